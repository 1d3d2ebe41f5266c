import reasoning_gym
from hypothesis import given, settings
from hypothesis import strategies as st

from kimina_edu.rewards import (
    correctness_reward,
    extract_answer,
    format_reward,
    raw_score,
    score_completions,
    total_reward,
)

SYL = reasoning_gym.create_dataset("syllogism", size=20, seed=3)


def _entry_with(answer):
    return next(e for e in SYL if e["answer"] == answer)


def test_extract_answer_takes_the_last_block():
    assert extract_answer("<answer> No </answer> then <answer>Yes</answer>") == "Yes"
    assert extract_answer("<think>x</think><answer>\n 42 \n</answer>") == "42"


def test_extract_answer_none_when_absent_or_unclosed():
    assert extract_answer("") is None
    assert extract_answer("<answer>Yes") is None
    assert extract_answer("Yes</answer>") is None
    assert extract_answer("</answer><answer>") is None


def test_format_reward_accepts_exact_shape_with_whitespace():
    assert format_reward("<think>a</think><answer>b</answer>") == 1.0
    assert format_reward("  \n<think>\na\n</think>\n\n<answer>b</answer>\n") == 1.0


def test_format_reward_rejects_every_deviation():
    bad = [
        "",
        "<answer>b</answer>",
        "<think>a</think>",
        "hi <think>a</think><answer>b</answer>",
        "<think>a</think> text <answer>b</answer>",
        "<think>a</think><answer>b</answer> trailing",
        "<think>a</think><answer>b</answer><answer>c</answer>",
        "<answer>b</answer><think>a</think>",
        "<think>a<answer>b</answer></think>",
        "<think>a</think><think>c</think><answer>b</answer>",
    ]
    assert [format_reward(t) for t in bad] == [0.0] * len(bad)


def test_binarized_correctness_closes_the_partial_credit_hole():
    yes = _entry_with("Yes")
    assert raw_score("Yes No", yes) > 0  # reasoning-gym pays a hedge...
    assert correctness_reward("Yes No", yes) == 0.0  # ...we do not
    assert correctness_reward("Yes", yes) == 1.0
    assert correctness_reward("yes", yes) == 0.0
    assert correctness_reward(None, yes) == 0.0


def test_total_reward_weights():
    yes = _entry_with("Yes")
    assert total_reward("<think>t</think><answer>Yes</answer>", yes) == 1.0
    assert abs(total_reward("<think>t</think><answer>No</answer>", yes) - 0.15) < 1e-9
    assert abs(total_reward("<answer>Yes</answer>", yes) - 0.85) < 1e-9


def test_propositional_logic_scores_through_its_own_scorer():
    pl = reasoning_gym.create_dataset("propositional_logic", size=5, seed=0)[0]
    good = pl["metadata"]["example_answer"]
    assert correctness_reward(good, pl) == 1.0
    assert correctness_reward("garbage ((", pl) == 0.0


def test_batched_path_matches_scalar_and_checks_lengths():
    entries = list(SYL)[:4]
    texts = [f"<think>t</think><answer>{e['answer']}</answer>" for e in entries]
    assert [b.total for b in score_completions(texts, entries)] == [total_reward(t, e) for t, e in zip(texts, entries)]
    try:
        score_completions(texts, entries[:2])
    except ValueError as exc:
        assert "pair them" in str(exc)
    else:
        raise AssertionError("length mismatch must raise")


tags = st.sampled_from(["<think>", "</think>", "<answer>", "</answer>", "Yes", "\n", " ", "é", "𝔸", "<", ">"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(tags, st.text(max_size=20)), max_size=30).map("".join))
def test_text_functions_never_raise(text):
    answer = extract_answer(text)
    assert answer is None or isinstance(answer, str)
    assert format_reward(text) in (0.0, 1.0)
    assert 0.0 <= total_reward(text, SYL[0]) <= 1.0


def test_huge_input_is_fast():
    import time

    text = "<think>" + "<answer>" * 200_000 + "</think>" + "x" * 1_000_000
    start = time.perf_counter()
    extract_answer(text), format_reward(text)
    assert time.perf_counter() - start < 20  # a hang catcher: quadratic would take minutes


# ---- the propositional-logic premise echo

PL_ENTRIES = [e for seed in (0, 31337, 999_001) for e in reasoning_gym.create_dataset("propositional_logic", size=200,
                                                                                      seed=seed)]


def test_copying_a_premise_earns_nothing_though_reasoning_gym_pays_it():
    premises = [(p, e) for e in PL_ENTRIES for p in e["metadata"]["premises"]]
    paid_raw = [p for p, e in premises if raw_score(p, e) >= 1.0]
    assert len(paid_raw) > 0.4 * len(premises), "the hole this test guards should exist in reasoning-gym's scorer"
    assert [p for p, e in premises if correctness_reward(p, e) > 0] == []


def test_rewrites_that_add_nothing_to_a_premise_earn_nothing():
    entry = next(e for e in PL_ENTRIES if "(Q → P)" in e["metadata"]["premises"])
    for echo in ("(Q → P)", "Q→P", " ( (Q → P) ) ", "¬¬(Q → P)", "((Q → P) ∧ (Q → P))", "(¬Q ∨ P)", "(P ∨ ¬Q)"):
        assert raw_score(echo, entry) >= 1.0, echo  # reasoning-gym pays every one of them
        assert correctness_reward(echo, entry) == 0.0, echo
    assert correctness_reward("(Q ∨ q)", entry) == 0.0  # a symbol the question does not have


def test_genuine_conclusions_still_earn_full_credit():
    import itertools

    from reasoning_gym.logic.propositional_logic import Expression

    def says(formula, variables):
        expr = Expression.from_string(formula)
        return tuple(expr.evaluate(dict(zip(variables, row))) for row in itertools.product((False, True),
                                                                                          repeat=len(variables)))

    checked = 0
    for e in PL_ENTRIES:
        meta = e["metadata"]
        answer, variables = meta["example_answer"], sorted(meta["variables"])
        new = all(says(answer, variables) != says(p, variables) for p in meta["premises"])
        if raw_score(answer, e) >= 1.0 and new:
            assert correctness_reward(answer, e) == 1.0, (answer, meta["premises"])
            checked += 1
    assert checked > 300
    # the conjunction of two different premises is new information, and is paid
    e = next(e for e in PL_ENTRIES if len(set(e["metadata"]["premises"])) >= 2 and "¬" not in e["metadata"]["premises"][0])
    a, b = sorted(set(e["metadata"]["premises"]))[:2]
    if raw_score(f"({a} ∧ {b})", e) >= 1.0 and not any(says(f"({a} ∧ {b})", sorted(e["metadata"]["variables"]))
                                                       == says(p, sorted(e["metadata"]["variables"]))
                                                       for p in e["metadata"]["premises"]):
        assert correctness_reward(f"({a} ∧ {b})", e) == 1.0


def test_long_propositional_answers_are_refused_fast():
    import time

    entry = PL_ENTRIES[1]
    for text in ("¬" * 20_000 + "Q", "Q ∧ " * 5_000 + "Q", "(" * 50_000 + "Q" + ")" * 50_000):
        start = time.perf_counter()
        assert correctness_reward(text, entry) == 0.0
        assert time.perf_counter() - start < 10  # a hang catcher
