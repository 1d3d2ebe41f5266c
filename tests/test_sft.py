import json

import httpx
import pytest

from kimina_edu.rewards import correctness_reward, extract_answer, format_reward
from kimina_edu.sft import OpenAITeacher, make_sft_examples, rule_based_teacher
from kimina_edu.tasks import SEEDS, held_out, make_entries, syllogism_form


@pytest.mark.parametrize("task", ["syllogism", "propositional_logic"])
def test_rule_based_teacher_is_always_formatted_and_right(task):
    from kimina_edu.rewards import paid_conclusion

    for entry in make_entries(task, 150, SEEDS["sft"]):
        text = rule_based_teacher(entry)
        assert format_reward(text) == 1.0
        if task == "propositional_logic":  # premises that allow nothing but a restatement (≈2%): no answer is paid
            try:
                paid_conclusion(entry)
            except ValueError:
                continue
        assert correctness_reward(extract_answer(text), entry) == 1.0


def test_syllogism_form_parses_and_rejects():
    assert syllogism_form("Some teachers are not parents") == ("some-not", "teachers", "parents")
    assert syllogism_form("No cats are dogs") == ("no", "cats", "dogs")
    with pytest.raises(ValueError):
        syllogism_form("Cats are nice")


def test_held_out_is_balanced_and_fixed():
    ev = held_out("syllogism", 400)
    assert ev == held_out("syllogism", 400)
    assert 0.45 < sum(e["answer"] == "Yes" for e in ev) / len(ev) < 0.55


def _teacher_server(script):
    """A mock OpenAI endpoint answering from a list of (status, body) in order."""
    calls = []

    def handler(request):
        calls.append(json.loads(request.content))
        status, body = script[min(len(calls) - 1, len(script) - 1)]
        if isinstance(body, Exception):
            raise body
        return httpx.Response(status, content=body if isinstance(body, bytes) else json.dumps(body).encode())

    return httpx.MockTransport(handler), calls


def _reply(text):
    return {"choices": [{"message": {"content": text}}]}


def test_hosted_teacher_retries_drops_and_caches(tmp_path):
    entries = make_entries("syllogism", 1, SEEDS["sft"])
    good = rule_based_teacher(entries[0])
    transport, calls = _teacher_server([(429, {}), (503, {}), (200, _reply(good))])
    teacher = OpenAITeacher(base_url="http://teacher.local/v1", cache_path=tmp_path / "c.jsonl", transport=transport,
                            backoff_base=0.001)
    examples, report = make_sft_examples(entries, teacher)
    assert report.kept == 1 and len(calls) == 3  # two retries, then a kept example
    again = OpenAITeacher(base_url="http://teacher.local/v1", cache_path=tmp_path / "c.jsonl",
                          transport=_teacher_server([(500, {})])[0])
    examples2, report2 = make_sft_examples(entries, again)
    assert report2.kept == 1 and examples2 == examples  # served from the disk cache


@pytest.mark.parametrize("script, reason", [
    ([(200, b"not json")], "no_response"),
    ([(200, _reply("<answer>Yes</answer>"))], "bad_format"),
    ([(200, _reply("<think>t</think><answer>Maybe</answer>"))], "wrong_answer"),
    ([(401, {"error": "bad key"})], "no_response"),
    ([(200, {"choices": []})], "no_response"),
    ([(200, httpx.ConnectError("down"))], "no_response"),
])
def test_hosted_teacher_bad_answers_are_counted_never_kept(tmp_path, script, reason):
    transport, _ = _teacher_server(script)
    teacher = OpenAITeacher(base_url="http://teacher.local/v1", cache_path=tmp_path / "c.jsonl", transport=transport,
                            backoff_base=0.001, max_retries=2)
    examples, report = make_sft_examples(make_entries("syllogism", 2, SEEDS["sft"]), teacher)
    assert examples == [] and report.dropped[reason] == 2


@pytest.mark.usefixtures("offline_shared_cache")
@pytest.mark.parametrize("target, stops_at", [(0.0, 2), (1.01, None)])
def test_sft_stops_at_the_first_epoch_that_reaches_the_dev_target(tmp_path, target, stops_at):
    """The dev check runs from ``from_epoch`` on and ends training at the first epoch that reaches
    the target; an unreachable target runs every epoch (and checks each one)."""
    from kimina_edu.models import base_model_path
    from kimina_edu.pocket import PocketRecipe
    from kimina_edu.sft import DevTargetStop, sft_train
    from kimina_edu.tasks import dev_split

    examples, _ = make_sft_examples(make_entries("syllogism", 16, SEEDS["sft"]))
    stop = DevTargetStop(dev_split("syllogism", 8), target, from_epoch=2, max_new_tokens=16)
    _, _, log = sft_train(base_model_path("pocket", PocketRecipe.smoke()), examples, output_dir=tmp_path, epochs=4,
                          lr=5e-3, batch_size=8, stop=stop)
    epochs = [c["epoch"] for c in stop.history]
    assert epochs == ([2] if stops_at else [2, 3, 4])
    assert log[-1]["step"] == 2 * (stops_at or 4)  # 16 examples / batch 8 = 2 steps per epoch


@pytest.mark.usefixtures("offline_shared_cache")
@pytest.mark.parametrize("target, checked_steps", [(0.0, [3]), (1.01, [3, 4, 5, 6, 7, 8])])
def test_sft_checks_the_dev_target_every_few_steps_when_asked(tmp_path, target, checked_steps):
    """``every=1`` checks after each optimizer step from the first step of epoch ``from_epoch`` (step 3
    of 2-step epochs), not at epoch ends, and stops at the first step that reaches the target."""
    from kimina_edu.models import base_model_path
    from kimina_edu.pocket import PocketRecipe
    from kimina_edu.sft import DevTargetStop, sft_train
    from kimina_edu.tasks import dev_split

    examples, _ = make_sft_examples(make_entries("syllogism", 16, SEEDS["sft"]))
    stop = DevTargetStop(dev_split("syllogism", 8), target, from_epoch=2, max_new_tokens=16, every=1)
    _, _, log = sft_train(base_model_path("pocket", PocketRecipe.smoke()), examples, output_dir=tmp_path, epochs=4,
                          lr=5e-3, batch_size=8, stop=stop)
    assert [c["step"] for c in stop.history] == checked_steps
    assert stop.history[0]["epoch"] == 1.5
    assert log[-1]["step"] == checked_steps[-1]


def test_a_step_wise_dev_stop_hashes_apart_and_the_default_hashes_as_before():
    from kimina_edu.sft import SFTRecipe, sft_adapter_dir

    plain = SFTRecipe.preset("smollm2")
    assert sft_adapter_dir("base", plain) == sft_adapter_dir("base", SFTRecipe.preset("smollm2", dev_every=0))
    assert sft_adapter_dir("base", plain) != sft_adapter_dir("base", SFTRecipe.preset("smollm2", dev_every=5))
    assert SFTRecipe.preset("smollm2", dev_target=0.74, dev_every=5).stop_rule().every == 5


def test_dev_split_is_disjoint_from_the_held_out_split():
    from kimina_edu.tasks import dev_split

    assert not {e["question"] for e in dev_split()} & {e["question"] for e in held_out()}


def test_completion_loss_is_trls_sft_loss_on_the_completion_tokens(smollm_shaped, tmp_path):
    """``sft_train``'s loss runs the LM head on the completion tokens only; loss and LoRA gradients
    equal TRL's own ``SFTTrainer.compute_loss`` on the same batch (a SmolLM-shaped model: chat
    prompt longer than the answer, right padding, rows of different lengths)."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, set_seed
    from trl import SFTConfig, SFTTrainer

    from kimina_edu.lora import lora_config
    from kimina_edu.sft import completion_loss

    set_seed(0)
    tok = AutoTokenizer.from_pretrained(str(smollm_shaped))
    tok.padding_side = "right"
    model = AutoModelForCausalLM.from_pretrained(str(smollm_shaped), dtype=torch.float32)
    examples, _ = make_sft_examples(make_entries("syllogism", 4, SEEDS["sft"]))
    examples[1]["completion"][0]["content"] += " Premise 1 is read twice." * 3  # rows of different lengths
    args = SFTConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, report_to="none", use_cpu=True,
                     completion_only_loss=True, disable_tqdm=True)
    trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(examples), processing_class=tok,
                         peft_config=lora_config(r=4, alpha=8))
    batch = dict(next(iter(trainer.get_train_dataloader())))
    assert (batch["labels"] == -100).float().mean() > 0.5  # mostly prompt and padding: the case that pays
    lora = [p for p in trainer.model.parameters() if p.requires_grad]
    # LoRA's B starts at zero, which leaves A without a gradient: give B values first
    with torch.no_grad():
        for name, p in trainer.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.02)

    def loss_and_grads(loss_fn):
        trainer.model.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss.detach(), torch.cat([p.grad.flatten() for p in lora])

    theirs, their_grads = loss_and_grads(lambda: trainer.compute_loss(trainer.model, dict(batch)))
    ours, our_grads = loss_and_grads(lambda: completion_loss(trainer.model, dict(batch)))
    assert torch.allclose(ours, theirs, rtol=1e-5)
    assert (our_grads - their_grads).norm() <= 1e-4 * their_grads.norm()
    # the Trainer's token count across accumulation steps divides the same sum
    assert torch.allclose(completion_loss(trainer.model, dict(batch), num_items_in_batch=10 ** 6),
                          ours * (batch["labels"][:, 1:] != -100).sum() / 10 ** 6, rtol=1e-5)


def test_both_verdict_examples_teach_the_format_and_leave_the_verdict_a_coin():
    from kimina_edu.sft import both_verdict_examples

    entries = make_entries("syllogism", 40, SEEDS["sft"])
    examples = both_verdict_examples(entries)
    assert len(examples) == 2 * len(entries)
    for entry, pair in zip(entries, zip(examples[::2], examples[1::2])):
        texts = [ex["completion"][0]["content"] for ex in pair]
        assert all(format_reward(t) == 1.0 for t in texts)
        assert sorted(extract_answer(t) for t in texts) == ["No", "Yes"]  # one of each, whatever the truth
        assert sorted(correctness_reward(extract_answer(t), entry) for t in texts) == [0.0, 1.0]
        for t in texts:  # the trace's verdict and the answer agree
            assert ("does not follow" in t) == (extract_answer(t) == "No")
        assert pair[0]["prompt"] == pair[1]["prompt"]
    with pytest.raises(ValueError, match="syllogism"):
        both_verdict_examples(make_entries("propositional_logic", 2, SEEDS["sft"]))


def test_the_default_recipe_hashes_as_it_did_and_a_both_verdict_recipe_apart():
    from kimina_edu.sft import SFTRecipe, sft_adapter_dir

    # the folder of the default recipe before SFTRecipe.verdicts existed (the pocket preset)
    assert sft_adapter_dir("base", SFTRecipe.preset("pocket")).name == "f9d7e81af58a"
    restated = SFTRecipe.preset("smollm2", trace="restate")  # SmolLM2's warm-up before its preset derived
    assert SFTRecipe.preset("smollm2").trace == "derive"
    for recipe in (SFTRecipe.preset("smollm2"), SFTRecipe.preset("smollm2", trace="restate", verdicts="both")):
        assert sft_adapter_dir("base", recipe) != sft_adapter_dir("base", restated)


@pytest.mark.parametrize("verdicts, n_right, n_both", [("right", 10, 0), ("both", 0, 10), ("half", 5, 5)])
def test_the_warm_up_examples_follow_the_recipes_verdicts(verdicts, n_right, n_both):
    from kimina_edu.sft import SFTRecipe, warmup_examples

    entries = make_entries("syllogism", 10, SEEDS["sft"])
    examples = warmup_examples(SFTRecipe.preset("smollm2", trace="restate", verdicts=verdicts), entries)
    assert len(examples) == n_right + 2 * n_both
    answers = [extract_answer(ex["completion"][0]["content"]) for ex in examples]
    right = [correctness_reward(a, e) for a, e in zip(answers, entries[:n_right])]
    assert right == [1.0] * n_right  # the right-verdict part comes first, every answer right
    assert sorted(answers[n_right:]) == ["No"] * n_both + ["Yes"] * n_both
    with pytest.raises(ValueError, match="verdicts"):
        warmup_examples(SFTRecipe.preset("smollm2", trace="restate", verdicts="some"), entries)


def test_a_derived_warm_up_teaches_right_verdicts_only():
    from kimina_edu.sft import SFTRecipe, warmup_examples

    entries = make_entries("syllogism", 10, SEEDS["sft"])
    examples = warmup_examples(SFTRecipe.preset("smollm2", trace="derive"), entries)
    texts = [ex["completion"][0]["content"] for ex in examples]
    assert all("What follows about " in t for t in texts)
    assert [correctness_reward(extract_answer(t), e) for t, e in zip(texts, entries)] == [1.0] * 10
    with pytest.raises(ValueError, match="verdicts='right'"):
        warmup_examples(SFTRecipe.preset("smollm2", trace="derive", verdicts="both"), entries)
