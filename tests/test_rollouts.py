"""Sampling backends and the learner's log-probs: same numbers as before, less memory, one load per step."""

from __future__ import annotations

import pytest
import torch

from kimina_edu.logprobs import (
    Rollout,
    completion_logprobs,
    reference_completion_logprobs,
    token_entropy,
    token_logprobs,
)
from kimina_edu.lora import lora_config
from kimina_edu.models import load_policy
from kimina_edu.pocket import PocketRecipe
from kimina_edu.rewards import RewardBreakdown
from kimina_edu.rollouts import (
    SamplingSettings,
    TransformersBackend,
    chat_prompt,
    encode_prompts,
    generate,
    generate_ids,
    trim_completion,
)
from kimina_edu.tasks import SEEDS, make_entries
from kimina_edu.tiny import tiny_random_llama
from kimina_edu.train_config import TrainConfig
from kimina_edu.trainer import GRPOTrainer

SMOKE = PocketRecipe.smoke()
ENTRIES = make_entries("syllogism", 32, SEEDS["rl"])


pytestmark = pytest.mark.usefixtures("offline_shared_cache")


logprobs_before_issue_19 = reference_completion_logprobs  # the witness: a full fp32 log-softmax


def _rollouts(vocab, shapes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [Rollout(torch.randint(1, vocab, (p,), generator=g).tolist(), torch.randint(1, vocab, (c,), generator=g).tolist(),
                    [], 0.0, 0.0, False) for p, c in shapes]


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("chunk", [1, 3, 4096])
def test_logprobs_entropy_and_gradients_equal_the_previous_implementation(attn, chunk):
    model = tiny_random_llama(vocab_size=97, seed=1, attn_implementation=attn)
    rows = _rollouts(97, [(3, 2), (7, 5), (1, 4), (5, 1)])
    new, mask, ent = completion_logprobs(model, rows, 0, with_entropy=True, chunk=chunk)
    old, old_mask, old_ent = logprobs_before_issue_19(model, rows, 0, with_entropy=True)
    assert torch.equal(mask, old_mask)
    assert torch.allclose(new, old * old_mask, atol=1e-5)
    assert torch.allclose(ent, old_ent, atol=1e-5)

    weights = torch.randn(old.shape, generator=torch.Generator().manual_seed(5))
    model.zero_grad()
    (old * old_mask * weights).sum().backward()
    before = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    (completion_logprobs(model, rows, 0, chunk=chunk)[0] * weights).sum().backward()
    for n, p in model.named_parameters():
        assert torch.isfinite(p.grad).all(), f"{n}: left padding produced a non-finite gradient"
        assert torch.allclose(p.grad, before[n], atol=1e-5), n


def test_logprobs_of_a_lora_policy_equal_the_previous_implementation():
    model, tok = load_policy("pocket", recipe=SMOKE, lora=lora_config(r=4, alpha=8), verbose=False)
    prompts = encode_prompts(tok, [chat_prompt(tok, e["question"]) for e in ENTRIES[:3]])
    rows = [Rollout(p, c, [], 0.0, 0.0, False) for p, c in zip(prompts, [[5, 6, 7], [8], [9, 10, 11, 12, tok.eos_token_id]])]
    new, _ = completion_logprobs(model, rows, tok.pad_token_id)
    old, mask, _ = logprobs_before_issue_19(model, rows, tok.pad_token_id)
    assert torch.allclose(new, old * mask, atol=1e-5)


@pytest.mark.parametrize("share", [True, False])
def test_logprobs_at_a_temperature_are_those_of_softmax_of_logits_over_t(share):
    """What a sampler at T drew from (TrainConfig.score_at_temperature): log softmax(logits / T)."""
    model = tiny_random_llama(vocab_size=97, seed=1)
    prompt = [5, 9, 11]
    rows = [Rollout(prompt, c, [], 0.0, 0.0, False) for c in ([3, 4], [7, 8, 9], [2])]  # one group: a shared prompt
    got, _mask = completion_logprobs(model, rows, 0, temperature=0.7, share_prompts=share)
    with torch.no_grad():
        for i, r in enumerate(rows):
            ids = torch.tensor([r.prompt_ids + r.completion_ids])
            logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float() / 0.7, -1)
            want = logp.gather(-1, ids[0, 1:, None])[:, 0][len(prompt) - 1:]
            assert torch.allclose(got[i, : len(want)], want, atol=1e-5)
    at_one, _ = completion_logprobs(model, rows, 0, share_prompts=share)
    assert not torch.allclose(got, at_one, atol=1e-3)  # the temperature is not ignored
    with pytest.raises(ValueError, match="temperature"):
        completion_logprobs(model, rows, 0, temperature=0.0)


def test_token_logprobs_of_bf16_logits_are_fp32_and_match_a_full_log_softmax():
    logits = torch.randn(3, 5, 1000, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16).requires_grad_()
    targets = torch.randint(0, 1000, (3, 5), generator=torch.Generator().manual_seed(1))
    got = token_logprobs(logits, targets, chunk=4)
    want = torch.log_softmax(logits.float(), -1).gather(-1, targets[..., None]).squeeze(-1)
    assert got.dtype == torch.float32 and torch.allclose(got, want, atol=1e-5)
    (g_got,) = torch.autograd.grad(got.sum(), logits)
    (g_want,) = torch.autograd.grad(want.sum(), logits)
    assert g_got.dtype == torch.bfloat16 and torch.allclose(g_got.float(), g_want.float(), atol=1e-2)
    ent = token_entropy(logits, chunk=2)
    p = torch.softmax(logits.float(), -1)
    assert torch.allclose(ent, -(p * torch.log(p)).sum(-1), atol=1e-4)


def test_logprob_inputs_that_make_no_sense_are_refused():
    model = tiny_random_llama(vocab_size=50)
    with pytest.raises(ValueError, match="non-empty prompt"):
        completion_logprobs(model, [], 0)
    with pytest.raises(ValueError, match="non-empty prompt"):
        completion_logprobs(model, [Rollout([], [3], [], 0.0, 0.0, False)], 0)
    with pytest.raises(ValueError, match="disagree"):
        token_logprobs(torch.zeros(2, 3, 5), torch.zeros(2, 4, dtype=torch.long))


def test_sampling_settings_refuse_impossible_values_in_one_message():
    with pytest.raises(ValueError) as err:
        SamplingSettings(max_new_tokens=0, temperature=-1, top_p=0.0, min_p=1.0, n=0)
    for word in ("max_new_tokens", "temperature", "top_p", "min_p", "n must"):
        assert word in str(err.value)
    with pytest.raises(ValueError):
        SamplingSettings(max_new_tokens=4, temperature=float("nan"))
    cfg = TrainConfig(max_new_tokens=9, temperature=0.5, top_p=0.9, min_p=0.1, group_size=3, seed=4)
    assert cfg.sampling() == SamplingSettings(9, 0.5, 0.9, 0.1, 3, 4)


def test_prompts_are_encoded_without_added_special_tokens_and_empty_ones_refused():
    _, tok = load_policy("pocket", recipe=SMOKE, verbose=False)
    text = chat_prompt(tok, "All cats are dogs. ¿Verdad? 猫")
    (ids,) = encode_prompts(tok, [text])
    assert tok.decode(ids) == text
    with pytest.raises(ValueError, match="encode to no tokens"):
        encode_prompts(tok, ["fine", ""])


def test_generation_from_token_ids_equals_generation_from_text():
    model, tok = load_policy("pocket", recipe=SMOKE, verbose=False)
    prompts = [chat_prompt(tok, e["question"]) for e in ENTRIES[:3]]
    ids, from_text = generate(model, tok, prompts, max_new_tokens=8)
    assert from_text == generate_ids(model, tok, ids, SamplingSettings(max_new_tokens=8, temperature=0.0))
    assert trim_completion([4, 9, 2, 9], eos_id=2, pad_id=0) == [4, 9, 2]
    assert trim_completion([4, 9, 0, 0], eos_id=2, pad_id=0) == [4, 9]


def test_transformers_backend_samples_the_merged_policy_and_leaves_it_untouched():
    model, tok = load_policy("pocket", recipe=SMOKE, lora=lora_config(r=4, alpha=8), verbose=False)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    backend = TransformersBackend()
    with pytest.raises(RuntimeError, match="load_policy"):
        backend.generate(tok, [[1, 2]], SamplingSettings(max_new_tokens=2))
    backend.load_policy(model.eval())
    ids = encode_prompts(tok, [chat_prompt(tok, e["question"]) for e in ENTRIES[:2]])
    gen = backend.generate(tok, ids, SamplingSettings(max_new_tokens=6, temperature=0.0))
    assert gen.sampler_logp is None and gen.prompt_ids == ids
    assert gen.completion_ids == generate_ids(model, tok, ids, SamplingSettings(max_new_tokens=6, temperature=0.0))
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())
    assert any(p.requires_grad for p in model.parameters())


def test_a_small_models_merged_copy_is_refreshed_in_place_bit_for_bit(monkeypatch):
    """The pocket model's sampler is kept between steps and refreshed: its weights must be exactly what a
    fresh ``merge_and_unload`` of the moved policy gives (the course's sampled figures depend on it)."""
    import copy

    from kimina_edu import merged_weights, rollouts

    model, tok = load_policy("pocket", recipe=SMOKE, lora=lora_config(r=4, alpha=8), verbose=False)
    backend = TransformersBackend()
    backend.load_policy(model.eval())
    kept = backend._sampler
    backend.release()
    with torch.no_grad():  # an optimizer step: the adapter moves
        for name, p in model.named_parameters():
            if "lora_" in name:
                p.add_(torch.randn_like(p) * 0.05)
    backend.load_policy(model)
    assert backend._sampler is kept, "a small model's merged copy is refreshed, not copied again"
    fresh = dict(copy.deepcopy(model).merge_and_unload().named_parameters())
    got = dict(kept.named_parameters())
    assert set(got) == set(fresh) and all(torch.equal(got[n], fresh[n]) for n in fresh)
    ids = encode_prompts(tok, [chat_prompt(tok, e["question"]) for e in ENTRIES[:2]])
    greedy = SamplingSettings(max_new_tokens=6, temperature=0.0)
    assert backend.generate(tok, ids, greedy).completion_ids == generate_ids(model, tok, ids, greedy)

    # a GPU's dtypes (bf16 base, fp32 adapter): one rounding of base + delta, as PEFT's merge does
    mixed = copy.deepcopy(model)
    with torch.no_grad():
        for name, p in mixed.named_parameters():
            p.data = p.data.float() if "lora_" in name else p.data.to(torch.bfloat16)
    kept_mixed = copy.deepcopy(mixed).merge_and_unload()
    with torch.no_grad():
        for name, p in mixed.named_parameters():
            if "lora_" in name:
                p.add_(torch.randn_like(p) * 0.05)
    assert merged_weights.refresh_merged(kept_mixed, mixed)
    fresh = dict(copy.deepcopy(mixed).merge_and_unload().named_parameters())
    assert all(torch.equal(p, fresh[n]) for n, p in kept_mixed.named_parameters())
    assert not merged_weights.refresh_merged(kept_mixed.float(), mixed), "a copy of another dtype is made anew"

    monkeypatch.setattr(rollouts, "ARITHMETIC_BOUND_PARAMS", 0)  # a large model: no copy kept while it learns
    large = TransformersBackend()
    large.load_policy(model)
    large.release()
    assert large._sampler is None and large._kept is None


class CountingBackend(TransformersBackend):
    def __init__(self):
        super().__init__()
        self.loads, self.calls = 0, 0

    def load_policy(self, model):
        self.loads += 1
        super().load_policy(model)

    def generate(self, tok, prompt_ids, settings):
        assert self.loads == self.steps_seen + 1, "generate before this step's weights were loaded"
        self.calls += 1
        return super().generate(tok, prompt_ids, settings)


def test_the_trainer_loads_the_policy_once_per_step_not_once_per_round(tmp_path):
    model, tok = load_policy("pocket", recipe=SMOKE, verbose=False)
    cfg = TrainConfig(steps=2, questions_per_batch=2, group_size=2, max_new_tokens=4, buffer_size=12,
                      minibatch_size=12, grad_accum=1, lr=1e-3, log_rollouts=0, seed=2)
    backend = CountingBackend()
    trainer = GRPOTrainer(model, tok, cfg, train_entries=ENTRIES, output_dir=tmp_path, backend=backend, progress=False,
                          reward_fn=lambda text, e: RewardBreakdown(None, 0.0, float(len(text) % 2), float(len(text) % 2)))
    for step in range(cfg.steps):
        backend.steps_seen = step
        trainer.train_step()
        assert backend._sampler is None, "the merged copy outlived the collection phase"
    assert backend.loads == cfg.steps and backend.calls == 3 * cfg.steps


@pytest.mark.parametrize("which", ["pocket", "tiny"])
def test_greedy_decoding_that_drops_finished_rows_writes_what_generate_writes(which, monkeypatch):
    """Real models decode greedily with finished rows dropped from the batch and the cache; the tokens
    must be ``model.generate``'s, row for row, with left padding and rows finishing at different steps."""
    from kimina_edu import rollouts

    if which == "pocket":
        model, tok = load_policy("pocket", recipe=SMOKE, verbose=False)
        prompt_ids = encode_prompts(tok, [chat_prompt(tok, e["question"]) for e in ENTRIES[:6]])
    else:  # random weights, a small vocabulary, eos = 3: rows stop early and at different steps
        model = tiny_random_llama(vocab_size=8, eos_token_id=3, pad_token_id=0)
        tok = type("Tok", (), {"pad_token_id": 0, "eos_token_id": 3})()
        g = torch.Generator().manual_seed(1)
        prompt_ids = [torch.randint(4, 8, (n,), generator=g).tolist() for n in (1, 5, 3, 7, 2, 6, 4, 4)]
    settings = SamplingSettings(max_new_tokens=24, temperature=0.0)
    monkeypatch.setattr(rollouts, "ARITHMETIC_BOUND_PARAMS", 10**12)
    monkeypatch.setattr(rollouts.smalldecode, "supported", lambda model: "this test's reference is model.generate")
    by_generate = generate_ids(model, tok, prompt_ids, settings)
    monkeypatch.setattr(rollouts, "ARITHMETIC_BOUND_PARAMS", 0)
    dropping = generate_ids(model, tok, prompt_ids, settings)
    assert dropping == by_generate
    if which == "tiny":  # (the SMOKE pocket model rarely stops within 24 tokens: the equal-tokens half)
        lengths = {len(row) for row in dropping}
        assert len(lengths) > 1, f"the rows must finish at different steps for this test to mean anything: {lengths}"


@pytest.mark.parametrize(("temperature", "top_p", "min_p"), [(0.7, 0.95, 0.0), (1.0, 1.0, 0.1), (0.7, 0.9, 0.05),
                                                             (2.0, 0.5, 0.0)])
def test_the_sampling_distribution_is_generates(temperature, top_p, min_p):
    """Real models sample through kimina_edu's own decoding loop: its distribution must be the one
    ``model.generate``'s warpers (temperature → top-p → min-p) give, token for token."""
    from transformers.generation.logits_process import (
        LogitsProcessorList,
        MinPLogitsWarper,
        TemperatureLogitsWarper,
        TopPLogitsWarper,
    )

    from kimina_edu.rollouts import sampling_probs

    logits = torch.randn(6, 50, generator=torch.Generator().manual_seed(0)) * 3
    warpers = LogitsProcessorList([TemperatureLogitsWarper(temperature)] + ([TopPLogitsWarper(top_p)] if top_p < 1 else [])
                                  + ([MinPLogitsWarper(min_p)] if min_p > 0 else []))
    theirs = warpers(None, logits.clone()).softmax(-1)
    ours = sampling_probs(logits, SamplingSettings(max_new_tokens=1, temperature=temperature, top_p=top_p, min_p=min_p))
    assert torch.allclose(ours, theirs, atol=1e-6)
    assert ((ours == 0) == (theirs == 0)).all(), "the same tokens must be ruled out"


@pytest.mark.parametrize("bound", [0, 10**12], ids=["dropping finished rows", "smalldecode"])
def test_a_group_shares_its_prefill_and_comes_back_prompt_major(monkeypatch, bound):
    """n samples per prompt from one prefill (both of the package's own decoders): with a distribution
    that allows only the top token, every sample of a prompt is that prompt's greedy completion, in
    generate's prompt-major order."""
    from kimina_edu import rollouts

    model = tiny_random_llama(vocab_size=8, eos_token_id=3, pad_token_id=0)
    tok = type("Tok", (), {"pad_token_id": 0, "eos_token_id": 3})()
    prompts = [[4, 5, 6], [7], [5, 5, 7, 4, 6]]
    monkeypatch.setattr(rollouts, "ARITHMETIC_BOUND_PARAMS", bound)
    greedy = generate_ids(model, tok, prompts, SamplingSettings(max_new_tokens=16, temperature=0.0))
    grouped = generate_ids(model, tok, prompts, SamplingSettings(max_new_tokens=16, temperature=1.0, top_p=1e-6, n=4))
    assert grouped == [row for row in greedy for _ in range(4)]
    torch.manual_seed(0)
    sampled = generate_ids(model, tok, prompts, SamplingSettings(max_new_tokens=16, temperature=1.0, n=4))
    assert len(sampled) == 12 and len({tuple(r) for r in sampled}) > 3, "real sampling must vary within a group"
