"""The pinned environment: read the lock files, compare them with what is installed, write
``environment.yml`` from the lock.

Why a lock: ``pyproject.toml`` states ranges (what the code supports); two installs a week apart
would resolve them to different versions, and the course's numbers move with the versions.
``make lock`` resolves the ranges once with uv (``uv pip compile``) into ``requirements.lock``
(the course), ``requirements-lab.lock`` (the course + JupyterLab) and
``kimina_edu/verl/requirements-verl.lock`` (chapter 8's own environment); every ``make`` target
installs from them. ``torch`` is written as ``torch==2.13.0`` without a build tag: pip then takes
the CPU build where one is offered (this course's machines) and the CUDA build on a GPU machine —
the same version either way.

    python -m kimina_edu.environment check   # installed vs requirements.lock, one line each
    python -m kimina_edu.environment env     # rewrite environment.yml from requirements.lock
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOCK = REPO / "requirements.lock"
LAB_LOCK = REPO / "requirements-lab.lock"
VERL_LOCK = REPO / "kimina_edu" / "verl" / "requirements-verl.lock"
ENVIRONMENT_YML = REPO / "environment.yml"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;]+)\s*(?:;\s*(.+))?$")


def canonical(name: str) -> str:
    """PEP 503 name: ``Foo_Bar.baz`` and ``foo-bar-baz`` are one package."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(path: str | Path = LOCK) -> dict[str, tuple[str, str | None]]:
    """``{canonical name: (version, environment marker or None)}`` from a pip requirements lock."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError:
        raise FileNotFoundError(f"{path} is missing: run `make lock` (or restore it with git checkout)") from None
    pins: dict[str, tuple[str, str | None]] = {}
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith(("#", "-")):
            continue
        match = _PIN.match(line)
        if not match:
            raise ValueError(f"{path}: not an exact pin: {line!r} — regenerate it with `make lock`")
        pins[canonical(match[1])] = (match[2], match[3])
    return pins


def _applies(marker: str | None) -> bool:
    if not marker:
        return True
    from packaging.markers import Marker

    return Marker(marker).evaluate()


def _same_version(installed: str, locked: str) -> bool:
    """A local build tag (``2.13.0+cpu``) matches the lock's ``2.13.0``, as pip's ``==`` does."""
    return installed == locked or installed.split("+", 1)[0] == locked


def lock_mismatches(path: str | Path = LOCK) -> list[str]:
    """One line per locked package that is missing or installed at another version."""
    lines = []
    for name, (version, marker) in sorted(read_lock(path).items()):
        if not _applies(marker):
            continue
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            lines.append(f"{name}: locked {version}, not installed")
            continue
        if not _same_version(installed, version):
            lines.append(f"{name}: locked {version}, installed {installed}")
    return lines


def environment_yml(path: str | Path = LOCK) -> str:
    """``environment.yml`` for conda users: Python 3.11 and every pin of the lock, through pip."""
    lines = ["# Generated from requirements.lock by `make lock` (python -m kimina_edu.environment env): do not edit.",
             "# conda env create -f environment.yml", "name: kimina-edu", "channels:", "- conda-forge",
             "dependencies:", "- python=3.11", "- pip", "- pip:"]
    for name, (version, marker) in sorted(read_lock(path).items()):
        pin = f"{name}=={version}" + (f"; {marker}" if marker else "")
        lines.append(f'  - "{pin}"' if marker else f"  - {pin}")
    lines.append("  - -e .")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["env"]:
        ENVIRONMENT_YML.write_text(environment_yml())
        print(f"wrote {ENVIRONMENT_YML.name} from {LOCK.name}")
        return 0
    if args[:1] == ["check"]:
        lock = Path(args[1]) if len(args) > 1 else LOCK
        bad = lock_mismatches(lock)
        for line in bad:
            print(f"not as locked: {line}")
        if bad:
            print(f"{len(bad)} package(s) differ from {lock.name}: run `make install` to restore the locked versions")
        return 1 if bad else 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
