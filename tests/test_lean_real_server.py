"""Contract tests against the **real** kimina-lean-server code (PyPI kimina-ast-server 2.1.3) with
the fake Lean REPL: the client, the reward, the feedback and verl's ``compute_score``.

Run by ``make lean-check`` (and ``make test``) inside ``.venv-lean``, where the server is
installed; elsewhere skipped unless ``KIMINA_LEAN_SERVER_PYTHON`` names an interpreter that has it.
"""

from __future__ import annotations

import importlib.metadata
import os
import time

import httpx
import pytest

from kimina_edu.lean.client import LeanVerifier, forget_line_schemes
from kimina_edu.lean.data import load_offline_problems
from kimina_edu.lean.examples import passing_response
from kimina_edu.lean.feedback import build_feedback
from kimina_edu.lean.proof import extract_proof
from kimina_edu.lean.real_server import RealLeanServer


def _has_server() -> bool:
    try:
        importlib.metadata.version("kimina-ast-server")
        return True
    except importlib.metadata.PackageNotFoundError:
        return bool(os.environ.get("KIMINA_LEAN_SERVER_PYTHON"))


pytestmark = pytest.mark.skipif(not _has_server(), reason="the real server lives in .venv-lean: run `make lean-check`")

KEY = "contract-test-key"
H = "import Mathlib\nimport Aesop\n\n"


@pytest.fixture(scope="module")
def server():
    srv = RealLeanServer(repls=2, max_wait=30, latency=0.01, api_key=KEY)
    with srv as url:
        srv.url = url
        yield srv


def verifier(server, **kw) -> LeanVerifier:
    kw = {"repls": 2, "timeout": 5, "retries": 3, "backoff": 0.05, **kw}
    return LeanVerifier(server.url, api_key=KEY, **kw)


def test_one_verdict_per_input_in_order(server):
    codes = [H + "theorem a : True := by\n  trivial",
             H + "theorem b : True := by\n  simp -- fake: error simp made no progress",
             H + "theorem c : True := by\n  sorry",
             H + "theorem d : True := by -- fake: die\n  trivial",
             H + "theorem e : True := by -- fake: empty\n  trivial",
             H + "theorem f : True := by -- fake: sleep 8\n  trivial",
             H + "theorem g : True := by\n  trivial"]
    verdicts = verifier(server).verify(codes)
    statuses = [v.status for v in verdicts]
    assert statuses[:3] == ["valid", "lean_error", "sorry"] and statuses[6] == "valid"
    assert statuses[3] == statuses[4] == "server_error"  # the REPL died / answered nothing: that proof only
    assert statuses[5] == "timeout_error" and "timed out" in verdicts[5].error


def test_auth_is_checked_before_the_body(server):
    assert httpx.post(server.url + "/api/check", json={"snippets": "nonsense"}).status_code == 401
    assert httpx.post(server.url + "/api/check", json={"snippets": "nonsense"},
                      headers={"Authorization": f"Bearer {KEY}"}).status_code == 422
    wrong = LeanVerifier(server.url, api_key="not-the-key", retries=1).verify([H + "theorem a : True := trivial"])[0]
    assert wrong.status == "server_error" and "401" in wrong.error and KEY not in wrong.error
    assert LeanVerifier(server.url, api_key=KEY).health()


def test_headerless_snippets_share_env_0_unless_the_client_adds_a_header(server):
    same = ["theorem dup : 1 + 1 = 2 := by\n  rfl"] * 8
    with pytest.warns(UserWarning, match="no import header"):
        shared = verifier(server).verify(same)
    assert any("already been declared" in str(v.messages) for v in shared)  # the pitfall, reproduced
    headed = verifier(server, header="import Init").verify(same)
    assert all(v.valid for v in headed)


def test_line_scheme_is_probed_and_feedback_marks_the_error_line(server):
    forget_line_schemes()
    v = verifier(server)
    assert v.resolve_line_scheme() == "relative"  # kimina-ast-server keeps 2.0.0's body-relative lines
    code = H + "theorem t (x : Nat) : x = x := by\n  simp\n  omega -- fake: error omega failed\n"
    verdict = v.verify([code])[0]
    assert verdict.status == "lean_error"
    text = build_feedback(code, verdict.response, line_scheme=v.resolve_line_scheme())
    assert "006 >|   omega -- fake: error omega failed" in text
    forget_line_schemes()


def test_score_batch_and_verl_compute_score(server, monkeypatch):
    from kimina_edu.lean.reward import score_batch
    from kimina_edu.verl import reward as verl_reward
    from kimina_edu.verl.data import GROUND_TRUTH, to_verl_row

    problems = [p for p in load_offline_problems() if p.get("illustrative_proof")][:3]
    good = [passing_response(p) for p in problems]
    assert all(extract_proof(r, p["formal_statement"]) for r, p in zip(good, problems))
    rows = score_batch(good + [good[0] + "\ntrailing"], [p["formal_statement"] for p in problems + problems[:1]],
                       verifier(server))
    assert [r["score"] for r in rows] == [1.0, 1.0, 1.0, 0.0] and [r["acc"] for r in rows] == [1.0] * 4

    monkeypatch.setenv("LEAN_SERVER_API_URL", server.url)
    monkeypatch.setenv("LEAN_SERVER_API_KEY", KEY)
    monkeypatch.setenv("LEAN_SERVER_MAX_REPLS", "2")
    verl_reward.reset_verifier()
    try:
        info = to_verl_row(problems[0], "train")["extra_info"]
        ok = verl_reward.compute_score(problems[0]["data_source"], good[0], GROUND_TRUTH, info)
        broken = good[0].replace("```lean4\n", "```lean4\n", 1).rsplit("\n```", 1)[0] + "\n  simp -- fake: error no\n```"
        bad = verl_reward.compute_score(problems[0]["data_source"], broken, GROUND_TRUTH, info)
    finally:
        verl_reward.reset_verifier()
    assert (ok["score"], ok["acc"]) == (1.0, 1.0)
    assert bad["acc"] == 0.0 and bad["tool_feedback"].startswith("# Error 1:")


def test_pool_exhaustion_is_retried_until_a_repl_frees(server):
    srv = RealLeanServer(repls=1, max_wait=1, latency=0.0)
    with srv as url:
        codes = [f"import Init\n\ntheorem t{i} : True := by -- fake: sleep 1.5\n  trivial" for i in range(2)]
        start = time.perf_counter()
        raw = httpx.post(url + "/api/check", json={"snippets": [{"id": str(i), "code": c} for i, c in enumerate(codes)],
                                                   "timeout": 10}, timeout=30).json()["results"]
        assert any(r.get("error") == "No available REPLs" for r in raw), raw  # 200 with a per-snippet error
        verdicts = LeanVerifier(url, repls=1, concurrency=2, batch_size=1, timeout=10, retries=6,
                                backoff=0.5).verify(codes)
        assert all(v.valid for v in verdicts), [(v.status, v.error) for v in verdicts]
        assert time.perf_counter() - start < 60


def test_validity_needs_positive_evidence_on_the_real_server(server):
    """Every rule of ``classify`` against the real server code with the fake REPL. (A REPL answer
    with both ``env`` and ``message`` never reaches a client from kimina-ast-server 2.1.3: its response model
    keeps ``env``/``messages``/``sorries`` and drops ``message``; the client's rule for it is tested against
    a server that forwards it, in test_lean_validity.py.)"""
    codes = [H + "theorem s1 : False := by\n  exact sorryAx _",             # Lean's warning, no sorries entry
             H + "theorem s3 : False := by\n  sorry\n#check Nat",             # a trailing command after the proof
             H + "theorem s4 : True := by\n  trivial\ntheorem s5 : False := by\n  admit",  # admit, which the REPL hides
             H + "theorem s6 : True := by\n  trivial\n#eval 1",              # trailing info only: still a proof
             H + "theorem s7 : True := by\n  trivial -- a comment that says sorry"]
    verdicts = verifier(server).verify(codes)
    statuses = [v.status for v in verdicts]
    assert statuses == ["sorry", "sorry", "sorry", "valid", "valid"], \
        [(v.status, v.response) for v in verdicts]


def test_feedback_with_the_clients_header_marks_the_error_line(server):
    # the client adds the header to a header-less proof; feedback is numbered on the code sent
    from kimina_edu.lean.reward import score_batch

    statement = "theorem hm (x : Nat) : x = x := by sorry"
    response = "```lean4\ntheorem hm (x : Nat) : x = x := by\n  simp\n  omega -- fake: error omega failed\n```"
    forget_line_schemes()
    row = score_batch([response], [statement], verifier(server, header="import Mathlib"))[0]
    forget_line_schemes()
    assert row["status"] == "lean_error"
    assert " >|   omega -- fake: error omega failed" in row["feedback"], row["feedback"]
