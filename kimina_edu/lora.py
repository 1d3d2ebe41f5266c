"""Chapters 3–5 — the LoRA adapter the course trains: one recipe for SFT and both GRPO paths.

Its own module because three chapters build the same adapter: the SFT warm-up
(:mod:`kimina_edu.sft`), the from-scratch GRPO loop (chapter 4) and TRL's (chapter 5). In
:mod:`kimina_edu.sft` the trainer would have to import the SFT module to get it; in
:mod:`kimina_edu.models` it would be a second job beside choosing and loading a model.
"""

from __future__ import annotations

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj", "gate_proj")


def lora_config(r: int = 32, alpha: int = 64, dropout: float = 0.0, target_modules: tuple[str, ...] = PROJECTIONS):
    """The reference article's LoRA: r=32, alpha=64, no dropout, every projection matrix."""
    from peft import LoraConfig

    return LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=list(target_modules),
                      task_type="CAUSAL_LM", bias="none")


__all__ = ["PROJECTIONS", "lora_config"]
