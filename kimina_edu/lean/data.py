"""Chapter 6 — the problems: the recipe's datasets when online, the course's own set offline.

Column mapping (recipe ``prepare_data.py``):
- ``AI-MO/Kimina-Prover-Promptset`` (split "train"): ``source``→``data_source``,
  ``natural_language``→``informal_problem``; keeps ``formal_statement``, ``statement_id``.
- ``AI-MO/minif2f_test`` (split "train"): ``informal_prefix``→``informal_problem``,
  ``name``→``statement_id``; ``data_source`` = the dataset id.

The offline set (``data/lean_problems.jsonl``) was written for this course: 34 short,
competition-style statements with the ``import Mathlib`` header miniF2F uses. Each carries an
``illustrative_proof`` — plausible tactics, **never checked by Lean here**; the stand-in server
only replays verdicts it is scripted with.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPO_DATA = Path(__file__).resolve().parents[2] / "data"
OFFLINE_PROBLEMS = REPO_DATA / "lean_problems.jsonl"
TRAIN_DATASET = "AI-MO/Kimina-Prover-Promptset"
TEST_DATASET = "AI-MO/minif2f_test"
COLUMNS = ("statement_id", "informal_problem", "formal_statement", "data_source")


def load_offline_problems(path: str | Path = OFFLINE_PROBLEMS) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    for row in rows:
        missing = [c for c in COLUMNS if c not in row]
        if missing:
            raise ValueError(f"{path}: problem {row.get('statement_id', '?')} lacks {missing}")
    return rows


def load_hub_problems(split: str = "train", limit: int | None = None) -> list[dict[str, Any]]:
    """The recipe's prompt set (``split="train"``) or miniF2F-test (``split="test"``) from the hub."""
    from datasets import load_dataset

    if split == "train":
        ds = load_dataset(TRAIN_DATASET, split="train")
        ds = ds.rename_columns({"source": "data_source", "natural_language": "informal_problem"})
    elif split == "test":
        ds = load_dataset(TEST_DATASET, split="train")
        ds = ds.rename_columns({"informal_prefix": "informal_problem", "name": "statement_id"})
        ds = ds.add_column("data_source", [TEST_DATASET] * len(ds))
    else:
        raise ValueError(f"split must be 'train' or 'test'; got {split!r}")
    if limit:
        ds = ds.select(range(min(limit, len(ds))))
    return [{c: row[c] for c in COLUMNS} for row in ds]


def load_problems(split: str = "train", *, online: bool = False, limit: int | None = None) -> list[dict[str, Any]]:
    """Hub data when ``online``; otherwise the offline set (both splits share it offline)."""
    if online:
        return load_hub_problems(split, limit)
    rows = load_offline_problems()
    return rows[:limit] if limit else rows
