"""`make course`'s runner: a failing notebook does not stop the others, is marked FAIL, keeps its
executed copy with the traceback, and makes the exit code non-zero."""

import json

import nbformat

from kimina_edu import course


def _notebook(path, code):
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("SMOKE = False\nOUTPUT_DIR = '.'")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(code)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def test_failure_is_reported_and_the_rest_still_runs(tmp_path, monkeypatch, capsys):
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    write = "from kimina_edu.runtime import write_metrics\nwrite_metrics({'smoke': SMOKE, 'headline': {'x': 1}}, OUTPUT_DIR)"
    _notebook(nbs / "01_breaks.ipynb", "raise RuntimeError('deliberate failure')")
    _notebook(nbs / "02_works.ipynb", write)
    monkeypatch.setattr(course, "NOTEBOOKS", nbs)
    code = course.main(["--smoke", "--runs-dir", str(tmp_path / "runs")])
    out = capsys.readouterr().out
    assert code == 1
    assert "01_breaks" in out and "FAIL" in out and "1/2 notebooks ok" in out
    latest = tmp_path / "runs" / "latest"
    kept = nbformat.read(latest / "01_breaks" / "01_breaks.ipynb", as_version=4)
    assert any(o.get("ename") == "RuntimeError" for c in kept.cells for o in c.get("outputs", []))
    assert json.loads((latest / "02_works" / "metrics.json").read_text())["smoke"] is True
    assert (latest / "02_works" / "02_works.html").exists() and (latest / "summary.txt").exists()


def test_learning_goals_are_judged_on_full_pocket_runs_only():
    full = {"smoke": False, "model": "pocket", "accuracy_before": 0.71, "grpo_seconds": 400.0}
    assert course.missed_goals("04_grpo_from_scratch", {**full, "accuracy_after": 0.77}) == []
    missed = course.missed_goals("04_grpo_from_scratch", {**full, "accuracy_after": 0.74, "grpo_seconds": 700.0})
    assert len(missed) == 2 and "+ 5 points" in missed[0] and "10 minutes" in missed[1]
    assert course.missed_goals("04_grpo_from_scratch", {**full, "accuracy_after": 0.5, "smoke": True}) == []
    assert course.missed_goals("04_grpo_from_scratch", {**full, "accuracy_after": 0.5, "model": "hub-id"}) == []
    assert course.missed_goals("03_sft_warmup", {"smoke": False, "model": "pocket", "sft_accuracy": 0.6,
                                                 "sft_format_rate": 1.0}) == ["03_sft_warmup: missed goal: SFT accuracy ≥ 65%"]
