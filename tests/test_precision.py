"""The CPU's fast path (kimina_edu/precision.py): bf16 matrix multiplies where the CPU has bf16 units, with
the sampler–learner gap it opens measured and corrected; fp32 when forced or where the CPU lacks them."""

from __future__ import annotations

import math

import pytest
import torch
from toy_task import brevity_reward, toy_config

from kimina_edu import precision, smalldecode
from kimina_edu.logprobs import Rollout, completion_logprobs
from kimina_edu.models import load_policy
from kimina_edu.pocket import PocketRecipe
from kimina_edu.rollouts import SamplingSettings, TransformersBackend, chat_prompt, encode_prompts, sample_ids
from kimina_edu.tasks import SEEDS, make_entries
from kimina_edu.trainer import GRPOTrainer, mismatch_stats

SMOKE = PocketRecipe.smoke()

HAS_BF16 = precision.bf16_units() is not None


def test_the_setting_forces_fp32_and_a_bad_value_is_one_line(monkeypatch):
    monkeypatch.setenv(precision.ENV, "fp32")
    assert precision.matmul_dtype(large=True) == torch.float32
    assert "KIMINA_EDU_PRECISION=fp32" in precision.path_line(large=True)
    monkeypatch.setenv(precision.ENV, "fast")
    with pytest.raises(ValueError, match=r"KIMINA_EDU_PRECISION='fast': use one of auto, fp32, bf16"):
        precision.matmul_dtype(large=True)


def test_a_small_model_or_a_cpu_without_bf16_units_stays_fp32(monkeypatch):
    monkeypatch.delenv(precision.ENV, raising=False)
    assert precision.matmul_dtype(large=False) == torch.float32
    monkeypatch.setattr(precision, "bf16_units", lambda: None)
    dtype, why = precision.choose(large=True)
    assert dtype == torch.float32 and "no bf16 matrix unit" in why
    monkeypatch.setenv(precision.ENV, "bf16")
    with pytest.raises(RuntimeError, match="no bf16 matrix unit"):
        precision.matmul_dtype(large=True)


def test_auto_takes_bf16_on_a_cpu_with_the_units(monkeypatch):
    monkeypatch.delenv(precision.ENV, raising=False)
    monkeypatch.setattr(precision, "bf16_units", lambda: "AVX512-BF16")
    assert precision.matmul_dtype(large=True) == torch.bfloat16
    assert precision.path_line(large=True).startswith("arithmetic: bf16 matrix multiplies, fp32 master weights")
    assert precision.matmul_dtype(large=True, device="cuda") == torch.float32


def test_mismatch_stats_are_k3_and_the_weight_quantiles():
    log_r = torch.tensor([0.1, -0.1, 0.0, 0.2])
    got = mismatch_stats([log_r[:2], log_r[2:]])
    r = log_r.double().exp()
    assert got["mismatch_kl"] == pytest.approx(float(((r - 1) - log_r.double()).mean()))
    assert got["is_weight_p50"] == pytest.approx(float(torch.quantile(r, 0.5)))
    assert got["is_weight_p01"] < 1 < got["is_weight_p99"]
    assert mismatch_stats([]) == {}


def test_the_fp32_decoder_returns_the_learners_own_logprobs():
    """Asked for them, the decoder's log-probs of its own draws are the learner's, to float rounding: the
    measurement of the gap reads 0 where there is none."""
    model, tok = load_policy("pocket", recipe=SMOKE, verbose=False)
    entries = make_entries("syllogism", 3, SEEDS["rl"])
    prompts = encode_prompts(tok, [chat_prompt(tok, e["question"]) for e in entries])
    width = max(map(len, prompts))
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
    attn = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    decoder = smalldecode.SmallLlama.from_model(model)
    torch.manual_seed(0)
    rows = decoder.decode(ids, attn, SamplingSettings(max_new_tokens=8, temperature=0.7, top_p=0.95, n=2),
                          tok.eos_token_id, logp_temperature=1.0)
    rollouts = [Rollout(prompts[i // 2], row, [], 0.0, 0.0, False) for i, row in enumerate(rows)]
    learner, _ = completion_logprobs(model, rollouts, tok.pad_token_id)
    for i, row in enumerate(rows):
        assert decoder.sampled_logp[i] == pytest.approx(learner[i, : len(row)].tolist(), abs=1e-4)


@pytest.fixture(scope="module")
def smollm2_policy():
    from kimina_edu import smollm2

    problem = smollm2.converted_problem(smollm2.converted_dir())
    if problem is not None:
        pytest.fail(f"the converted SmolLM2 folder {problem}: run `make smollm2` (make test does it first)")
    model, tok = load_policy("smollm2", device="cpu", verbose=False)
    return model.eval(), tok


@pytest.mark.skipif(not HAS_BF16, reason="this CPU has no bf16 matrix unit: the bf16 path does not run here")
def test_bf16_sampling_on_smollm2_returns_its_logprobs_close_to_the_fp32_learner(smollm2_policy, monkeypatch):
    monkeypatch.delenv(precision.ENV, raising=False)
    model, tok = smollm2_policy
    entries = make_entries("syllogism", 2, SEEDS["rl"])
    prompts = encode_prompts(tok, [chat_prompt(tok, e["question"]) for e in entries])
    torch.manual_seed(0)
    gen = sample_ids(model, tok, prompts, SamplingSettings(max_new_tokens=24, temperature=0.7, top_p=0.95, n=2))
    assert gen.sampler_logp is not None
    assert [len(lp) for lp in gen.sampler_logp] == [len(c) for c in gen.completion_ids]
    rollouts = [Rollout(prompts[i // 2], c, [], 0.0, 0.0, False) for i, c in enumerate(gen.completion_ids)]
    with torch.no_grad():
        learner, _ = completion_logprobs(model, rollouts, tok.pad_token_id)
    log_r = torch.cat([learner[i, : len(lp)] - torch.tensor(lp) for i, lp in enumerate(gen.sampler_logp)])
    stats = mismatch_stats([log_r])
    assert 0 < stats["mismatch_kl"] < 0.01, stats  # bf16 rounding: small, and not zero
    assert 0.7 < stats["is_weight_p01"] <= stats["is_weight_p99"] < 1.4, stats
    monkeypatch.setenv(precision.ENV, "fp32")
    assert sample_ids(model, tok, prompts, SamplingSettings(max_new_tokens=4, n=1)).sampler_logp is None


class _OffsetBackend(TransformersBackend):
    """The learner's own sampler, reporting each token's log-prob shifted by a known amount: a sampler
    whose arithmetic differs from the learner's by exactly ``offset`` nats a token."""

    def __init__(self, offset: float) -> None:
        super().__init__()
        self.offset = offset

    def generate(self, tok, prompt_ids, settings):
        gen = super().generate(tok, prompt_ids, settings)
        rollouts = [Rollout(gen.prompt_ids[i // settings.n], c, [], 0.0, 0.0, False)
                    for i, c in enumerate(gen.completion_ids)]
        with torch.no_grad():
            logp, _ = completion_logprobs(self._sampler, rollouts, tok.pad_token_id)
        gen.sampler_logp = [(logp[i, : len(c)] - self.offset).tolist() for i, c in enumerate(gen.completion_ids)]
        return gen


def test_the_trainer_logs_the_gap_a_sampler_reports(tmp_path):
    model, tok = load_policy("pocket", recipe=SMOKE, verbose=False)
    offset = 0.05  # log r = log π_learner − log π_sampler = +0.05 at every token
    tr = GRPOTrainer(model, tok, toy_config(steps=2), output_dir=tmp_path, reward_fn=brevity_reward,
                     backend=_OffsetBackend(offset), progress=False)
    learned = [r for r in tr.train() if not r["skipped"]]
    assert learned
    k3 = math.exp(offset) - 1 - offset
    for row in learned:
        assert row["mismatch_kl"] == pytest.approx(k3, rel=0.05)
        assert row["is_weight_p50"] == pytest.approx(math.exp(offset), rel=1e-3)


def test_minibatches_of_a_multiple_of_the_group_hold_whole_groups_and_draw_as_a_shuffle(tmp_path):
    model, tok = load_policy("pocket", recipe=SMOKE, verbose=False)
    buffer = [Rollout([1, q], [5, 6], [], 1.0, 1.0, False) for q in range(8) for _ in range(6)]
    grouped = GRPOTrainer(model, tok, toy_config(minibatch_size=12, group_size=6), output_dir=tmp_path / "g",
                          reward_fn=brevity_reward, progress=False)
    order = grouped.minibatch_order(buffer)
    assert sorted(order) == list(range(48))
    for k in range(0, 48, 12):
        prompts = [tuple(buffer[i].prompt_ids) for i in order[k : k + 12]]
        assert len(set(prompts)) == 2 and all(prompts.count(p) == 6 for p in set(prompts))
    plain = GRPOTrainer(model, tok, toy_config(minibatch_size=8, group_size=6), output_dir=tmp_path / "p",
                        reward_fn=brevity_reward, progress=False)
    plain.minibatch_order(buffer)
    assert grouped.data_rng.getstate() == plain.data_rng.getstate()  # the next questions drawn do not change
    shuffled = plain.minibatch_order(buffer)
    assert len({tuple(buffer[i].prompt_ids) for i in shuffled[:8]}) > 2


@pytest.mark.skipif(not HAS_BF16, reason="this CPU has no bf16 matrix unit: the bf16 path does not run here")
def test_the_gap_stays_small_once_the_adapter_has_moved(smollm2_policy, monkeypatch):
    """The sampler rounds base + adapter, summed, to bf16; the learner (autocast) rounds each on its own. With
    every adapter's delta at 0.5% of its weight, as after some training, the gap stays bf16 rounding."""
    import copy

    from peft import get_peft_model

    from kimina_edu.lora import lora_config

    monkeypatch.delenv(precision.ENV, raising=False)
    base, tok = smollm2_policy
    policy = get_peft_model(copy.deepcopy(base), lora_config())
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for module in policy.modules():
            if hasattr(module, "lora_B") and "default" in module.lora_B:
                w, a = module.base_layer.weight, module.lora_A["default"].weight
                b = torch.randn(module.lora_B["default"].weight.shape, generator=gen)
                delta = (b @ a) * module.scaling["default"]
                module.lora_B["default"].weight.copy_(b * 0.005 * w.norm() / delta.norm())
    backend = TransformersBackend()
    backend.load_policy(policy)
    entries = make_entries("syllogism", 2, SEEDS["rl"])
    prompts = encode_prompts(tok, [chat_prompt(tok, e["question"]) for e in entries])
    torch.manual_seed(0)
    out = backend.generate(tok, prompts, SamplingSettings(max_new_tokens=24, temperature=0.7, top_p=0.95, n=2))
    rollouts = [Rollout(prompts[i // 2], c, [], 0.0, 0.0, False) for i, c in enumerate(out.completion_ids)]
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):  # as the trainer's learner scores
        learner, _ = completion_logprobs(policy, rollouts, tok.pad_token_id)
    log_r = torch.cat([learner[i, : len(lp)].float() - torch.tensor(lp) for i, lp in enumerate(out.sampler_logp)])
    assert mismatch_stats([log_r])["mismatch_kl"] < 0.005


def test_greedy_evaluation_multiplies_in_fp32_where_sampling_takes_bf16(monkeypatch):
    from kimina_edu import eval as evaluation
    from kimina_edu import rollouts

    monkeypatch.delenv(precision.ENV, raising=False)
    monkeypatch.setattr(precision, "bf16_units", lambda: "AVX512-BF16")
    monkeypatch.setattr(rollouts, "ARITHMETIC_BOUND_PARAMS", 0)  # the pocket model, treated as a large one
    built = []
    real = smalldecode.SmallLlama.from_model
    monkeypatch.setattr(smalldecode.SmallLlama, "from_model",
                        classmethod(lambda cls, m, dtype=None: built.append(dtype) or real(m, dtype)))
    model, tok = load_policy("pocket", recipe=SMOKE, verbose=False)
    entries = make_entries("syllogism", 2, SEEDS["eval"])
    evaluation.evaluate_policy(model, tok, entries, max_new_tokens=4, progress=False, cache=False)
    assert built == [torch.float32]
    prompts = encode_prompts(tok, [chat_prompt(tok, e["question"]) for e in entries])
    sample_ids(model, tok, prompts, SamplingSettings(max_new_tokens=4, temperature=0.7, n=2))
    assert built[-1] == torch.bfloat16


@pytest.mark.skipif(not HAS_BF16, reason="this CPU has no bf16 matrix unit: the bf16 path does not run here")
def test_a_bf16_heads_largest_logits_are_taken_again_in_fp32():
    model, _ = load_policy("pocket", recipe=SMOKE, verbose=False)
    decoder = smalldecode.SmallLlama.from_model(model, torch.bfloat16)
    h = torch.randn(3, decoder.head_rows.shape[1])
    logits = decoder._logits(h)
    exact = h @ decoder.head_rows.t()
    top = exact.topk(8, dim=-1).indices
    # the candidates: fp32 to its rounding (bf16's step at these sizes is ~0.01), the tail: bf16's
    torch.testing.assert_close(logits.gather(1, top), exact.gather(1, top), atol=1e-5, rtol=0)
    assert (logits - exact).abs().max() > 1e-3
