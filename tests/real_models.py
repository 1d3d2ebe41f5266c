"""The real SmolLM2 folder `make smollm2` built, shared with the tests' temporary caches.

Most tests point ``KIMINA_EDU_CACHE`` at a temporary folder so nothing they build lands in the
learner's cache; the 542 MB SmolLM2 conversion is the exception they read, never write: a temporary
cache gets a link to it. The learner's cache is read when this module is first imported (by
conftest.py, before any test changes the variable)."""

from __future__ import annotations

import os
from pathlib import Path

_LEARNER_CACHE = os.environ.get("KIMINA_EDU_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "kimina-edu")


def learner_smollm2_root() -> Path:
    return Path(_LEARNER_CACHE) / "smollm2"


def share_real_smollm2(cache: str | os.PathLike) -> None:
    """Link ``cache``/smollm2 to the learner's converted SmolLM2 (when there is one and the link is not
    there yet). Without it, chapter 3 in the tests says in one line that SmolLM2 is missing."""
    source, target = learner_smollm2_root(), Path(cache) / "smollm2"
    if not source.is_dir() or target.exists() or target.is_symlink():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(source, target_is_directory=True)
