"""`make course`'s runner: a failing notebook does not stop the others, is marked FAIL, keeps its
executed copy with the traceback, and makes the exit code non-zero."""

import json
import os
from pathlib import Path

import nbformat
import pytest
from tiny_notebook import write_notebook

from kimina_edu import course


def _notebook(path, code):
    write_notebook(path, code, parameters="SMOKE = False\nOUTPUT_DIR = '.'")


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


def test_learning_goals_are_judged_on_full_runs_of_models_with_goals_only():
    full = {"smoke": False, "model": "pocket", "accuracy_before": 0.71, "grpo_seconds": 400.0, "format_after": 1.0,
            "shift_pos_mean": 0.001, "shift_neg_mean": -0.001}
    assert course.missed_goals("04_grpo_from_scratch", {**full, "accuracy_after": 0.77}) == []
    missed = course.missed_goals("04_grpo_from_scratch", {**full, "accuracy_after": 0.74, "grpo_seconds": 700.0})
    assert len(missed) == 2 and "+ 5 points" in missed[0] and "10 minutes" in missed[1]
    assert course.missed_goals("04_grpo_from_scratch", {**full, "accuracy_after": 0.5, "smoke": True}) == []
    assert course.missed_goals("04_grpo_from_scratch", {**full, "accuracy_after": 0.5, "model": "hub-id"}) == []
    assert course.missed_goals("03_sft_warmup", {"smoke": False, "model": "pocket", "sft_accuracy": 0.6,
                                                 "sft_format_rate": 1.0}) == ["03_sft_warmup: missed goal: SFT accuracy ≥ 65%"]
    # the real SmolLM2 has goals of its own (by model_id: its "model" is the converted folder): the warm-up
    # teaches the format (its accuracy is printed, not judged); GRPO's gain is large, certain and ends high
    real = {"smoke": False, "model": "/cache/smollm2/b179c9523d0e", "model_id": "smollm2", "sft_format_rate": 1.0}
    assert course.missed_goals("03_sft_warmup", {**real, "sft_accuracy": 0.40}) == []
    assert course.missed_goals("03_sft_warmup", {**real, "sft_accuracy": 0.9, "sft_format_rate": 0.9}) == [
        "03_sft_warmup: missed goal: SFT format rate ≥ 95%"]
    good = {**real, "accuracy_before": 0.60, "accuracy_after": 0.78, "gain_paired_points": [18.0, 14.0, 22.0]}
    assert course.missed_goals("04_grpo_from_scratch", good) == []
    small = {**good, "accuracy_after": 0.67, "gain_paired_points": [7.0, 4.0, 10.0]}
    assert [m.split(": missed goal: ")[1][:28] for m in course.missed_goals("04_grpo_from_scratch", small)] == [
        "GRPO accuracy ≥ SFT accuracy", "GRPO accuracy ≥ 76.5% (the f"]
    unsure = {**good, "gain_paired_points": [18.0, -0.5, 36.0]}  # large, but its interval reaches zero
    assert len(course.missed_goals("04_grpo_from_scratch", unsure)) == 1
    bought = {**good, "accuracy_before": 0.30, "accuracy_after": 0.70, "gain_paired_points": [40.0, 35.0, 45.0]}
    assert "76.5%" in course.missed_goals("04_grpo_from_scratch", bought)[0]  # a gain bought by a weak start
    no_interval = {k: v for k, v in good.items() if k != "gain_paired_points"}
    assert "gain_paired_points" in course.missed_goals("04_grpo_from_scratch", no_interval)[0]
    # a gain of exactly the goal's points counts as met, whatever floating point makes of the sum
    assert course.missed_goals("04_grpo_from_scratch", {**full, "accuracy_before": 0.01, "accuracy_after": 0.06}) == []
    assert course.missed_goals("04_grpo_from_scratch", {**good, "accuracy_before": 0.685, "accuracy_after": 0.765}) == []
    # a metric the goal needs but the notebook did not write is a missed goal, not a crash (fail closed)
    no_format = {k: v for k, v in full.items() if k != "format_after"}
    assert course.missed_goals("04_grpo_from_scratch", {**no_format, "accuracy_after": 0.9}) == [
        "04_grpo_from_scratch: missed goal: format rate after GRPO ≥ 95% (metrics.json has no 'format_after')"]
    # the update's measured effect: rewarded above penalised on average over the measured updates
    shift = "04_grpo_from_scratch: missed goal: measured updates raise rewarded completions above penalised ones, on average"
    wrong_way = {**full, "accuracy_after": 0.9, "shift_pos_mean": -0.002, "shift_neg_mean": -0.001}
    assert course.missed_goals("04_grpo_from_scratch", wrong_way) == [shift]
    too_few = {**full, "accuracy_after": 0.9, "shift_pos_mean": None, "shift_neg_mean": None}  # < 2 updates measured
    assert course.missed_goals("04_grpo_from_scratch", too_few) == [shift]
    # the summary says how many goals were judged and met, then each miss; nothing when none was judged
    met_all = [("03_sft_warmup", {"smoke": False, "model": "pocket", "sft_accuracy": 0.7, "sft_format_rate": 1.0}),
               ("04_grpo_from_scratch", {**full, "accuracy_after": 0.9})]
    n = len(course.LEARNING_GOALS["03"]) + len(course.LEARNING_GOALS["04"])
    assert course.goal_lines(met_all) == [f"learning goals: {n} of {n} met"]
    assert course.goal_lines([met_all[0], ("04_grpo_from_scratch", wrong_way)]) == [f"learning goals: {n - 1} of {n} met", shift]
    assert course.goal_lines([(name, {**m, "smoke": True}) for name, m in met_all]) == []
    assert course.goal_lines([("04_grpo_from_scratch", {**full, "accuracy_after": 0.9, "model": "hub-id"})]) == []
    no_shift = {k: v for k, v in full.items() if k != "shift_pos_mean"}
    assert course.missed_goals("04_grpo_from_scratch", {**no_shift, "accuracy_after": 0.9}) == [
        f"{shift} (metrics.json has no 'shift_pos_mean')"]


# ---- overrides reach every notebook; runs/latest only ever points at a finished run

ECHO = ("import json, os\nfrom pathlib import Path\nfrom kimina_edu.runtime import write_metrics\n"
        "run = Path(OUTPUT_DIR).parent\nlatest = run.parent / 'latest'\n"
        "write_metrics({'smoke': SMOKE, 'seed': SEED, 'device': DEVICE, 'model': MODEL_ID,\n"
        "               'running_marker': (run / 'RUNNING').exists(),\n"
        "               'latest_at_start': os.readlink(latest) if latest.is_symlink() else None}, OUTPUT_DIR)")


def _echo_notebook(path):
    write_notebook(path, ECHO)


@pytest.fixture
def echo_course(tmp_path, monkeypatch):
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    _echo_notebook(nbs / "01_echo.ipynb")
    monkeypatch.setattr(course, "NOTEBOOKS", nbs)
    for name in course.ENV_OVERRIDES:
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "runs"


def _metrics(run):
    return json.loads((run / "01_echo" / "metrics.json").read_text())


def test_model_id_and_the_documented_overrides_reach_every_notebook(echo_course, monkeypatch):
    monkeypatch.setenv("MODEL_ID", "HuggingFaceTB/SmolLM-135M-Instruct")
    monkeypatch.setenv("SEED", "7")
    monkeypatch.setenv("SMOKE", "1")
    assert course.main(["--runs-dir", str(echo_course), "--device", "cpu"]) == 0
    m = _metrics(echo_course / "latest")
    assert (m["model"], m["seed"], m["device"], m["smoke"]) == ("HuggingFaceTB/SmolLM-135M-Instruct", 7, "cpu", True)


@pytest.mark.parametrize("env,words", [({"SEED": "seven"}, "SEED"), ({"SMOKE": "maybe"}, "SMOKE"),
                                       ({"DEVICE": "banana"}, "DEVICE")])
def test_a_bad_override_stops_the_run_in_one_line(echo_course, monkeypatch, capsys, env, words):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert course.main(["--runs-dir", str(echo_course)]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1
    assert not echo_course.exists(), "no run folder for a run that never started"


def test_latest_moves_only_when_a_run_has_finished(echo_course, monkeypatch):
    assert course.main(["--runs-dir", str(echo_course)]) == 0
    first = os.readlink(echo_course / "latest")
    assert course.main(["--runs-dir", str(echo_course)]) == 0
    second = os.readlink(echo_course / "latest")
    m = _metrics(echo_course / second)
    assert second != first and m["latest_at_start"] == first and m["running_marker"]
    assert not (echo_course / second / "RUNNING").exists() and (echo_course / second / "summary.txt").exists()

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(course, "run_notebook", interrupted)
    assert course.main(["--runs-dir", str(echo_course)]) == 130
    assert os.readlink(echo_course / "latest") == second, "an interrupted run must not become latest"
    marked = [p for p in echo_course.iterdir() if (p / "INTERRUPTED").exists()]
    assert len(marked) == 1 and not (marked[0] / "summary.txt").exists()


# ---- QUICK, a learner's first pass

def test_quick_reaches_only_the_notebooks_that_declare_it(echo_course, monkeypatch):
    nbs = echo_course.parent / "notebooks"
    quick = nbformat.read(nbs / "01_echo.ipynb", as_version=4)
    quick.cells[0].source = "QUICK = False\n" + quick.cells[0].source
    quick.cells[1].source = quick.cells[1].source.replace("'smoke': SMOKE,", "'smoke': SMOKE, 'quick': QUICK,")
    nbformat.write(quick, nbs / "02_quick.ipynb")
    monkeypatch.setenv("QUICK", "yes")
    assert course.notebook_parameters(nbs / "02_quick.ipynb") == {"QUICK", "SMOKE", "SEED", "DEVICE", "MODEL_ID",
                                                                   "OUTPUT_DIR"}
    assert course.main(["--runs-dir", str(echo_course)]) == 0
    latest = echo_course / "latest"
    assert json.loads((latest / "02_quick" / "metrics.json").read_text())["quick"] is True
    executed = nbformat.read(latest / "01_echo" / "01_echo.ipynb", as_version=4)
    assert "QUICK" not in "".join(c.source for c in executed.cells), "a notebook without QUICK is not handed one"
    monkeypatch.setenv("QUICK", "sometimes")
    assert course.main(["--runs-dir", str(echo_course)]) == 2


def test_quick_runs_a_third_of_the_steps_and_is_not_judged_on_the_full_goals():
    from kimina_edu.train_config import TrainConfig

    full, quick = TrainConfig.preset("pocket"), TrainConfig.preset("pocket", quick=True)
    assert quick.steps == full.steps // 3 and {**quick.__dict__, "steps": full.steps} == full.__dict__
    assert TrainConfig.preset("pocket", quick=True, steps=40).steps == 40, "an explicit STEPS wins"
    assert TrainConfig.preset("pocket", quick=True, smoke=True).steps == TrainConfig.preset("pocket", smoke=True).steps
    done = {"smoke": False, "quick": True, "model": "pocket", "accuracy_before": 0.7, "accuracy_after": 0.71,
            "grpo_seconds": 90.0, "format_after": 1.0, "shift_pos_mean": -1.0, "shift_neg_mean": 0.0}
    assert course.missed_goals("04_grpo_from_scratch", done) == []


# ---- every flag and variable parsed once, "not given" explicit, validated, echoed

def test_a_flag_wins_over_the_environment_even_when_it_is_zero(echo_course, monkeypatch, capsys):
    monkeypatch.setenv("SEED", "5")
    assert course.main(["--runs-dir", str(echo_course), "--seed", "0"]) == 0
    assert _metrics(echo_course / "latest")["seed"] == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert "SEED=0 (--seed)" in header and "MODEL_ID" in header and "timeout 7200 s" in header


@pytest.mark.parametrize("argv, words", [
    (["--only"], "--only"), (["--timeout", "0"], "--timeout"), (["--timeout", "-5"], "--timeout"),
    (["--seed", "-1"], "SEED"), (["--seed", str(2**32)], "SEED"), (["--only", "42"], "--only"),
    (["--device", "cuda:"], "DEVICE"), (["--device", "gpu"], "DEVICE"), (["--model-id", ""], "MODEL_ID"),
    (["--seed"], "--seed"), (["--bogus"], "--bogus"),
])
def test_a_bad_flag_is_one_line_and_starts_nothing(echo_course, capsys, argv, words):
    assert course.main(["--runs-dir", str(echo_course), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1, err
    assert not echo_course.exists()


def test_a_seed_numpy_refuses_is_refused_first(echo_course, monkeypatch, capsys):
    monkeypatch.setenv("SEED", str(2**32))
    assert course.main(["--runs-dir", str(echo_course)]) == 2
    assert "SEED" in capsys.readouterr().err


def _terminated_run(runs: Path, code: str, settle: float) -> tuple[int, str]:
    """Start ``python -c code`` (a course run into ``runs``), wait until its RUNNING marker exists (a
    deadline that only catches hangs), let it run ``settle`` seconds, SIGTERM it: its exit code and output."""
    import signal
    import subprocess
    import sys
    import time

    from deadlines import WAIT_DEADLINE_S

    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + WAIT_DEADLINE_S
    while not list(runs.glob("*/RUNNING")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert list(runs.glob("*/RUNNING")), "the run never started"
    time.sleep(settle)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=WAIT_DEADLINE_S)
    return proc.returncode, out


def test_sigterm_marks_the_run_interrupted(echo_course, tmp_path):
    nbs = echo_course.parent / "notebooks"
    slow = nbformat.read(nbs / "01_echo.ipynb", as_version=4)
    slow.cells[1].source = "import time\ntime.sleep(600)"
    nbformat.write(slow, nbs / "01_echo.ipynb")
    code = (f"import sys; from kimina_edu import course; from pathlib import Path; course.NOTEBOOKS = Path({str(nbs)!r}); "
            f"sys.exit(course.main(['--runs-dir', {str(echo_course)!r}]))")
    returncode, out = _terminated_run(echo_course, code, settle=1.0)
    assert returncode == 143, out
    assert not list(echo_course.glob("*/RUNNING")) and len(list(echo_course.glob("*/INTERRUPTED"))) == 1, out


def test_sigterm_ends_the_run_even_when_the_kernels_cleanup_hangs(echo_course):
    """A SIGTERM that papermill's clean-up swallows and then waits on (a kernel still starting on a busy
    machine) must still end the run, marked INTERRUPTED, after the grace period: here the notebook
    runner catches the signal and hangs, as that clean-up does."""
    nbs = echo_course.parent / "notebooks"
    code = ("import sys, time; from pathlib import Path; from kimina_edu import course\n"
            f"course.NOTEBOOKS = Path({str(nbs)!r}); course.TERMINATE_GRACE_S = 1.0\n"
            "def hanging(*args, **kwargs):\n"
            "    try:\n        time.sleep(600)\n    except KeyboardInterrupt:\n        time.sleep(600)\n"
            "course.run_notebook = hanging\n"
            f"sys.exit(course.main(['--runs-dir', {str(echo_course)!r}]))")
    returncode, out = _terminated_run(echo_course, code, settle=0.5)
    assert returncode == 143, out
    assert "shutdown took over 1 s" in out and len(list(echo_course.glob("*/INTERRUPTED"))) == 1, out


def test_a_run_is_quiet_one_line_per_notebook_and_says_where_the_time_went(tmp_path, monkeypatch, capfd):
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    write = ("import os\nfrom kimina_edu.runtime import write_metrics\nwrite_metrics({'smoke': SMOKE, 'bars': "
             "os.environ.get('HF_HUB_DISABLE_PROGRESS_BARS')}, OUTPUT_DIR)")
    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)
    for name in ("01_a", "02_b"):
        _notebook(nbs / f"{name}.ipynb", "import time\ntime.sleep(0.3)  # the slow one\n" + write)
    monkeypatch.setattr(course, "NOTEBOOKS", nbs)
    assert course.main(["--smoke", "--runs-dir", str(tmp_path / "runs")]) == 0
    out, err = capfd.readouterr()  # file-descriptor level: the kernels' own stderr is caught too
    assert "without encryption" not in out + err, "the kernel must not warn about plain-text TCP on every start"
    lines = out.splitlines()
    assert [ln.split()[1] for ln in lines if ln.startswith("▶")] == ["01_a.ipynb", "02_b.ipynb"]
    # the slowest cell is named by its first line of work, not its imports
    assert all(" ok in " in ln and "slowest: cell" in ln and "time.sleep(0.3)" in ln for ln in lines if ln.startswith("▶")), lines
    # the libraries' own bars are off in the kernel (their first frame, kept in the executed notebook, reads as a hang)
    assert json.loads((tmp_path / "runs" / "latest" / "01_a" / "metrics.json").read_text())["bars"] == "1"
    assert "HF_HUB_DISABLE_PROGRESS_BARS" not in os.environ  # and only there
    summary = (tmp_path / "runs" / "latest" / "summary.txt").read_text()
    assert "slowest cell" in summary and "time.sleep(0.3)" in summary and "CPU calibration: fp32 GEMM" in summary


def test_the_summary_wraps_a_long_headline_between_figures_and_never_cuts_a_value(tmp_path):
    head = {"batch_scores (scripted)": "1/0/0/0/0", "checks_agree": True, "proofs_per_s@32 (stand-in)": 812.5,
            "p99_latency_ms (stand-in)": 41.25}
    table = course.summary_table([course.NotebookResult("06_lean_rewards", True, 22.8, tmp_path, {"headline": head})])
    lines = table.splitlines()[2:-2]
    text = " ".join(line[46:] for line in lines)
    assert all(f"{k}=" in text for k in head) and "812" in text and "41.2" in text, table
    assert len(lines) > 1 and all(len(line) <= 46 + 70 for line in lines), table
    assert lines[1][:46].strip() == ""  # a continuation line sits under the first line's figures
