"""The verifier client against the stand-in server: every proof gets exactly one verdict."""

import time

import httpx
import pytest

from kimina_edu.lean import verdicts as verdicts_module
from kimina_edu.lean.client import LeanVerifier, forget_line_schemes
from kimina_edu.lean.data import load_offline_problems
from kimina_edu.lean.examples import passing_response
from kimina_edu.lean.feedback import (
    FILTERED_FEEDBACK,
    VALID_FEEDBACK,
    SecondTurnCache,
    absolute_line,
    build_feedback,
    code_window,
    recipe_window,
)
from kimina_edu.lean.proof import extract_proof
from kimina_edu.lean.reward import lean_reward, score_batch
from kimina_edu.lean.standin import STANDIN_NOTICE, StandinServer
from kimina_edu.lean.verdicts import Verdict, classify

P = load_offline_problems()[0]
VALID = {"response": {"env": 0, "messages": []}}
ERR = {"response": {"env": 0, "messages": [{"severity": "error", "pos": {"line": 2, "column": 2}, "data": "linarith failed"}]}}


@pytest.fixture(scope="module")
def server():
    script = {"good": VALID, "bad": ERR, "sorry": {"response": {"env": 0, "sorries": [{"goal": "⊢ True"}]}},
              "timeout": {"error": "Lean REPL command timed out in 60 seconds"}, "repl": {"response": {"message": "boom"}}}
    srv = StandinServer(script, workers=8, latency=0.01, max_wait=2.0)
    with srv as url:
        srv.url = url
        yield srv


def test_statuses_in_input_order(server):
    codes = ["good", "bad", "sorry", "timeout", "repl", "unknown"] * 3
    verdicts = LeanVerifier(server.url, batch_size=4, concurrency=3).verify(codes)
    assert [v.status for v in verdicts] == ["valid", "lean_error", "sorry", "timeout_error", "repl_error", "lean_error"] * 3
    assert STANDIN_NOTICE in verdicts[5].messages[0]["data"]
    assert len({v.id for v in verdicts}) == len(codes)


def test_health_and_empty_batch(server):
    assert LeanVerifier(server.url).health() is True
    assert LeanVerifier("http://127.0.0.1:9").health() is False
    assert LeanVerifier(server.url).verify([]) == []


@pytest.mark.parametrize("mode, count, expect", [
    ("500", 1, "valid"), ("429", 2, "valid"), ("malformed", 1, "valid"), ("drop", 1, "valid"),
    ("500", 1000, "server_error"), ("malformed", 10, "server_error"), ("drop", 10, "server_error"),
])
def test_faults_retry_then_give_every_proof_a_verdict(server, mode, count, expect):
    server.fault(mode, count)
    verdicts = LeanVerifier(server.url, batch_size=8, concurrency=1, retries=3, backoff=0.01).verify(["good"] * 5)
    server.fault("none", 0)
    assert [v.status for v in verdicts] == [expect] * 5
    if expect == "server_error":
        assert verdicts[0].error


def test_slow_server_times_out_within_budget(server):
    server.fault("slow", 5, slow_seconds=3)
    start = time.perf_counter()
    verdicts = LeanVerifier(server.url, timeout=1, http_timeout=0.5, retries=2, backoff=0.01).verify(["good"] * 3)
    server.fault("none", 0)
    assert [v.status for v in verdicts] == ["timeout_error"] * 3
    assert time.perf_counter() - start < 5.5  # without the timeout: 2 tries x 3 s


def test_server_down_gives_server_errors_fast():
    verdicts = LeanVerifier("http://127.0.0.1:9", retries=2, backoff=0.01).verify(["a", "b"])
    assert [v.status for v in verdicts] == ["server_error"] * 2


def test_bearer_auth_and_validation():
    with StandinServer({"good": VALID}, api_key="s3cret") as url:
        assert LeanVerifier(url, api_key="s3cret").verify(["good"])[0].status == "valid"
        wrong = LeanVerifier(url, api_key="nope", retries=3, backoff=0.01).verify(["good"])[0]
        assert wrong.status == "server_error" and "401" in wrong.error
        headers = {"Authorization": "Bearer s3cret"}
        assert httpx.post(url + "/api/check", json={"snippets": []}, headers=headers).status_code == 422
        dup = {"snippets": [{"id": "1", "code": "a"}, {"id": "1", "code": "b"}]}
        assert httpx.post(url + "/api/check", json=dup, headers=headers).status_code == 422
        ok = httpx.post(url + "/verify", json={"codes": [{"custom_id": 7, "proof": "good"}]}, headers=headers).json()
        assert ok["results"][0]["custom_id"] == "7" and "time" in ok["results"][0]["response"]


def test_pool_exhaustion_is_429_then_server_error():
    with StandinServer({"good": VALID}, workers=1, latency=0.5, max_wait=0.1) as url:
        verdicts = LeanVerifier(url, batch_size=4, retries=1).verify(["good"] * 4)
        assert {v.status for v in verdicts} == {"server_error"} and "429" in verdicts[0].error


@pytest.mark.parametrize("result, status", [
    ({"error": "Lean REPL command timed out in 5 seconds"}, "timeout_error"),
    ({"error": "something broke"}, "server_error"),
    ({"response": {"message": "unknown env"}}, "repl_error"),
    (ERR, "lean_error"),
    ({"response": {"env": 0, "messages": [{"severity": "warning", "data": "declaration uses 'sorry'"}], "sorries": [{}]}}, "sorry"),
    ({"response": {"env": 0, "messages": [{"severity": "warning", "data": "declaration uses 'sorry'"}]}}, "sorry"),
    (VALID, "valid"),
])
def test_classify_both_paths_agree(result, status):
    # kimina-client calls the sorry warning without a sorries entry (exact sorryAx _) valid; our rule does not,
    # and kimina-client may only make a verdict stricter
    full = {"id": "1", "time": 0.1, **result}
    assert classify(full, use_kimina_client=False) == status
    if verdicts_module.KIMINA_CLIENT is not None:  # kimina-client imported (3.11 shim): same taxonomy
        assert classify(full, use_kimina_client=True) == status


def test_kimina_client_import_is_reported():
    assert (verdicts_module.KIMINA_CLIENT is None) == (verdicts_module.KIMINA_CLIENT_IMPORT_ERROR is not None)


def test_feedback_line_numbers_for_both_server_schemes():
    code = "import Mathlib\nimport Aesop\n\ntheorem t (x : ℕ) : x = x := by\n  simp\n  linarith\n"
    # the error is on "  linarith": absolute line 6; server 2.0.0 reports body-relative line 3
    assert absolute_line(code, 3, "relative") == 6 == absolute_line(code, 6, "absolute")
    for reported, scheme in ((3, "relative"), (6, "absolute")):
        result = {"response": {"messages": [{"severity": "error", "pos": {"line": reported, "column": 2}, "data": "bad"}]}}
        text = build_feedback(code, result, line_scheme=scheme)
        assert "006 >|   linarith" in text and text.startswith("# Error 1:")
    assert "> |   linarith" not in recipe_window(code, 3).replace("003 >", "")  # the recipe marks another line
    assert "  simp" in [ln.split("| ", 1)[1] for ln in recipe_window(code, 3).splitlines() if " >" in ln]
    assert code_window(code, 1).startswith("001 >| import Mathlib")


def test_feedback_keeps_three_errors_and_system_errors():
    msgs = [{"severity": "error", "pos": {"line": 1}, "data": f"e{i}"} for i in range(5)]
    msgs.insert(0, {"severity": "warning", "pos": {"line": 1}, "data": "w"})
    text = build_feedback("theorem t : True := by\n  trivial", {"response": {"messages": msgs}}, line_scheme="absolute")
    assert text.count("# Error") == 3 and "w\n" not in text
    assert build_feedback("x", {"error": "Lean REPL command timed out in 60 seconds"}).startswith("# System Error:")


def test_second_turn_cache_rules():
    cache = SecondTurnCache(capacity=3, max_feedback_chars=20, seed=0)
    turn1 = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]
    assert cache.add(turn1, "r", VALID_FEEDBACK) == "valid"
    assert cache.add(turn1, "r", FILTERED_FEEDBACK) == "filtered"
    assert cache.add(turn1, "r", "x" * 21) == "feedback_too_long"
    for i in range(5):
        assert cache.add(turn1, f"r{i}", "# Error 1: short") == "added"
    assert len(cache) == 3 and cache.prompts[0]["messages"][2]["content"] == "r2"  # newest kept
    turn2 = cache.prompts[0]["messages"]
    assert cache.add(turn2, "r", "# Error 1: again") == "exceed_max_turn"
    draws = [cache.draw({"fresh": True}) for _ in range(2000)]
    share = sum("messages" in d for d in draws) / len(draws)
    assert 0.45 < share < 0.55
    assert cache.counts == {"valid": 1, "filtered": 1, "feedback_too_long": 1, "added": 5, "exceed_max_turn": 1}


class _Tok:
    def apply_chat_template(self, conv, tokenize, add_generation_prompt):
        return list(" ".join(m["content"] for m in conv))


def test_second_turn_cache_prompt_too_long():
    cache = SecondTurnCache(max_prompt_tokens=10, tokenizer=_Tok())
    assert cache.add([{"role": "user", "content": "q"}], "a long response", "# Error") == "prompt_too_long"


def test_reward_requires_valid_proof_and_format(server):
    good = passing_response(P)
    code = extract_proof(good, P["formal_statement"])
    with StandinServer({code: VALID}) as url:
        verifier = LeanVerifier(url)
        rows = score_batch([good, good + "\nextra", "no proof at all"], [P["formal_statement"]] * 3, verifier)
    assert [r["score"] for r in rows] == [1.0, 0.0, 0.0]
    assert [r["acc"] for r in rows] == [1.0, 1.0, 0.0]  # Lean validity alone
    assert rows[1]["format_error"] == "NO_VALID_LEAN4_CODE_BLOCK" and rows[2]["feedback"] == FILTERED_FEEDBACK
    assert rows[0]["feedback"] == VALID_FEEDBACK and rows[2]["status"] == "not_sent"
    assert lean_reward(good, P["formal_statement"], Verdict("0", "valid")) == 1.0
    assert lean_reward(good, P["formal_statement"], Verdict("0", "lean_error")) == 0.0
    assert lean_reward(good + "!", P["formal_statement"], Verdict("0", "valid")) == 0.0


# ------------------------------------------------------------------ behaviours the real servers have (auth, 500, pool)


def test_auth_before_body_and_fault_switches_need_the_key():
    with StandinServer({"good": VALID}, api_key="s3cret") as url:
        assert httpx.post(url + "/api/check", json={"snippets": []}).status_code == 401  # not 422
        assert httpx.post(url + "/api/check", content=b"not json").status_code == 401
        wrong = {"Authorization": "Bearer s3cres"}
        assert httpx.post(url + "/_standin/faults", json={"mode": "500"}, headers=wrong).status_code == 401
        assert httpx.get(url + "/_standin/stats").status_code == 401
        assert httpx.post(url + "/_standin/faults", json={"mode": "none", "count": 0},
                          headers={"Authorization": "s3cret"}).status_code == 200  # "Bearer " is optional


def test_a_crashing_snippet_fails_alone_after_the_split():
    script = {f"import Init\n\ngood{i}": VALID for i in range(8)} | {"import Init\n\ncrash": {"crash": True}}
    codes = [f"import Init\n\ngood{i}" for i in range(7)]
    codes.insert(4, "import Init\n\ncrash")
    with StandinServer(script) as url:
        raw = httpx.post(url + "/api/check", json={"snippets": [{"id": str(i), "code": c} for i, c in enumerate(codes)]})
        assert raw.status_code == 500
        verdicts = LeanVerifier(url, batch_size=8, retries=2, backoff=0.01, line_scheme="relative").verify(codes)
    assert [v.status for v in verdicts] == ["valid"] * 4 + ["server_error"] + ["valid"] * 3


def test_per_snippet_no_available_repls_and_the_response_poll():
    with StandinServer({"import Init\n\ngood": VALID}, workers=1, latency=0.3, max_wait=0.05, poll=0.1,
                       no_repls_answer="snippet") as url:
        body = {"snippets": [{"id": str(i), "code": "import Init\n\ngood"} for i in range(3)]}
        start = time.perf_counter()
        raw = httpx.post(url + "/api/check", json=body).json()["results"]
        took = time.perf_counter() - start
        assert sorted(r.get("error", "ok") for r in raw) == ["No available REPLs", "No available REPLs", "ok"]
        assert took >= 0.38  # the work ends at ~0.30 s; the answer waits for the 0.4 s poll tick
        verdicts = LeanVerifier(url, batch_size=3, repls=1, concurrency=1, retries=6, backoff=0.05,
                                line_scheme="relative").verify(["import Init\n\ngood"] * 3)
    assert [v.status for v in verdicts] == ["valid"] * 3


@pytest.mark.parametrize("scheme", ["relative", "absolute"])
def test_line_scheme_probe_against_the_standin(scheme):
    forget_line_schemes()
    with StandinServer({}, line_scheme=scheme) as url:
        assert LeanVerifier(url).resolve_line_scheme() == scheme
    forget_line_schemes()


def test_pool_sized_client_gets_every_valid_proof_through_two_workers():
    # in flight: 2 x the pool; the HTTP timeout covers the turns a proof may wait (header + body each)
    codes = [f"import Init\n\ntheorem t{i} : True := trivial" for i in range(48)]
    with StandinServer({c: VALID for c in codes}, workers=2, latency=0.02) as url:
        v = LeanVerifier(url, repls=2, timeout=1, line_scheme="relative")
        assert v.concurrency == 1 and v.http_timeout >= 4 * 2 * v.timeout
        verdicts = v.verify(codes)
    assert all(x.valid for x in verdicts)
