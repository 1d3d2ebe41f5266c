"""The from-scratch GRPO loop: it learns, it resumes exactly, it refuses bad states."""

import pytest
import torch
from toy_task import brevity_reward, toy_config

from kimina_edu.logprobs import Rollout, completion_logprobs, pad_batch
from kimina_edu.models import load_policy
from kimina_edu.pocket import PocketRecipe
from kimina_edu.rewards import RewardBreakdown
from kimina_edu.tasks import SEEDS, make_entries
from kimina_edu.trainer import GRPOTrainer, read_log

SMOKE = PocketRecipe.smoke()
ENTRIES = make_entries("syllogism", 64, SEEDS["rl"])


pytestmark = pytest.mark.usefixtures("offline_shared_cache")


_cfg = toy_config


def _trainer(tmp_path, cfg, reward=brevity_reward):
    model, tok = load_policy("pocket", recipe=SMOKE, verbose=False)
    return GRPOTrainer(model, tok, cfg, train_entries=ENTRIES, output_dir=tmp_path, reward_fn=reward, progress=False)


def test_learning_reward_rises_and_parameters_change(tmp_path):
    tr = _trainer(tmp_path, _cfg(steps=10))
    before = {n: p.detach().clone() for n, p in tr.model.named_parameters()}
    log = tr.train()
    first = sum(r["reward_mean"] for r in log[:3]) / 3
    last = sum(r["reward_mean"] for r in log[-3:]) / 3
    assert last > first + 0.2, f"reward did not rise: {first:.3f} → {last:.3f}"
    changed = sum(not torch.equal(before[n], p) for n, p in tr.model.named_parameters())
    assert changed > 0
    learned = [r for r in log if not r["skipped"]]  # a solved toy task's last steps have no signal to learn from
    for key in ("clip_frac_low", "clip_frac_high", "approx_kl", "entropy", "frac_zero_std_groups", "truncation_rate",
                "gen_tokens_per_s", "train_tokens_per_s", "completion_length", "format", "correct", "reward_std"):
        assert key in learned[-1]


def test_resume_continues_identically(tmp_path):
    straight = _trainer(tmp_path / "a", _cfg(steps=2))
    straight.train()
    first = _trainer(tmp_path / "b", _cfg(steps=1))
    first.train()
    ckpt = first.save_checkpoint()
    resumed = _trainer(tmp_path / "c", _cfg(steps=2))
    resumed.resume_from(ckpt)
    resumed.train()
    for (n, p), (_, q) in zip(straight.model.named_parameters(), resumed.model.named_parameters()):
        assert torch.allclose(p, q, atol=1e-6), n
    assert read_log(tmp_path / "a" / "log.jsonl")[-1]["reward_mean"] == read_log(tmp_path / "c" / "log.jsonl")[-1]["reward_mean"]


def test_resume_with_another_config_names_the_fields(tmp_path):
    tr = _trainer(tmp_path, _cfg(steps=1))
    ckpt = tr.save_checkpoint()
    other = _trainer(tmp_path / "o", _cfg(lr=5e-3, group_size=4))
    with pytest.raises(ValueError, match="group_size.*lr|lr.*group_size"):
        other.resume_from(ckpt)


def test_all_zero_variance_batch_is_skipped_not_nan(tmp_path):
    constant = lambda text, entry: RewardBreakdown(None, 1.0, 1.0, 1.0)
    tr = _trainer(tmp_path, _cfg(steps=1), reward=constant)
    before = [p.detach().clone() for p in tr.model.parameters()]
    row = tr.train()[-1]
    assert row["skipped"] == 1.0 and "zero reward variance" in row["skip_reason"]
    assert all(torch.equal(a, b) for a, b in zip(before, tr.model.parameters()))


def test_keyboard_interrupt_saves_then_reraises(tmp_path):
    tr = _trainer(tmp_path, _cfg(steps=3))

    def stop(_row):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        tr.train(on_step=stop)
    assert (tmp_path / "checkpoints" / "step_00001" / "manifest.json").exists()


def test_truncated_completions_are_counted_and_can_be_masked(tmp_path):
    tr = _trainer(tmp_path, _cfg(steps=1, max_new_tokens=2, mask_truncated=True))
    row = tr.train()[-1]
    assert row["truncation_rate"] > 0.5
    assert row["skipped"] in (0.0, 1.0)


def test_logprobs_of_padded_batch_match_one_by_one():
    model, tok = load_policy("pocket", recipe=SMOKE, verbose=False)
    rows = [Rollout([5, 6, 7], [8, 9], [], 0.0, 0.0, False), Rollout([5], [8, 9, 10, 11], [], 0.0, 0.0, False)]
    together, mask = completion_logprobs(model, rows, tok.pad_token_id)
    for i, r in enumerate(rows):
        alone, _ = completion_logprobs(model, [r], tok.pad_token_id)
        assert torch.allclose(together[i, : len(r.completion_ids)], alone[0], atol=1e-5)
    assert mask.sum().item() == 6
    ids, attn, _, _ = pad_batch(rows, tok.pad_token_id)
    assert ids.shape == (2, 5) and attn.sum().item() == 10


def test_default_questions_use_the_course_task_settings(tmp_path):
    # the course's task settings (TASK_CONFIGS: invalid_ratio=0.5), not reasoning-gym's own 70%-"Yes" syllogisms
    model, tok = load_policy("pocket", recipe=SMOKE, verbose=False)
    tr = GRPOTrainer(model, tok, _cfg(), output_dir=tmp_path, progress=False)
    yes = sum(e["answer"] == "Yes" for e in tr.train_entries[:1000]) / 1000
    assert 0.45 < yes < 0.55, f"{yes:.0%} 'Yes' — the course uses invalid_ratio=0.5"
    assert tr.train_entries[0] == make_entries("syllogism", 1, SEEDS["rl"])[0]


def test_min_p_near_one_samples_the_greedy_completion():
    from kimina_edu.rollouts import chat_prompt, generate

    model, tok = load_policy("pocket", recipe=SMOKE, verbose=False)
    prompts = [chat_prompt(tok, e["question"]) for e in ENTRIES[:2]]
    _, greedy = generate(model, tok, prompts, max_new_tokens=10)
    _, sampled = generate(model, tok, prompts, max_new_tokens=10, temperature=1.0, min_p=0.999,
                          num_return_sequences=3, seed=0)
    assert sampled == [greedy[0]] * 3 + [greedy[1]] * 3
    _, free = generate(model, tok, prompts, max_new_tokens=10, temperature=1.0, num_return_sequences=3, seed=0)
    assert free != sampled, "without min_p the untrained model's samples should differ from greedy"


def test_early_stop_rule_is_one_rule_for_both_trainers():
    """Stop once the last `window` steps are known and at most a tenth of them learned (our trainer
    and TRL's callback both call trainer.signal_exhausted)."""
    from kimina_edu.trainer import signal_exhausted
    from kimina_edu.trl_bridge import stop_when_silent

    assert not signal_exhausted([True] * 19, 20)  # not enough steps yet
    assert signal_exhausted([False, False] + [True] * 18, 20)
    assert not signal_exhausted([False] * 3 + [True] * 17, 20)
    assert not signal_exhausted([True] * 40, 0)  # window 0: never stop
    cb, control = stop_when_silent(4), type("C", (), {"should_training_stop": False})()
    for frac in (0.5, 1.0, 1.0, 1.0):
        cb.on_log(None, None, control, logs={"frac_reward_zero_std": frac})
    assert not control.should_training_stop  # one of 4 learned: more than a tenth
    cb.on_log(None, None, control, logs={"frac_reward_zero_std": 1.0})
    assert control.should_training_stop


def test_reward_at_ends_averages_the_first_and_last_quarter():
    from kimina_edu.trainer import reward_at_ends

    log = [{"reward_mean": v} for v in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.0, 0.6)]
    assert reward_at_ends(log) == pytest.approx((0.1, 0.8))
    assert reward_at_ends(log[:1]) == (0.0, 0.0)
    with pytest.raises(ValueError):
        reward_at_ends([])


@pytest.mark.parametrize("prompt_lengths", [(3, 3), (1, 4), (5, 2)])
def test_shared_prompts_give_the_same_logprobs_and_gradients(prompt_lengths):
    """Groups share prompts: run once, keys/values copied per completion. Values, entropies and the
    LoRA gradient must equal running every (prompt, completion) whole — left padding, one-token and
    padded completions included."""
    from peft import get_peft_model

    from kimina_edu.lora import lora_config

    model, tok = load_policy("pocket", recipe=SMOKE, verbose=False)
    model = get_peft_model(model, lora_config(r=4, alpha=8))
    with torch.no_grad():  # a non-zero adapter, so the prompt's gradient matters
        for p in model.parameters():
            if p.requires_grad:
                p.normal_(0, 0.05)
    a, b = ([5 + i for i in range(n)] for n in prompt_lengths)
    rows = [Rollout(a, [8, 9], [], 0.0, 0.0, False), Rollout(b, [8, 9, 10, 11], [], 0.0, 0.0, False),
            Rollout(a, [12], [], 0.0, 0.0, False), Rollout(b, [13, 14, 15], [], 0.0, 0.0, False),
            Rollout(a, [16, 17, 18, 19, 20], [], 0.0, 0.0, False)]
    lora = [p for p in model.parameters() if p.requires_grad]
    shared, mask, ent = completion_logprobs(model, rows, tok.pad_token_id, with_entropy=True)
    g_shared = torch.autograd.grad((shared * mask).sum(), lora)
    whole = [completion_logprobs(model, [r], tok.pad_token_id, with_entropy=True) for r in rows]
    g_whole = torch.autograd.grad(sum(lp.sum() for lp, _, _ in whole), lora)
    for i, (lp, _, e) in enumerate(whole):
        n = len(rows[i].completion_ids)
        assert torch.allclose(shared[i, :n], lp[0], atol=1e-5) and torch.allclose(ent[i, :n], e[0], atol=1e-4)
        assert (shared[i, n:] == 0).all() and mask[i].sum() == n
    assert max((x - y).abs().max().item() for x, y in zip(g_shared, g_whole)) < 1e-4


def test_balanced_answers_split_every_step_evenly(tmp_path):
    answers = lambda tr: [e["answer"] for e in tr.draw_questions()]
    plain = _trainer(tmp_path / "plain", _cfg())
    assert any(a.count("Yes") != 2 for a in (answers(plain) for _ in range(30)))  # uniform draws often tilt
    tr = _trainer(tmp_path / "bal", _cfg(balance_answers=True))
    draws = [answers(tr) for _ in range(30)]
    assert all(sorted(a) == ["No", "No", "Yes", "Yes"] for a in draws)
    assert len({tuple(a) for a in draws}) > 1  # which answer comes first varies
    odd = _trainer(tmp_path / "odd", _cfg(balance_answers=True, questions_per_batch=3))
    assert {answers(odd).count("Yes") for _ in range(30)} == {1, 2}


def test_balanced_answers_refuse_an_open_ended_task(tmp_path):
    model, tok = load_policy("pocket", recipe=SMOKE, verbose=False)
    open_ended = make_entries("propositional_logic", 8, SEEDS["rl"])
    tr = GRPOTrainer(model, tok, _cfg(balance_answers=True), train_entries=open_ended, output_dir=tmp_path,
                     reward_fn=brevity_reward, progress=False)
    with pytest.raises(ValueError, match="open-ended"):
        tr.draw_questions()


def test_collapse_guard_stops_and_puts_back_the_best_weights(tmp_path, capsys):
    calls = {"n": 0}
    per_step = 4 * 6  # questions × group size in _cfg()

    def right_then_wrong(text, entry):  # steps 1–2 right (and varied, so the weights move), then wrong
        calls["n"] += 1
        right = calls["n"] <= 2 * per_step
        score = 1.0 - min(len(text), 60) / 60
        return RewardBreakdown(None, 1.0, float(right), score)

    tr = _trainer(tmp_path, _cfg(steps=8, guard_window=2, guard_drop=0.15), reward=right_then_wrong)
    kept = {}
    tr.train(on_step=lambda row: kept.setdefault(row["step"], [p.detach().clone() for p in tr.params]))
    assert tr.step == 4 and tr.guard_stopped == 4  # steps 3–4 averaged 0% against 100% in steps 1–2
    assert "collapse guard: stopped at step 4" in capsys.readouterr().out
    assert all(torch.equal(p, q) for p, q in zip(tr.params, kept[2]))  # the weights after step 2 are back
    assert not all(torch.equal(p, q) for p, q in zip(kept[4], kept[2]))


def test_smollm2_preset_is_the_cpu_one_and_smoke_stays_small():
    from kimina_edu.train_config import TrainConfig

    full = TrainConfig.preset("smollm2", seed=2)
    assert (full.steps, full.questions_per_batch, full.group_size, full.max_new_tokens) == (24, 16, 6, 96)
    assert full.balance_answers and full.guard_window == 4 and full.seed == 2
    assert full.buffer_size == full.questions_per_batch * full.group_size  # one round: TRL can run the same
    # SmolLM2 keeps its own preset's lr, not the 1e-5 that preset() gives the other hub models
    assert full.lr == TrainConfig.cpu_smollm2().lr == 3e-5
    assert full.buffer_size == full.minibatch_size * full.grad_accum  # one optimizer step a batch, on-policy
    assert TrainConfig.preset("smollm2", lr=1e-5).lr == 1e-5  # a notebook parameter wins
    smoke = TrainConfig.preset("smollm2", smoke=True)
    assert (smoke.steps, smoke.questions_per_batch, smoke.balance_answers) == (6, 2, False)
    hub = TrainConfig.preset("HuggingFaceTB/SmolLM-135M-Instruct")
    assert (hub.max_new_tokens, hub.lr, hub.balance_answers) == (300, 1e-5, False)  # the article's, LoRA lr


def test_smollm2_on_a_gpu_gets_the_gpu_preset(monkeypatch):
    import kimina_edu.runtime
    from kimina_edu.train_config import TrainConfig

    monkeypatch.setattr(kimina_edu.runtime, "resolve_device", lambda device="auto": "cuda")  # no GPU needed
    gpu = TrainConfig.preset("smollm2", device="cuda", seed=1)
    assert gpu == TrainConfig.gpu_smollm2(seed=1)
    assert (gpu.questions_per_batch, gpu.group_size, gpu.max_new_tokens, gpu.lr) == (32, 8, 300, 1e-5)
    assert gpu.buffer_size == gpu.questions_per_batch * gpu.group_size == gpu.minibatch_size * gpu.grad_accum
    assert TrainConfig.preset("smollm2", device="cuda", smoke=True).questions_per_batch == 2  # SMOKE stays small
    monkeypatch.setattr(kimina_edu.runtime, "resolve_device", lambda device="auto": "cpu")
    assert TrainConfig.preset("smollm2", device="auto") == TrainConfig.cpu_smollm2()


def test_update_shift_splits_by_the_sign_of_the_advantage():
    from kimina_edu.probes import update_shift

    out = update_shift([1.0, -1.0, 0.0, 2.0], [-2.0, -2.0, -2.0, -3.0], [-1.0, -2.5, -9.0, -3.5])
    assert out == pytest.approx({"shift_pos": 0.25, "shift_neg": -0.5, "shift_agree": 2 / 3})
    assert update_shift([0.0], [-1.0], [-2.0]) == {}  # no completion asked to move: nothing to say
    assert set(update_shift([1.0], [-1.0], [-0.5])) == {"shift_pos", "shift_agree"}  # no NaN side
    with pytest.raises(ValueError, match="2 advantages, 1 before"):
        update_shift([1.0, -1.0], [0.0], [0.0, 0.0])


@pytest.mark.parametrize("lr", [1e-2, 1e-4])
def test_every_measured_update_pushes_rewarded_above_penalised(tmp_path, lr):
    """The measurement on a real run: the update moves the completions it learned from the way their
    advantages asked — rewarded above penalised in every measured update, at a large and a small lr."""
    from kimina_edu.probes import shift_summary

    tr = _trainer(tmp_path, _cfg(steps=4, lr=lr, shift_every=1))
    summary = shift_summary(tr.train())
    assert summary["shift_updates"] >= 3
    assert summary["shift_gap_frac"] == 1.0, summary
    if lr == 1e-4:  # a small step stays in the linear regime: each side moves its own way
        assert summary["shift_pos_mean"] > 0 > summary["shift_neg_mean"], summary


def test_measuring_the_shift_changes_no_weight_and_follows_shift_every(tmp_path):
    measured = _trainer(tmp_path / "m", _cfg(steps=6, shift_every=3))
    log = measured.train()
    due = [r["step"] for r in log if (r["step"] == 1 or r["step"] % 3 == 0) and not r["skipped"]]
    assert len(due) >= 2 and [r["step"] for r in log if "shift_pos" in r] == due  # a step without signal has no update
    plain = _trainer(tmp_path / "p", _cfg(steps=6, shift_every=0))
    assert not any("shift_pos" in r for r in plain.train())
    for (n, p), (_, q) in zip(measured.model.named_parameters(), plain.model.named_parameters()):
        assert torch.equal(p, q), n


def test_shift_summary_needs_two_measured_updates():
    from kimina_edu.probes import shift_summary

    one = [{"step": 1, "shift_pos": 0.1, "shift_neg": -0.1, "shift_agree": 1.0}, {"step": 2}]
    assert shift_summary(one) == {"shift_updates": 1, "shift_gap_frac": None, "shift_pos_mean": None,
                                  "shift_neg_mean": None, "shift_agree_mean": None}
    two = [*one, {"step": 3, "shift_pos": -0.2, "shift_neg": 0.1, "shift_agree": 0.0}]
    s = shift_summary(two)
    assert s["shift_updates"] == 2 and s["shift_gap_frac"] == 0.5
    assert s["shift_pos_mean"] == pytest.approx(-0.05) and s["shift_neg_mean"] == pytest.approx(0.0)


def test_the_learner_scores_at_the_sampling_temperature_only_when_asked(tmp_path):
    """score_at_temperature: the learner's log-probs (and so its gradient) under softmax(logits / T),
    the distribution the samples came from, as TRL and verl score them; off, the model's own T = 1."""
    from kimina_edu.logprobs import Rollout, completion_logprobs

    off = _trainer(tmp_path / "off", _cfg(temperature=0.7))
    on = _trainer(tmp_path / "on", _cfg(temperature=0.7, score_at_temperature=True))
    assert off.score_temperature == 1.0 and on.score_temperature == 0.7
    rows = [Rollout([5, 9, 11], c, [], 0.0, 0.0, False) for c in ([3, 4], [7, 8, 9])]
    for trainer, t in ((off, 1.0), (on, 0.7)):
        want, mask = completion_logprobs(trainer.model, rows, trainer.tok.pad_token_id, temperature=t)
        got = trainer._mean_token_logps(rows)
        assert got == pytest.approx(((want * mask).sum(1) / mask.sum(1)).tolist(), abs=1e-5)


def test_every_measured_update_records_its_per_token_changes_matching_a_direct_computation(tmp_path):
    """token_shift.jsonl beside log.jsonl: one row per measured update whose quantiles and top movers
    equal a direct before/after scoring of that update's own buffer (no extra forward pass in the trainer)."""
    import copy

    import numpy as np

    from kimina_edu.token_dynamics import QUANTILES, read_token_shift

    tr = _trainer(tmp_path, _cfg(steps=2, shift_every=2))
    seen = {}
    original = tr.learn

    def spy(buffer):
        kept = [r for r in buffer if r.advantage != 0.0 and not (tr.cfg.mask_truncated and r.truncated)]
        seen[tr.step + 1] = (copy.deepcopy(tr.model), kept)
        return original(buffer)

    tr.learn = spy
    calls = []
    real = tr._token_logps
    tr._token_logps = lambda rows: calls.append(len(rows)) or real(rows)
    log = tr.train()
    records = read_token_shift(tmp_path)
    measured = [r["step"] for r in log if "shift_pos" in r]
    assert [r["step"] for r in records] == measured and measured, (measured, records)
    assert len(calls) == 2 * len(measured)  # the two scorings update_shift always made, nothing more
    for rec in records:
        model_before, buffer = seen[rec["step"]]
        after_model = tr.model if rec["step"] == log[-1]["step"] else None
        if after_model is None:
            continue  # only the last update's "after" weights are the trainer's current ones
        b, _ = completion_logprobs(model_before.eval(), buffer, tr.tok.pad_token_id)
        a, _ = completion_logprobs(after_model.eval(), buffer, tr.tok.pad_token_id)
        deltas = [(a[i, : len(r.completion_ids)] - b[i, : len(r.completion_ids)]).detach().numpy()
                  for i, r in enumerate(buffer)]
        pos = np.concatenate([d for d, r in zip(deltas, buffer) if r.advantage > 0])
        assert rec["pos"]["q"] == pytest.approx(np.quantile(pos, QUANTILES).tolist(), abs=1e-5)
        top = max(((abs(d[j]), i, j) for i, d in enumerate(deltas) for j in range(len(d))))
        assert (rec["top"][0]["completion"], rec["top"][0]["position"]) == top[1:]
        assert rec["top"][0]["text"] == tr.tok.decode([buffer[top[1]].completion_ids[top[2]]])
        break
    else:
        pytest.fail("the last step was not a measured update: nothing compared")
    # the log rows stay flat numbers; the nested per-token record lives beside them
    assert all(not isinstance(v, (dict, list)) for r in log for v in r.values())


def test_resuming_rewrites_token_shift_rows_past_the_checkpoint_once(tmp_path):
    """token_shift.jsonl follows log.jsonl on resume: rows of updates after the checkpoint are dropped
    and measured again, so each measured step has exactly one row."""
    from kimina_edu.checkpoints import latest_checkpoint
    from kimina_edu.token_dynamics import read_token_shift

    first = _trainer(tmp_path, _cfg(steps=2, shift_every=1, checkpoint_every=1))
    first.train()
    again = _trainer(tmp_path, _cfg(steps=2, shift_every=1, checkpoint_every=1))
    again.resume_from(min((tmp_path / "checkpoints").iterdir()))  # step 1
    assert [r["step"] for r in read_token_shift(tmp_path)] == [1]
    again.train()
    assert [r["step"] for r in read_token_shift(tmp_path)] == [1, 2]
    assert latest_checkpoint(tmp_path) is not None
