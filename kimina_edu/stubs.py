"""Stub cells and their solutions: what a headless run fills in before it executes a notebook.

A learner's notebook has cells tagged ``stub`` whose metadata names a solution —
``"kimina": {"solution": "my_extract_answer"}`` — and whose body raises ``NotImplementedError`` until the
learner writes it. The filled versions are the sections of ``notebooks/solutions/derive.py``, each headed
``# %% solution: <name>``. ``make course`` and the tests (:func:`kimina_edu.course.run_notebook`) execute a
copy with each stub replaced by its solution; ``make lab`` copies the stubs as they are.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SOLUTIONS_FILE = REPO / "notebooks" / "solutions" / "derive.py"
STUB_TAG = "stub"
INJECTED_HEADER = "# solution injected by make course — notebooks/solutions/derive.py ({name})"
_SECTION = re.compile(r"^# %% solution: (\S+)[ \t]*$", re.MULTILINE)


def load_solutions(path: Path = SOLUTIONS_FILE) -> dict[str, str]:
    """``{name: source}`` for every ``# %% solution: <name>`` section (the text up to the next section)."""
    text = path.read_text(encoding="utf-8")
    heads = list(_SECTION.finditer(text))
    solutions: dict[str, str] = {}
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        name = head.group(1)
        if name in solutions:
            raise ValueError(f"{path}: two sections named {name!r}; rename one")
        solutions[name] = text[head.end():end].strip("\n") + "\n"
    return solutions


def _source(cell: dict[str, Any]) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def stub_cells(nb: dict[str, Any]) -> list[tuple[int, str]]:
    """``(cell index, solution name)`` for each ``stub``-tagged cell. Raises ``ValueError`` for a stub
    cell that names no solution (the runner could not fill it)."""
    found = []
    for i, cell in enumerate(nb.get("cells", [])):
        meta = cell.get("metadata", {})
        if STUB_TAG not in meta.get("tags", []):
            continue
        name = meta.get("kimina", {}).get("solution")
        if not isinstance(name, str) or not name:
            raise ValueError(f"cell {i} is tagged {STUB_TAG!r} but its metadata has no kimina.solution name")
        found.append((i, name))
    return found


def inject_solutions(nb: dict[str, Any], solutions: dict[str, str] | None = None) -> list[str]:
    """Replace each stub cell's source (in place) by its solution, under a first line saying so; returns the
    names filled. Raises ``ValueError`` naming a stub whose solution ``derive.py`` lacks."""
    solutions = load_solutions() if solutions is None else solutions
    filled = []
    for i, name in stub_cells(nb):
        if name not in solutions:
            raise ValueError(f"cell {i} is the stub {name!r}, but {SOLUTIONS_FILE.name} has no "
                             f"'# %% solution: {name}' section: add one")
        nb["cells"][i]["source"] = INJECTED_HEADER.format(name=name) + "\n" + solutions[name].rstrip("\n")
        filled.append(name)
    return filled
