"""The runner under hostile input: every mistake is one line before anything starts — a repeated flag
is never silently dropped, a runs folder that cannot be one is named, a per-cell deadline too large for
the event loop is refused."""

import pytest

from kimina_edu import course


def _one_line_refusal(capsys, argv) -> str:
    assert course.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize("flag,first,second", [("--seed", "1", "2"), ("--model-id", "pocket", "smollm2"),
                                               ("--device", "cpu", "auto"), ("--timeout", "60", "120")])
def test_a_repeated_single_value_flag_is_refused_not_dropped(recorded_runs, capsys, flag, first, second):
    ran, tmp = recorded_runs
    err = _one_line_refusal(capsys, ["--runs-dir", str(tmp / "runs"), flag, first, flag, second])
    assert flag in err and "once" in err and ran == []


def test_a_runs_folder_that_is_a_file_is_one_line(recorded_runs, capsys):
    ran, tmp = recorded_runs
    blocked = tmp / "runs"
    blocked.write_text("not a folder")
    err = _one_line_refusal(capsys, ["--runs-dir", str(blocked), "--only", "00"])
    assert str(blocked) in err and "folder" in err and ran == []


def test_a_deadline_too_large_for_the_event_loop_is_refused(recorded_runs, capsys):
    ran, tmp = recorded_runs
    err = _one_line_refusal(capsys, ["--runs-dir", str(tmp / "runs"), "--timeout", str(10**12)])
    assert "--timeout" in err and ran == []
