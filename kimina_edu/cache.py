"""Built artifacts (a pocket model, an SFT adapter) cached by recipe hash: validated on every use,
rebuilt when damaged, built by one process at a time.

Why each piece:
- **validated on use** — a cache folder can be half-written (Ctrl-C, a full disk) or damaged
  later; loading it would fail with an error about the file, not about what to do.
- **a private temp folder, then one rename** — readers never see a half-built folder, and two
  builders never write into the same one.
- **a file lock** — three notebooks (or three test workers) asking for the same recipe at once
  must wait for one build, not race three (``fcntl.flock``: released by the OS if a builder dies).
"""

from __future__ import annotations

import fcntl
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def build_once(path: Path, build: Callable[[Path], Any], problem: Callable[[Path], str | None], *,
               force: bool = False, what: str = "artifact") -> Path:
    """Return ``path`` holding a valid artifact, building it with ``build(tmp_folder)`` if needed.

    ``problem(path)`` returns ``None`` when the folder is usable, else a short reason; a damaged
    folder is rebuilt with one line saying why.
    """
    if not force and path.is_dir() and problem(path) is None:
        return path
    if path.exists() and not path.is_dir():  # before building: the build would be thrown away at the end
        raise RuntimeError(f"{path} is a file where the {what} cache folder belongs: move it away, then run again")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f".{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it: wait, then look again
        try:
            reason = problem(path) if path.exists() else None
            if path.exists() and reason is None and not force:
                return path
            if path.exists():
                print(f"{what} cache at {path} {reason or 'rebuild forced'}: rebuilding it")
            tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
            try:
                build(tmp)
                if (reason := problem(tmp)) is not None:
                    raise RuntimeError(f"the freshly built {what} {reason}; please report this as a bug")
                if path.exists():
                    shutil.rmtree(path)
                tmp.rename(path)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return path
