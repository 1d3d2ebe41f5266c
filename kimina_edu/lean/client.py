"""Chapter 7 — a verifier client for kimina-lean-server that fails closed: a verdict for every proof, always.

    verifier = LeanVerifier(repls=8)               # LEAN_SERVER_API_URL / LEAN_SERVER_API_KEY
    verdicts = verifier.verify([code1, code2, …])  # same order, one Verdict each

What "fails closed" means here, case by case (each has a test in ``tests/test_lean_client_hostile.py``):

- **Unknown shapes are errors, item by item.** Every result is checked against the REPL's
  answer shape (``env`` an integer, ``messages`` a list of objects whose ``severity`` is exactly
  ``"error"``/``"warning"``/``"info"``, …). A result that does not fit, an id answered twice, an
  id not answered, JSON the parser rejects — each is ``server_error`` for the items it concerns,
  never ``valid``; the other items keep their verdicts.
- **One overall deadline per call** (``deadline``; by default sized to the worst honest case,
  every proof using its whole Lean timeout). It covers DNS (resolved on a daemon thread, so a
  hung resolver is abandoned, not waited for), connecting, and bodies dripped byte by byte
  (each request also has its own ``http_timeout`` over the whole exchange, not per read).
  When consecutive requests keep failing without any answer, the rest of the call is
  abandoned (``server_error``) instead of waiting out wave after wave.
- **A response size cap** (``max_response_bytes``, decoded bytes; compression is not requested).
- **One bad proof cannot fail its batch-mates:** a whole-request HTTP 500 (kimina-lean-server
  answers 500 when one snippet's REPL dies) splits the batch in halves and retries each, down
  to the proof that fails. 429 and per-snippet "No available REPLs" (kimina-ast-server) are
  retried with backoff.
- **Sized to the pool:** at most ``2 × repls`` proofs in flight by default, and ``http_timeout``
  covers the queue wait that follows from it (a request may wait for a free REPL, then run a
  header and a body, each with ``timeout``).
- **Inputs are checked before sending:** a non-string or a string that is not valid UTF-8
  (a lone surrogate) gets ``input_error`` alone; a proof without an ``import`` header gets the
  ``header`` you pass, or a warning (header-less proofs share the REPL's environment 0 — a
  repeated theorem name fails "already declared").
- **Secrets:** the API key is never part of a verdict — server text echoing it is redacted.

**Line numbers.** kimina-lean-server after PR #56 reports absolute lines; 2.0.0-era servers and
kimina-ast-server report lines relative to the body after the header, and both call themselves
"2.0.0". :meth:`LeanVerifier.resolve_line_scheme` asks once per server (``#check Nat`` on a
known line after an ``import Init`` header) unless ``line_scheme=`` was given.

**kimina-client.** The verdict taxonomy is kimina-client's (``ReplResponse.analyze()``).
Its PyPI release 0.2.1 fails to import on Python 3.11 (pydantic rejects ``typing.TypedDict``
before 3.12; fixed upstream in PR #63, unreleased) and imports the undeclared ``pygments``.
We import it with ``typing.TypedDict`` temporarily pointed at ``typing_extensions.TypedDict``
— the upstream fix, applied from outside — and use its ``analyze()`` on results that passed
our shape check; otherwise :func:`classify` applies the same rules itself.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ipaddress
import json
import math
import os
import re
import socket
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kimina_edu.retry import backoff_delay
from kimina_edu.runtime import run_sync

SEVERITIES = ("error", "warning", "info")
NO_REPLS = "No available REPLs"
# A header the REPL imports in well under a second; ``#check Nat`` sits on line 3 of the code, line 1 of the body.
PROBE_CODE = "import Init\n\n#check Nat"
PROBE_LINES = {3: "absolute", 1: "relative"}


@dataclass
class Verdict:
    """One proof's outcome. ``response`` is the server's result dict (for feedback)."""

    id: str
    status: str
    messages: list[dict] = field(default_factory=list)
    time: float | None = None
    error: str | None = None
    response: dict | None = None
    code: str | None = None  # the code as sent (with the header the client added): what line numbers count

    @property
    def valid(self) -> bool:
        return self.status == "valid"


def _import_kimina_client():
    """``(module, None)`` when kimina-client imports (with the 3.11 shim), else ``(None, reason)``."""
    import typing

    try:
        import typing_extensions
    except ImportError:  # pragma: no cover - typing_extensions ships with pydantic
        typing_extensions = None
    original = typing.TypedDict
    try:
        if typing_extensions is not None:
            typing.TypedDict = typing_extensions.TypedDict
        import kimina_client

        return kimina_client, None
    except Exception as exc:  # noqa: BLE001 — any import failure means "use our classifier"
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    finally:
        typing.TypedDict = original


KIMINA_CLIENT, KIMINA_CLIENT_IMPORT_ERROR = _import_kimina_client()


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_seconds(x: Any, *, zero_ok: bool = False) -> bool:
    return (isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
            and (x >= 0 if zero_ok else x > 0))


def _position_problem(pos: Any, name: str) -> str | None:
    if pos is None and name == "endPos":
        return None
    if not isinstance(pos, dict) or not _is_int(pos.get("line")) or not _is_int(pos.get("column")):
        return f"{name} is not {{line: int, column: int}}"
    return None


def result_problem(result: Any) -> str | None:
    """Why ``result`` is not a shape the client recognises, or ``None`` when it is.

    Recognised: ``{"id": str, "error": non-empty str, …}`` or ``{"id": str, "response": R, …}``
    with R either ``{"message": str}`` (the REPL's own error) or ``{"env": int, "messages"?:
    [M], "sorries"?: [object], …}``; M has ``severity`` in :data:`SEVERITIES`, ``data`` a
    string and, if present, ``pos`` (and ``endPos``, which may be ``null``) as ``{line, column}``
    integers (the REPL's JSON, ``REPL/JSON.lean``).
    """
    if not isinstance(result, dict):
        return "result is not an object"
    if not isinstance(result.get("id"), str):
        return "result id is not a string"
    error = result.get("error")
    if error is not None:
        if not isinstance(error, str) or not error.strip():
            return "error is not a non-empty string"
        return None
    response = result.get("response")
    if not isinstance(response, dict):
        return "neither a response object nor an error"
    if "message" in response:
        return None if isinstance(response["message"], str) else "REPL message is not a string"
    if not _is_int(response.get("env")):
        return "response has no integer env"
    messages = response.get("messages", [])
    if not isinstance(messages, list):
        return "messages is not a list"
    for m in messages:
        if not isinstance(m, dict):
            return "a message is not an object"
        if m.get("severity") not in SEVERITIES:
            return f"a message has severity {m.get('severity')!r}"
        if not isinstance(m.get("data"), str):
            return "a message has no text"
        for key in ("pos", "endPos"):
            if key in m and (problem := _position_problem(m[key], key)):
                return problem
    sorries = response.get("sorries", [])
    if not isinstance(sorries, list) or not all(isinstance(s, dict) for s in sorries):
        return "sorries is not a list of objects"
    return None


SORRY_WARNING = "declaration uses 'sorry'"  # Lean's warning, also for ``exact sorryAx _`` (no ``sorries`` entry)
_SORRY_WORDS = re.compile(r"(?<![\w.'])(?:sorry|sorryAx|admit)(?![\w'])")


def _without_comments(code: str) -> str:
    """``code`` with Lean comments blanked (``--`` to the end of the line; ``/- … -/``, nested), in
    one pass. An unclosed ``/-`` comments out the rest (Lean then fails the file anyway)."""
    out, i, n, depth = [], 0, len(code), 0
    while i < n:
        if depth:
            j = code.find("-/", i)
            k = code.find("/-", i)
            if j == -1:
                break
            if k != -1 and k < j:
                depth, i = depth + 1, k + 2
            else:
                depth, i = depth - 1, j + 2
            continue
        j, k = code.find("--", i), code.find("/-", i)
        stops = [x for x in (j, k) if x != -1]
        if not stops:
            out.append(code[i:])
            break
        cut = min(stops)
        out.append(code[i:cut])
        if cut == j:
            end = code.find("\n", j)
            i = n if end == -1 else end
        else:
            depth, i = 1, k + 2
    return " ".join(out)


def mentions_sorry(code: Any) -> bool:
    """Does the code (outside comments) use ``sorry``, ``sorryAx`` or ``admit``? Lean reports
    ``sorry`` in ``sorries`` but ``sorryAx`` only as a warning, and a server may drop either; the
    code itself is evidence no server answer can hide. Linear time."""
    return isinstance(code, str) and _SORRY_WORDS.search(_without_comments(code)) is not None


def _our_status(result: dict[str, Any], code: str | None) -> str:
    error = result.get("error")
    if error:
        return "timeout_error" if "timed out" in error else "server_error"
    response = result["response"]
    if "message" in response:  # the REPL's own error, with or without an env
        return "repl_error"
    messages = response.get("messages", [])
    if any(m["severity"] == "error" for m in messages):
        return "lean_error"
    if response.get("sorries") or any(SORRY_WARNING in m["data"] for m in messages) or mentions_sorry(code):
        return "sorry"
    return "valid"


def classify(result: dict[str, Any], *, code: str | None = None, use_kimina_client: bool = True) -> str:
    """kimina-client's ``SnippetStatus`` for one ``/api/check`` result — ``valid`` only on positive
    evidence; ``server_error`` for a shape :func:`result_problem` rejects.

    timeout_error: ``error`` says "timed out"; server_error: any other ``error``;
    repl_error: the REPL answered ``{"message": …}`` (even beside an ``env``); lean_error: a
    message with severity "error"; sorry: non-empty ``sorries``, Lean's "declaration uses
    'sorry'" in any message, or ``sorry``/``sorryAx``/``admit`` in ``code`` (the code sent); else
    valid. This is the one rule (the reward and the stand-in ask it); kimina-client's own
    ``analyze()`` is consulted and may only make a verdict stricter, never turn one ``valid``.
    """
    if result_problem(result) is not None:
        return "server_error"
    ours = _our_status(result, code)
    if ours == "valid" and use_kimina_client and KIMINA_CLIENT is not None:
        try:
            theirs = KIMINA_CLIENT.ReplResponse.model_validate(result).analyze().status.value
        except Exception:  # noqa: BLE001 — a shape kimina-client rejects: our rules stand
            return ours
        return theirs
    return ours


def has_header(code: str) -> bool:
    """Does the server's header split (``split_snippet``) find an ``import`` line?"""
    for line in code.splitlines():
        stripped = line.strip()
        if stripped.startswith("import "):
            return True
        if stripped:
            return False
    return False


# ---------------------------------------------------------------------------- DNS with a deadline


def _resolve_on_daemon_thread(host: str, port: int) -> concurrent.futures.Future:
    future: concurrent.futures.Future = concurrent.futures.Future()

    def work():
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            future.set_result(infos[0][4][0])
        except BaseException as exc:  # noqa: BLE001 — handed to the waiting coroutine
            if not future.cancelled():
                future.set_exception(exc)

    threading.Thread(target=work, name=f"resolve {host}", daemon=True).start()
    return future


class _DaemonDnsBackend:
    """An httpcore network backend that resolves names on a daemon thread.

    httpx resolves on a worker thread the event loop waits for when it shuts down, so a DNS
    lookup that hangs for 20 s holds ``verify()`` for 20 s whatever its deadline. Here the
    coroutine stops waiting when it is cancelled and the thread is left to finish alone. The
    connection itself (and TLS, whose server name is the original host) is httpcore's.
    """

    def __init__(self, inner):
        self._inner = inner

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        try:
            ipaddress.ip_address(host)
            address = host
        except ValueError:
            address = await asyncio.wrap_future(_resolve_on_daemon_thread(host, port))
        return await self._inner.connect_tcp(address, port, timeout=timeout, local_address=local_address,
                                             socket_options=socket_options)

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):  # pragma: no cover
        return await self._inner.connect_unix_socket(path, timeout=timeout, socket_options=socket_options)

    async def sleep(self, seconds):  # pragma: no cover
        await self._inner.sleep(seconds)


# ---------------------------------------------------------------------------- the client


class _Call:
    """Per-``verify()`` state: verdicts so far and the unresponsive-server breaker."""

    def __init__(self, ids: list[str], breaker_limit: int):
        self.verdicts: dict[str, Verdict] = {}
        self.ids = ids
        self.failures_in_a_row = 0
        self.breaker_limit = breaker_limit
        self.broken: str | None = None

    def answered(self) -> None:
        self.failures_in_a_row = 0

    def unanswered(self, why: str) -> None:
        self.failures_in_a_row += 1
        if self.failures_in_a_row >= self.breaker_limit and self.broken is None:
            self.broken = f"server unresponsive: {self.failures_in_a_row} requests in a row got no answer (last: {why})"


class LeanVerifier:
    """Batched, concurrent, retrying client for kimina-lean-server's ``/api/check``.

    ``repls``: the server's pool size (``LEAN_SERVER_MAX_REPLS``; read from that variable when
    not given, else the server's own default on this machine, cpu_count − 1). ``concurrency``
    (requests in flight) defaults to ``⌈2·repls / batch_size⌉`` so the pool never idles and no
    proof waits more than about one turn. ``http_timeout`` defaults to what a request can
    honestly take: the turns it may wait plus its own header and body runs, each ``timeout``.
    """

    _schemes: ClassVar[dict[str, str]] = {}  # line scheme per server URL, probed once per process

    def __init__(self, url: str | None = None, api_key: str | None = None, *, timeout: int = 60,
                 repls: int | None = None, concurrency: int | None = None, batch_size: int = 8,
                 retries: int = 3, backoff: float = 1.0, http_timeout: float | None = None,
                 deadline: float | None = None, max_response_bytes: int = 64 * 2**20,
                 header: str | None = None, line_scheme: str | None = None, transport=None):
        self.url = (url or os.environ.get("LEAN_SERVER_API_URL") or "http://localhost:8000").rstrip("/")
        self._api_key = api_key or os.environ.get("LEAN_SERVER_API_KEY") or os.environ.get("LEANSERVER_API_KEY")
        if repls is None:
            env = os.environ.get("LEAN_SERVER_MAX_REPLS", "").strip()
            repls = int(env) if env.isdigit() and int(env) > 0 else max((os.cpu_count() or 2) - 1, 1)
        for name, value in (("timeout", timeout), ("batch_size", batch_size), ("retries", retries), ("repls", repls),
                            ("concurrency", concurrency), ("max_response_bytes", max_response_bytes)):
            if not (value is None and name == "concurrency") and not (_is_int(value) and value >= 1):
                raise ValueError(f"LeanVerifier: {name} must be a whole number >= 1 (timeout in seconds), got {value!r}")
        for name, value in (("http_timeout", http_timeout), ("deadline", deadline), ("backoff", backoff)):
            if value is None and name != "backoff":
                continue
            if not _is_seconds(value, zero_ok=name == "backoff"):
                raise ValueError(f"LeanVerifier: {name} must be a finite number of seconds "
                                 f"{'>= 0' if name == 'backoff' else '> 0'}, got {value!r}")
        if line_scheme not in (None, "relative", "absolute"):
            raise ValueError(f"line_scheme must be 'relative', 'absolute' or None (probe the server); got {line_scheme!r}")
        self.timeout, self.batch_size, self.repls = timeout, batch_size, repls
        self.concurrency = concurrency or max(1, math.ceil(2 * repls / batch_size))
        self.retries, self.backoff = retries, backoff
        turns = math.ceil(self.concurrency * batch_size / repls)
        self.http_timeout = http_timeout if http_timeout is not None else turns * 2 * timeout + 10
        self.deadline, self.max_response_bytes = deadline, max_response_bytes
        self.header, self._line_scheme, self.transport = header, line_scheme, transport

    def __repr__(self) -> str:  # never the key
        return (f"LeanVerifier({self.url!r}, repls={self.repls}, concurrency={self.concurrency}, "
                f"batch_size={self.batch_size}, timeout={self.timeout}, api_key={'set' if self._api_key else 'unset'})")

    # -- helpers ----------------------------------------------------------------------------

    def _redact(self, text: str) -> str:
        key = self._api_key
        return text.replace(key, "***") if key and len(key) >= 4 else text

    def _redact_value(self, value: Any) -> Any:
        if not self._api_key:
            return value
        if isinstance(value, str):
            return self._redact(value)
        if isinstance(value, list):
            return [self._redact_value(v) for v in value]
        if isinstance(value, dict):
            return {k: self._redact_value(v) for k, v in value.items()}
        return value

    def default_deadline(self, n: int) -> float:
        """Seconds one ``verify()`` of ``n`` proofs may take: every proof using its whole header
        and body timeout on a pool of ``repls``, plus one full retry round."""
        return math.ceil(n / self.repls) * 2 * self.timeout + self.retries * self.http_timeout + 30

    def _client(self):
        import httpx

        headers = {"Accept-Encoding": "identity"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
        transport = self.transport
        if transport is None:
            transport = httpx.AsyncHTTPTransport(limits=limits)
            pool = getattr(transport, "_pool", None)
            if pool is not None and hasattr(pool, "_network_backend"):
                pool._network_backend = _DaemonDnsBackend(pool._network_backend)
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=self.http_timeout, limits=limits,
                                 transport=transport)

    async def _request(self, client, method: str, path: str, payload: dict | None) -> tuple[int, Any]:
        """``(status, parsed JSON or None)``; raises ``_Unanswered`` when no complete answer came."""
        import httpx

        try:
            async with asyncio.timeout(self.http_timeout):
                async with client.stream(method, path, json=payload) as resp:
                    body, size = [], 0
                    async for chunk in resp.aiter_bytes():
                        size += len(chunk)
                        if size > self.max_response_bytes:
                            return resp.status_code, _TooLarge(size)
                        body.append(chunk)
                    raw = b"".join(body)
        except TimeoutError:
            raise _Unanswered(f"request got no complete answer within {self.http_timeout:g} s", timed_out=True) from None
        except httpx.HTTPError as exc:
            raise _Unanswered(f"connection error: {type(exc).__name__}: {exc}") from None
        except OSError as exc:  # DNS failures surface from the resolver thread as OSError
            raise _Unanswered(f"connection error: {type(exc).__name__}: {exc}") from None
        try:
            return resp.status_code, json.loads(raw)
        except (ValueError, RecursionError) as exc:
            return resp.status_code, _Malformed(f"{type(exc).__name__}: {str(exc)[:100]}", raw[:200])

    # -- one batch ----------------------------------------------------------------------------

    def _fail(self, call: _Call, items: list[tuple[str, str]], status: str, why: str) -> None:
        for sid, code in items:
            call.verdicts.setdefault(sid, Verdict(sid, status, error=self._redact(why), code=code))

    def _accept(self, call: _Call, items: list[tuple[str, str]], results: Any) -> list[tuple[str, str]]:
        """Verdicts from a 200 answer; returns the items to retry ("No available REPLs")."""
        if not isinstance(results, dict) or not isinstance(results.get("results"), list):
            raise _BadAnswer("the answer has no 'results' list")
        by_id: dict[str, list] = {}
        for r in results["results"]:
            rid = r.get("id") if isinstance(r, dict) else None
            if isinstance(rid, str):
                by_id.setdefault(rid, []).append(r)
        retry = []
        for sid, code in items:
            found = by_id.get(sid, [])
            if len(found) != 1:
                why = "the server returned no result for this id" if not found else \
                    f"the server returned {len(found)} results for this id"
                call.verdicts[sid] = Verdict(sid, "server_error", error=why)
                continue
            try:
                r = self._redact_value(found[0])
            except RecursionError:  # one result nested past Python's stack: that item alone fails
                call.verdicts[sid] = Verdict(sid, "server_error", error="unrecognised result: nested too deeply to read",
                                             code=code)
                continue
            problem = result_problem(r)
            if problem is not None:
                call.verdicts[sid] = Verdict(sid, "server_error", error=f"unrecognised result: {problem}", response=r,
                                             code=code)
                continue
            if r.get("error") is not None and r["error"].strip() == NO_REPLS:
                retry.append((sid, code))
                continue
            resp = r.get("response") or {}
            call.verdicts[sid] = Verdict(sid, classify(r, code=code), messages=list(resp.get("messages", [])),
                                         time=r.get("time") if isinstance(r.get("time"), (int, float)) else None,
                                         error=r.get("error"), response=r, code=code)
        return retry

    async def _check(self, client, sem: asyncio.Semaphore, call: _Call, items: list[tuple[str, str]]) -> None:
        last, timed_out = "no attempt made", False
        attempt = 0
        while items and attempt < self.retries:
            payload = {"snippets": [{"id": s, "code": c} for s, c in items], "timeout": self.timeout, "reuse": True}
            try:
                async with sem:
                    if call.broken:  # checked after the wait for a slot: the breaker may have tripped meanwhile
                        return self._fail(call, items, "server_error", call.broken)
                    status, body = await self._request(client, "POST", "/api/check", payload)
            except _Unanswered as exc:
                call.unanswered(str(exc))
                last, timed_out = str(exc), exc.timed_out
            else:
                call.answered()
                timed_out = False
                text = _preview(body)
                if isinstance(body, _TooLarge):
                    return self._fail(call, items, "server_error", f"response over {self.max_response_bytes} bytes")
                if status == 401:
                    return self._fail(call, items, "server_error",
                                      f"HTTP 401 from the server: {text} (set LEAN_SERVER_API_KEY)")
                if status == 500 and len(items) > 1:
                    half = len(items) // 2
                    await asyncio.gather(self._check(client, sem, call, items[:half]),
                                         self._check(client, sem, call, items[half:]))
                    return None
                if status == 429 or status >= 500:
                    last = f"HTTP {status}: {text}"
                elif status != 200:
                    return self._fail(call, items, "server_error", f"HTTP {status}: {text}")  # retrying cannot help
                elif isinstance(body, _Malformed):
                    last = f"malformed response: {body.why}"
                else:
                    try:
                        items = self._accept(call, items, body)
                        last = f"HTTP 200 with per-proof error {NO_REPLS!r}"
                    except _BadAnswer as exc:
                        last = f"malformed response: {exc}"
            attempt += 1
            if items and attempt < self.retries:
                # spread (0.5, 1.0): a wait never exceeds its nominal delay, so 10 s bounds every wait
                await asyncio.sleep(backoff_delay(attempt - 1, self.backoff, cap=10.0, spread=(0.5, 1.0)))
        if items:
            self._fail(call, items, "timeout_error" if timed_out else "server_error", last)
        return None

    # -- the public calls ----------------------------------------------------------------------

    def _prepare(self, codes: list[Any], call: _Call) -> list[tuple[str, str]]:
        items, headerless = [], 0
        for sid, code in zip(call.ids, codes):
            if not isinstance(code, str):
                call.verdicts[sid] = Verdict(sid, "input_error", error=f"a proof must be a str, got {type(code).__name__}")
                continue
            try:
                code.encode("utf-8")
            except UnicodeEncodeError as exc:
                call.verdicts[sid] = Verdict(sid, "input_error", error=f"not valid UTF-8 ({exc.reason} at {exc.start}); "
                                             "not sent")
                continue
            if not has_header(code):
                if self.header:
                    code = self.header.rstrip("\n") + "\n\n" + code
                else:
                    headerless += 1
            items.append((sid, code))
        if headerless:
            warnings.warn(f"{headerless} of {len(codes)} proofs have no import header: on kimina-lean-server they share "
                          "one REPL environment, so a theorem name used twice fails 'already declared'. Pass "
                          "LeanVerifier(header='import Init') (or the problem's own imports).", stacklevel=3)
        return items

    async def averify(self, codes: list[Any], *, deadline: float | None = None) -> list[Verdict]:
        """One :class:`Verdict` per code, in input order, within ``deadline`` seconds (default
        :meth:`default_deadline`); proofs unanswered at the deadline get ``timeout_error``."""
        if deadline is not None and not _is_seconds(deadline):
            raise ValueError(f"verify: deadline must be a finite number of seconds > 0, got {deadline!r}")
        if not codes:
            return []
        codes = list(codes)
        n_batches = math.ceil(len(codes) / self.batch_size)
        call = _Call([str(i) for i in range(len(codes))], self.retries * min(self.concurrency, n_batches))
        items = self._prepare(codes, call)
        budget = deadline if deadline is not None else self.deadline or self.default_deadline(len(items))
        if items:
            sem = asyncio.Semaphore(self.concurrency)
            async with self._client() as client:
                tasks = [asyncio.create_task(self._check(client, sem, call, items[k: k + self.batch_size]))
                         for k in range(0, len(items), self.batch_size)]
                done, pending = await asyncio.wait(tasks, timeout=budget)
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                for task in done:
                    if not task.cancelled() and task.exception() is not None:
                        exc = task.exception()
                        warnings.warn(f"verifier batch failed unexpectedly: {type(exc).__name__}: {exc}", stacklevel=2)
        for sid in call.ids:
            call.verdicts.setdefault(sid, Verdict(sid, "timeout_error",
                                                  error=f"no verdict within the call's deadline of {budget:g} s"))
        return [call.verdicts[sid] for sid in call.ids]

    def verify(self, codes: list[Any], *, deadline: float | None = None) -> list[Verdict]:
        """Synchronous wrapper (works inside Jupyter's running event loop too)."""
        return run_sync(self.averify(list(codes), deadline=deadline))

    async def ahealth(self, deadline: float = 10.0) -> bool:
        """``GET /health`` answered ``{"status": "ok"}`` within ``deadline`` seconds."""
        try:
            async with asyncio.timeout(deadline), self._client() as client:
                status, body = await self._request(client, "GET", "/health", None)
                return status == 200 and isinstance(body, dict) and body.get("status") == "ok"
        except (_Unanswered, TimeoutError):
            return False

    def health(self, deadline: float = 10.0) -> bool:
        return run_sync(self.ahealth(deadline))

    async def aprobe_line_scheme(self, deadline: float | None = None) -> str | None:
        """Ask the server which line numbering it reports: ``"absolute"``, ``"relative"``, or
        ``None`` when the answer says neither (server down, unexpected answer)."""
        probe = LeanVerifier(self.url, self._api_key, timeout=self.timeout, repls=self.repls, concurrency=1,
                             batch_size=1, retries=self.retries, backoff=self.backoff,
                             http_timeout=self.http_timeout, line_scheme="relative", transport=self.transport)
        verdict = (await probe.averify([PROBE_CODE], deadline=deadline or 2 * self.http_timeout))[0]
        lines = {m["pos"]["line"] for m in verdict.messages if m.get("severity") == "info" and "pos" in m}
        schemes = {PROBE_LINES[ln] for ln in lines if ln in PROBE_LINES}
        return schemes.pop() if len(schemes) == 1 else None

    def resolve_line_scheme(self) -> str:
        """The line scheme to number feedback with: the one given, else probed once per server
        URL (cached for the process), else ``"relative"`` with a warning (not cached)."""
        if self._line_scheme:
            return self._line_scheme
        if self.url not in LeanVerifier._schemes:
            scheme = run_sync(self.aprobe_line_scheme())
            if scheme is None:
                warnings.warn(f"could not tell which line numbering {self.url} reports (probe failed); feedback "
                              "windows assume body-relative lines — pass line_scheme= to be sure", stacklevel=2)
                return "relative"
            LeanVerifier._schemes[self.url] = scheme
        return LeanVerifier._schemes[self.url]


def forget_line_schemes() -> None:
    """Drop every probed line scheme (a server was restarted or replaced at the same URL)."""
    LeanVerifier._schemes.clear()


class _Unanswered(Exception):
    """No complete HTTP answer (timeout, connection, DNS)."""

    def __init__(self, message: str, *, timed_out: bool = False):
        super().__init__(message)
        self.timed_out = timed_out


class _BadAnswer(Exception):
    """A 200 answer without the ``results`` list."""


def _preview(body: Any) -> str:
    """The first 200 characters of an answer, for error lines; never raises (a deep answer is named, not dumped)."""
    if isinstance(body, _Malformed):
        return body.text
    if isinstance(body, _TooLarge):
        return str(body)
    try:
        return json.dumps(body)[:200]
    except (RecursionError, ValueError, TypeError):
        return "(an answer nested too deeply to show)"


@dataclass
class _Malformed:
    why: str
    raw: bytes

    @property
    def text(self) -> str:
        return self.raw.decode("utf-8", "replace")


@dataclass
class _TooLarge:
    size: int

    def __str__(self) -> str:
        return f"response over the size cap (read {self.size} bytes)"
