"""The course's notebook conventions, enforced (CONVENTIONS.md, the foundation issue)."""

import re
from pathlib import Path

import nbformat
import pytest

from kimina_edu.course import list_notebooks

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = list_notebooks()
REQUIRED_PARAMS = ("SMOKE", "SEED", "DEVICE", "MODEL_ID", "OUTPUT_DIR")


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 3


def _harness_conventions(nb) -> list:
    """What every notebook the harness runs needs: a title, one parameters cell with the shared
    parameters, stripped outputs, metrics written last. Returns the code cells."""
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1, "exactly one cell tagged 'parameters'"
    for name in REQUIRED_PARAMS:
        assert re.search(rf"^{name}\s*=", params[0].source, re.MULTILINE), f"parameters cell lacks {name}"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code), "strip outputs"
    assert "write_metrics(" in code[-1].source, "the last cell writes metrics.json"
    return code


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_conventions(path):
    assert re.fullmatch(r"\d\d_[a-z0-9_]+\.ipynb", path.name)
    nb = nbformat.read(path, as_version=4)
    code = _harness_conventions(nb)
    assert "After this notebook you can" in nb.cells[0].source
    assert any("print_versions(" in c.source for c in code), "print the package versions"


def test_no_output_widgets_anywhere():
    """ipywidgets' ``Output`` (and ``interact``, which draws into one) make nbclient answer the kernel on its
    shell socket mid-cell; headless, that can leave the cell waiting out its whole timeout (nbclient issue
    #312; seen twice here, 610 s for a 10 s notebook). Playgrounds render into HTML or Image widgets."""
    sources = {p.name: p.read_text() for p in (REPO / "kimina_edu").rglob("*.py")}
    sources.update({p.name: "\n".join(c.source for c in nbformat.read(p, as_version=4).cells if c.cell_type == "code")
                    for p in NOTEBOOKS})
    pattern = re.compile(r"\bOutput\(|\binteract(_manual)?\(|@interact")  # a call or a decorator, not prose
    offenders = [name for name, text in sources.items() if pattern.search(text)]
    assert not offenders, f"Output widget or interact in {offenders}"


SOLUTIONS = sorted((REPO / "notebooks" / "solutions").glob("*.ipynb"))


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_solutions_conventions(path):
    """Solutions notebooks run in the same harness: a parameters cell, stripped, metrics last."""
    assert re.fullmatch(r"\d\d_solutions\.ipynb", path.name)
    nb = nbformat.read(path, as_version=4)
    _harness_conventions(nb)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_chapter_ends_with_exercises(path):
    """Every chapter ends with at least three exercises, solved in notebooks/solutions/."""
    nb = nbformat.read(path, as_version=4)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "## Exercises" in text, "add an '## Exercises' section before the metrics cell"
    section = text.split("## Exercises", 1)[1]
    assert len(re.findall(r"^\d\.\s", section, re.MULTILINE)) >= 3, "at least three numbered exercises"
    assert (REPO / "notebooks" / "solutions" / f"{path.name[:2]}_solutions.ipynb").exists()
