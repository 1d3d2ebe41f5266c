"""Our policy_loss against the loss TRL 1.16's GRPOTrainer computes, on one fixed batch."""

import pytest
import torch

from kimina_edu.grpo import LOSS_TYPES, TRL_LOSSES, policy_loss
from kimina_edu.logprobs import Rollout, completion_logprobs
from kimina_edu.models import load_policy
from kimina_edu.pocket import PocketRecipe
from kimina_edu.tasks import SEEDS, make_entries
from kimina_edu.train_config import TrainConfig
from kimina_edu.trl_bridge import (
    REWARD_FUNCS,
    build_dataset,
    check_trl_version,
    correctness_reward_func,
    format_reward_func,
    grpo_config,
    trl_loss_on_batch,
    trl_variant_overrides,
)


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    # module-scoped, so no monkeypatch: set and then restore by hand (a leaked KIMINA_EDU_CACHE hid the
    # learner's converted SmolLM2 from tests/test_smollm2.py, which runs later)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("KIMINA_EDU_CACHE", str(tmp_path_factory.getbasetemp() / "model-cache"))
        yield load_policy("pocket", recipe=PocketRecipe.smoke(), verbose=False)


def _batch_and_trl(policy, tmp_path, eps_high: float, **trl_overrides):
    from trl import GRPOTrainer

    model, tok = policy
    entries = make_entries("syllogism", 8, SEEDS["rl"])
    cfg = TrainConfig(group_size=4, questions_per_batch=2, buffer_size=8, minibatch_size=8, grad_accum=1,
                      max_new_tokens=12, temperature=1.0, eps_high=eps_high, steps=1)
    trainer = GRPOTrainer(model=model, reward_funcs=REWARD_FUNCS, args=grpo_config(cfg, str(tmp_path), **trl_overrides),
                          train_dataset=build_dataset(entries), processing_class=tok)
    g = torch.Generator().manual_seed(0)
    prompt = tok("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n")["input_ids"]
    completions = [torch.randint(10, 500, (n,), generator=g).tolist() for n in (3, 7, 12, 5)]
    rollouts = [Rollout(prompt, c, [], 0.0, 0.0, False) for c in completions]
    with torch.no_grad():
        logp, mask = completion_logprobs(model, rollouts, tok.pad_token_id)
    old = logp + 0.3 * torch.randn(logp.shape, generator=g)  # ratios off 1: the clip matters
    adv = torch.tensor([1.0, -0.5, 0.2, -0.7])
    theirs = trl_loss_on_batch(trainer, prompt, completions, adv, old, tok.pad_token_id)
    return (logp, old, adv, mask), float(theirs)


# The same formula summed in another order: fp32 rounding, ~1e-6 on a loss near 1 (1.2e-6 for CISPO on an AMD EPYC
# without AVX512, `CI=true make test`, 2026-12-07). Different losses differ by > 1e-4 on this batch (asserted below).
PARITY_TOL = 1e-5


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_parity_with_trl_compute_loss(policy, tmp_path, loss_type):
    (logp, old, adv, mask), theirs = _batch_and_trl(policy, tmp_path, 0.28, loss_type=loss_type)
    ours, _ = policy_loss(logp, old, adv, mask, loss_type=loss_type, eps_low=0.2, eps_high=0.28, max_len=12)
    assert abs(float(ours) - theirs) < PARITY_TOL


@pytest.mark.parametrize("variant", sorted(TRL_LOSSES))
def test_every_trl_variant_is_one_line_of_our_loss(policy, tmp_path, variant):
    surrogate, aggregation, level = TRL_LOSSES[variant]
    eps_high = 5.0 if variant == "cispo" else 0.28  # CISPO's eps_high is the cap on the ratio itself
    (logp, old, adv, mask), theirs = _batch_and_trl(policy, tmp_path, eps_high, **trl_variant_overrides(variant))
    ours, _ = policy_loss(logp, old, adv, mask, loss_type=aggregation, eps_low=0.2, eps_high=eps_high, max_len=12,
                          surrogate=surrogate, ratio_level=level)
    assert abs(float(ours) - theirs) < PARITY_TOL
    if variant != "grpo":  # each variant is a different loss on this batch (ratios off 1), not a renamed one
        base, _ = policy_loss(logp, old, adv, mask, loss_type="grpo", eps_low=0.2, eps_high=eps_high, max_len=12)
        assert abs(float(base) - float(ours)) > 1e-4


def test_variants_share_the_on_policy_gradient():
    """At ratio 1 every surrogate's gradient is -A·∇log π (aggregated alike)."""
    g = torch.Generator().manual_seed(1)
    logp0 = -torch.rand(4, 6, generator=g) - 0.1
    mask = torch.ones(4, 6)
    adv = torch.tensor([1.0, -0.5, 0.2, -0.7])
    grads = []
    for surrogate in ("clip", "cispo", "sapo"):
        logp = logp0.clone().requires_grad_(True)
        loss, _ = policy_loss(logp, logp0.clone(), adv, mask, surrogate=surrogate, eps_high=5.0 if surrogate == "cispo" else 0.28)
        loss.backward()
        grads.append(logp.grad)
    assert torch.allclose(grads[0], grads[1]) and torch.allclose(grads[0], grads[2])
    with pytest.raises(ValueError, match="surrogate"):
        policy_loss(logp0, logp0, adv, mask, surrogate="ppo")


def test_reward_functions_in_trl_signature():
    import json

    entry = make_entries("syllogism", 1, SEEDS["rl"])[0]
    good = [{"role": "assistant", "content": f"<think>t</think><answer>{entry['answer']}</answer>"}]
    assert format_reward_func(prompts=[None], completions=[good]) == [1.0]
    assert correctness_reward_func(prompts=[None], completions=[good], entry=[json.dumps(entry)]) == [1.0]


def test_config_mapping_and_version():
    assert check_trl_version().startswith("1.16")
    cfg = TrainConfig.cpu_pocket(steps=10, epochs=2, loss_type="dr_grpo", scale="none")
    args = grpo_config(cfg, "/tmp/unused")
    assert args.num_generations == cfg.group_size and args.generation_batch_size == 48
    assert args.max_steps == 20 and args.num_iterations == 2
    assert (args.loss_type, args.scale_rewards, args.beta) == ("dr_grpo", "none", 0.0)
    assert args.epsilon_high == 0.28 and not args.bf16
    with pytest.raises(ValueError, match="buffer"):
        grpo_config(TrainConfig(), "/tmp/unused")


def test_checkpoint_every_reaches_trl():
    cfg = TrainConfig.cpu_pocket(steps=10, epochs=2, checkpoint_every=3)
    args = grpo_config(cfg, "/tmp/unused")
    assert (str(args.save_strategy), args.save_steps) in (("steps", 6), ("SaveStrategy.STEPS", 6))
    assert str(grpo_config(TrainConfig.cpu_pocket(steps=10), "/tmp/unused").save_strategy) in ("no", "SaveStrategy.NO")


def test_a_shorter_trl_run_is_the_longer_ones_first_steps(policy, tmp_path):
    """Chapter 5's variant study reads its `grpo` curve off section 4's run instead of training it again:
    that holds only while TRL's first steps do not depend on how many steps it was asked for."""
    from trl import GRPOTrainer

    from kimina_edu.lora import lora_config
    from kimina_edu.trl_bridge import trl_log_rows

    entries = make_entries("syllogism", 64, SEEDS["rl"])
    rows = {}
    for steps in (3, 2):
        model, tok = load_policy("pocket", recipe=PocketRecipe.smoke(), lora=lora_config(), seed=0, verbose=False)
        cfg = TrainConfig(group_size=4, questions_per_batch=2, buffer_size=8, minibatch_size=8, grad_accum=1,
                          max_new_tokens=12, temperature=1.0, steps=steps)
        trainer = GRPOTrainer(model=model, reward_funcs=REWARD_FUNCS, args=grpo_config(cfg, str(tmp_path / str(steps))),
                              train_dataset=build_dataset(entries), processing_class=tok)
        trainer.train()
        rows[steps] = trl_log_rows(trainer.state.log_history)
    assert len(rows[3]) == 3 and rows[3][:2] == rows[2], "step 2 comes after an update: it must match too"


def test_compare_steps_and_accuracy_at():
    from kimina_edu.trl_bridge import COMPARE_STEPS, accuracy_at, compare_steps

    pocket = TrainConfig.preset("pocket")
    assert compare_steps("pocket", pocket) == COMPARE_STEPS < pocket.steps
    assert pocket.eval_every and COMPARE_STEPS % pocket.eval_every == 0, "chapter 4 must check accuracy at that step"
    assert compare_steps("pocket", TrainConfig.preset("pocket", quick=True)) == TrainConfig.preset("pocket", quick=True).steps
    assert compare_steps("pocket", TrainConfig.preset("pocket", smoke=True), smoke=True) == 3
    smollm2 = TrainConfig.preset("smollm2")  # a real model: at chapter 4's first in-run check, else whole
    assert compare_steps("smollm2", smollm2) == smollm2.eval_every < smollm2.steps
    assert compare_steps("smollm2", TrainConfig.preset("smollm2", eval_every=0)) == smollm2.steps
    assert compare_steps("smollm2", TrainConfig.preset("smollm2", eval_every=smollm2.steps)) == smollm2.steps
    assert compare_steps("pocket", pocket, 1000) == pocket.steps and compare_steps("pocket", pocket, 7) == 7
    log = [{"step": 1}, {"step": 2, "eval_accuracy": 0.5}, {"step": 3, "eval_accuracy": float("nan")}]
    assert accuracy_at(log, 2) == 0.5 and accuracy_at(log, 1) is None and accuracy_at(log, 9) is None
    assert accuracy_at(log, 3) is None, "a NaN accuracy is no measurement"
