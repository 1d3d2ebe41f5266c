"""Diagrams the course draws itself (matplotlib boxes and arrows), one function per picture.

Why drawn here rather than shipped as images: each diagram names the course's own functions and
settings, so it changes in the same commit as the code it describes; every function returns the
figure, and the notebooks save it with ``bbox_inches="tight"``.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

Box = tuple[float, float, str]  # centre x, centre y, label


def _canvas(width: float, height: float, title: str):
    fig, ax = plt.subplots(figsize=(width, height))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.axis("off")
    ax.set_title(title, fontsize=11)
    return fig, ax


def _box(ax, x: float, y: float, text: str, color: str = "#e8f0fe", w: float = 2.2, h: float = 0.9) -> None:
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.05", fc=color, ec="#333"))
    ax.text(x, y, text, ha="center", va="center", fontsize=8.5, wrap=True)


def _arrow(ax, start: tuple[float, float], end: tuple[float, float], label: str = "", rad: float = 0.0) -> None:
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color="#333",
                                 connectionstyle=f"arc3,rad={rad}"))
    if label:
        ax.text((start[0] + end[0]) / 2, (start[1] + end[1]) / 2 + 0.18, label, ha="center", fontsize=7.5,
                color="#444")


def _chain(ax, boxes: list[Box], labels: list[str] | None = None, w: float = 2.2, colors: list[str] | None = None):
    for i, (x, y, text) in enumerate(boxes):
        _box(ax, x, y, text, (colors or ["#e8f0fe"] * len(boxes))[i], w=w)
    for i in range(len(boxes) - 1):
        (x0, y0, _), (x1, y1, _) = boxes[i], boxes[i + 1]
        dx = w / 2 + 0.05 if x1 != x0 else 0.0
        dy = 0.5 if y1 != y0 else 0.0
        start = (x0 + (dx if x1 > x0 else -dx), y0 - (dy if y1 < y0 else -dy))
        end = (x1 - (dx if x1 > x0 else -dx), y1 + (dy if y1 < y0 else -dy))
        _arrow(ax, start, end, (labels or [""] * len(boxes))[i])


# The advantage the loop figure names: the course's default ``grpo.group_advantages`` (DeepSeekMath's
# (r − mean) / std within each group of G). Chapter 0 evaluates this formula by hand beside the package's.
RL_LOOP_ADVANTAGE = "A = (r − mean) / std"


def rl_loop():
    """The RL loop of the whole course: policy → rollouts → verifier → advantages → update."""
    fig, ax = _canvas(12, 3.6, "Reinforcement learning with a verifiable reward (chapters 1–4)")
    boxes = [(1.4, 2.4, "policy π_θ\n(a language model)"), (4.3, 2.4, "rollouts\nG answers per question"),
             (7.2, 2.4, "verifier\nreward r per answer"), (10.2, 2.4, f"advantage\n{RL_LOOP_ADVANTAGE}\nwithin the group")]
    _chain(ax, boxes, ["sample", "check", "per group"])
    _box(ax, 5.8, 0.7, "update θ: raise log π of answers with A > 0, lower A < 0 (clipped)", "#fde8e8", w=6.2)
    _arrow(ax, (10.2, 1.9), (8.95, 0.75), rad=-0.2)
    _arrow(ax, (2.65, 0.75), (1.4, 1.9), rad=-0.2)
    return fig


def course_map():
    """Which chapter builds which piece, left to right."""
    fig, ax = _canvas(12, 2.8, "The course: each chapter builds one piece, later ones import it")
    # the number above the topic: two short lines fit a box a tenth of the figure wide, one long line does not
    labels = ["00\nstart", "01\nrewards", "02\nloss", "03\nSFT warm-up", "04\nGRPO loop", "05\nTRL",
              "06\nLean reward", "07\nerror fix", "08\nverl", "09\npass@k"]
    colors = ["#eeeeee"] + ["#e8f0fe"] * 5 + ["#e6f4ea"] * 4
    for i, label in enumerate(labels):
        x, y = 0.65 + 1.19 * i, 1.55 if i % 2 == 0 else 0.95
        _box(ax, x, y, label, colors[i], w=1.1, h=0.6)
    ax.text(3.5, 0.2, "reasoning-gym on a CPU (blue)", ha="center", fontsize=8)
    ax.text(9.2, 0.2, "Lean proofs on a CPU; verl (08) for 8 GPUs (green)", ha="center", fontsize=8)
    return fig


def grpo_loop():
    """Chapter 4's step: collect (no gradients) then learn (gradients), with π_old in between."""
    fig, ax = _canvas(12, 3.8, "One GRPO step (chapter 4)")
    ax.add_patch(FancyBboxPatch((0.2, 1.7), 7.2, 1.8, boxstyle="round,pad=0.05", fc="none", ec="#7aa", ls="--"))
    ax.text(0.4, 3.3, "experience collection — no gradients", fontsize=8, color="#377")
    ax.add_patch(FancyBboxPatch((7.7, 0.2), 4.1, 3.3, boxstyle="round,pad=0.05", fc="none", ec="#a77", ls="--"))
    ax.text(7.9, 3.3, "learning phase — gradients", fontsize=8, color="#733")
    _chain(ax, [(1.3, 2.4, "B questions"), (3.7, 2.4, "generate G each\n(T, top_p, min_p)"),
                (6.2, 2.4, "rewards [B, G]\n→ advantages")], ["", ""], w=1.9)
    _chain(ax, [(9.7, 2.4, "buffer of rollouts\n(+ old log-probs π_old)"), (9.7, 1.1, "minibatch: new log-probs,\nclipped loss, AdamW")],
           w=3.2, colors=["#fde8e8", "#fde8e8"])
    _arrow(ax, (7.2, 2.4), (8.05, 2.4))
    _arrow(ax, (8.05, 1.1), (1.3, 1.9), "updated policy samples the next batch", rad=-0.25)
    return fig


def two_turn_flow():
    """Chapter 7: a failed first attempt, Lean's messages as feedback, one second attempt."""
    fig, ax = _canvas(12, 3.4, "Error correction: attempt, Lean feedback, one fix (chapter 7)")
    _chain(ax, [(1.3, 2.3, "problem\n(formal statement)"), (3.9, 2.3, "turn 1:\nmodel writes a proof"),
                (6.5, 2.3, "Lean server\nchecks it"), (9.1, 2.3, "feedback: ≤ 3 errors,\n≤ 5-line windows")],
           ["", "", "fails"], w=2.1)
    _box(ax, 9.1, 0.7, "second-turn cache\n(newest prompts, drawn p = 0.5)", "#fff4e0", w=2.6)
    _box(ax, 3.9, 0.7, "turn 2: model sees proof +\nfeedback, writes a fix", "#e6f4ea", w=2.6)
    _arrow(ax, (9.1, 1.8), (9.1, 1.2))
    _arrow(ax, (7.75, 0.7), (5.25, 0.7), "next training batch")
    _arrow(ax, (5.0, 1.15), (6.2, 1.8), rad=0.2)
    ax.text(6.5, 2.95, "a valid proof: reward 1, nothing cached", ha="center", fontsize=7.5, color="#444")
    ax.text(5.9, 1.2, "checked again", fontsize=7.5, color="#444")
    return fig


def verl_roles():
    """Chapter 8: verl's roles, separated by configuration, orchestrated by Ray."""
    fig, ax = _canvas(12, 3.6, "verl's roles for the Kimina-Prover-RL recipe (chapter 8)")
    _box(ax, 6.0, 3.0, "Ray driver: legacy PPO trainer (trainer.use_v1=False)\ncalls dataset.on_batch_end after each step",
         "#eeeeee", w=7.0)
    roles = [(1.6, 1.3, "data: SecondTurnRLDataset\nparquet + chapter-7 cache"),
             (4.5, 1.3, "rollout: vLLM workers\nn = 8 samples per prompt"),
             (7.5, 1.3, "reward: compute_score\nformat × Lean (HTTP)"),
             (10.4, 1.3, "actor: FSDP workers\nDr.GRPO update")]
    for x, y, text in roles:
        _box(ax, x, y, text, "#e8f0fe", w=2.6)
        _arrow(ax, (6.0 + (x - 6.0) * 0.55, 2.5), (x, 1.8))
    ax.text(6.0, 0.25, "one step: prompts → rollouts → rewards → advantages → actor update → new weights to vLLM",
            ha="center", fontsize=8)
    return fig


def clip_region(eps_low: float = 0.2, eps_high: float = 0.28):
    """Where the clipped surrogate has a gradient, over (ratio, sign of the advantage)."""
    import numpy as np

    fig, ax = plt.subplots(figsize=(7, 2.6))
    r = np.linspace(0.0, 2.0, 401)
    for row, (sign, name) in enumerate(((1, "A > 0"), (-1, "A < 0"))):
        flat = r > 1 + eps_high if sign > 0 else r < 1 - eps_low
        ax.fill_between(r, row - 0.4, row + 0.4, where=~flat, color="#4a90d9", alpha=0.6, step="mid")
        ax.fill_between(r, row - 0.4, row + 0.4, where=flat, color="#bbbbbb", alpha=0.6, step="mid")
        ax.text(-0.05, row, name, ha="right", va="center", fontsize=9)
    ax.axvline(1 - eps_low, color="k", lw=0.8)
    ax.axvline(1 + eps_high, color="k", lw=0.8)
    ax.set_yticks([])
    ax.set_xlim(-0.3, 2.0)
    ax.set_xlabel("ratio r = π_θ / π_old")
    ax.set_title(f"blue: gradient flows; grey: clipped, no gradient (ε_low={eps_low}, ε_high={eps_high})", fontsize=9)
    return fig


__all__ = ["RL_LOOP_ADVANTAGE", "clip_region", "course_map", "grpo_loop", "rl_loop", "two_turn_flow", "verl_roles"]
