"""The verifier client against a hostile server: malformed and ambiguous answers, HTTP faults, bad
inputs, echoed secrets, silent or drip-feeding servers, slow DNS and a gzip bomb each get one verdict
per input, none of them ``valid`` unless the server said so unambiguously, within the call's deadline.

Shapes are served by ``httpx.MockTransport`` (the client's HTTP code above the socket is real);
timing faults (drip-fed bodies, silence, slow DNS, a gzip bomb) by a raw asyncio TCP server on
127.0.0.1, so the client's own sockets, resolver and decoder are exercised.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import threading
import time

import httpx
import pytest

from kimina_edu.lean.client import PROBE_CODE, LeanVerifier, forget_line_schemes
from kimina_edu.lean.feedback import SecondTurnCache, build_feedback
from kimina_edu.lean.verdicts import result_problem

OK = {"env": 1}
BAD = {"env": 1, "messages": [{"severity": "error", "pos": {"line": 1, "column": 0},
                               "endPos": {"line": 1, "column": 3}, "data": "type mismatch"}]}
HEADER = "import Init\n\n"


def mock(handler) -> httpx.MockTransport:
    """A transport whose answer to ``/api/check`` is ``handler(snippets) -> (status, body)``."""

    def respond(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/health":
            return httpx.Response(200, json={"status": "ok"})
        snippets = json.loads(request.content)["snippets"]
        status, body = handler(snippets)
        if isinstance(body, (bytes, str)):
            return httpx.Response(status, content=body)
        return httpx.Response(status, json=body)

    return httpx.MockTransport(respond)


def verifier(transport, **kw) -> LeanVerifier:
    kw = {"retries": 2, "backoff": 0.01, "repls": 8, "line_scheme": "absolute", **kw}
    return LeanVerifier("http://lean.test", transport=transport, **kw)


def each(snippets, fn) -> dict:
    return {"results": [{"id": s["id"], "time": 0.1, **fn(s)} for s in snippets]}


CODES = [HEADER + f"theorem t{i} : True := trivial" for i in range(8)]


# ------------------------------------------------------------------ malformed fields, item by item


@pytest.mark.parametrize("bad_response", [
    {"env": 1, "messages": "type mismatch"},
    {"env": 1, "messages": 7},
    {"env": 1, "messages": [None]},
    {"env": 1, "messages": [{"severity": "ERROR", "pos": {"line": 1, "column": 0}, "data": "x"}]},
    {"env": 1, "messages": [{"pos": {"line": 1, "column": 0}, "data": "x"}]},
    {"env": 1, "messages": [{"severity": "error", "pos": {"line": "1", "column": 0}, "data": "x"}]},
    {"env": 1, "sorries": "yes"},
    {},
    {"env": "0"},
    None,
], ids=lambda r: json.dumps(r)[:40])
def test_one_malformed_result_costs_only_its_own_item(bad_response):
    def handler(snippets):
        return 200, each(snippets, lambda s: {"response": bad_response} if s["id"] == "3" else {"response": OK})

    verdicts = verifier(mock(handler)).verify(CODES)
    assert [v.status for v in verdicts] == ["valid"] * 3 + ["server_error"] + ["valid"] * 4
    assert "unrecognised result" in verdicts[3].error


def test_duplicate_ids_are_an_error_not_the_last_answer():
    def handler(snippets):
        body = each(snippets, lambda s: {"response": OK})
        body["results"].insert(0, {"id": "2", "response": BAD})  # an error first, then a valid one
        return 200, body

    verdicts = verifier(mock(handler)).verify(CODES)
    assert verdicts[2].status == "server_error" and "2 results" in verdicts[2].error
    assert all(v.valid for i, v in enumerate(verdicts) if i != 2)


def test_missing_ids_and_non_list_results():
    verdicts = verifier(mock(lambda s: (200, {"results": [{"id": "0", "response": OK}]}))).verify(CODES[:3])
    assert [v.status for v in verdicts] == ["valid", "server_error", "server_error"]
    verdicts = verifier(mock(lambda s: (200, {"results": {"0": OK}}))).verify(CODES[:2])
    assert [v.status for v in verdicts] == ["server_error"] * 2


def test_json_nested_100000_deep_does_not_raise():
    deep = b"[" * 100_000 + b"]" * 100_000
    verdicts = verifier(mock(lambda s: (200, deep))).verify(CODES[:3])
    assert [v.status for v in verdicts] == ["server_error"] * 3 and "RecursionError" in verdicts[0].error


def test_result_problem_accepts_what_the_repl_sends():
    assert result_problem({"id": "1", "response": {"env": 0}}) is None
    assert result_problem({"id": "1", "response": {"message": "Unknown environment."}}) is None
    assert result_problem({"id": "1", "error": "Lean REPL command timed out in 60.0 seconds"}) is None
    assert result_problem({"id": "1", "response": {"env": 2, "messages": [
        {"severity": "info", "pos": {"line": 1, "column": 0}, "endPos": None, "data": "Nat : Type"}],
        "sorries": [{"pos": {"line": 1, "column": 0}, "goal": "⊢ True", "proofState": 0}]}}) is None
    assert result_problem({"id": 1, "response": {"env": 0}}) is not None



# Written as raw text: these answers parse with Python's json module, but no JSON writer (and no REPL)
# sends them — a key given twice (the parser keeps the last one), NaN, a lone surrogate, a bad time.
ERROR_MESSAGE = '{"severity": "error", "pos": {"line": 1, "column": 0}, "data": "type mismatch"}'
UNRECOGNISED_RAW = {
    "messages given twice": '"response": {"env": 1, "messages": [' + ERROR_MESSAGE + '], "messages": []}',
    "response given twice": '"response": {"env": 1, "messages": [' + ERROR_MESSAGE + ']}, "response": {"env": 1}',
    "id given twice": '"id": "9", "response": {"env": 1}',
    "time NaN": '"time": NaN, "response": {"env": 1}',
    "Infinity in an extra field": '"response": {"env": 1, "tactics": Infinity}',
    "time a string": '"time": "fast", "response": {"env": 1}',
    "time true": '"time": true, "response": {"env": 1}',
    "time negative": '"time": -1, "response": {"env": 1}',
    "lone surrogate in an info message": '"response": {"env": 1, "messages": [{"severity": "info", "data": "\\udc80"}]}',
    "lone surrogate in an error message": '"response": {"env": 1, "messages": [{"severity": "error", "data": "\\ud800"}]}',
}


def raw_answer(snippets, bad_fields: str, bad_id: str = "3") -> bytes:
    items = [f'{{"id": "{s["id"]}", {bad_fields}}}' if s["id"] == bad_id else
             f'{{"id": "{s["id"]}", "time": 0.1, "response": {{"env": 1}}}}' for s in snippets]
    return ('{"results": [' + ", ".join(items) + "]}").encode()


@pytest.mark.parametrize("bad_fields", UNRECOGNISED_RAW.values(), ids=UNRECOGNISED_RAW.keys())
def test_an_answer_no_json_writer_sends_is_an_error_for_its_item_alone(bad_fields):
    verdicts = verifier(mock(lambda snippets: (200, raw_answer(snippets, bad_fields)))).verify(CODES)
    assert [v.status for v in verdicts] == ["valid"] * 3 + ["server_error"] + ["valid"] * 4
    assert "unrecognised result" in verdicts[3].error or "no result" in verdicts[3].error
    assert all(isinstance(v.time, float) and v.time >= 0 for v in verdicts if v.valid)
    assert [v.error.encode("utf-8") for v in verdicts if v.error]  # every error line can be printed


def test_results_given_twice_in_one_answer_fail_every_item():
    def handler(snippets):
        body = raw_answer(snippets, '"time": 0.1, "response": {"env": 1}').decode()
        return 200, '{"results": [], ' + body[1:]  # an empty list first, the valid one second

    verdicts = verifier(mock(handler)).verify(CODES[:3])
    assert [v.status for v in verdicts] == ["server_error"] * 3 and "twice" in verdicts[0].error

# ------------------------------------------------------------------ 500, 429, No available REPLs


def test_whole_request_500_is_split_so_one_bad_proof_cannot_fail_its_batch_mates():
    calls = []

    def handler(snippets):
        calls.append(len(snippets))
        if any("t5" in s["code"] for s in snippets):
            return 500, {"detail": "REPL died"}
        return 200, each(snippets, lambda s: {"response": OK})

    verdicts = verifier(mock(handler), batch_size=8).verify(CODES)
    assert [v.status for v in verdicts] == ["valid"] * 5 + ["server_error"] + ["valid"] * 2
    assert calls[0] == 8 and len(calls) < 16


def test_per_snippet_no_available_repls_is_retried():
    seen = {}

    def handler(snippets):
        def answer(s):
            seen[s["id"]] = seen.get(s["id"], 0) + 1
            return {"error": "No available REPLs"} if seen[s["id"]] == 1 and s["id"] in "135" else {"response": OK}
        return 200, each(snippets, answer)

    verdicts = verifier(mock(handler), retries=3).verify(CODES)
    assert all(v.valid for v in verdicts) and seen["1"] == 2 and seen["0"] == 1


def test_no_available_repls_forever_is_a_server_error():
    verdicts = verifier(mock(lambda s: (200, each(s, lambda _: {"error": "No available REPLs"})))).verify(CODES[:2])
    assert [v.status for v in verdicts] == ["server_error"] * 2 and "No available REPLs" in verdicts[0].error


# ------------------------------------------------------------------ inputs


def test_lone_surrogate_fails_alone():
    codes = list(CODES[:4])
    codes[1] = HEADER + "theorem bad : True := by\n  exact \ud800"
    verdicts = verifier(mock(lambda s: (200, each(s, lambda _: {"response": OK})))).verify(codes + [None])
    assert [v.status for v in verdicts] == ["valid", "input_error", "valid", "valid", "input_error"]


def test_headerless_proofs_get_the_header_or_a_warning():
    sent = []

    def handler(snippets):
        sent.extend(s["code"] for s in snippets)
        return 200, each(snippets, lambda _: {"response": OK})

    with pytest.warns(UserWarning, match="no import header"):
        verifier(mock(handler)).verify(["theorem a : True := trivial"])
    verifier(mock(handler), header="import Init").verify(["theorem a : True := trivial"])
    assert sent == ["theorem a : True := trivial", "import Init\n\ntheorem a : True := trivial"]


# ------------------------------------------------------------------ secrets


def test_server_text_echoing_the_key_is_redacted_and_never_cached():
    key = "sk-very-secret-token"

    def handler(snippets):
        return 200, each(snippets, lambda s: {"error": f"auth backend failed for Bearer {key}"})

    v = verifier(mock(handler), api_key=key)
    verdict = v.verify(CODES[:1])[0]
    assert verdict.status == "server_error" and key not in verdict.error and "***" in verdict.error
    assert key not in repr(v) and key not in repr(verdict)
    feedback = build_feedback(CODES[0], verdict.response)
    assert key not in feedback and feedback.startswith("# System Error:")
    cache = SecondTurnCache()
    assert cache.add([{"role": "user", "content": "q"}], "r", feedback) == "system_error" and len(cache) == 0


def test_401_text_is_redacted():
    key = "sk-another-secret"
    verdict = verifier(mock(lambda s: (401, {"detail": f"bad key {key}"})), api_key=key).verify(CODES[:1])[0]
    assert verdict.status == "server_error" and "401" in verdict.error and key not in verdict.error


# ------------------------------------------------------------------ line scheme probe


@pytest.mark.parametrize("line, scheme", [(3, "absolute"), (1, "relative"), (2, None)])
def test_line_scheme_probe(line, scheme):
    forget_line_schemes()

    def handler(snippets):
        assert snippets[0]["code"] == PROBE_CODE
        return 200, each(snippets, lambda _: {"response": {"env": 1, "messages": [
            {"severity": "info", "pos": {"line": line, "column": 0}, "endPos": None, "data": "Nat : Type"}]}})

    v = LeanVerifier("http://probe.test", transport=mock(handler), retries=1)
    if scheme is None:
        with pytest.warns(UserWarning, match="line numbering"):
            assert v.resolve_line_scheme() == "relative"
        assert "http://probe.test" not in LeanVerifier._schemes
    else:
        assert v.resolve_line_scheme() == scheme
        assert LeanVerifier("http://probe.test", transport=mock(lambda s: 1 / 0)).resolve_line_scheme() == scheme
    assert LeanVerifier("http://probe.test", line_scheme="absolute").resolve_line_scheme() == "absolute"
    forget_line_schemes()


# ------------------------------------------------------------------ deadlines, with real sockets


class RawServer:
    """A TCP server on 127.0.0.1 whose every connection is handled by ``handler(reader, writer)``."""

    def __init__(self, handler):
        self.handler = handler
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        asyncio.set_event_loop(self.loop)

        async def start():
            self.server = await asyncio.start_server(self._guarded, "127.0.0.1", 0)
            self.port = self.server.sockets[0].getsockname()[1]
            self.ready.set()

        self.loop.run_until_complete(start())
        self.loop.run_forever()

    async def _guarded(self, reader, writer):
        try:
            await self.handler(reader, writer)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    def __enter__(self) -> str:
        self.thread.start()
        self.ready.wait(5)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc):
        async def shutdown():
            self.server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


async def read_request(reader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next((int(ln.split(b":")[1]) for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length")), 0)
    await reader.readexactly(length)


async def drip(reader, writer):
    await read_request(reader)
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
    for _ in range(100_000):
        writer.write(b" ")
        await writer.drain()
        await asyncio.sleep(0.5)


async def silent(reader, writer):
    await read_request(reader)
    await asyncio.sleep(3600)


def test_drip_fed_body_is_cut_by_the_request_timeout():
    with RawServer(drip) as url:
        start = time.perf_counter()
        verdicts = LeanVerifier(url, http_timeout=1, retries=2, backoff=0.01, line_scheme="absolute").verify(CODES[:4])
        took = time.perf_counter() - start
    assert [v.status for v in verdicts] == ["timeout_error"] * 4
    assert took < 30  # a hang catcher: an uncut drip never ends


def test_a_server_that_never_answers_costs_about_retries_times_the_timeout_not_every_wave():
    with RawServer(silent) as url:
        start = time.perf_counter()
        verdicts = LeanVerifier(url, http_timeout=1, retries=2, backoff=0.01, batch_size=1, concurrency=2,
                                line_scheme="absolute").verify(CODES * 2)
        took = time.perf_counter() - start
    assert len(verdicts) == 16 and not any(v.valid for v in verdicts)
    assert {v.status for v in verdicts} <= {"timeout_error", "server_error"}
    assert took < 12, took  # 8 waves x 2 tries x 1 s = 16 s without the breaker (about 2 s with it, idle)


def test_overall_deadline_holds_whatever_the_per_request_timeouts():
    with RawServer(silent) as url:
        start = time.perf_counter()
        verdicts = LeanVerifier(url, http_timeout=30, retries=3, line_scheme="absolute").verify(CODES, deadline=1)
        took = time.perf_counter() - start
    assert [v.status for v in verdicts] == ["timeout_error"] * 8 and "deadline" in verdicts[0].error
    assert took < 15  # without the deadline: 3 tries x 30 s


def test_slow_dns_is_abandoned_at_the_deadline(monkeypatch):
    real = socket.getaddrinfo

    def slow(host, *args, **kwargs):
        if host == "slow-dns.test":
            time.sleep(20)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", slow)
    v = LeanVerifier("http://slow-dns.test:8000", retries=1, line_scheme="absolute")
    start = time.perf_counter()
    verdicts = v.verify(CODES[:2], deadline=1)
    assert [x.status for x in verdicts] == ["timeout_error"] * 2
    assert v.health(deadline=1) is False
    assert time.perf_counter() - start < 15  # without the deadline: 20 s of DNS, twice


def test_response_size_cap_stops_a_gzip_bomb():
    bomb = gzip.compress(b"[" + b" " * (200 * 2**20) + b"]", compresslevel=9)

    async def serve(reader, writer):
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
                     + f"Content-Length: {len(bomb)}\r\n\r\n".encode() + bomb)
        await writer.drain()

    with RawServer(serve) as url:
        start = time.perf_counter()
        verdicts = LeanVerifier(url, max_response_bytes=2**20, retries=1, line_scheme="absolute").verify(CODES[:2])
        took = time.perf_counter() - start
    assert [v.status for v in verdicts] == ["server_error"] * 2 and "over" in verdicts[0].error
    assert took < 30  # a hang catcher (inflating 200 MB per try would take far longer on a busy machine)
