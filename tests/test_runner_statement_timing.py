"""Where a notebook's time went is named by the statement that took it: the runner times each top-level
statement of every cell in the kernel, and the summary names the slowest cell by its slowest statement,
not by the cell's first line (chapter 5's slowest cell opens with a quick ``held_out(...)``; its time is
TRL's training call, further down)."""

import json

import nbformat
from deadlines import CELL_DEADLINE_S
from tiny_notebook import write_notebook

from kimina_edu import course

# The slow statement sleeps three times as long as everything before it took in this kernel (at least
# 0.8 s), so it is the slowest however busy the machine is: no test waits on a speed.
FIRST_CELL = ("import time\n_start = time.perf_counter()\n\n%config InlineBackend.figure_format = 'png'\n"
              "from kimina_edu.runtime import write_metrics\nbefore_s = time.perf_counter() - _start")
SLOW_CELL = ("eval_entries = list(range(3))  # quick, and first\n"
             "\n"
             "def train(seconds):\n"
             "    time.sleep(seconds)\n"
             "\n"
             "train(\n"
             "    max(0.8, 3 * before_s),\n"
             ")\n"
             "after = len(eval_entries)\n"
             "after")


def _notebook(path):
    write_notebook(path, FIRST_CELL, SLOW_CELL, "write_metrics({'smoke': SMOKE}, OUTPUT_DIR)",
                   parameters="SMOKE = False\nOUTPUT_DIR = '.'")


def test_the_summary_names_the_statement_that_took_the_time(tmp_path, monkeypatch, capsys):
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    _notebook(nbs / "01_slow.ipynb")
    monkeypatch.setattr(course, "NOTEBOOKS", nbs)
    assert course.main(["--smoke", "--runs-dir", str(tmp_path / "runs")]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("▶"))
    summary = (tmp_path / "runs" / "latest" / "summary.txt").read_text()
    for text in (line, summary):
        assert "train(" in text and "eval_entries" not in text, text
    slowest = next(ln for ln in summary.splitlines() if "01_slow" in ln and "cell" in ln)
    statement_s = float(slowest.rsplit("(", 1)[1].split(" s")[0])
    assert 0.8 <= statement_s < CELL_DEADLINE_S, slowest  # the statement's own time, measured
    executed = nbformat.read(tmp_path / "runs" / "latest" / "01_slow" / "01_slow.ipynb", as_version=4)
    shown = [o for o in executed.cells[-2].outputs if o.output_type == "execute_result"]
    assert shown and shown[0].data["text/plain"] == "3", "the cell's last expression is still displayed"
    assert not [o for c in executed.cells for o in c.get("outputs", []) if o.output_type == "stream"
                and o.get("name") == "stderr"], "timing leaves no trace in the notebook"


def test_without_statement_timings_the_cells_first_line_of_work_is_named(tmp_path):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("import json\nfirst_work()\nslow()")
    cell.metadata["papermill"] = {"duration": 4.0}
    cell.execution_count = 3
    nb.cells = [cell]
    path = tmp_path / "x.ipynb"
    nbformat.write(nb, path)
    assert course.slowest_cell(path) == "cell 0, 4.0 s: first_work()"
    timings = tmp_path / "statements.jsonl"
    timings.write_text(json.dumps({"execution_count": 3, "statements": [["first_work()", 0.5], ["slow()", 3.4]]}) + "\n"
                       + "not json\n")
    assert course.slowest_cell(path, timings) == "cell 0, 4.0 s: slow() (3.4 s)"
