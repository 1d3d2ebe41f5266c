"""Chapter 7 — a verifier client for kimina-lean-server that fails closed: a verdict for every proof, always.

    verifier = LeanVerifier(repls=8)               # LEAN_SERVER_API_URL / LEAN_SERVER_API_KEY
    verdicts = verifier.verify([code1, code2, …])  # same order, one Verdict each

What "fails closed" means here, case by case (each has a test in ``tests/test_lean_client_hostile.py``):

- **Unknown shapes are errors, item by item.** Every result is checked against the REPL's
  answer shape (``env`` an integer, ``messages`` a list of objects whose ``severity`` is exactly
  ``"error"``/``"warning"``/``"info"``, …). A result that does not fit, an id answered twice, an
  id not answered, JSON the parser rejects — each is ``server_error`` for the items it concerns,
  never ``valid``; the other items keep their verdicts. So is what Python's parser accepts but
  no JSON writer sends: a key given twice, ``NaN``/``Infinity``, a lone surrogate.
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

The pieces: :mod:`kimina_edu.lean.verdicts` (what one result means), :mod:`kimina_edu.lean.transport`
(one HTTP exchange within its deadline); this module batches, retries and keeps order.
"""

from __future__ import annotations

import asyncio
import math
import os
import warnings
from typing import Any, ClassVar

from kimina_edu.lean.transport import (
    BadAnswer,
    Call,
    Malformed,
    TooLarge,
    Unanswered,
    exchange,
    open_client,
    preview,
)
from kimina_edu.lean.verdicts import (
    KeyGivenTwice,
    Verdict,
    classify,
    has_header,
    is_int,
    is_seconds,
    result_problem,
)
from kimina_edu.retry import backoff_delay
from kimina_edu.runtime import run_sync

__all__ = ["NO_REPLS", "PROBE_CODE", "PROBE_LINES", "LeanVerifier", "Verdict", "classify", "forget_line_schemes"]

NO_REPLS = "No available REPLs"
# A header the REPL imports in well under a second; ``#check Nat`` sits on line 3 of the code, line 1 of the body.
PROBE_CODE = "import Init\n\n#check Nat"
PROBE_LINES = {3: "absolute", 1: "relative"}

Items = list[tuple[str, str]]  # (id, code as sent)


def _default_repls() -> int:
    """``LEAN_SERVER_MAX_REPLS`` when set, else the server's own default on this machine (cpus − 1)."""
    env = os.environ.get("LEAN_SERVER_MAX_REPLS", "").strip()
    return int(env) if env.isdigit() and int(env) > 0 else max((os.cpu_count() or 2) - 1, 1)


def _check_settings(counts: dict[str, Any], seconds: dict[str, Any], line_scheme: str | None) -> None:
    """One clear ``ValueError`` for the first setting out of range."""
    for name, value in counts.items():
        if not (value is None and name == "concurrency") and not (is_int(value) and value >= 1):
            raise ValueError(f"LeanVerifier: {name} must be a whole number >= 1 (timeout in seconds), got {value!r}")
    for name, value in seconds.items():
        if value is None and name != "backoff":
            continue
        if not is_seconds(value, zero_ok=name == "backoff"):
            raise ValueError(f"LeanVerifier: {name} must be a finite number of seconds "
                             f"{'>= 0' if name == 'backoff' else '> 0'}, got {value!r}")
    if line_scheme not in (None, "relative", "absolute"):
        raise ValueError(f"line_scheme must be 'relative', 'absolute' or None (probe the server); got {line_scheme!r}")


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
        repls = _default_repls() if repls is None else repls
        _check_settings({"timeout": timeout, "batch_size": batch_size, "retries": retries, "repls": repls,
                         "concurrency": concurrency, "max_response_bytes": max_response_bytes},
                        {"http_timeout": http_timeout, "deadline": deadline, "backoff": backoff}, line_scheme)
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
        and body timeout on a pool of ``repls``, plus ``retries`` whole request timeouts."""
        return math.ceil(n / self.repls) * 2 * self.timeout + self.retries * self.http_timeout + 30

    def _client(self):
        return open_client(self.url, self._api_key, connections=self.concurrency, http_timeout=self.http_timeout,
                           transport=self.transport)

    async def _request(self, client, method: str, path: str, payload: dict | None) -> tuple[int, Any]:
        """``(status, parsed JSON or Malformed/TooLarge)``; raises ``Unanswered`` when no complete answer came."""
        return await exchange(client, method, path, payload, http_timeout=self.http_timeout,
                              max_bytes=self.max_response_bytes)

    # -- one batch ----------------------------------------------------------------------------

    def _fail(self, call: Call, items: Items, status: str, why: str) -> None:
        for sid, code in items:
            call.verdicts.setdefault(sid, Verdict(sid, status, error=self._redact(why), code=code))

    def _accept(self, call: Call, items: Items, answer: Any) -> Items:
        """Verdicts from a 200 answer; returns the items to retry ("No available REPLs")."""
        by_id = _results_by_id(answer)
        retry = []
        for sid, code in items:
            verdict = self._verdict(sid, code, by_id.get(sid, []))
            if verdict is None:
                retry.append((sid, code))
            else:
                call.verdicts[sid] = verdict
        return retry

    def _verdict(self, sid: str, code: str, found: list) -> Verdict | None:
        """The verdict for one item from the results that name its id; ``None``: retry it (no free REPL)."""
        if len(found) != 1:
            why = "the server returned no result for this id" if not found else \
                f"the server returned {len(found)} results for this id"
            return Verdict(sid, "server_error", error=why)
        problem = result_problem(found[0])  # before redacting: a redacted copy no longer marks a key given twice
        try:
            r = self._redact_value(found[0])
        except RecursionError:  # one result nested past Python's stack: that item alone fails
            return Verdict(sid, "server_error", error="unrecognised result: nested too deeply to read", code=code)
        if problem is not None:
            return Verdict(sid, "server_error", error=f"unrecognised result: {self._redact(problem)}", response=r,
                           code=code)
        if r.get("error") is not None and r["error"].strip() == NO_REPLS:
            return None
        resp = r.get("response") or {}
        return Verdict(sid, classify(r, code=code), messages=list(resp.get("messages", [])),
                       time=r.get("time") if isinstance(r.get("time"), (int, float)) else None,
                       error=r.get("error"), response=r, code=code)

    async def _settle(self, client, sem: asyncio.Semaphore, call: Call, items: Items, status: int,
                      body: Any) -> tuple[Items, str] | None:
        """What one answer settles: ``None`` when every item has its verdict (or went to a split
        half), else the items still to retry and why."""
        text = preview(body)
        if isinstance(body, TooLarge):
            return self._fail(call, items, "server_error", f"response over {self.max_response_bytes} bytes")
        if status == 401:
            return self._fail(call, items, "server_error", f"HTTP 401 from the server: {text} (set LEAN_SERVER_API_KEY)")
        if status == 500 and len(items) > 1:  # one snippet's REPL died: halve, down to the proof that fails
            half = len(items) // 2
            await asyncio.gather(self._check(client, sem, call, items[:half]),
                                 self._check(client, sem, call, items[half:]))
            return None
        if status == 429 or status >= 500:
            return items, f"HTTP {status}: {text}"
        if status != 200:
            return self._fail(call, items, "server_error", f"HTTP {status}: {text}")  # retrying cannot help
        if isinstance(body, Malformed):
            return items, f"malformed response: {body.why}"
        try:
            return self._accept(call, items, body), f"HTTP 200 with per-proof error {NO_REPLS!r}"
        except BadAnswer as exc:
            return items, f"malformed response: {exc}"

    async def _check(self, client, sem: asyncio.Semaphore, call: Call, items: Items) -> None:
        """Verdicts for one batch: up to ``retries`` requests, with backoff between them."""
        last, timed_out, attempt = "no attempt made", False, 0
        while items and attempt < self.retries:
            payload = {"snippets": [{"id": s, "code": c} for s, c in items], "timeout": self.timeout, "reuse": True}
            try:
                async with sem:
                    if call.broken:  # checked after the wait for a slot: the breaker may have tripped meanwhile
                        return self._fail(call, items, "server_error", call.broken)
                    status, body = await self._request(client, "POST", "/api/check", payload)
            except Unanswered as exc:
                call.unanswered(str(exc))
                last, timed_out = str(exc), exc.timed_out
            else:
                call.answered()
                timed_out = False
                if (left := await self._settle(client, sem, call, items, status, body)) is None:
                    return None
                items, last = left
            attempt += 1
            if items and attempt < self.retries:
                # spread (0.5, 1.0): a wait never exceeds its nominal delay, so 10 s bounds every wait
                await asyncio.sleep(backoff_delay(attempt - 1, self.backoff, cap=10.0, spread=(0.5, 1.0)))
        if items:
            self._fail(call, items, "timeout_error" if timed_out else "server_error", last)
        return None

    # -- the public calls ----------------------------------------------------------------------

    def _prepare(self, codes: list[Any], call: Call) -> Items:
        """The items to send: bad inputs get ``input_error`` here; header-less proofs get ``header``."""
        items, headerless = [], 0
        for sid, code in zip(call.ids, codes):
            if (why := _input_problem(code)) is not None:
                call.verdicts[sid] = Verdict(sid, "input_error", error=why)
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

    async def _run_batches(self, call: Call, items: Items, budget: float) -> None:
        """Every batch of ``items`` under one deadline of ``budget`` seconds; late batches are cancelled."""
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
                    warnings.warn(f"verifier batch failed unexpectedly: {type(exc).__name__}: {exc}", stacklevel=3)

    async def averify(self, codes: list[Any], *, deadline: float | None = None) -> list[Verdict]:
        """One :class:`Verdict` per code, in input order, within ``deadline`` seconds (default
        :meth:`default_deadline`); proofs unanswered at the deadline get ``timeout_error``."""
        if deadline is not None and not is_seconds(deadline):
            raise ValueError(f"verify: deadline must be a finite number of seconds > 0, got {deadline!r}")
        if not codes:
            return []
        codes = list(codes)
        n_batches = math.ceil(len(codes) / self.batch_size)
        call = Call([str(i) for i in range(len(codes))], self.retries * min(self.concurrency, n_batches))
        items = self._prepare(codes, call)
        budget = deadline if deadline is not None else self.deadline or self.default_deadline(len(items))
        if items:
            await self._run_batches(call, items, budget)
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
        except (Unanswered, TimeoutError):
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


def _input_problem(code: Any) -> str | None:
    """Why ``code`` cannot be sent (not a string, not valid UTF-8), or ``None``."""
    if not isinstance(code, str):
        return f"a proof must be a str, got {type(code).__name__}"
    try:
        code.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"not valid UTF-8 ({exc.reason} at {exc.start}); not sent"
    return None


def _results_by_id(answer: Any) -> dict[str, list]:
    """The answer's results grouped by their string ids; :class:`BadAnswer` when it has no one ``results`` list."""
    if not isinstance(answer, dict) or not isinstance(answer.get("results"), list):
        raise BadAnswer("the answer has no 'results' list")
    if isinstance(answer, KeyGivenTwice):
        raise BadAnswer(f"the answer gives the key {ascii(answer.twice)[:60]} twice")
    by_id: dict[str, list] = {}
    for r in answer["results"]:
        rid = r.get("id") if isinstance(r, dict) else None
        if isinstance(rid, str):
            by_id.setdefault(rid, []).append(r)
    return by_id
