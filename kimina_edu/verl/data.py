"""verl-format parquet for the Lean task (recipe ``prepare_data.py``).

One row per prompt: ``prompt`` (chat messages), ``data_source``, ``ability``,
``reward_model`` ``{"style": "rule", "ground_truth": …}`` and ``extra_info`` with the
``formal_statement`` the reward needs and the statement id as ``index``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kimina_edu.lean.data import TEST_DATASET, load_problems
from kimina_edu.lean.prompts import build_messages

GROUND_TRUTH = "Should be solved in Lean 4."  # the recipe's placeholder: the verifier is Lean, not a string


def to_verl_row(problem: dict[str, Any], split: str) -> dict[str, Any]:
    messages = build_messages(problem["informal_problem"], problem["formal_statement"])
    return {
        "data_source": problem["data_source"],
        "prompt": messages,
        "ability": "theorem_proving",
        "reward_model": {"style": "rule", "ground_truth": GROUND_TRUTH},
        "extra_info": {"formal_statement": problem["formal_statement"], "index": str(problem["statement_id"]),
                       "split": split, "prompt": messages},
    }


def prepare_data(out_dir: str | Path, *, online: bool = False, limit: int | None = None) -> dict[str, Path]:
    """Write ``train.parquet`` (the prompt set) and ``test.parquet`` (miniF2F-test) to ``out_dir``.

    Online: the recipe's hub datasets. Offline: the course's own problem set for both splits
    (test rows carry the miniF2F ``data_source`` name only when they really are miniF2F).
    """
    from datasets import Dataset

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for split in ("train", "test"):
        problems = load_problems(split, online=online, limit=limit)
        if not problems:
            raise ValueError(f"no {split} problems found (online={online}); check the dataset or data/lean_problems.jsonl")
        rows = [to_verl_row(p, split) for p in problems]
        if split == "test" and online:
            assert all(r["data_source"] == TEST_DATASET for r in rows)
        path = out / f"{split}.parquet"
        Dataset.from_list(rows).to_parquet(str(path))
        paths[split] = path
    return paths
