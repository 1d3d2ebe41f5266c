"""The course's notebook conventions, enforced (CONVENTIONS.md): shape, first cells, exercises, and a record
that speaks of the course, never of its making."""

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


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_first_cell_says_what_you_build_and_how_long_in_120_words(path):
    first = nbformat.read(path, as_version=4).cells[0].source
    body = first.split("\n", 1)[1]
    assert len(body.split()) <= 120, f"{path.name}: the first cell has {len(body.split())} words"
    assert "After this notebook you can" in body
    assert re.search(r"\bCPU\b", body) and ("GPU" in body or "nothing here trains" in body), \
        f"{path.name}: say how long it takes on a CPU and on a GPU"


# Phrases that date a figure by the work that made it, not by its command and date. The words a
# reader meets for other reasons are not in it: pytest's fixture scope (scope="session"), JupyterLab's
# and requests' sessions, a POSIX process session (setsid), another project's tracker ("nbclient issue #312").
HISTORY = re.compile(
    r"\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|"
    r"fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth|\d+(?:st|nd|rd|th))"
    r"(?:\s+and\s+\w+)?\s+(?:sessions?|rounds? of work|stop)\b"
    r"|\b(?:issue|stop|session)\s+\d+\b"
    r"|\ban earlier (?:run|round|session)\b|\bbefore the \w+ session\b|\bthis session\b|\bearlier session",
    re.IGNORECASE)
ALLOWED_SESSION = re.compile(r'scope="session"|kernel session|JupyterLab session|process session|requests\.Session'
                             r"|running session|learner session|setsid", re.IGNORECASE)


def _read_sources() -> list[Path]:
    roots = [REPO / "README.md", REPO / "kimina_edu", REPO / "notebooks", REPO / "tests", REPO / "benchmarks"]
    files = []
    for root in roots:
        files += [root] if root.is_file() else [p for p in root.rglob("*")
                                                 if p.suffix in {".py", ".md", ".ipynb"} and p.is_file()]
    return sorted(files)


@pytest.mark.parametrize("text,found", [
    ("(benchmarks/README.md, fifteenth session)", True), ("as issue 26 reported", True),
    ("see stop 42", True), ("(README, sixth and seventh sessions)", True), ("an earlier run gave 73.5%", True), ("before the twelfth session it", True),
    ('@pytest.fixture(scope="session")', False), ("the first 100 steps", False), ("2026-12-06, make course", False),
])
def test_the_history_check_can_fail(text, found):
    assert bool(HISTORY.search(text)) == found


def test_nothing_a_reader_meets_dates_a_figure_by_the_work_that_made_it():
    """README, notebooks, the package, tests and benchmarks cite a command and a date, never the round of
    work, the tracker or an earlier run (this file's own list of phrases excepted)."""
    hits = []
    for path in _read_sources():
        if path == Path(__file__).resolve():
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if HISTORY.search(line) and not ALLOWED_SESSION.search(line):
                hits.append(f"{path.relative_to(REPO)}:{n}: {line.strip()[:100]}")
    assert not hits, "\n".join(hits)
