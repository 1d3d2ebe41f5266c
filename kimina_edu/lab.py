"""`make lab`: JupyterLab on the learner's own copies of the notebooks, under ``runs/lab/``.

Why copies and not a strip-on-save hook: a learner's executed notebook (outputs, widget state, the
``SMOKE = True`` they typed) is their work, and it should still be there when they reopen it; a hook
that strips on save would throw it away, and one that misses a save path (a rename, an extension, a
second editor) would leave outputs in the tracked file, which fails ``tests/test_conventions.py``. With
copies the tracked ``notebooks/`` folder is never opened, so ``git status`` stays clean, and the
notebooks' ``OUTPUT_DIR = "."`` puts ``figures/``, ``grpo_run/`` and ``metrics.json`` under ``runs/lab/``
(git-ignored) too. A copy is never overwritten: when the course's version is newer, one line says so.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from kimina_edu.course import absolute_path_variables

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
WORKSPACE = REPO / "runs" / "lab"

# ipywidgets' JupyterLab manager saves every widget's state into the notebook on save only when
# saveState is on (it is off by default); saved state is what a reopened notebook renders its widgets
# from. autoStartDefaultKernel: a notebook opens with its Python kernel started, no "Select Kernel" dialog.
LAB_SETTINGS = {
    "@jupyter-widgets/jupyterlab-manager:plugin": {"saveState": True},
    "@jupyterlab/notebook-extension:tracker": {"autoStartDefaultKernel": True},
}


def prepare_workspace(dest: Path = WORKSPACE, source: Path = NOTEBOOKS) -> list[str]:
    """Copy every course notebook (and ``solutions/``) that ``dest`` lacks; one line per notebook.

    Existing copies are kept: they hold the learner's work. A copy older than the course's version
    is named, with what to do to get the new one.
    """
    if not source.is_dir():
        raise RuntimeError(f"no notebooks at {source}: run `make lab` from a clone of the course")
    lines = []
    for nb in sorted(source.rglob("*.ipynb")):
        rel = nb.relative_to(source)
        if ".ipynb_checkpoints" in rel.parts:
            continue
        target = dest / rel
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(nb, target)
            lines.append(f"copied   {rel}")
        elif nb.stat().st_mtime > target.stat().st_mtime + 1:
            lines.append(f"kept     {rel} (yours; the course's version is newer: delete {target} to get it)")
    return lines


def write_lab_settings(prefix: Path = Path(sys.prefix)) -> Path:
    """Turn on widget-state saving (and kernel autostart) for this environment's JupyterLab (``overrides.json`` sets the
    defaults of a JupyterLab installation; a learner's own settings still win)."""
    path = prefix / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    current = {}
    if path.exists():
        try:
            current = json.loads(path.read_text() or "{}")
        except json.JSONDecodeError as exc:
            raise RuntimeError(f"{path} is not valid JSON ({exc}): fix or delete it, then rerun `make lab`") from exc
    if not isinstance(current, dict) or not all(isinstance(v, dict) for v in current.values()):
        raise RuntimeError(f"{path} should map plugin ids to settings objects: fix or delete it, then rerun `make lab`")
    for plugin, values in LAB_SETTINGS.items():
        current.setdefault(plugin, {}).update(values)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(current, indent=2))
    return path


def lab_command(root: Path = WORKSPACE, extra: list[str] | None = None, is_root: bool | None = None) -> list[str]:
    """The ``jupyter lab`` command line: served from ``root``, on this machine only, and with
    ``--allow-root`` exactly when running as root (containers and cloud notebooks run as root; Jupyter
    refuses to start there without it)."""
    if is_root is None:
        is_root = hasattr(os, "geteuid") and os.geteuid() == 0
    jupyter = Path(sys.executable).with_name("jupyter")
    cmd = [str(jupyter), "lab", f"--ServerApp.root_dir={root}", "--ServerApp.ip=127.0.0.1"]
    if is_root:
        cmd.append("--allow-root")
    return cmd + list(extra or [])


def main(argv: list[str] | None = None) -> int:
    """``make lab``; a setup problem (no notebooks, a file where ``runs/lab`` belongs, a broken settings
    file, JupyterLab missing) is one line and exit 2, not a traceback."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="prepare runs/lab/ and print the command only")
    args, extra = parser.parse_known_args(argv)
    try:
        if WORKSPACE.exists() and not WORKSPACE.is_dir():
            raise RuntimeError(f"{WORKSPACE} is a file where your notebooks' folder belongs: move it away, then "
                               "rerun `make lab`")
        for line in prepare_workspace(WORKSPACE, NOTEBOOKS):
            print(line)
        write_lab_settings()
        cmd = lab_command(WORKSPACE, extra=extra)
        if not Path(cmd[0]).exists():
            raise RuntimeError(f"{cmd[0]} is missing: JupyterLab is installed by `make lab` (requirements-lab.lock)")
    except (RuntimeError, OSError) as exc:
        print(f"make lab: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(f"your notebooks: {WORKSPACE} (notebooks/ stays as shipped)")
    print(" ".join(cmd))
    # the kernels run in runs/lab/: a relative KIMINA_EDU_CACHE (or HF_HOME …) means where it was typed
    os.environ.update(absolute_path_variables(os.environ))
    if args.dry_run:
        return 0
    os.execv(cmd[0], cmd)
    return 0  # not reached


if __name__ == "__main__":
    raise SystemExit(main())
