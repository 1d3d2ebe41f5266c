"""Chapter 7 — a verifier client for kimina-lean-server: a verdict for every proof, always.

    verifier = LeanVerifier()                      # LEAN_SERVER_API_URL / LEAN_SERVER_API_KEY
    verdicts = verifier.verify([code1, code2, …])  # same order, one Verdict each

Proofs go out in batches of ``batch_size`` to ``POST /api/check``, at most ``concurrency``
requests in flight. 429, 5xx, timeouts, dropped connections and malformed JSON are retried
with exponential backoff; a batch that still fails gets ``server_error`` (or
``timeout_error``) verdicts — a proof is never lost, duplicated or left without a verdict,
and a call finishes within about ``(timeout + 10 s) × retries`` plus the backoff.

**kimina-client.** The verdict taxonomy is kimina-client's (``ReplResponse.analyze()``).
Its PyPI release 0.2.1 fails to import on Python 3.11 (pydantic rejects ``typing.TypedDict``
before 3.12; fixed upstream in PR #63, unreleased) and imports the undeclared ``pygments``.
We import it with ``typing.TypedDict`` temporarily pointed at ``typing_extensions.TypedDict``
— the upstream fix, applied from outside — and use its ``analyze()`` when that works; if the
package is missing or still fails, :func:`classify` applies the same rules itself. The HTTP
side is ours either way: kimina-client's ``check()`` returns results in completion order and
has no per-item verdict guarantee, which a trainer needs.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any

from kimina_edu.runtime import run_sync


@dataclass
class Verdict:
    """One proof's outcome. ``response`` is the server's result dict (for feedback)."""

    id: str
    status: str
    messages: list[dict] = field(default_factory=list)
    time: float | None = None
    error: str | None = None
    response: dict | None = None

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


def classify(result: dict[str, Any], *, use_kimina_client: bool = True) -> str:
    """kimina-client's ``SnippetStatus`` for one ``/api/check`` result.

    timeout_error: ``error`` says "timed out"; server_error: any other ``error``;
    repl_error: the REPL answered ``{"message": …}``; lean_error: a message with severity
    "error"; sorry: non-empty ``sorries`` (not the warning text); else valid.
    """
    if use_kimina_client and KIMINA_CLIENT is not None:
        try:
            return KIMINA_CLIENT.ReplResponse.model_validate(result).analyze().status.value
        except Exception:  # noqa: BLE001 — a shape kimina-client rejects gets the same rules below
            return classify(result, use_kimina_client=False)
    error = result.get("error")
    if error:
        return "timeout_error" if "timed out" in str(error) else "server_error"
    response = result.get("response")
    if not isinstance(response, dict):
        return "server_error"
    if "message" in response:
        return "repl_error"
    if any(m.get("severity") == "error" for m in response.get("messages") or []):
        return "lean_error"
    if response.get("sorries"):
        return "sorry"
    return "valid"


class LeanVerifier:
    """Batched, concurrent, retrying client for kimina-lean-server's ``/api/check``."""

    def __init__(self, url: str | None = None, api_key: str | None = None, *, timeout: int = 60,
                 concurrency: int = 32, batch_size: int = 8, retries: int = 3, backoff: float = 1.0,
                 http_timeout: float | None = None, transport=None):
        self.url = (url or os.environ.get("LEAN_SERVER_API_URL") or "http://localhost:8000").rstrip("/")
        self.api_key = api_key or os.environ.get("LEAN_SERVER_API_KEY") or os.environ.get("LEANSERVER_API_KEY")
        if batch_size < 1 or concurrency < 1 or retries < 1:
            raise ValueError("batch_size, concurrency and retries must all be >= 1")
        self.timeout, self.concurrency, self.batch_size = timeout, concurrency, batch_size
        self.retries, self.backoff = retries, backoff
        self.http_timeout = http_timeout if http_timeout is not None else timeout + 10
        self.transport = transport  # tests pass an httpx transport; None means the network

    def _client(self):
        import httpx

        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=self.http_timeout, limits=limits,
                                 transport=self.transport)

    async def _post_batch(self, client, batch: list[tuple[str, str]]) -> dict[str, dict] | str:
        """``{id: result}`` on success, else the last error text after every retry."""
        import httpx

        payload = {"snippets": [{"id": i, "code": c} for i, c in batch], "timeout": self.timeout, "reuse": True}
        last = "no attempt made"
        for attempt in range(self.retries):
            try:
                resp = await client.post("/api/check", json=payload)
                if resp.status_code == 401:
                    return f"HTTP 401 from the server: {resp.text[:200]} (set LEAN_SERVER_API_KEY)"
                if resp.status_code == 429 or resp.status_code >= 500:
                    last = f"HTTP {resp.status_code}: {resp.text[:200]}"
                elif resp.status_code != 200:
                    return f"HTTP {resp.status_code}: {resp.text[:200]}"  # 4xx: retrying cannot help
                else:
                    results = resp.json()["results"]
                    return {str(r["id"]): r for r in results if isinstance(r, dict) and "id" in r}
            except httpx.TimeoutException as exc:
                last = f"request timed out after {self.http_timeout}s ({type(exc).__name__})"
            except httpx.HTTPError as exc:
                last = f"connection error: {type(exc).__name__}: {exc}"
            except (ValueError, KeyError, TypeError) as exc:
                last = f"malformed response: {type(exc).__name__}: {exc}"
            if attempt + 1 < self.retries:
                await asyncio.sleep(min(10.0, self.backoff * 2**attempt) * (0.5 + random.random() / 2))
        return last

    async def averify(self, codes: list[str]) -> list[Verdict]:
        """One :class:`Verdict` per code, in input order."""
        if not codes:
            return []
        ids = [str(i) for i in range(len(codes))]
        batches = [list(zip(ids[k : k + self.batch_size], codes[k : k + self.batch_size]))
                   for k in range(0, len(codes), self.batch_size)]
        verdicts: dict[str, Verdict] = {}
        sem = asyncio.Semaphore(self.concurrency)

        async def run(batch):
            async with sem:
                start = time.perf_counter()
                outcome = await self._post_batch(client, batch)
            for sid, _ in batch:
                if isinstance(outcome, str):
                    status = "timeout_error" if "timed out" in outcome else "server_error"
                    verdicts[sid] = Verdict(sid, status, error=outcome, time=time.perf_counter() - start)
                elif sid not in outcome:
                    verdicts[sid] = Verdict(sid, "server_error", error="the server returned no result for this id")
                else:
                    r = outcome[sid]
                    resp = r.get("response") if isinstance(r.get("response"), dict) else {}
                    verdicts[sid] = Verdict(sid, classify(r), messages=list(resp.get("messages") or []),
                                            time=r.get("time"), error=r.get("error"), response=r)

        async with self._client() as client:
            await asyncio.gather(*(run(b) for b in batches))
        return [verdicts[i] for i in ids]

    def verify(self, codes: list[str]) -> list[Verdict]:
        """Synchronous wrapper (works inside Jupyter's running event loop too)."""
        return run_sync(self.averify(list(codes)))

    async def ahealth(self) -> bool:
        import httpx

        try:
            async with self._client() as client:
                resp = await client.get("/health")
                return resp.status_code == 200 and resp.json().get("status") == "ok"
        except (httpx.HTTPError, ValueError):
            return False

    def health(self) -> bool:
        return run_sync(self.ahealth())
