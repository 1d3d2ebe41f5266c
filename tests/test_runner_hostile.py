"""The runner under hostile input: every mistake is one line before anything starts — a repeated flag
is never silently dropped, a runs folder that cannot be one is named, a per-cell deadline too large for
the event loop is refused."""

import pytest

from kimina_edu import course, runtime


@pytest.fixture
def quiet_runner(monkeypatch, tmp_path):
    """Notebooks recorded instead of executed, no calibration: only the runner's own checks run."""
    ran = []

    def record(path, output_dir, **kwargs):
        ran.append(path.name[:2])
        return course.NotebookResult(path.stem, True, 0.0, output_dir)

    monkeypatch.setattr(course, "run_notebook", record)
    monkeypatch.setattr(course, "export_html", lambda executed: None)
    monkeypatch.setattr(runtime, "calibration_line", lambda: "CPU calibration: (skipped in this test)")
    for name in course.ENV_OVERRIDES:
        monkeypatch.delenv(name, raising=False)
    return ran, tmp_path


def _one_line_refusal(capsys, argv) -> str:
    assert course.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize("flag,first,second", [("--seed", "1", "2"), ("--model-id", "pocket", "smollm2"),
                                               ("--device", "cpu", "auto"), ("--timeout", "60", "120")])
def test_a_repeated_single_value_flag_is_refused_not_dropped(quiet_runner, capsys, flag, first, second):
    ran, tmp = quiet_runner
    err = _one_line_refusal(capsys, ["--runs-dir", str(tmp / "runs"), flag, first, flag, second])
    assert flag in err and "once" in err and ran == []


def test_a_runs_folder_that_is_a_file_is_one_line(quiet_runner, capsys):
    ran, tmp = quiet_runner
    blocked = tmp / "runs"
    blocked.write_text("not a folder")
    err = _one_line_refusal(capsys, ["--runs-dir", str(blocked), "--only", "00"])
    assert str(blocked) in err and "folder" in err and ran == []


def test_a_deadline_too_large_for_the_event_loop_is_refused(quiet_runner, capsys):
    ran, tmp = quiet_runner
    err = _one_line_refusal(capsys, ["--runs-dir", str(tmp / "runs"), "--timeout", str(10**12)])
    assert "--timeout" in err and ran == []
