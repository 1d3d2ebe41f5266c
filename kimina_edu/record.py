"""The course's measured ranges, beside this run's figures: what a notebook's closing "measured" cell prints.

The ranges are the record's (``benchmarks/measured/*.json``, the files README's tables are rendered
from): one row per figure, its measured values over seeds in the row's value columns. A chapter names
the rows it compares with and passes this run's values; :func:`beside` prints one line per figure —
this run's value, the measured range, and whether this run falls inside it — so a learner's run is
read against the measured spread, never against a single number from somebody else's run.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

MEASURED = Path(__file__).resolve().parent.parent / "benchmarks" / "measured"
_NUMBER = re.compile(r"^\s*([+\-−]?\d+(?:\.\d+)?)")
# which record holds a model's seeds, and the columns that hold one value per run or summary statistic
RECORDS = {"pocket": ("pocket_seeds", (1, 2, 3)), "smollm2": ("smollm2", (1, 2, 3, 4, 5))}


@dataclass(frozen=True)
class MeasuredRange:
    """One figure of the record: its label, the values measured (min … max), where it comes from."""

    label: str
    low: float
    high: float
    source: str

    def holds(self, value: float) -> bool:
        return self.low <= value <= self.high


def _number(cell: str) -> float | None:
    match = _NUMBER.match(str(cell).replace(",", ""))
    return float(match.group(1).replace("−", "-")) if match else None


def measured_range(model: str, label: str, folder: Path = MEASURED) -> MeasuredRange | None:
    """The range of the record's row ``label`` (its first row starting with it) for ``model``; ``None``
    when the model has no record or the record no such row."""
    if model not in RECORDS:
        return None
    name, columns = RECORDS[model]
    path = folder / f"{name}.json"
    if not path.exists():
        return None
    record = json.loads(path.read_text(encoding="utf-8"))
    row = next((r for r in record["rows"] if r[0].startswith(label)), None)
    values = [v for v in (_number(row[i]) for i in columns if row and i < len(row)) if v is not None]
    if not values:
        return None
    date = record.get("date") or (row[-1] if re.fullmatch(r"\d{4}-\d\d-\d\d", str(row[-1])) else "")
    return MeasuredRange(row[0], min(values), max(values), f"benchmarks/measured/{name}.json, {date}".rstrip(", "))


def beside(model: str, this_run: dict[str, float | tuple[float, float, float]]) -> list[str]:
    """One line per figure: ``label`` → this run's value against the measured range (✓ inside it, or
    where outside). Values are in the record's units (percent for accuracies, points for gains); a gain
    measured on the same questions is passed as (point, low, high) and printed with its 95% interval."""
    lines = []
    for label, value in this_run.items():
        point, shown = _shown(value)
        found = measured_range(model, label)
        if found is None:
            lines.append(f"  {label}: this run {shown} — no measured range for {model!r}")
            continue
        where = "✓ inside" if found.holds(point) else ("below" if point < found.low else "above")
        lines.append(f"  {found.label}: this run {shown}; measured {points(found.low)} … {points(found.high)} "
                     f"({found.source}) {where}")
    return lines


def gain_text(point: float, lo: float, hi: float) -> str:
    """A paired gain with its 95% interval, in points, as the record writes it: ``+8.5 [+4.2, +12.8]``,
    ``+10.25 [+6.2, +14.3]`` (the point to the quarter point of 400 questions, :func:`points`)."""
    return f"{points(point, sign=True)} [{lo:+.1f}, {hi:+.1f}]"


def _shown(value: float | tuple[float, float, float]) -> tuple[float, str]:
    """(the point, as printed): a number to its quarter point (:func:`points`), or a paired gain with its interval."""
    if isinstance(value, tuple | list):  # metrics.json keeps a paired gain as a list
        point, lo, hi = value
        return point, gain_text(point, lo, hi) + ("" if lo > 0 else ", not clearly above zero")
    return value, points(value)


# a chapter's figures (this run's metric names) → the record's rows, per model (CPU rows for SmolLM2)
ROWS = {
    "pocket": {"sft_accuracy": "03 accuracy after SFT", "grpo_accuracy": "04 accuracy after GRPO",
               "grpo_gain": "04 GRPO gain", "trl_minus_ours": "05 TRL − ours"},
    "smollm2": {"sft_accuracy": "CPU: after the LoRA SFT", "grpo_accuracy": "CPU: after GRPO",
                "grpo_gain": "CPU: GRPO gain"},  # TRL at chapter 4's preset: not measured over seeds yet
}


def print_measured(model_id: str, figures: dict[str, float | tuple[float, float, float]], *, accuracy: float, n_questions: int,
                   seed: int, smoke: bool = False) -> list[str]:
    """A notebook's closing "measured" cell: this run's figures (percent, points) beside the record's
    ranges for this model, after the standard error of one evaluation on this run's questions: √(p(1−p)/n),
    the one the chapters print beside an accuracy; at 0% or 100%, where that says no error at all,
    Agresti–Coull's estimate, named."""
    extreme = accuracy <= 0.0 or accuracy >= 1.0
    se = standard_error((accuracy * n_questions + 2) / (n_questions + 4) if extreme else accuracy, n_questions)
    lines = [(f"This run: seed {seed}, {n_questions} held-out questions — one evaluation's standard error "
              f"±{se:.1f} points{' (Agresti–Coull, at an accuracy of ' + f'{accuracy:.0%})' if extreme else ''}; "
              "a difference under about twice that is not a result.")]
    if smoke:
        lines.append("SMOKE sizes (a test run): the ranges below are for full runs, not comparable with this one.")
    rows = ROWS.get(model_id)
    if rows is None:
        lines.append(f"No measured ranges for {model_id!r}: the record holds the pocket model and SmolLM2.")
    else:
        lines += beside(model_id, {rows[k]: v for k, v in figures.items() if k in rows})
        for key, value in figures.items():  # a figure the record lacks is printed too, and said to be unmeasured
            if key not in rows:
                lines.append(f"  {key.replace('_', ' ')}: this run {_shown(value)[1]} — not measured over seeds "
                             f"for {model_id!r}, so no range to hold it against")
    print("\n".join(lines))
    return lines


def standard_error(p: float, n: int) -> float:
    """One evaluation's standard error, in points: √(p(1−p)/n) for accuracy ``p`` on ``n`` questions ("Adding
    Error Bars to Evals", Miller 2024). An accuracy with it beside: how far a second draw of ``n`` questions
    would typically land (400 questions at 80%: ±2 points)."""
    if n < 1 or not 0.0 <= p <= 1.0:
        raise ValueError(f"standard_error needs an accuracy in [0, 1] and at least one question, got p={p!r}, n={n!r}")
    return 100 * (p * (1 - p) / n) ** 0.5


def points(x: float, *, sign: bool = False) -> str:
    """A percentage, or a gain in points, to two decimals with a trailing zero dropped ("71.25", "76.0",
    "+14.5"): the share of 400 questions is a multiple of 0.25, and one decimal would round 71.25 and
    85.75 to 71.2 and 85.8 — a gain of 14.6 printed beside the +14.5 it is."""
    text = f"{x:+.2f}" if sign else f"{x:.2f}"
    return text.removesuffix("0")


def accuracy_with_se(p: float, n: int) -> str:
    """``"72.5% ± 2.2 points"``: a held-out accuracy as the chapters print it, its standard error beside it. At 0%
    and 100% the formula gives 0, which is no error bar: the count is printed instead, and says so."""
    se = standard_error(p, n)
    if p in (0.0, 1.0):
        return f"{points(100 * p)}% ({round(p * n)} of {n}: no error bar from √(p(1−p)/n) here)"
    return f"{points(100 * p)}% ± {se:.1f} points"


def paired_gain(before: list[float], after: list[float], z: float = 1.96) -> tuple[float, float, float]:
    """A gain measured on the same questions, in points, with its 95% interval: the mean of the per-question
    differences (after − before, each −1, 0 or +1) ± z standard errors of that mean. Pairing removes what
    the two evaluations share (the questions' own difficulty), so the interval is narrower than two
    independent evaluations' would be ("Adding Error Bars to Evals", Miller 2024)."""
    if len(before) != len(after) or not before:
        raise ValueError(f"paired_gain needs two equal, non-empty lists of per-question scores, got {len(before)} "
                         f"and {len(after)}")
    d = [a - b for a, b in zip(after, before)]
    n = len(d)
    mean = sum(d) / n
    var = sum((x - mean) ** 2 for x in d) / max(1, n - 1)
    half = z * (var / n) ** 0.5
    return 100 * mean, 100 * (mean - half), 100 * (mean + half)
