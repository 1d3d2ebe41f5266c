"""The learning goals `make course` checks on each notebook's ``metrics.json``, per model.

A full run (not SMOKE, not QUICK) of the pocket model or of SmolLM2 is judged against its goals; a missed
goal is one line in ``summary.txt`` and exit 1. ``make robustness`` checks the same goals for seeds 0–4
(``benchmarks/robustness.py``). Other models have no goals: nothing was measured on them.
"""

from __future__ import annotations

from typing import Any


def gain_points(m: dict[str, Any]) -> float:
    """Held-out accuracy after GRPO minus before, in points, rounded past float noise: accuracies are
    counts over N questions, and 0.285 ≥ 0.255 + 0.03 is False in floating point (+3 points exactly)."""
    return round(100 * (m["accuracy_after"] - m["accuracy_before"]), 6)


# What a full offline run of the pocket model must show, judged on each notebook's metrics.json; never
# in SMOKE mode (tiny sizes learn little).
# `make robustness` checks the same goals for SEED 0–4 (benchmarks/robustness.py).
LEARNING_GOALS: dict[str, list[tuple[str, Any]]] = {
    "03": [("SFT accuracy ≥ 65%", lambda m: m["sft_accuracy"] >= 0.65),
           ("SFT format rate ≥ 95%", lambda m: m["sft_format_rate"] >= 0.95)],
    "04": [("GRPO accuracy ≥ SFT accuracy + 5 points", lambda m: gain_points(m) >= 5),
           ("GRPO within 10 minutes", lambda m: m["grpo_seconds"] <= 600),
           ("format rate after GRPO ≥ 95%", lambda m: m["format_after"] >= 0.95),
           # the update's own effect, measured on its buffer (probes.shift_summary): what GRPO promises.
           # On average, not in every update: AdamW's momentum carries earlier batches' directions, and
           # single updates went the wrong way round in 4–17% of them: `python -m benchmarks.robustness --seeds
           # 0 1 2 3 4 --until grpo`, 2026-12-04 (benchmarks/README.md, "What each update does")
           ("measured updates raise rewarded completions above penalised ones, on average",
            lambda m: m["shift_pos_mean"] is not None and m["shift_pos_mean"] > m["shift_neg_mean"])],
}


# The real SmolLM2's (MODEL_ID='smollm2'). The warm-up's job is the format (the article's: SmolLM-135M reached
# 46% after SFT and 60% after GRPO), so chapter 3 is judged on the format and prints its accuracy. GRPO must
# then add a gain that is large and certain — ≥ 8 points, its paired 95% interval above zero — and end at least
# where the full 3-epoch SFT alone gets (76.5%, its median over seeds 0–2), so that a weaker warm-up cannot buy
# the gain. Whether they hold is measured by `make robustness MODEL_ID=smollm2` (README's table).
SMOLLM2_END_ACCURACY = 0.765

SMOLLM2_GOALS: dict[str, list[tuple[str, Any]]] = {
    "03": [("SFT format rate ≥ 95%", lambda m: m["sft_format_rate"] >= 0.95)],
    "04": [("GRPO accuracy ≥ SFT accuracy + 8 points", lambda m: gain_points(m) >= 8),
           ("GRPO accuracy ≥ 76.5% (the full SFT's median alone, so a weaker warm-up cannot buy the gain)",
            lambda m: m["accuracy_after"] >= SMOLLM2_END_ACCURACY),
           ("the gain's paired 95% interval above zero", lambda m: m["gain_paired_points"][1] > 0)],
}
GOALS = {"pocket": LEARNING_GOALS, "smollm2": SMOLLM2_GOALS}


def goals_for(metrics: dict[str, Any]) -> dict[str, list[tuple[str, Any]]]:
    """The goals of the model a notebook ran (``model_id``, else ``model``); none for other models."""
    return GOALS.get(metrics.get("model_id") or metrics.get("model"), {})


def missed_goals(name: str, metrics: dict[str, Any]) -> list[str]:
    """The learning goals notebook ``name`` missed (none for SMOKE or QUICK runs, or models without goals)."""
    if metrics.get("smoke", True) or metrics.get("quick"):
        return []
    missed = []
    for text, met in goals_for(metrics).get(name[:2], []):
        try:
            if not met(metrics):
                missed.append(f"{name}: missed goal: {text}")
        except KeyError as exc:  # a figure the goal needs is missing: the goal is not met (fail closed)
            missed.append(f"{name}: missed goal: {text} (metrics.json has no {exc.args[0]!r})")
    return missed


def goal_lines(runs: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """What a run's summary says of its learning goals, from each notebook's (name, metrics): how many of the
    goals judged were met, then each one missed; nothing when none was judged (SMOKE, QUICK, a model without goals)."""
    judged = sum(len(goals_for(m).get(name[:2], [])) for name, m in runs if not (m.get("smoke", True) or m.get("quick")))
    missed = [line for name, m in runs for line in missed_goals(name, m)]
    return [f"learning goals: {judged - len(missed)} of {judged} met"] + missed if judged else []
