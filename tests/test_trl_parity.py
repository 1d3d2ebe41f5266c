"""Our policy_loss against the loss TRL 1.16's GRPOTrainer computes, on one fixed batch."""

import pytest
import torch

from kimina_edu.grpo import LOSS_TYPES, policy_loss
from kimina_edu.models import load_policy
from kimina_edu.pocket import PocketRecipe
from kimina_edu.tasks import SEEDS, make_entries
from kimina_edu.trainer import Rollout, TrainConfig, completion_logprobs
from kimina_edu.trl_bridge import (
    REWARD_FUNCS,
    build_dataset,
    check_trl_version,
    correctness_reward_func,
    format_reward_func,
    grpo_config,
    trl_loss_on_batch,
)


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    # module-scoped, so no monkeypatch: set and then restore by hand (a leaked KIMINA_EDU_CACHE hid the
    # learner's converted SmolLM2 from tests/test_smollm2.py, which runs later)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("KIMINA_EDU_CACHE", str(tmp_path_factory.getbasetemp() / "model-cache"))
        yield load_policy("pocket", recipe=PocketRecipe.smoke(), verbose=False)


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_parity_with_trl_compute_loss(policy, tmp_path, loss_type):
    from trl import GRPOTrainer

    model, tok = policy
    entries = make_entries("syllogism", 8, SEEDS["rl"])
    cfg = TrainConfig(group_size=4, questions_per_batch=2, buffer_size=8, minibatch_size=8, grad_accum=1,
                      max_new_tokens=12, temperature=1.0, loss_type=loss_type, eps_high=0.28, steps=1)
    trainer = GRPOTrainer(model=model, reward_funcs=REWARD_FUNCS, args=grpo_config(cfg, str(tmp_path)),
                          train_dataset=build_dataset(entries), processing_class=tok)
    g = torch.Generator().manual_seed(0)
    prompt = tok("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n")["input_ids"]
    completions = [torch.randint(10, 500, (n,), generator=g).tolist() for n in (3, 7, 12, 5)]
    rollouts = [Rollout(prompt, c, [], 0.0, 0.0, False) for c in completions]
    with torch.no_grad():
        logp, mask = completion_logprobs(model, rollouts, tok.pad_token_id)
    old = logp + 0.3 * torch.randn(logp.shape, generator=g)  # ratios off 1: the clip matters
    adv = torch.tensor([1.0, -0.5, 0.2, -0.7])
    ours, _ = policy_loss(logp, old, adv, mask, loss_type=loss_type, eps_low=0.2, eps_high=0.28, max_len=12)
    theirs = trl_loss_on_batch(trainer, prompt, completions, adv, old, tok.pad_token_id)
    assert abs(float(ours) - float(theirs)) < 1e-6


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
