"""A stand-in server's silence is never shown as Lean's verdict: a proof it has no script for is
reported "not checked (stand-in)" with the whole notice, the chapters' demonstrations script every
proof they send, and the verl reward entry point carries the same status."""

import pytest

from kimina_edu.lean.client import LeanVerifier
from kimina_edu.lean.data import load_offline_problems
from kimina_edu.lean.examples import passing_response
from kimina_edu.lean.proof import extract_proof
from kimina_edu.lean.reward import score_batch
from kimina_edu.lean.standin import STANDIN_NOTICE, StandinServer, is_unchecked, require_scripted

P = load_offline_problems()[0]
VALID = {"response": {"env": 0, "messages": []}}


@pytest.fixture(scope="module")
def url():
    good = extract_proof(passing_response(P), P["formal_statement"])
    with StandinServer({good: VALID}) as address:
        yield address


def test_an_unscripted_proof_is_not_checked_and_its_feedback_says_so_in_full(url):
    other = passing_response({**P, "illustrative_proof": ["nlinarith"]})
    rows = score_batch([passing_response(P), other], [P["formal_statement"]] * 2, LeanVerifier(url))
    assert rows[0]["status"] == "valid" and rows[0]["score"] == 1.0
    assert rows[1]["status"] == "not_checked_standin", rows[1]
    assert rows[1]["score"] == 0.0 and rows[1]["acc"] == 0.0  # nothing unchecked is ever paid
    assert STANDIN_NOTICE in rows[1]["feedback"], rows[1]["feedback"]
    assert rows[1]["feedback"].startswith("# System Error"), "not Lean's verdict: never a Lean error to fix"


def test_a_lean_error_the_script_gives_stays_a_lean_error(url):
    bad = passing_response({**P, "illustrative_proof": ["simp"]})
    code = extract_proof(bad, P["formal_statement"])
    message = {"severity": "error", "pos": {"line": 8, "column": 2}, "data": "simp made no progress"}
    with StandinServer({code: {"response": {"env": 0, "messages": [message]}}}) as address:
        (row,) = score_batch([bad], [P["formal_statement"]], LeanVerifier(address))
    assert row["status"] == "lean_error" and "simp made no progress" in row["feedback"]


def test_is_unchecked_recognises_only_the_stand_in_notice():
    notice = {"env": 0, "messages": [{"severity": "error", "data": STANDIN_NOTICE}]}
    lean = {"env": 0, "messages": [{"severity": "error", "data": "linarith failed"}]}
    assert is_unchecked(notice) and not is_unchecked(lean) and not is_unchecked(None)


def test_require_scripted_names_the_proof_a_demonstration_left_unscripted():
    require_scripted({"a": VALID, "b": VALID}, ["a", "b", None])  # None: filtered locally, never sent
    with pytest.raises(ValueError, match="1 of 2 .*no scripted verdict.*theorem missing"):
        require_scripted({"a": VALID}, ["a", "theorem missing : True := by\n  trivial"])


def test_verl_reward_rows_carry_the_status(url):
    import os

    from kimina_edu.verl import reward as verl_reward
    from kimina_edu.verl.data import GROUND_TRUTH, to_verl_row

    other = passing_response({**P, "illustrative_proof": ["nlinarith"]})
    old = os.environ.get("LEAN_SERVER_API_URL")
    os.environ["LEAN_SERVER_API_URL"] = url
    verl_reward.reset_verifier()
    try:
        row = verl_reward.compute_score(P["data_source"], other, GROUND_TRUTH, to_verl_row(P, "train")["extra_info"])
    finally:
        verl_reward.reset_verifier()
        if old is None:
            del os.environ["LEAN_SERVER_API_URL"]
        else:
            os.environ["LEAN_SERVER_API_URL"] = old
    assert row["status"] == "not_checked_standin" and row["score"] == 0.0
