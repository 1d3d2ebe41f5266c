"""Every chapter's exercise solutions, executed headless with SMOKE=True (so they cannot rot).

Each solutions notebook asserts its own answers and writes ``checked`` — exercise → True — to
metrics.json; a chapter with fewer than three checked solutions fails.
"""

from __future__ import annotations

import pytest
from deadlines import CELL_DEADLINE_S

from kimina_edu.course import NOTEBOOKS, list_notebooks, run_notebook

SOLUTIONS = sorted((NOTEBOOKS / "solutions").glob("[0-9][0-9]_solutions.ipynb"))


def test_every_chapter_has_solutions():
    chapters = {p.name[:2] for p in list_notebooks()}
    have = {p.name[:2] for p in SOLUTIONS}
    assert chapters <= have, f"chapters without a solutions notebook: {sorted(chapters - have)}"


@pytest.mark.parametrize("notebook", SOLUTIONS, ids=lambda p: p.stem)
def test_solutions_smoke(notebook, smoke_env, tmp_path):
    result = run_notebook(notebook, tmp_path / notebook.stem, smoke=True, timeout=CELL_DEADLINE_S)
    assert result.ok, f"{notebook.name} failed:\n{result.error[-6000:]}"
    checked = result.metrics.get("checked", {})
    assert len(checked) >= 3 and all(v is True for v in checked.values()), checked
    assert result.metrics.get("smoke") is True
