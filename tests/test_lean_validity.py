"""Validity by positive evidence: a proof is ``valid`` only when the server's answer shows
no error, no ``sorry`` in any form (a ``sorries`` entry, Lean's "declaration uses 'sorry'" warning —
how ``exact sorryAx _`` arrives — or ``sorry``/``sorryAx``/``admit`` in the code sent), and no REPL
message. The same rule decides in the client, the reward and the stand-in (one place: ``classify``)."""

from __future__ import annotations

import json

import httpx
import pytest

from kimina_edu.lean.client import LeanVerifier
from kimina_edu.lean.feedback import build_feedback
from kimina_edu.lean.reward import score_batch
from kimina_edu.lean.standin import StandinServer, unscripted_result
from kimina_edu.lean.verdicts import classify, mentions_sorry

HEADER = "import Init\n\n"
SORRY_WARNING = {"severity": "warning", "pos": {"line": 1, "column": 8}, "endPos": {"line": 1, "column": 11},
                 "data": "declaration uses 'sorry'"}


def mock(handler) -> httpx.MockTransport:
    def respond(request: httpx.Request) -> httpx.Response:
        snippets = json.loads(request.content)["snippets"]
        return httpx.Response(200, json={"results": [{"id": s["id"], "time": 0.1, **handler(s)} for s in snippets]})

    return httpx.MockTransport(respond)


def verifier(handler, **kw) -> LeanVerifier:
    kw = {"retries": 2, "backoff": 0.01, "repls": 8, "line_scheme": "relative", **kw}
    return LeanVerifier("http://lean.test", transport=mock(handler), **kw)


@pytest.mark.parametrize("response, status", [
    ({"env": 3, "message": "Lean REPL crashed: segmentation fault"}, "repl_error"),
    ({"env": 3, "messages": [], "message": "Lean REPL crashed"}, "repl_error"),
    ({"env": 3, "messages": [SORRY_WARNING]}, "sorry"),  # exact sorryAx _: the warning, no sorries entry
    ({"env": 3, "messages": [{**SORRY_WARNING, "severity": "info"}]}, "sorry"),
    ({"env": 3, "messages": [{**SORRY_WARNING, "data": "declaration uses 'sorry'\nnote: …"}]}, "sorry"),
    ({"env": 3, "messages": [{"severity": "warning", "data": "unused variable `h`"}]}, "valid"),
    ({"env": 3}, "valid"),
])
def test_only_positive_evidence_is_valid(response, status):
    result = {"id": "0", "time": 0.1, "response": response}
    assert classify(result) == status
    assert classify(result, use_kimina_client=False) == status


@pytest.mark.parametrize("code, found", [
    ("theorem t : False := by\n  exact sorryAx _", True),
    ("theorem t : False := by\n  sorry", True),
    ("theorem t : False := by\n  admit", True),
    ("theorem t : False := by\n  exact (sorry : False)", True),
    ("theorem t : True := by\n  trivial -- no sorry here", False),   # a comment is not code
    ("/- sorry -/ theorem t : True := by\n  trivial", False),
    ("theorem sorryless : True := by\n  trivial", False),
    ("theorem t : True := by\n  exact admitted_lemma", False),
    ("", False),
])
def test_sorry_in_the_code_sent(code, found):
    assert mentions_sorry(code) is found


def test_code_with_sorry_is_never_valid_even_if_the_server_says_nothing():
    verdicts = verifier(lambda s: {"response": {"env": 1}}).verify(
        [HEADER + "theorem t : False := by\n  exact sorryAx _", HEADER + "theorem u : True := by\n  trivial"])
    assert [v.status for v in verdicts] == ["sorry", "valid"]


def test_mentions_sorry_is_linear_on_huge_input():
    import time

    start = time.perf_counter()
    assert mentions_sorry("-" * 2_000_000 + "\n" + "/-" * 200_000) is False
    assert time.perf_counter() - start < 5  # a hang catcher: quadratic would take minutes


def test_standin_never_calls_unscripted_code_valid():
    code = HEADER + "theorem foo : False := by sorry\n#check Nat"
    result = unscripted_result("0", code)
    assert classify(result) != "valid"
    with StandinServer({}, workers=2) as url:
        verdicts = LeanVerifier(url, line_scheme="relative").verify([code, HEADER + "#check Nat"])
    assert verdicts[0].status != "valid"
    assert verdicts[1].status == "valid"  # a probe of #check lines only still answers its info message
    assert verdicts[1].messages and verdicts[1].messages[0]["severity"] == "info"


def test_absolute_line_numbers_with_the_clients_header_mark_the_error_line():
    # the client adds "import Mathlib" to a header-less proof; a server numbering absolute lines counts it
    header = "import Mathlib"
    proof = "theorem t (x : Nat) : x = x := by\n  simp\n  omega\n  rfl\n  rfl\n  rfl"

    def handler(snippet):
        lines = snippet["code"].splitlines()
        n = next(i for i, line in enumerate(lines, 1) if line.strip() == "omega")
        return {"response": {"env": 1, "messages": [{"severity": "error", "pos": {"line": n, "column": 2},
                                                     "endPos": {"line": n, "column": 7}, "data": "omega failed"}]}}

    v = verifier(handler, header=header, line_scheme="absolute")
    statement = "theorem t (x : Nat) : x = x := by sorry"
    response = f"```lean4\n{proof}\n```"
    row = score_batch([response], [statement], v, line_scheme="absolute")[0]
    assert row["status"] == "lean_error"
    assert " >|   omega" in row["feedback"], row["feedback"]
    verdict = v.verify([proof])[0]
    assert verdict.code is not None and verdict.code.startswith(header)
    assert " >|   omega" in build_feedback(verdict.code, verdict.response, line_scheme="absolute")


def test_deeply_nested_result_fails_only_its_own_item():
    # deep enough to break a recursive walk of the parsed answer, shallow enough for json.loads to parse
    depth = 700
    deep = "[" * depth + '"x"' + "]" * depth

    def respond(request: httpx.Request) -> httpx.Response:
        snippets = json.loads(request.content)["snippets"]
        rows = [f'{{"id": "{s["id"]}", "time": 0.1, "response": {{"env": 1'
                + (f', "extra": {deep}' if s["id"] == "0" else "") + "}}" for s in snippets]
        return httpx.Response(200, content=('{"results": [' + ", ".join(rows) + "]}").encode())

    v = LeanVerifier("http://lean.test", transport=httpx.MockTransport(respond), retries=2, backoff=0.01, repls=8,
                     line_scheme="relative", api_key="secret-key-1234")
    verdicts = v.verify([HEADER + f"theorem t{i} : True := trivial" for i in range(4)], deadline=30)
    assert verdicts[0].status == "server_error", verdicts[0]
    assert [x.status for x in verdicts[1:]] == ["valid"] * 3


@pytest.mark.parametrize("kwargs", [{"timeout": -1}, {"timeout": 0}, {"timeout": 1.5}, {"timeout": "60"},
                                    {"http_timeout": 0}, {"deadline": -3}, {"max_response_bytes": 0},
                                    {"backoff": -1}, {"repls": True}])
def test_verifier_settings_out_of_range_are_one_line(kwargs):
    with pytest.raises(ValueError) as err:
        LeanVerifier("http://lean.test", **kwargs)
    assert "\n" not in str(err.value) and next(iter(kwargs)) in str(err.value)
