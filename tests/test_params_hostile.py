"""Parameter values a hostile (or hurried) learner types that pass a loose check and fail later: refused in
one line by the check, before any work starts."""

import pytest

from kimina_edu import course
from kimina_edu.params import ParameterError, check_params

BASE = {"SMOKE": False, "SEED": 0, "DEVICE": "cpu", "MODEL_ID": "pocket", "OUTPUT_DIR": "."}


@pytest.mark.parametrize("name,value", [("MODEL_ID", "pocket "), ("MODEL_ID", "smollm2\n"), ("MODEL_ID", " my_model"),
                                        ("TEACHER_MODEL", "gpt-4.1-mini ")])
def test_a_name_with_spaces_at_its_ends_is_refused(name, value):
    """``MODEL_ID="pocket "`` (a pasted value) is no keyword, no folder, no hub id: every notebook would say it
    cannot load it, after the runner accepted it."""
    with pytest.raises(ParameterError) as info:
        check_params({**BASE, name: value}, verbose=False)
    text = str(info.value)
    assert "\n" not in text and name in text and "spaces" in text


def test_the_runner_refuses_it_before_starting(monkeypatch, tmp_path, capsys):
    for name in course.ENV_OVERRIDES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MODEL_ID", "pocket ")
    assert course.main(["--runs-dir", str(tmp_path / "runs"), "--only", "00"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "MODEL_ID" in err and not (tmp_path / "runs").exists()
