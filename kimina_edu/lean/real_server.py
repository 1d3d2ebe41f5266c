"""Run the **real** kimina-lean-server code (PyPI ``kimina-ast-server``) on 127.0.0.1 with the
fake Lean REPL of :mod:`kimina_edu.lean.fake_repl` — the contract tests' server.

Only the missing part is faked: Lean. The server's HTTP layer, auth, pool, header split,
REPL protocol handling, timeouts and error paths are its own code. It runs in its own
environment (``make lean-check`` builds ``.venv-lean`` from
``kimina_edu/lean/requirements-lean.txt``: kimina-ast-server 2.1.3 needs ``fastapi==0.116.1`` and
installs a ``kimina_client`` module that collides with kimina-client).

    with RealLeanServer(repls=2, latency=0.05) as url:
        LeanVerifier(url, repls=2).verify(codes)

How the pieces meet (``server/repl.py``): the server spawns ``lake env <LEAN_SERVER_REPL_PATH>``
in ``LEAN_SERVER_PROJECT_DIR``; here ``lake`` is a two-line shell script on ``PATH`` that runs its
argument, and the REPL path is a script running the fake REPL with this interpreter. The
generated Prisma client is replaced by ``kimina_edu/lean/prisma_stub`` (see its docstring), and
on Python 3.11 the server starts with ``typing.TypedDict`` pointed at ``typing_extensions`` (see
``_LAUNCH``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from kimina_edu.lean.standin import free_port, wait_for_health

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
LEAN_VENV_PYTHON = REPO / ".venv-lean" / "bin" / "python"


# kimina-client's models (which the server imports) use ``typing.TypedDict``, which pydantic
# rejects before Python 3.12 — the bug upstream PR #63 fixes, unreleased on PyPI. The server
# process gets the same fix from outside as our client (``verdicts._import_kimina_client``).
_LAUNCH = ("import typing, typing_extensions, runpy; typing.TypedDict = typing_extensions.TypedDict; "
           "runpy.run_module('server', run_name='__main__', alter_sys=True)")


def server_python() -> Path | None:
    """An interpreter that has ``kimina-ast-server``: ``$KIMINA_LEAN_SERVER_PYTHON``, this one, or ``.venv-lean``."""
    import importlib.metadata

    env = os.environ.get("KIMINA_LEAN_SERVER_PYTHON")
    if env:
        return Path(env)
    try:
        importlib.metadata.version("kimina-ast-server")
        return Path(sys.executable)
    except importlib.metadata.PackageNotFoundError:
        pass
    return LEAN_VENV_PYTHON if LEAN_VENV_PYTHON.exists() else None


class RealLeanServer:
    """Start kimina-ast-server + fake REPLs in a subprocess on a free port; stop it (and its REPLs) on exit."""

    def __init__(self, *, repls: int = 2, max_wait: int = 60, latency: float = 0.0, api_key: str | None = None,
                 python: str | Path | None = None, log_level: str = "WARNING", startup_timeout: float = 60.0):
        self.python = Path(python) if python else server_python()
        if self.python is None:
            raise RuntimeError("kimina-ast-server is not installed: run `make lean-check` (builds .venv-lean) or set "
                               "KIMINA_LEAN_SERVER_PYTHON to an interpreter that has it")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.repls, self.max_wait, self.latency, self.api_key = repls, int(max_wait), latency, api_key
        self.log_level, self.startup_timeout = log_level, startup_timeout
        self.proc: subprocess.Popen | None = None
        self.workdir: Path | None = None

    def _environment(self) -> dict[str, str]:
        work = self.workdir
        assert work is not None
        (work / "project").mkdir()
        lake = work / "bin" / "lake"
        lake.parent.mkdir()
        lake.write_text('#!/bin/sh\n[ "$1" = env ] && shift\nexec "$@"\n')
        repl = work / "repl"
        repl.write_text(f"#!{self.python}\nimport runpy\nrunpy.run_module('kimina_edu.lean.fake_repl', run_name='__main__')\n")
        for path in (lake, repl):
            path.chmod(0o755)
        env = {k: v for k, v in os.environ.items() if not k.startswith("LEAN_SERVER_")}
        env.update({
            "PATH": f"{lake.parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": os.pathsep.join([str(HERE / "prisma_stub"), str(REPO), os.environ.get("PYTHONPATH", "")]),
            "LEAN_SERVER_HOST": "127.0.0.1", "LEAN_SERVER_PORT": str(self.port),
            "LEAN_SERVER_MAX_REPLS": str(self.repls), "LEAN_SERVER_MAX_WAIT": str(self.max_wait),
            "LEAN_SERVER_REPL_PATH": str(repl), "LEAN_SERVER_PROJECT_DIR": str(work / "project"),
            "LEAN_SERVER_WORKSPACE": str(work), "LEAN_SERVER_SKIP_VALIDATION": "1",
            "LEAN_SERVER_ENVIRONMENT": "prod", "LEAN_SERVER_LOG_LEVEL": self.log_level,
            "FAKE_REPL_LATENCY": str(self.latency),
        })
        if self.api_key:
            env["LEAN_SERVER_API_KEY"] = self.api_key
        return env

    def __enter__(self) -> str:

        self.workdir = Path(tempfile.mkdtemp(prefix="kimina-real-server-"))
        env = self._environment()
        self._log = open(self.workdir / "server.log", "wb")
        self.proc = subprocess.Popen([str(self.python), "-c", _LAUNCH], cwd=self.workdir, env=env,
                                     stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        return wait_for_health(self.url, self.proc, self.startup_timeout, "kimina-ast-server",
                               stop=lambda: self.__exit__(None, None, None), log=self.log_tail)

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return (self.workdir / "server.log").read_bytes()[-chars:].decode("utf-8", "replace")
        except (OSError, TypeError):
            return ""

    def __exit__(self, *exc) -> None:
        import signal

        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)  # the server and the REPLs it spawned (its own process group, setsid)
                self.proc.wait(timeout=10)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if getattr(self, "_log", None):
            self._log.close()
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
