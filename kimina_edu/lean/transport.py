"""The verifier client's HTTP exchange: one request, its whole answer or a clear reason why not.

What the client (:mod:`kimina_edu.lean.client`) needs from the network, and nothing else:

- **DNS on a daemon thread** (:class:`DaemonDnsBackend`): a hung resolver is abandoned at the
  call's deadline, not waited for.
- **One timeout over the whole exchange** (:func:`exchange`): connecting, sending, and a body
  dripped byte by byte all count against ``http_timeout``, not per read.
- **A size cap on the decoded body** (compression is not requested; a gzip bomb stops at the cap).
- **Strict JSON** (:func:`parse_answer`): an object that gives a key twice is marked
  (:class:`~kimina_edu.lean.verdicts.KeyGivenTwice`) rather than read as its last value.
- **Per-call state** (:class:`Call`): verdicts so far and the breaker that abandons a server
  which keeps not answering.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ipaddress
import json
import socket
import threading
from dataclasses import dataclass
from typing import Any

from kimina_edu.lean.verdicts import KeyGivenTwice, Verdict


class Unanswered(Exception):
    """No complete HTTP answer (timeout, connection, DNS)."""

    def __init__(self, message: str, *, timed_out: bool = False):
        super().__init__(message)
        self.timed_out = timed_out


class BadAnswer(Exception):
    """A 200 answer without the ``results`` list."""


@dataclass
class Malformed:
    """An answer the JSON parser rejected: why, and its first bytes (for the error line)."""

    why: str
    raw: bytes

    @property
    def text(self) -> str:
        return self.raw.decode("utf-8", "replace")


@dataclass
class TooLarge:
    """An answer cut off at the size cap."""

    size: int

    def __str__(self) -> str:
        return f"response over the size cap (read {self.size} bytes)"


def preview(body: Any) -> str:
    """The first 200 characters of an answer, for error lines; never raises (a deep answer is named, not dumped)."""
    if isinstance(body, Malformed):
        return body.text
    if isinstance(body, TooLarge):
        return str(body)
    try:
        return json.dumps(body)[:200]
    except (RecursionError, ValueError, TypeError):
        return "(an answer nested too deeply to show)"


class Call:
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


# ---------------------------------------------------------------------------- DNS with a deadline


def resolve_on_daemon_thread(host: str, port: int) -> concurrent.futures.Future:
    """The first address of ``host``, looked up on a daemon thread nobody has to wait for."""
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


class DaemonDnsBackend:
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
            address = await asyncio.wrap_future(resolve_on_daemon_thread(host, port))
        return await self._inner.connect_tcp(address, port, timeout=timeout, local_address=local_address,
                                             socket_options=socket_options)

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):  # pragma: no cover
        return await self._inner.connect_unix_socket(path, timeout=timeout, socket_options=socket_options)

    async def sleep(self, seconds):  # pragma: no cover
        await self._inner.sleep(seconds)


# ---------------------------------------------------------------------------- one exchange


def open_client(url: str, api_key: str | None, *, connections: int, http_timeout: float, transport=None):
    """An ``httpx.AsyncClient`` for ``url``: bearer key, no compression, ``connections`` at once,
    DNS on daemon threads (unless a ``transport`` is given, as tests do)."""
    import httpx

    headers = {"Accept-Encoding": "identity"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    if transport is None:
        transport = httpx.AsyncHTTPTransport(limits=limits)
        pool = getattr(transport, "_pool", None)
        if pool is not None and hasattr(pool, "_network_backend"):
            pool._network_backend = DaemonDnsBackend(pool._network_backend)
    return httpx.AsyncClient(base_url=url, headers=headers, timeout=http_timeout, limits=limits, transport=transport)


def _object(pairs: list[tuple[str, Any]]) -> dict:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    seen: set[str] = set()
    twice = next(k for k, _ in pairs if k in seen or seen.add(k))
    return KeyGivenTwice(pairs, twice)


def parse_answer(raw: bytes) -> Any:
    """The parsed answer (objects with a repeated key marked), or :class:`Malformed`; never raises."""
    try:
        return json.loads(raw, object_pairs_hook=_object)
    except (ValueError, RecursionError) as exc:
        return Malformed(f"{type(exc).__name__}: {str(exc)[:100]}", raw[:200])


async def _read_capped(resp, max_bytes: int) -> bytes | TooLarge:
    body, size = [], 0
    async for chunk in resp.aiter_bytes():
        size += len(chunk)
        if size > max_bytes:
            return TooLarge(size)
        body.append(chunk)
    return b"".join(body)


async def exchange(client, method: str, path: str, payload: dict | None, *, http_timeout: float,
                   max_bytes: int) -> tuple[int, Any]:
    """``(status, parsed JSON, Malformed or TooLarge)``; raises :class:`Unanswered` when no
    complete answer came within ``http_timeout`` seconds."""
    import httpx

    try:
        async with asyncio.timeout(http_timeout):
            async with client.stream(method, path, json=payload) as resp:
                raw = await _read_capped(resp, max_bytes)
    except TimeoutError:
        raise Unanswered(f"request got no complete answer within {http_timeout:g} s", timed_out=True) from None
    except httpx.HTTPError as exc:
        raise Unanswered(f"connection error: {type(exc).__name__}: {exc}") from None
    except OSError as exc:  # DNS failures surface from the resolver thread as OSError
        raise Unanswered(f"connection error: {type(exc).__name__}: {exc}") from None
    if isinstance(raw, TooLarge):
        return resp.status_code, raw
    return resp.status_code, parse_answer(raw)
