"""Figures used by several notebooks. Each function draws on a matplotlib Axes it is given
(or makes one) and returns it, so notebooks can compose figures and save them."""

from __future__ import annotations

from collections.abc import Iterable

import matplotlib.pyplot as plt
import numpy as np


def _ax(ax=None, figsize=(6, 3.5)):
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def clipped_surrogate(ratio: np.ndarray, advantage: float, eps_low: float, eps_high: float) -> np.ndarray:
    """The per-token PPO/GRPO objective ``min(r·A, clip(r)·A)`` (to be maximized)."""
    return np.minimum(ratio * advantage, np.clip(ratio, 1 - eps_low, 1 + eps_high) * advantage)


def plot_clipped_surrogate(advantage: float, eps_low: float, eps_high: float, ratio: float | None = None, ax=None):
    """Objective and its gradient d/dr over the ratio, the flat (zero-gradient) zone shaded."""
    ax = _ax(ax)
    r = np.linspace(0.0, 2.5, 501)
    obj = clipped_surrogate(r, advantage, eps_low, eps_high)
    grad = np.gradient(obj, r)
    ax.plot(r, obj, label="objective min(r·A, clip(r)·A)", lw=2)
    ax.plot(r, grad, "--", label="gradient d/dr", lw=1.5)
    flat = np.isclose(grad, 0.0, atol=1e-9)
    ax.fill_between(r, obj.min() - 0.1, obj.max() + 0.1, where=flat, color="grey", alpha=0.2,
                    label="clipped: no gradient")
    ax.axvline(1 - eps_low, color="k", lw=0.5)
    ax.axvline(1 + eps_high, color="k", lw=0.5)
    if ratio is not None:
        ax.plot([ratio], clipped_surrogate(np.array([ratio]), advantage, eps_low, eps_high), "ro")
    ax.set_xlabel("ratio r = π_new / π_old")
    ax.set_title(f"A = {advantage:+.2f}, ε_low = {eps_low}, ε_high = {eps_high}")
    ax.legend(fontsize=8, loc="best")
    return ax


def plot_curves(logs: list[dict], keys: Iterable[str], ax=None, label_prefix: str = "", window: int = 1):
    """Plot logged metrics over steps (one line per key), optionally smoothed."""
    ax = _ax(ax)
    steps = [row["step"] for row in logs]
    for key in keys:
        values = np.array([row.get(key, np.nan) for row in logs], dtype=float)
        if window > 1:  # centred moving average; the window shrinks at the edges instead of padding with 0
            import pandas as pd

            values = pd.Series(values).rolling(window, min_periods=1, center=True).mean().to_numpy()
        ax.plot(steps, values, label=f"{label_prefix}{key}")
    ax.set_xlabel("step")
    ax.legend(fontsize=8)
    return ax

