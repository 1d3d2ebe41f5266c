"""Every ✗ a learner reads comes with a why computed from the run: the checks module, the notebooks'
sources (every check goes through it, with its why), and the package's own ✗ lines (the graders').
The executed notebooks' outputs are read by tests/test_notebooks.py (unexplained_in_notebook)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from kimina_edu.checks import (
    CROSS,
    EVERY_WHY_ENV,
    WHY,
    check,
    check_all,
    unexplained_crosses,
    unexplained_in_notebook,
)
from kimina_edu.graders import grade

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "notebooks" / "solutions").glob("*.ipynb"))
PACKAGE = ROOT / "kimina_edu"


# ---------------------------------------------------------------- the convention


def test_unexplained_crosses_flags_a_bare_cross_and_passes_a_computed_why():
    lines = ["✓ fine", "✗ the rewarded probes fell", "  why: the verdict token moved -1.30 nats", "next",
             "✗ no drift beyond a wander", "✗ low-advantage not below", "  why: the answer tokens moved +0.2", "",
             "  ✗ an indented bare one", "a check mark ✗ in the middle of a line is a verdict too"]
    assert unexplained_crosses(lines) == ["  ✗ an indented bare one",
                                          "a check mark ✗ in the middle of a line is a verdict too"]
    assert unexplained_crosses(["✗ alone at the end"]) == ["✗ alone at the end"]
    assert unexplained_crosses(["✗ a", "  because: 3 is not the convention"]) == ["✗ a"]
    assert unexplained_crosses("✗ x\n  why: 2 of 3 moved\n") == []  # a cell's whole printed text works too


def test_a_why_that_cites_no_number_of_the_run_explains_nothing():
    assert unexplained_crosses(["✗ a", "  why: the samples differ", "  why: fixed prose"]) == ["✗ a"]
    assert unexplained_crosses(["✗ a", "  why: the samples differ", "  why: ours 0.41, theirs 0.30"]) == []


def test_check_prints_the_why_only_under_a_cross(capsys, monkeypatch):
    monkeypatch.delenv(EVERY_WHY_ENV, raising=False)
    assert check(True, "rose", why=lambda: pytest.fail("a passing check must not compute its why")) is True
    assert capsys.readouterr().out == "✓ rose\n"
    assert check(0.0, "fell", why=lambda: [f"moved {-0.5:+.1f} nats"]) is False
    out = capsys.readouterr().out
    assert out == "✗ fell\n  why: moved -0.5 nats\n" and unexplained_crosses(out) == []


def test_the_notebook_tests_compute_every_why_so_a_broken_one_fails_on_a_passing_run(monkeypatch, capsys):
    def broken():
        return [f"{undefined_name}"]  # noqa: F821 — a why that would only break on the run that fails

    monkeypatch.delenv(EVERY_WHY_ENV, raising=False)
    assert check(True, "holds", why=broken) and check_all([(True, "holds")], why=broken) == [True]
    monkeypatch.setenv(EVERY_WHY_ENV, "1")
    with pytest.raises(NameError):
        check(True, "holds", why=broken)
    with pytest.raises(NameError):
        check_all([(True, "holds")], why=broken)
    assert capsys.readouterr().out.count("✓ holds") == 4 and CROSS not in capsys.readouterr().out


def test_a_check_without_its_why_fails_where_it_is_written_even_when_it_passes():
    with pytest.raises(TypeError):
        check(True, "holds")  # type: ignore[call-arg]


def test_consecutive_crosses_share_one_why_computed_once(capsys):
    calls = []

    def why():
        calls.append(1)
        return [f"the verdict moved {-1.3:+.1f}"]

    assert check_all([(False, "a"), (False, "b"), (True, "c"), (False, "d")], why=why) == [False, False, True, False]
    out = capsys.readouterr().out.splitlines()
    assert out == ["✗ a", "✗ b", "  why: the verdict moved -1.3", "✓ c", "✗ d", "  why: the verdict moved -1.3"]
    assert len(calls) == 1 and unexplained_crosses(out) == []


def test_unexplained_in_notebook_names_the_cell():
    nb = {"cells": [{"cell_type": "code", "outputs": [{"output_type": "stream", "name": "stdout", "text": ["✓ ok\n"]}]},
                    {"cell_type": "markdown"},
                    {"cell_type": "code", "outputs": [{"output_type": "stream", "name": "stdout",
                                                       "text": ["✗ fell\n", "  why: by 0.3\n", "✗ bare\n"]}]}]}
    assert unexplained_in_notebook(nb) == ["cell 2: ✗ bare"]


# ---------------------------------------------------------------- the notebooks' sources


def _code_cells(path: Path):
    for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        if cell["cell_type"] == "code":
            source = "".join(cell["source"])
            # IPython's magics and shell lines are no Python: blank them, keeping the line numbers
            yield i, "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_notebook_prints_a_cross_of_its_own(path):
    """A ✗ written into a cell escapes the rule that it comes with a why: every check goes through
    kimina_edu.checks (check, check_all), whose why has no default."""
    found = [f"cell {i}: {line.strip()[:100]}" for i, source in _code_cells(path)
             for line in source.splitlines() if CROSS in line]
    assert not found, f"{path.name} writes ✗ itself; use kimina_edu.checks.check(ok, claim, why=...):\n" + "\n".join(found)


def _constant(node: ast.AST) -> bool:
    """A string or a list/tuple of strings written out: prose fixed once, not computed from the run."""
    if isinstance(node, ast.Constant):
        return True
    return isinstance(node, ast.List | ast.Tuple) and all(isinstance(e, ast.Constant) for e in node.elts)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_check_in_a_notebook_computes_its_why(path):
    bad = []
    for i, source in _code_cells(path):
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in ("check", "check_all"):
                why = next((k.value for k in node.keywords if k.arg == "why"), None)
                if why is None or _constant(why):
                    bad.append(f"cell {i}: {ast.unparse(node)[:120]}")
    assert not bad, f"{path.name}: a check whose why is missing or fixed prose:\n" + "\n".join(bad)


# ---------------------------------------------------------------- the package's own ✗ lines


def _string_constants(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module, its docstrings left out (they describe ✗, they do not print it)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_only_the_checks_and_the_graders_print_a_cross():
    """Every other module that wants a ✗ prints it through kimina_edu.checks."""
    found = [f"{p.relative_to(ROOT)}:{line}" for p in sorted(PACKAGE.rglob("*.py"))
             if p.name not in ("checks.py", "graders.py")
             for line, text in _string_constants(p) if CROSS in text]
    assert not found, "✗ printed outside kimina_edu.checks: " + ", ".join(found)


def _stub(x):
    raise NotImplementedError("write it")


def _wrong(x):
    return x + 1


def _double(x):
    return 2 * x


@pytest.mark.parametrize("mine", [_stub, _wrong, "not a function"], ids=["not written", "a wrong case", "not callable"])
def test_a_grader_cross_comes_with_a_computed_why(mine, capsys):
    result = grade("my_double", mine, _double, {"zero": (0,), "one": (1,), "two": (2,)})
    out = capsys.readouterr().out
    assert not result.passed and out.splitlines()[0] == result.line
    assert out.splitlines()[1].startswith(WHY) and unexplained_crosses(out) == [], out
    assert re.search(r"\b_double\b", out.splitlines()[1]), "the why names the function the notebook goes on with"
