"""The Lean package stays readable and importable: no module of ``kimina_edu/lean`` or
``kimina_edu/verl`` over 600 lines, every ``LeanVerifier`` method short enough for one screen
(30 lines), no import cycle among the package's modules (imports inside functions count: a cycle
there only fails later, at call time), and every name a notebook imports from
``kimina_edu.lean.client`` still importable from there."""

from __future__ import annotations

import ast
import importlib
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "kimina_edu"
MODULES = sorted([*PACKAGE.glob("lean/*.py"), *PACKAGE.glob("verl/*.py")])
MAX_MODULE_LINES = 600
MAX_METHOD_LINES = 30


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> set[str]:
    """Every ``kimina_edu.lean``/``kimina_edu.verl`` module ``path`` imports, anywhere in the file."""
    known = {module_name(p) for p in MODULES}
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        found |= {n for n in names if n in known}
    return found - {module_name(path)}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_fits_in_one_reading(path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{path.name}: {lines} lines (split it by job)"


def test_every_lean_verifier_method_fits_on_one_screen():
    tree = ast.parse((PACKAGE / "lean" / "client.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "LeanVerifier")
    long = {f.name: f.end_lineno - f.lineno + 1 for f in cls.body
            if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and f.end_lineno - f.lineno + 1 > MAX_METHOD_LINES}
    assert not long, f"methods over {MAX_METHOD_LINES} lines: {long}"


def test_no_import_cycle_among_lean_and_verl_modules():
    graph = {module_name(p): imported_modules(p) for p in MODULES}

    def cycle_from(start: str, node: str, path: list[str]) -> list[str] | None:
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                return path + [nxt]
            if nxt not in path and (found := cycle_from(start, nxt, path + [nxt])):
                return found
        return None

    cycles = [c for m in graph if (c := cycle_from(m, m, [m]))]
    assert not cycles, f"import cycle: {' -> '.join(cycles[0])}"


def test_names_notebooks_import_from_the_client_are_still_there():
    pattern = re.compile(r"from kimina_edu\.lean\.client import ([\w, ]+)")
    names = set()
    for notebook in ROOT.glob("notebooks/**/*.ipynb"):
        for cell in json.loads(notebook.read_text())["cells"]:
            for match in pattern.finditer("".join(cell["source"])):
                names |= {n.strip() for n in match.group(1).split(",") if n.strip()}
    assert "LeanVerifier" in names  # the scan found the notebooks' imports
    client = importlib.import_module("kimina_edu.lean.client")
    assert not [n for n in names if not hasattr(client, n)]
