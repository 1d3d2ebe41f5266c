"""Chapter 5 — the chapter-4 run through TRL's ``GRPOTrainer`` (TRL 1.16).

Field by field, our :class:`~kimina_edu.train_config.TrainConfig` → TRL's ``GRPOConfig``: see
:data:`CONFIG_MAP` (rendered as a table in notebook 05) and :func:`grpo_config`.

CPU: TRL inherits ``bf16=True``, which transformers rejects without a bf16 GPU; we set
``use_cpu=True, bf16=False`` on a CPU.
"""

from __future__ import annotations

import json
import math
from importlib import metadata
from typing import Any

from kimina_edu.rewards import (
    W_CORRECT,
    W_FORMAT,
    chat_messages,
    correctness_reward,
    extract_answer,
    format_reward,
)
from kimina_edu.train_config import TrainConfig
from kimina_edu.trainer import signal_exhausted

TRL_SUPPORTED = ("1.16",)  # the minor versions whose loss code this chapter was checked against

CONFIG_MAP: list[tuple[str, str, str]] = [
    ("group_size", "num_generations", "completions per prompt (G)"),
    ("questions_per_batch · group_size", "generation_batch_size", "completions generated per round"),
    ("minibatch_size", "per_device_train_batch_size", "TRL counts completions, not prompts"),
    ("grad_accum", "gradient_accumulation_steps", ""),
    ("epochs", "num_iterations", "passes over each generation round"),
    ("steps", "max_steps (= steps · epochs)", "TRL counts optimizer steps"),
    ("max_new_tokens", "max_completion_length", "also Dr.GRPO's constant L"),
    ("temperature, top_p, min_p", "temperature, top_p, min_p", "min_p 0 → None (off)"),
    ("lr, weight_decay", "learning_rate, weight_decay", ""),
    ("max_grad_norm", "max_grad_norm", ""),
    ("loss_type", "loss_type", "TRL's default is 'dapo'"),
    ("scale", "scale_rewards", "TRL's default 'group'; Dr.GRPO needs 'none'"),
    ("eps_low, eps_high", "epsilon, epsilon_high", ""),
    ("beta", "beta", "TRL's default 0.0: no reference model"),
    ("mask_truncated", "mask_truncated_completions", ""),
    ("seed", "seed", ""),
    ("buffer_size", "—", "TRL generates generation_batch_size per round"),
]


def check_trl_version() -> str:
    """The installed TRL version, or a clear error naming the version this chapter needs."""
    try:
        version = metadata.version("trl")
    except metadata.PackageNotFoundError:
        raise RuntimeError(f"TRL is not installed; this chapter needs trl {TRL_SUPPORTED[0]}.x "
                           f"(pip install 'trl=={TRL_SUPPORTED[0]}.0')") from None
    if not version.startswith(TRL_SUPPORTED):
        raise RuntimeError(f"this chapter was checked against trl {TRL_SUPPORTED[0]}.x, found {version}; "
                           f"install it with pip install 'trl=={TRL_SUPPORTED[0]}.0'")
    return version


def _text(completion: Any) -> str:
    """TRL passes conversational completions as ``[{"role": "assistant", "content": …}]``."""
    if isinstance(completion, list):
        return completion[0]["content"] if completion else ""
    return completion


def format_reward_func(prompts, completions, completion_ids=None, **columns) -> list[float]:
    """Chapter 1's format reward in TRL's reward-function signature."""
    return [format_reward(_text(c)) for c in completions]


def correctness_reward_func(prompts, completions, completion_ids=None, *, entry, **columns) -> list[float]:
    """Chapter 1's binarized correctness; ``entry`` is the dataset column holding the item as JSON."""
    return [correctness_reward(extract_answer(_text(c)), json.loads(e)) for c, e in zip(completions, entry)]


REWARD_FUNCS = [format_reward_func, correctness_reward_func]
REWARD_WEIGHTS = [W_FORMAT, W_CORRECT]


def build_dataset(entries: list[dict[str, Any]]):
    """reasoning-gym items → a ``datasets.Dataset`` TRL accepts: a conversational ``prompt`` and
    the whole item as JSON in ``entry`` (nested metadata with mixed types does not fit Arrow)."""
    from datasets import Dataset

    rows = [{"prompt": chat_messages(e["question"]),
             "entry": json.dumps(e)} for e in entries]
    return Dataset.from_list(rows)


def grpo_config(cfg: TrainConfig, output_dir: str, *, use_cpu: bool = True, **overrides):
    """TRL's ``GRPOConfig`` for the same run as ``cfg`` (see the table in this module's docstring)."""
    from trl import GRPOConfig

    if cfg.buffer_size not in (0, cfg.questions_per_batch * cfg.group_size):
        raise ValueError("TRL has no rollout buffer: set buffer_size = questions_per_batch · group_size to compare")
    kwargs = dict(
        output_dir=output_dir, num_generations=cfg.group_size,
        generation_batch_size=cfg.questions_per_batch * cfg.group_size,
        per_device_train_batch_size=cfg.minibatch_size, gradient_accumulation_steps=cfg.grad_accum,
        num_iterations=cfg.epochs, max_steps=cfg.steps * cfg.epochs, max_completion_length=cfg.max_new_tokens,
        temperature=cfg.temperature, top_p=cfg.top_p, min_p=cfg.min_p or None,
        learning_rate=cfg.lr, weight_decay=cfg.weight_decay,
        max_grad_norm=cfg.max_grad_norm, loss_type=cfg.loss_type, scale_rewards=cfg.scale, epsilon=cfg.eps_low,
        epsilon_high=cfg.eps_high if cfg.eps_high is not None else cfg.eps_low, beta=cfg.beta,
        mask_truncated_completions=cfg.mask_truncated, seed=cfg.seed, reward_weights=REWARD_WEIGHTS,
        lr_scheduler_type="constant", warmup_steps=0, logging_steps=1, report_to="none",
        # checkpoint_every counts our steps; TRL's max_steps counts each of the `epochs` passes as a step
        save_strategy="steps" if cfg.checkpoint_every else "no", save_steps=max(1, cfg.checkpoint_every * cfg.epochs),
        activation_checkpointing=False, use_cpu=use_cpu, bf16=False, disable_tqdm=True, dataloader_num_workers=0,
    )
    kwargs.update(overrides)
    return GRPOConfig(**kwargs)


def trl_variant_overrides(name: str) -> dict[str, Any]:
    """``GRPOConfig`` settings for one of TRL 1.16's loss variants (``grpo.TRL_LOSSES``): its
    ``loss_type``, and for GSPO ``importance_sampling_level="sequence"`` (GSPO is no loss_type)."""
    from kimina_edu.grpo import TRL_LOSSES

    if name not in TRL_LOSSES:
        raise ValueError(f"unknown TRL loss variant {name!r}; choose one of {sorted(TRL_LOSSES)}")
    if name == "gspo":
        return {"loss_type": "grpo", "importance_sampling_level": "sequence"}
    return {"loss_type": name, "importance_sampling_level": "token"}


def stop_when_silent(window: int):
    """A ``TrainerCallback`` with chapter 4's early stop (``TrainConfig.silent_window``): TRL's run
    ends once at most a tenth of the last ``window`` steps had a group whose rewards differed.
    TRL still takes an optimizer step on an all-zero-advantage batch; counting such steps as
    silent keeps the two runs' stopping rules the same."""
    from transformers import TrainerCallback

    class StopWhenSilent(TrainerCallback):
        def __init__(self):
            self.silent: list[bool] = []

        def on_log(self, args, state, control, logs=None, **kwargs):
            if window and logs and "frac_reward_zero_std" in logs:
                self.silent.append(logs["frac_reward_zero_std"] >= 1.0)
                if signal_exhausted(self.silent, window):
                    control.should_training_stop = True
            return control

    return StopWhenSilent()


# Chapter 5's TRL run is the first COMPARE_STEPS of chapter 4's 300 on the pocket model, compared with
# chapter 4's own run at that step: equal settings, equal steps, the same 200 questions. TRL's step costs
# ~2 s on a 2-core CPU (twice ours): the whole 300 took 600 s of the chapter's 710 on the slower of two
# measured machines, 100 steps take a third of that. Chapter 4's QUICK run is 100 steps, so QUICK compares
# whole runs. A real model is compared at chapter 4's first held-out check during its run (SmolLM2 on a
# CPU: step 6 of 24, where a TRL step of 96 rollouts costs minutes), or whole when it checks none before its end.
COMPARE_STEPS = 100


def compare_steps(model_id: str, cfg: TrainConfig, requested: int | None = None, *, smoke: bool = False) -> int:
    """How many of chapter 4's steps chapter 5 runs in TRL (its ``TRL_STEPS``; ``None``: the preset):
    :data:`COMPARE_STEPS` on the pocket model; on another model, chapter 4's first held-out check during its
    run (``cfg.eval_every``), or the whole run when there is none before its end; never more than
    ``cfg.steps``. SMOKE on the pocket model: half of its steps, so that the tests take the branch ``make
    course`` takes (a comparison before chapter 4's end, at one of its in-run checks)."""
    if requested is not None:
        return min(int(requested), cfg.steps)
    if model_id != "pocket":
        return cfg.eval_every if 0 < cfg.eval_every < cfg.steps else cfg.steps
    return max(1, cfg.steps // 2) if smoke else min(cfg.steps, COMPARE_STEPS)


def accuracy_at(log: list[dict], step: int) -> float | None:
    """Chapter 4's held-out accuracy logged at ``step`` (its ``eval_every`` checks), or ``None`` when that
    step logged none (``eval_every`` does not divide it, or the run stopped before it)."""
    for row in log:
        value = row.get("eval_accuracy")
        if row.get("step") == step and isinstance(value, int | float) and math.isfinite(value):
            return float(value)
    return None


def trl_log_rows(log_history: list[dict]) -> list[dict]:
    """TRL's log → rows with our metric names, so chapter 4's plots read both."""
    rename = {"reward": "reward_mean", "reward_std": "reward_std", "completions/mean_length": "completion_length",
              "clip_ratio/low_mean": "clip_frac_low", "clip_ratio/high_mean": "clip_frac_high",
              "frac_reward_zero_std": "frac_zero_std_groups", "entropy": "entropy",
              "rewards/correctness_reward_func/mean": "correct", "rewards/format_reward_func/mean": "format",
              "completions/clipped_ratio": "truncation_rate"}
    rows = []
    for r in log_history:
        if "reward" in r:
            rows.append({"step": r["step"], **{ours: r[theirs] for theirs, ours in rename.items() if theirs in r}})
    return rows


def trl_loss_on_batch(trainer, prompt_ids: list[int], completions: list[list[int]], advantages, old_logp, pad_id: int):
    """The loss TRL's own ``GRPOTrainer._compute_loss`` computes for one fixed batch of rollouts.

    One shared prompt (so no prompt padding), completions right-padded; evaluated in eval mode,
    where TRL divides by no gradient-accumulation factor. For the parity cell and its unit test.
    """
    import torch

    n, width = len(completions), max(len(c) for c in completions)
    comp = torch.full((n, width), pad_id, dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.long)
    for i, c in enumerate(completions):
        comp[i, : len(c)] = torch.tensor(c)
        mask[i, : len(c)] = 1
    device = trainer.model.device
    inputs = {
        "prompt_ids": torch.tensor([prompt_ids] * n, device=device),
        "prompt_mask": torch.ones((n, len(prompt_ids)), dtype=torch.long, device=device),
        "completion_ids": comp.to(device), "completion_mask": mask.to(device),
        "advantages": torch.as_tensor(advantages, dtype=torch.float32, device=device),
        "old_per_token_logps": torch.as_tensor(old_logp, dtype=torch.float32, device=device)[:, :width],
        "num_items_in_batch": mask.sum().to(device),
    }
    trainer.model.eval()
    with torch.no_grad():
        return trainer._compute_loss(trainer.model, inputs)
