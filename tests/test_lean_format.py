import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kimina_edu.lean.data import load_offline_problems
from kimina_edu.lean.examples import failing_examples, passing_response
from kimina_edu.lean.format import FormatError, check_conversation, check_format, remove_comments
from kimina_edu.lean.prompts import SYSTEM_PROMPT, build_messages
from kimina_edu.lean.proof import extract_proof, is_commented, normalize_formal_statement, theorem_signature

PROBLEMS = load_offline_problems()
P = PROBLEMS[0]


def test_offline_problem_set_is_real_data_shaped():
    assert len(PROBLEMS) >= 30
    assert len({p["statement_id"] for p in PROBLEMS}) == len(PROBLEMS)
    for p in PROBLEMS:
        assert p["formal_statement"].startswith("import Mathlib")
        assert p["formal_statement"].rstrip().endswith("sorry") and p["informal_problem"]


@pytest.mark.parametrize("row", failing_examples(P), ids=lambda r: r["case"])
def test_every_error_kind_has_a_minimal_trigger_and_near_miss(row):
    assert check_format(row["response"], P["formal_statement"]) is row["expected"]


def test_every_error_kind_is_covered():
    produced = {row["expected"] for row in failing_examples(P)}
    assert produced == set(FormatError)


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p["statement_id"])
def test_examples_hold_on_every_problem(problem):
    for row in failing_examples(problem):
        assert check_format(row["response"], problem["formal_statement"]) is row["expected"], row["case"]


def test_thresholds_are_overridable_and_unknown_ones_rejected():
    five = passing_response(P, repeats=5)
    assert check_format(five, P["formal_statement"], repeated_lines_threshold=5) is FormatError.GENERATION_REPEATS
    with pytest.raises(ValueError, match="unknown thresholds"):
        check_format(five, P["formal_statement"], repeat_threshold=5)


def test_check_conversation_fails_a_good_fix_after_a_malformed_first_turn():
    good = passing_response(P)
    messages = build_messages(P["informal_problem"], P["formal_statement"])
    bad_first = messages + [{"role": "assistant", "content": good + "\nextra"}, {"role": "user", "content": "# Error 1:"},
                            {"role": "assistant", "content": good}]
    assert check_conversation(bad_first, P["formal_statement"]) is FormatError.NO_VALID_LEAN4_CODE_BLOCK
    ok = messages + [{"role": "assistant", "content": good}]
    assert check_conversation(ok, P["formal_statement"]) is FormatError.NONE
    assert messages[0]["content"] == SYSTEM_PROMPT


def test_extract_proof_uses_the_dataset_statement_and_drops_lemmas_before_it():
    response = passing_response(P).replace(
        "```lean4\n", "```lean4\nlemma helper : 1 = 1 := by rfl\n\n", 1)
    code = extract_proof(response, P["formal_statement"])
    assert code.startswith(normalize_formal_statement(P["formal_statement"]))
    assert "helper" not in code and code.rstrip().endswith("linarith")


def test_extract_proof_none_cases():
    assert extract_proof("", P["formal_statement"]) is None
    assert extract_proof("```lean4\ntheorem other : True := by trivial\n```", P["formal_statement"]) is None
    commented = passing_response(P).replace("theorem algebra_linear_solve", "-- theorem algebra_linear_solve", 2)
    assert extract_proof(commented, P["formal_statement"]) is None
    assert extract_proof("x", "no statement here") is None


def test_lean_text_helpers():
    assert remove_comments("a /- b -/ c -- d\ne") == "a  c \ne"
    assert is_commented("x -- y", 5) and not is_commented("x -- y", 0) and is_commented("/- a -/", 3)
    assert theorem_signature("theorem foo (x : ℕ) : x = x := by sorry") == "foo (x : ℕ) : x = x"
    assert normalize_formal_statement("theorem t : True := by sorry") == "theorem t : True := by"


adversarial = st.sampled_from(["<think>", "</think>", "```lean4", "```lean4\n", "```tactics\n", "\n```", "```", "\n",
                               ":= by", "theorem ", "/-", "-/", "--", "sorry", "é", "∀", "𝔸"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(adversarial, st.text(max_size=15)), max_size=40).map("".join))
def test_never_raises_on_any_string(text):
    assert isinstance(check_format(text, P["formal_statement"]), FormatError)
    result = extract_proof(text, P["formal_statement"])
    assert result is None or isinstance(result, str)


@pytest.mark.parametrize("piece", ["<think>", "```lean4\n", "```tactics\n", "/-", "```lean4", "a" * 10 + "\n"])
def test_one_megabyte_adversarial_input_is_linear(piece):
    text = piece * (1_000_000 // len(piece))
    start = time.perf_counter()
    check_format(text, P["formal_statement"])
    check_format("<think>" + text + "</think>\n```lean4\nx\n```", P["formal_statement"])
    extract_proof(text, P["formal_statement"])
    assert time.perf_counter() - start < 20  # a hang catcher: quadratic would take minutes (benchmarks time it)
