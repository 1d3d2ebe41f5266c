"""What the course knows about its task: the shortcut a policy can take, and what its trace shows it read."""

import pytest

from kimina_edu.tasks import (
    SEEDS,
    held_out,
    make_entries,
    premises_only_accuracy,
    restatement,
    restates_claim,
    syllogism_form,
    teacher_trace,
    what_follows,
)


def _syllogism(premise1: str, premise2: str, conclusion: str, valid: bool) -> dict:
    return {"question": f"{premise1} / {premise2} / {conclusion}?", "answer": "Yes" if valid else "No",
            "metadata": {"source_dataset": "syllogism", "premise1": premise1, "premise2": premise2,
                         "conclusion": conclusion, "is_valid": valid}}


def test_premises_only_accuracy_takes_the_majority_verdict_per_pair_of_premises():
    # the same premises, three claims: two follow, one does not → "Yes" for that pair scores 2 of 3
    pair = ("All dogs are cats", "All cats are birds")
    entries = [_syllogism(*pair, "All dogs are birds", True), _syllogism(*pair, "Some dogs are birds", True),
               _syllogism(*pair, "No dogs are birds", False)]
    assert premises_only_accuracy(entries, entries) == pytest.approx(2 / 3)
    # other nouns, the same forms: the shortcut carries over (letters, not nouns)
    other = [_syllogism("All ants are bees", "All bees are owls", "No ants are owls", False)]
    assert premises_only_accuracy(other, entries) == 0.0
    # premises the reference never shows, and a tie, are a coin
    unseen = [_syllogism("No ants are bees", "Some bees are owls", "Some ants are owls", True)]
    assert premises_only_accuracy(unseen, entries) == 0.5
    assert premises_only_accuracy(entries[1:], entries[1:]) == 0.5
    assert premises_only_accuracy([], entries) == 0.0


def test_the_course_split_has_room_above_the_shortcut():
    """Reading only the premises cannot reach the course's accuracies near 90%: the claim matters."""
    ceiling = premises_only_accuracy(held_out(), make_entries("syllogism", 2000, 31337))
    assert 0.6 < ceiling < 0.85


def test_restates_claim_reads_the_first_claim_only():
    e = _syllogism("Some spiders are not students", "All students are reptiles", "All reptiles are students", False)
    right = restatement(e)
    assert right.endswith("Claim is all C B.")
    assert restates_claim(f"<think>{right} So the claim does not follow.</think>", e)
    assert not restates_claim("<think>Premise 1 is some-not A B. Premise 2 is all B C. Claim is some A C. "
                              "Claim is all C B.</think>", e)
    for text in ("", "Claim is", "Claim is all C B", "Claim is all C B C.", "claim is all C B.", "Claim is ✓." * 10_000):
        assert restates_claim(text, e) == (text == "Claim is all C B")


def test_only_syllogisms_have_a_claim():
    prop = make_entries("propositional_logic", 1, 0)[0]
    with pytest.raises(ValueError, match="syllogism"):
        restates_claim("Claim is all A B.", prop)
    with pytest.raises(ValueError, match="syllogism"):
        premises_only_accuracy([prop], [])


def test_claim_read_rate_is_the_share_of_right_restatements():
    from kimina_edu.tasks import claim_read_rate

    e = _syllogism("All dogs are cats", "All cats are birds", "All dogs are birds", True)
    assert claim_read_rate(["Claim is all A C.", "Claim is some A C.", ""], [e, e, e]) == pytest.approx(1 / 3)
    assert claim_read_rate([], []) == 0.0


def test_on_the_claim_balanced_questions_ignoring_the_claim_scores_one_half():
    from kimina_edu.tasks import claim_balanced, held_out, premises_only_accuracy

    questions = held_out("syllogism", 400)
    balanced = claim_balanced(questions)
    assert 150 < len(balanced) < 400 and premises_only_accuracy(questions, questions) > 0.7
    assert premises_only_accuracy(balanced, balanced) == 0.5
    assert sum(e["answer"] == "Yes" for e in balanced) * 2 == len(balanced)


def test_the_claim_follows_exactly_when_its_form_is_among_what_follows():
    entries = make_entries("syllogism", 2000, SEEDS["rl"]) + held_out()
    kinds = set()
    for e in entries:
        pair, forms = what_follows(e)
        kinds.add(pair)
        claim_form = syllogism_form(e["metadata"]["conclusion"])[0]
        assert (claim_form in forms) == e["metadata"]["is_valid"], (e["question"], pair, forms)
    assert kinds == {"A C", "B A", "C B"}  # syllogisms, and inversions of either premise


def test_a_derived_trace_states_what_follows_before_the_verdict():
    entry = next(e for e in held_out() if what_follows(e)[1] and e["metadata"]["type"] == "syllogism")
    pair, forms = what_follows(entry)
    text = teacher_trace(entry, trace="derive")
    assert text.startswith(restatement(entry) + f" What follows about {pair}: {', '.join(forms)}. So the claim ")
    assert teacher_trace(entry) == text.replace(f" What follows about {pair}: {', '.join(forms)}.", "")
    nothing = next(e for e in held_out() if not what_follows(e)[1])
    assert "What follows about A C: nothing. So the claim does not follow." in teacher_trace(nothing, trace="derive")
    with pytest.raises(ValueError, match="cannot be chosen"):
        teacher_trace(entry, valid=True, trace="derive")
    with pytest.raises(ValueError, match="trace"):
        teacher_trace(entry, trace="long")


def test_verdict_balance_tells_a_lean_from_reading():
    """Two policies with the same accuracy: one right on both kinds of question, one that says "Yes" to all."""
    from kimina_edu.tasks import verdict_balance

    entries = [{"answer": a, "question": f"q{i}", "metadata": {"source_dataset": "syllogism"}}
               for i, a in enumerate(["Yes", "Yes", "No", "No"])]
    say = lambda v: f"<think>x</think>\n<answer>{v}</answer>"
    always_yes = verdict_balance([say("Yes")] * 4, entries)
    assert always_yes["answered"] == {"Yes": 1.0} and always_yes["right_when"] == {"No": 0.0, "Yes": 1.0}
    mixed = verdict_balance([say("Yes"), say("No"), say("No"), say("Yes")], entries)
    assert mixed["answered"] == {"Yes": 0.5, "No": 0.5} and mixed["right_when"] == {"No": 0.5, "Yes": 0.5}
    unreadable = verdict_balance(["no tags", say("Yes"), say("No"), say("No")], entries)
    assert unreadable["answered"]["None"] == 0.25 and unreadable["right_when"]["Yes"] == 0.5
    with pytest.raises(ValueError, match="3 completions for 4 questions"):
        verdict_balance([say("Yes")] * 3, entries)
