"""The course runner reads its selection and its paths as the learner typed them: relative paths
(``MODEL_ID`` naming a folder, ``KIMINA_EDU_CACHE``) resolve against the folder the runner was started
in, not ``notebooks/`` where papermill runs each notebook; every ``--only`` counts; an empty selection
is refused, not read as "everything"."""

import json
import os

import pytest
from tiny_notebook import write_notebook

from kimina_edu import course

REPORT = ("import os\nfrom kimina_edu.runtime import cache_dir, write_metrics\n"
          "write_metrics({'model': MODEL_ID, 'model_is_folder': os.path.isdir(MODEL_ID),\n"
          "               'cache': str(cache_dir()), 'cwd': os.getcwd()}, OUTPUT_DIR)")


def _report_notebook(path):
    write_notebook(path, REPORT)


@pytest.fixture
def typed_here(tmp_path, monkeypatch):
    """A runner started in ``tmp/here`` (holding a model folder), notebooks in ``tmp/notebooks``."""
    nbs, here = tmp_path / "notebooks", tmp_path / "here"
    nbs.mkdir()
    (here / "my_model").mkdir(parents=True)
    _report_notebook(nbs / "01_report.ipynb")
    monkeypatch.setattr(course, "NOTEBOOKS", nbs)
    for name in (*course.ENV_OVERRIDES, "KIMINA_EDU_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(here)
    return here


def _reported(runs):
    return json.loads((runs / "latest" / "01_report" / "metrics.json").read_text())


def test_relative_model_folder_and_cache_resolve_where_they_were_typed(typed_here, monkeypatch, capsys):
    monkeypatch.setenv("MODEL_ID", "my_model")
    monkeypatch.setenv("KIMINA_EDU_CACHE", ".cache")
    runs = typed_here / "runs"
    assert course.main(["--runs-dir", str(runs)]) == 0
    got = _reported(runs)
    assert got["cwd"] == str(typed_here.parent / "notebooks"), "the notebook still runs in its own folder"
    assert got["model"] == str(typed_here / "my_model") and got["model_is_folder"]
    assert got["cache"] == str(typed_here / ".cache")
    assert f"MODEL_ID={str(typed_here / 'my_model')!r}" in capsys.readouterr().out.splitlines()[0]
    assert os.environ["KIMINA_EDU_CACHE"] == ".cache", "the runner's own environment is left as it was"


def test_a_relative_model_folder_given_as_a_flag_resolves_too(typed_here):
    runs = typed_here / "runs"
    assert course.main(["--runs-dir", str(runs), "--model-id", "./my_model/"]) == 0
    assert _reported(runs)["model_is_folder"]


def test_names_that_are_not_folders_here_are_passed_as_typed(typed_here, monkeypatch):
    (typed_here / "pocket").mkdir()  # a folder that shares the keyword's name: the keyword still wins
    for model_id in ("pocket", "smollm2", "HuggingFaceTB/SmolLM-135M-Instruct"):
        assert course.resolve_model_id(model_id) == model_id


@pytest.mark.parametrize("model_id", ["./nowhere", "../nowhere", "nowhere/"])
def test_a_model_path_that_is_not_a_folder_is_refused_in_one_line(typed_here, capsys, model_id):
    runs = typed_here / "runs"
    assert course.main(["--runs-dir", str(runs), "--model-id", model_id]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "MODEL_ID" in err and "nowhere" in err and "not a folder" in err
    assert not runs.exists()


def test_every_only_flag_counts(recorded_runs):
    ran, tmp = recorded_runs
    runs = tmp / "runs"
    assert course.main(["--runs-dir", str(runs), "--only", "03", "--only", "04"]) == 0
    assert ran == ["03", "04"]


def test_only_accepts_a_notebook_path_as_tab_completion_writes_it(recorded_runs):
    ran, tmp = recorded_runs
    runs = tmp / "runs"
    assert course.main(["--runs-dir", str(runs), "--only", "notebooks/05_grpo_with_trl.ipynb", "01"]) == 0
    assert ran == ["01", "05"]


@pytest.mark.parametrize("only", [[""], ["03", ""], [" "]])
def test_an_empty_selection_is_refused_not_read_as_everything(recorded_runs, capsys, only):
    ran, tmp = recorded_runs
    runs = tmp / "runs"
    assert course.main(["--runs-dir", str(runs), "--only", *only]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--only" in err and "empty" in err
    assert ran == [] and not runs.exists()
