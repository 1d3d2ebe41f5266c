"""A stand-in for kimina-lean-server — a **test double, not a proof checker**.

It speaks the real server's HTTP contract (``POST /api/check``, ``POST /verify``,
``GET /health``, bearer auth, 401/422/429) so the client, the reward and the notebooks can be
exercised where Lean cannot be installed. Its verdicts come only from a *script* (a JSON file
mapping code → result); every unscripted snippet gets one ``severity: "error"`` message saying
so, so nothing unscripted can ever count as valid.

    python -m kimina_edu.lean.standin --port 8765 --workers 32 --latency 0.05 --script verdicts.json

Fault switches (for tests): ``POST /_standin/faults {"mode": "...", "count": n}`` makes the next
n requests to ``/api/check`` fail with ``500``, ``429``, ``malformed`` JSON, a ``drop``ped
connection, or a ``slow`` reply (sleeps ``slow_seconds``). The switches need the API key when
the server has one, and the key is compared in constant time (``hmac.compare_digest``).

Behaviours of the real servers the client must survive (``kimina-lean-server`` HEAD and PyPI
``kimina-ast-server``, read from their code and run with a fake REPL):

- auth is checked **before** the body is validated (401 before 422);
- a scripted ``{"crash": true}`` snippet makes the whole request answer HTTP 500, as HEAD does
  when one snippet's REPL dies or answers empty;
- pool exhaustion answers ``429`` for the whole request (HEAD) or, with
  ``--no-repls-answer snippet``, HTTP 200 with a per-snippet ``"No available REPLs"`` error
  (kimina-ast-server);
- ``--poll 0.1`` answers at the next 0.1 s tick after the request arrived (the real server's
  response poll);
- ``#check`` lines of an unscripted snippet answer an ``info`` message on that line, numbered
  as ``--line-scheme`` says (beside the notice's error, unless the body is only ``#check`` lines) (``relative`` to the body after the import header, or
  ``absolute``), so the client's line-scheme probe works against the stand-in.
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, field_validator

STANDIN_NOTICE = ("stand-in server: this snippet is not in the stand-in's script, so no proof was checked "
                  "(start a real kimina-lean-server and set LEAN_SERVER_API_URL)")


def is_unchecked(result: dict[str, Any] | None) -> bool:
    """Is this server answer (one ``/api/check`` result, or its ``response``) the stand-in's notice for a
    snippet it has no script for? Then no proof was checked, and the answer is no verdict on the proof —
    callers show it as "not checked"."""
    result = result or {}
    response = result.get("response") if isinstance(result.get("response"), dict) else result
    messages = response.get("messages") or []
    return any(isinstance(m, dict) and m.get("data") == STANDIN_NOTICE for m in messages)


def require_scripted(script: dict[str, Any], codes: list[str | None]) -> None:
    """A demonstration scores only proofs the stand-in has a script for, so every verdict it shows is
    the scripted one; ``None`` (a proof filtered locally) is never sent. Raises naming the first gap."""
    sent = [c for c in codes if c is not None]
    missing = [c for c in sent if c not in script]
    if missing:
        first = missing[0].strip().splitlines()
        theorem = next((line for line in first if line.startswith(("theorem", "lemma"))), first[0] if first else "")
        raise ValueError(f"{len(missing)} of {len(sent)} proofs have no scripted verdict in the stand-in "
                         f"(first: {theorem[:80]!r}): add them to the script, or set LEAN_SERVER_API_URL to check them")


# The request models of kimina-lean-server's API (``server/routers``; client ``models.py``).
class Snippet(BaseModel):
    id: str
    code: str

class CheckRequest(BaseModel):
    snippets: list[Snippet] = Field(min_length=1)
    timeout: int = Field(default=30, ge=0)
    debug: bool = False
    reuse: bool = True
    infotree: str | None = None

    @field_validator("snippets")
    @classmethod
    def unique_ids(cls, v):
        if len({s.id for s in v}) != len(v):
            raise ValueError("snippet ids must be unique")
        return v

class Code(BaseModel):
    custom_id: str | int
    proof: str | None = None
    code: str | None = None

class VerifyRequest(BaseModel):
    codes: list[Code] = Field(min_length=1)
    timeout: int = 300
    infotree_type: str | None = None
    disable_cache: bool = False


def _header_lines(code: str) -> int:
    """Lines the real server splits off as the header (``split_snippet``)."""
    count = 0
    for line in code.splitlines():
        if line.strip() and not line.strip().startswith("import "):
            break
        count += 1
    return count


def unscripted_result(sid: str, code: str = "", line_scheme: str = "relative") -> dict[str, Any]:
    """The stand-in's notice as an error (nothing unscripted is ever valid); each ``#check`` line
    also answers an ``info`` message, numbered as ``line_scheme`` says. Only a body made of nothing
    but ``#check`` lines (the client's line-scheme probe) answers without the error — a proof with a
    ``#check`` after it still gets the notice."""
    lines = code.splitlines()
    offset = _header_lines(code)
    body = [(n, line) for n, line in enumerate(lines[offset:], 1) if line.strip()]
    shift = offset if line_scheme == "absolute" else 0
    messages = [{"severity": "info", "pos": {"line": n + shift, "column": 0}, "endPos": {"line": n + shift, "column": 6},
                 "data": "stand-in: #check answered without Lean"} for n, line in body if line.startswith("#check")]
    if not body or len(messages) < len(body):
        messages.append({"severity": "error", "pos": {"line": 1, "column": 0}, "endPos": {"line": 1, "column": 1},
                         "data": STANDIN_NOTICE})
    return {"id": sid, "time": 0.0, "response": {"env": 0, "messages": messages}}


class _Crash(Exception):
    """A scripted snippet whose REPL "dies": the whole request answers 500, as the real server does."""


def create_app(script: dict[str, dict] | None = None, *, workers: int = 8, latency: float = 0.0,
               max_wait: float = 60.0, api_key: str | None = None, poll: float = 0.0,
               no_repls_answer: str = "429", line_scheme: str = "relative"):
    """The FastAPI app. ``script`` maps code → ``{"response": …}``, ``{"error": …}`` or ``{"crash": true}``."""
    if no_repls_answer not in ("429", "snippet") or line_scheme not in ("relative", "absolute"):
        raise ValueError("no_repls_answer must be '429' or 'snippet'; line_scheme 'relative' or 'absolute'")

    app = FastAPI(title="kimina-lean-server stand-in (test double, not a proof checker)")
    state = {"script": dict(script or {}), "pool": asyncio.Semaphore(workers), "fault": None, "fault_count": 0,
             "slow_seconds": 5.0, "checked": 0}

    def authorize(request: Request):
        """A FastAPI dependency, so it runs before the body is validated (401 before 422, as the real server)."""
        if api_key is None:
            return
        header = request.headers.get("Authorization")
        if not header:
            raise HTTPException(status_code=401, detail="Missing API key")
        given = header.removeprefix("Bearer ").strip()
        if not hmac.compare_digest(given.encode("utf-8", "surrogateescape"), api_key.encode("utf-8")):
            raise HTTPException(status_code=401, detail="Invalid API key")

    async def answer_at_poll(start: float) -> None:
        # asyncio fires a timer up to its clock resolution early, so work "ending at 0.3 s" may read
        # 0.2999 s and would be answered at once: work within 1 ms of a tick counts as on it and
        # waits for the next tick, as the real server's poll does.
        if poll > 0:
            await asyncio.sleep(poll - (time.perf_counter() - start + 1e-3) % poll)

    async def run_one(sid: str, code: str, timeout: int) -> dict[str, Any]:
        try:
            await asyncio.wait_for(state["pool"].acquire(), timeout=max_wait)
        except TimeoutError:
            if no_repls_answer == "snippet":
                return {"id": sid, "error": "No available REPLs"}
            raise HTTPException(status_code=429, detail="No available REPLs") from None
        start = time.perf_counter()
        try:
            if latency > timeout:
                await asyncio.sleep(timeout)
                return {"id": sid, "time": timeout, "error": f"Lean REPL command timed out in {timeout} seconds"}
            await asyncio.sleep(latency)
            state["checked"] += 1
            scripted = state["script"].get(code)
            if scripted is None:
                return unscripted_result(sid, code, line_scheme)
            if scripted.get("crash"):
                raise _Crash(sid)
            return {"id": sid, "time": time.perf_counter() - start, **scripted}
        finally:
            state["pool"].release()

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    @app.post("/_standin/faults", dependencies=[Depends(authorize)])
    async def faults(body: dict):
        state["fault"], state["fault_count"] = body.get("mode"), int(body.get("count", 1))
        state["slow_seconds"] = float(body.get("slow_seconds", state["slow_seconds"]))
        return {"mode": state["fault"], "count": state["fault_count"]}

    @app.get("/_standin/stats", dependencies=[Depends(authorize)])
    async def stats():
        return {"checked": state["checked"]}

    @app.post("/api/check", dependencies=[Depends(authorize)])
    async def check(req: CheckRequest):
        start = time.perf_counter()
        if state["fault"] and state["fault_count"] > 0:
            state["fault_count"] -= 1
            mode = state["fault"]
            if mode == "500":
                return JSONResponse({"detail": "stand-in fault: internal error"}, status_code=500)
            if mode == "429":
                return JSONResponse({"detail": "No available REPLs"}, status_code=429)
            if mode == "malformed":
                return JSONResponse({"resul": "not what a client expects"}, status_code=200)
            if mode == "slow":
                await asyncio.sleep(state["slow_seconds"])
            if mode == "drop":
                return _DroppedResponse()
        try:
            results = await asyncio.gather(*(run_one(s.id, s.code, req.timeout) for s in req.snippets))
        except _Crash as crash:
            return JSONResponse({"detail": f"REPL for snippet {crash} died"}, status_code=500)
        await answer_at_poll(start)
        return {"results": list(results)}

    @app.post("/verify", dependencies=[Depends(authorize)])
    async def verify(req: VerifyRequest):
        results = await asyncio.gather(*(run_one(str(c.custom_id), c.proof or c.code or "", req.timeout)
                                         for c in req.codes))
        out = []
        for r in results:
            sid = r.pop("id")
            if "error" in r:
                out.append({"custom_id": sid, "error": r["error"]})
            else:
                out.append({"custom_id": sid, "response": {**r["response"], "time": r["time"]}})
        return {"results": out}

    return app


class _DroppedResponse:
    """An ASGI response that promises a body and then closes the connection mid-way."""

    async def __call__(self, scope, receive, send):
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", b"100000")]})
        await send({"type": "http.response.body", "body": b'{"results": [', "more_body": False})


def wait_for_health(url: str, proc, timeout: float, name: str, *, stop, log) -> str:
    """Poll ``url/health`` until it answers 200; a server that exits or stays silent past ``timeout``
    is stopped (``stop()``) and reported in one error with ``log()``'s tail."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            text = log()
            stop()
            raise RuntimeError(f"{name} exited at start-up:\n{text}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return url
        except httpx.HTTPError:
            time.sleep(0.1)
    stop()
    raise RuntimeError(f"{name} did not answer /health within {timeout:g} s")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StandinServer:
    """Start the stand-in in a subprocess on a free localhost port; stop it on exit.

        with StandinServer(latency=0.05, workers=32) as url:
            LeanVerifier(url).verify(codes)
    """

    def __init__(self, script: dict[str, dict] | None = None, *, workers: int = 8, latency: float = 0.0,
                 max_wait: float = 60.0, api_key: str | None = None, script_path: str | Path | None = None,
                 poll: float = 0.0, no_repls_answer: str = "429", line_scheme: str = "relative"):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._script_path = Path(script_path) if script_path else None
        self._script = script
        self.api_key = api_key
        self.args = ["--port", str(self.port), "--workers", str(workers), "--latency", str(latency),
                     "--max-wait", str(max_wait), "--poll", str(poll), "--no-repls-answer", no_repls_answer,
                     "--line-scheme", line_scheme]
        self._env = {"KIMINA_STANDIN_API_KEY": api_key} if api_key else {}
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> str:
        import tempfile


        args = list(self.args)
        if self._script is not None:
            tmp = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
            json.dump(self._script, tmp)
            tmp.close()
            self._script_path = Path(tmp.name)
        if self._script_path:
            args += ["--script", str(self._script_path)]
        import os

        # the key travels in the environment, not argv: argv is readable by every user (ps)
        self.proc = subprocess.Popen([sys.executable, "-m", "kimina_edu.lean.standin", *args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, **self._env})
        return wait_for_health(self.url, self.proc, 30.0, "stand-in server", stop=lambda: self.__exit__(None, None, None),
                               log=lambda: self.proc.stderr.read().decode()[-2000:])

    def fault(self, mode: str, count: int = 1, slow_seconds: float = 5.0) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        httpx.post(self.url + "/_standin/faults", json={"mode": mode, "count": count, "slow_seconds": slow_seconds},
                   headers=headers, timeout=5).raise_for_status()

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--workers", type=int, default=8, help="simulated REPL pool size")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per snippet")
    parser.add_argument("--max-wait", type=float, default=60.0, help="seconds to wait for a free worker before 429")
    parser.add_argument("--script", help="JSON file mapping code to a result ({'response': …} or {'error': …})")
    parser.add_argument("--api-key", help="bearer key (default: $KIMINA_STANDIN_API_KEY; none: no auth)")
    parser.add_argument("--poll", type=float, default=0.0, help="answer at the next tick of this period (real: 0.1)")
    parser.add_argument("--no-repls-answer", choices=["429", "snippet"], default="429",
                        help="pool exhausted: 429 for the request (kimina-lean-server) or per snippet (kimina-ast-server)")
    parser.add_argument("--line-scheme", choices=["relative", "absolute"], default="relative")
    args = parser.parse_args(argv)
    import os

    script = json.loads(Path(args.script).read_text()) if args.script else {}
    app = create_app(script, workers=args.workers, latency=args.latency, max_wait=args.max_wait,
                     api_key=args.api_key or os.environ.get("KIMINA_STANDIN_API_KEY") or None, poll=args.poll,
                     no_repls_answer=args.no_repls_answer, line_scheme=args.line_scheme)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", backlog=4096)


if __name__ == "__main__":
    main()
