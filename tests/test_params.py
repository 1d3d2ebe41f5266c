"""Notebook parameters are checked in one place, and a learner's mistake ends in one line in the notebook."""

import ast
import math

import nbformat
import pytest
import torch
from tiny_notebook import write_notebook

from kimina_edu.course import list_notebooks
from kimina_edu.grpo import group_advantages
from kimina_edu.params import SPECS, LearnerError, ParameterError, check_params, one_line

BASE = {"SMOKE": False, "SEED": 0, "DEVICE": "cpu", "MODEL_ID": "pocket", "OUTPUT_DIR": "."}


def _problem(**changes):
    with pytest.raises(ParameterError) as info:
        check_params({**BASE, **changes}, verbose=False)
    text = str(info.value)
    assert "\n" not in text and "parameters cell" in text
    return text


def test_smoke_must_be_a_real_bool():
    text = _problem(SMOKE="False")
    assert "SMOKE" in text and "truthy" in text
    _problem(SMOKE=1)
    assert check_params({**BASE, "SMOKE": True}, verbose=False)["SMOKE"] is True


def test_device_must_exist_here(monkeypatch):
    assert "DEVICE" in _problem(DEVICE="banana")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    text = _problem(DEVICE="cuda")
    assert "no CUDA GPU" in text and "'auto'" in text
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert check_params({**BASE, "DEVICE": "cuda:1"}, verbose=False)["DEVICE"] == "cuda:1"
    assert "2 CUDA device" in _problem(DEVICE="cuda:2")
    for fine in ("auto", "cpu"):
        check_params({**BASE, "DEVICE": fine}, verbose=False)


@pytest.mark.parametrize("name,value,words", [
    ("SEED", True, "whole number"), ("SEED", "0", "whole number"), ("SEED", -1, "between 0 and"), ("SEED", 2**32, "between 0 and"),
    ("N_SFT", 0, "≥ 1"), ("STEPS", 2.5, "whole number"), ("LATENCY", -0.1, "≥ 0"), ("FIX_RATE", 2, "≤ 1"),
    ("LR", math.nan, "finite"), ("LR", 0.0, "> 0"), ("SFT_LR", math.inf, "finite"), ("TASK", "chess", "one of"),
    ("LOSS_TYPE", "ppo", "one of"), ("MODEL_ID", "", "non-empty"), ("TEACHER", "gpt", "one of"),
    ("PRESET", "huge", "one of"), ("WORKERS", 0, "between"),
])
def test_types_and_ranges(name, value, words):
    text = _problem(**{name: value})
    assert name in text and words in text and SPECS[name].hint in text


def test_every_problem_is_reported_at_once_on_one_line():
    text = _problem(SMOKE="yes", DEVICE="banana", N_SFT=0)
    assert all(name in text for name in ("SMOKE", "DEVICE", "N_SFT"))


def test_smoke_fills_only_what_was_left_as_none(capsys):
    ns = {**BASE, "SMOKE": True, "STEPS": None, "N_EVAL": 123}
    out = check_params(ns, smoke={"STEPS": (300, 6), "N_EVAL": (400, 40)})
    assert out["STEPS"] == 6 and out["N_EVAL"] == 123, "an explicit value must survive SMOKE"
    assert "kept as set: N_EVAL=123" in capsys.readouterr().out
    assert check_params({**ns, "SMOKE": False}, smoke={"STEPS": (300, 6)}, verbose=False)["STEPS"] == 300
    with pytest.raises(ParameterError, match="STEPS"):  # the filled-in or explicit value is checked too
        check_params({**ns, "STEPS": 0}, smoke={"STEPS": (300, 6)}, verbose=False)
    with pytest.raises(ValueError, match="SPECS"):
        check_params(ns, smoke={"NOT_A_PARAM": (1, 2)})


def test_optional_parameters_may_be_left_to_the_preset():
    ns = {**BASE, "STEPS": None, "LR": None}
    assert check_params(ns, optional=("STEPS", "LR"), verbose=False)["STEPS"] is None
    with pytest.raises(ParameterError, match="LR"):
        check_params(ns, optional=("STEPS",), verbose=False)  # None is not a learning rate
    with pytest.raises(ParameterError, match="STEPS must be a whole number"):
        check_params({**ns, "STEPS": "10"}, optional=("STEPS", "LR"), verbose=False)


def _parameters_cell(path):
    nb = nbformat.read(path, as_version=4)
    return next(c.source for c in nb.cells if "parameters" in c.metadata.get("tags", []))


@pytest.mark.parametrize("path", list_notebooks(), ids=lambda p: p.stem)
def test_every_notebook_parameter_has_a_spec_and_its_default_passes(path):
    source = _parameters_cell(path)
    names = [t.id for node in ast.parse(source).body if isinstance(node, ast.Assign)
             for target in node.targets for t in ast.walk(target) if isinstance(t, ast.Name)]
    missing = [n for n in names if n not in SPECS]
    assert not missing, f"{path.name}: parameters without a check in kimina_edu.params.SPECS: {missing}"
    ns: dict = {}
    exec(source, ns)  # noqa: S102 — the course's own parameters cell
    explicit = {k: v for k, v in ns.items() if k in SPECS and v is not None}
    check_params({**explicit, "DEVICE": "cpu" if explicit.get("DEVICE") not in ("auto", "cpu") else explicit["DEVICE"]},
                 verbose=False)


def test_learner_errors_are_value_errors_too():
    assert issubclass(ParameterError, LearnerError) and issubclass(ParameterError, ValueError)
    assert one_line(ValueError("two\nlines  here")) == "ValueError: two lines here"


# ---- non-finite rewards


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_non_finite_rewards_raise_a_clear_error(bad):
    rewards = torch.tensor([[1.0, 0.0, 1.0], [0.0, bad, 1.0]])
    with pytest.raises(ValueError, match=r"non-finite.*\[question, completion\] \[\(1, 1\)\].*reward function"):
        group_advantages(rewards)


# ---- a learner's mistake in a real notebook kernel ends in one line


def _tiny_notebook(path):
    derived = ("from kimina_edu.params import check_params, one_line_errors\n\n"
               "one_line_errors(OUTPUT_DIR)\n"
               "globals().update(check_params(globals(), smoke={'STEPS': (300, 6)}))")
    write_notebook(path, derived, "def f(x):\n    return 1 / x\n\nf(STEPS - STEPS)",
                   parameters='SMOKE = False\nSEED = 0\nDEVICE = "auto"\nMODEL_ID = "pocket"\nOUTPUT_DIR = "."\nSTEPS = None')


def _error_output(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        outs = cell.get("outputs", [])
        for out in outs:
            if out.output_type == "error":
                return out, outs
    raise AssertionError("no error output in the executed notebook")


def test_a_learner_error_ends_its_notebook_cell_in_one_line(tmp_path):
    from kimina_edu.course import run_notebook

    src = tmp_path / "00_tiny.ipynb"
    _tiny_notebook(src)
    result = run_notebook(src, tmp_path / "bad", smoke=True, extra={"DEVICE": "banana", "SEED": "7"})
    assert not result.ok
    err, outs = _error_output(tmp_path / "bad" / src.name)
    assert err.ename == "ParameterError" and len(err.traceback) == 1, err.traceback
    line = err.traceback[0]
    assert "DEVICE" in line and "'auto'" in line and "SEED" in line and "\n" not in line
    full = [o for o in outs if o.output_type == "display_data"]
    assert full and "Traceback (most recent call last)" in full[0].data["text/html"], "the full traceback is kept"
    saved = list((tmp_path / "bad" / "errors").glob("ParameterError-*.txt"))
    assert len(saved) == 1 and "check_params" in saved[0].read_text()
    assert result.error.splitlines()[-1].startswith("PapermillExecutionError") or "ParameterError" in result.error


def test_other_errors_keep_their_traceback(tmp_path):
    from kimina_edu.course import run_notebook

    src = tmp_path / "00_tiny.ipynb"
    _tiny_notebook(src)
    result = run_notebook(src, tmp_path / "bug", smoke=True)  # valid parameters; the third cell divides by 0
    err, _ = _error_output(tmp_path / "bug" / src.name)
    assert not result.ok and err.ename == "ZeroDivisionError" and len(err.traceback) > 3


# ---- the hosted teacher: a deadline, and a clear failure


def _questions(n):
    from kimina_edu.tasks import SEEDS, make_entries

    return make_entries("syllogism", n, SEEDS["sft"])


def test_a_dead_teacher_endpoint_fails_fast_with_one_clear_line(tmp_path):
    import httpx

    from kimina_edu.sft import OpenAITeacher, TeacherUnavailableError, make_sft_examples

    calls = []

    def refuse(request):
        calls.append(request)
        raise httpx.ConnectError("connection refused", request=request)

    teacher = OpenAITeacher(base_url="http://dead.local/v1", cache_path=tmp_path / "c.jsonl", concurrency=16,
                            transport=httpx.MockTransport(refuse), backoff_base=0.01)
    with pytest.raises(TeacherUnavailableError) as info:
        make_sft_examples(_questions(200), teacher)
    text = str(info.value)
    assert "\n" not in text and "http://dead.local/v1" in text and "TEACHER='rule-based'" in text
    assert "ConnectError" in text and "none of 200" in text
    # one round of requests, not 200 questions × 5 retries with backoff
    assert len(calls) <= 2 * teacher.concurrency, f"{len(calls)} requests to a dead endpoint"
    assert isinstance(info.value, LearnerError) and isinstance(info.value, RuntimeError)


def test_the_teacher_has_an_overall_deadline(tmp_path):
    import asyncio

    import httpx

    from kimina_edu.sft import OpenAITeacher

    async def hang(request):
        await asyncio.sleep(60)
        return httpx.Response(200, json={})

    teacher = OpenAITeacher(base_url="http://slow.local/v1", cache_path=tmp_path / "c.jsonl", deadline=0.5,
                            transport=httpx.MockTransport(hang))
    assert teacher.complete(_questions(5)) == [None] * 5
    assert teacher.failures == {"deadline of 0.5 s passed": 5}


def test_no_sft_questions_is_a_clear_error():
    from kimina_edu.sft import make_sft_examples

    with pytest.raises(ValueError, match="N_SFT=0"):
        make_sft_examples([])


@pytest.mark.parametrize("device", ["cuda:", "cuda:٣", "cuda:-1", "cuda:0:1", " cuda", "CUDA", "cuda:01x"])
def test_device_strings_that_torch_would_refuse_later_are_refused_now(monkeypatch, device):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    assert "DEVICE" in _problem(DEVICE=device)


@pytest.mark.parametrize("device", ["gpu", "cuda:", 3, "cpu "])
def test_resolve_device_refuses_in_one_line(device):
    from kimina_edu.params import ParameterError
    from kimina_edu.runtime import resolve_device

    with pytest.raises(ParameterError) as err:
        resolve_device(device)
    assert "\n" not in str(err.value)
    assert resolve_device("cpu") == "cpu" and resolve_device(None) in ("cpu", "cuda")
