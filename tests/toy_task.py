"""The toy GRPO task the trainer tests share: a dense reward (shorter completions score higher, so the
policy must learn to emit its end-of-turn token early) and small settings that learn it in 4 steps."""

from kimina_edu.rewards import RewardBreakdown
from kimina_edu.train_config import TrainConfig


def brevity_reward(text, entry):
    score = 1.0 - min(len(text), 60) / 60
    return RewardBreakdown(None, 0.0, score, score)


def toy_config(**kw) -> TrainConfig:
    base = {"steps": 4, "questions_per_batch": 4, "group_size": 6, "max_new_tokens": 12, "buffer_size": 24,
            "minibatch_size": 12, "grad_accum": 2, "epochs": 1, "lr": 1e-2, "loss_type": "dr_grpo", "scale": "group",
            "log_rollouts": 1, "seed": 3}
    base.update(kw)
    return TrainConfig(**base)
