"""`make lab` (kimina_edu/lab.py): starts for every user, works on copies, keeps the learner's work."""

import json
import os

import pytest

from kimina_edu.lab import LAB_SETTINGS, lab_command, prepare_workspace, write_lab_settings


def test_allow_root_exactly_when_root(tmp_path):
    assert "--allow-root" in lab_command(tmp_path, is_root=True)
    assert "--allow-root" not in lab_command(tmp_path, is_root=False)
    cmd = lab_command(tmp_path, extra=["--port=9999"], is_root=False)
    assert f"--ServerApp.root_dir={tmp_path}" in cmd and "--ServerApp.ip=127.0.0.1" in cmd and cmd[-1] == "--port=9999"


def test_workspace_copies_once_and_never_overwrites_the_learners_work(tmp_path):
    source, dest = tmp_path / "notebooks", tmp_path / "runs" / "lab"
    (source / "solutions").mkdir(parents=True)
    (source / "01_a.ipynb").write_text("course v1")
    (source / "solutions" / "01_solutions.ipynb").write_text("solutions")
    (source / ".ipynb_checkpoints").mkdir()
    (source / ".ipynb_checkpoints" / "01_a-checkpoint.ipynb").write_text("junk")
    lines = prepare_workspace(dest, source)
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*.ipynb")) == ["01_a.ipynb",
                                                                                     "solutions/01_solutions.ipynb"]
    assert len(lines) == 2
    (dest / "01_a.ipynb").write_text("the learner's run")
    assert prepare_workspace(dest, source) == []
    (source / "01_a.ipynb").write_text("course v2")
    old = (dest / "01_a.ipynb").stat().st_mtime - 100
    os.utime(dest / "01_a.ipynb", (old, old))
    (line,) = prepare_workspace(dest, source)
    assert "newer" in line and "delete" in line
    assert (dest / "01_a.ipynb").read_text() == "the learner's run"
    with pytest.raises(RuntimeError, match="make lab"):
        prepare_workspace(dest, tmp_path / "missing")


def test_lab_settings_turn_on_widget_state_and_keep_other_overrides(tmp_path):
    path = write_lab_settings(tmp_path)
    assert json.loads(path.read_text()) == LAB_SETTINGS
    path.write_text(json.dumps({"@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"},
                                "@jupyter-widgets/jupyterlab-manager:plugin": {"saveState": False, "other": 1}}))
    saved = json.loads(write_lab_settings(tmp_path).read_text())
    assert saved["@jupyterlab/apputils-extension:themes"] == {"theme": "JupyterLab Dark"}
    assert saved["@jupyter-widgets/jupyterlab-manager:plugin"] == {"saveState": True, "other": 1}
    path.write_text("{not json")
    with pytest.raises(RuntimeError, match="not valid JSON"):
        write_lab_settings(tmp_path)
    for shape in ("[1, 2]", '{"plugin": 3}'):
        path.write_text(shape)
        with pytest.raises(RuntimeError, match="fix or delete"):
            write_lab_settings(tmp_path)


def test_a_broken_setup_is_one_line_not_a_traceback(tmp_path, monkeypatch, capsys):
    from kimina_edu import lab

    monkeypatch.setattr(lab, "NOTEBOOKS", tmp_path / "nowhere")
    assert lab.main(["--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert "no notebooks" in err and len(err.splitlines()) == 1

    blocked = tmp_path / "runs-lab-is-a-file"
    blocked.write_text("x")
    monkeypatch.setattr(lab, "NOTEBOOKS", lab.REPO / "notebooks")
    monkeypatch.setattr(lab, "WORKSPACE", blocked)
    assert lab.main(["--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert str(blocked) in err and len(err.splitlines()) == 1


def test_a_relative_cache_folder_reaches_the_kernels_as_typed(tmp_path, monkeypatch):
    """The kernels run in runs/lab/; KIMINA_EDU_CACHE=.cache typed in the repository means the repository's."""
    from kimina_edu import lab

    monkeypatch.setattr(lab, "WORKSPACE", tmp_path / "lab")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KIMINA_EDU_CACHE", ".cache")
    monkeypatch.setattr(lab, "lab_command", lambda root, extra=(): [lab.sys.executable])
    assert lab.main(["--dry-run"]) == 0
    assert lab.os.environ["KIMINA_EDU_CACHE"] == str(tmp_path / ".cache")
