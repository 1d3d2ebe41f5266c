"""The reasoning-gym tasks the course trains on, and what the course knows about each.

One place for: each task's generator settings, the seeds that keep pretraining, SFT, RL and
evaluation data apart, and the task-specific text the offline path writes (a restatement of
the question, and the rule-based teacher's reasoning trace).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

# syllogism: reasoning-gym's default invalid_ratio is 0.3, so "Yes" is right 70% of the time and
# a constant answer scores 70%. The course uses 0.5 so that chance is 50% and accuracy means
# something (tests/test_trainer.py checks that "Yes" stays near half of the RL questions).
TASK_CONFIGS: dict[str, dict[str, Any]] = {"syllogism": {"invalid_ratio": 0.5}, "propositional_logic": {}}

# Disjoint seeds: the pocket model's corpus, the SFT examples, the RL questions and the
# held-out evaluation never come from the same generator stream.
SEEDS = {"pretrain": 1234, "sft": 7, "rl": 31337, "eval": 999_001, "dev": 424_242, "fresh": 20_261_207}


def make_entries(task: str, n: int, seed: int) -> list[dict[str, Any]]:
    import reasoning_gym

    return list(reasoning_gym.create_dataset(task, size=n, seed=seed, **TASK_CONFIGS.get(task, {})))


def held_out(task: str = "syllogism", n: int = 400) -> list[dict[str, Any]]:
    """The fixed held-out split every chapter reports accuracy on."""
    return make_entries(task, n, SEEDS["eval"])


def dev_split(task: str = "syllogism", n: int = 200) -> list[dict[str, Any]]:
    """Questions for decisions made during training (when to stop SFT), kept apart from
    :func:`held_out`: a split that chose when to stop would flatter the accuracy it reports.
    Questions that also occur in the held-out split are dropped."""
    test = {e["question"] for e in held_out(task)}
    return [e for e in make_entries(task, n, SEEDS["dev"]) if e["question"] not in test]


def fresh_draw(task: str = "syllogism", n: int = 400) -> list[dict[str, Any]]:
    """``n`` questions from a generator stream no chapter touches, none of which also occurs among the SFT
    examples, the RL questions, the dev split or :func:`held_out` — a second held-out set on which a gain
    measured on the first is checked (`make robustness`)."""
    seen = {e["question"] for split in (make_entries(task, 5000, SEEDS["rl"]), make_entries(task, 1000, SEEDS["sft"]),
                                        make_entries(task, 1000, SEEDS["dev"]), held_out(task, 1000)) for e in split}
    fresh = [e for e in make_entries(task, 2 * n, SEEDS["fresh"]) if e["question"] not in seen]
    if len(fresh) < n:
        raise ValueError(f"only {len(fresh)} of {2 * n} fresh {task} questions are new: ask for fewer than {n}")
    return fresh[:n]


_FORMS = (
    (re.compile(r"^All (.+) are (.+)$"), "all"),
    (re.compile(r"^No (.+) are (.+)$"), "no"),
    (re.compile(r"^Some (.+) are not (.+)$"), "some-not"),
    (re.compile(r"^Some (.+) are (.+)$"), "some"),
)


def syllogism_form(statement: str) -> tuple[str, str, str]:
    """``"Some teachers are not parents"`` → ``("some-not", "teachers", "parents")``."""
    for pattern, form in _FORMS:
        m = pattern.match(statement.strip())
        if m:
            return form, m.group(1), m.group(2)
    raise ValueError(f"not a categorical statement: {statement!r}")


def _syllogism_restatement(meta: dict[str, Any]) -> str:
    """Each statement as its form and letters for its terms, lettered by first appearance:

    "All dogs are doctors / Some doctors are insects / All dogs are insects"
    → "Premise 1 is all A B. Premise 2 is some B C. Claim is all A C."

    Letters, not nouns: whether the claim follows depends only on this structure, and a tiny
    model can learn to match terms long before it can copy nouns reliably (what the pocket model
    made of noun restatements: benchmarks/README.md, "Task data").
    """
    statements = [syllogism_form(meta[k]) for k in ("premise1", "premise2", "conclusion")]
    letters: dict[str, str] = {}
    for _, subject, predicate in statements:
        for term in (subject, predicate):
            letters.setdefault(term, "ABCDEF"[len(letters)])
    names = ("Premise 1", "Premise 2", "Claim")
    return " ".join(f"{name} is {form} {letters[s]} {letters[p]}." for name, (form, s, p) in zip(names, statements))


def _propositional_restatement(meta: dict[str, Any]) -> str:
    return f"The premises are: {'; '.join(meta['premises'])}."


RESTATEMENTS: dict[str, Callable[[dict[str, Any]], str]] = {
    "syllogism": _syllogism_restatement,
    "propositional_logic": _propositional_restatement,
}


def restatement(entry: dict[str, Any]) -> str:
    """The question restated in short form — reading, not answering (no verdict, no answer)."""
    task = entry["metadata"]["source_dataset"]
    if task not in RESTATEMENTS:
        raise ValueError(f"the course can restate {sorted(RESTATEMENTS)}; got {task!r}")
    return RESTATEMENTS[task](entry["metadata"])


def syllogism_parts(entry: dict[str, Any]) -> tuple[str, str]:
    """``(premises, claim)`` of a syllogism's restatement: ``("Premise 1 is all A B. Premise 2 is
    some B C.", "some A C")``."""
    if entry.get("metadata", {}).get("source_dataset") != "syllogism":
        raise ValueError("only syllogism questions have premises and a claim to read")
    premises, _, claim = restatement(entry).partition(" Claim is ")
    return premises, claim.rstrip(".")


def premises_only_accuracy(entries: list[dict[str, Any]], reference: list[dict[str, Any]]) -> float:
    """The best accuracy on ``entries`` of a policy that reads the premises and never the claim.

    Such a policy can only answer each *pair of premises* (their forms, lettered) with one verdict;
    the best one is the verdict most common for that pair in ``reference`` (e.g. the RL questions).
    A pair ``reference`` never shows, or shows with both verdicts equally often, counts as a coin
    (half right). A trained policy that ends near this figure has learned the shortcut, not to read.
    """
    from collections import Counter, defaultdict

    votes: dict[str, Counter] = defaultdict(Counter)
    for e in reference:
        votes[syllogism_parts(e)[0]][bool(e["metadata"]["is_valid"])] += 1
    score = 0.0
    for e in entries:
        c = votes.get(syllogism_parts(e)[0], Counter())
        valid = bool(e["metadata"]["is_valid"])
        score += 0.5 if c[True] == c[False] else float((c[True] > c[False]) == valid)
    return score / max(len(entries), 1)


def restates_claim(completion: str, entry: dict[str, Any]) -> bool:
    """Whether ``completion``'s first "Claim is …" restates ``entry``'s claim exactly (form and
    letters, as :func:`restatement` writes it) — the pocket model's trace shows what it read."""
    _, claim = syllogism_parts(entry)
    start = completion.find("Claim is ")
    if start < 0:
        return False
    said = completion[start + len("Claim is "):].split(".", 1)[0]
    return said.strip() == claim


def claim_balanced(entries: list[dict]) -> list[dict]:
    """``entries`` with each premise pair's majority verdict subsampled to its minority's count (in
    order; pairs with one verdict only are dropped): questions on which ignoring the claim scores 50%,
    so accuracy above that needs the claim read (about half of the held-out questions)."""
    by: dict[tuple, list[dict]] = {}
    for e in entries:
        by.setdefault((syllogism_parts(e)[0], bool(e["metadata"]["is_valid"])), []).append(e)
    keep = set()
    for (pair, valid), group in by.items():
        n = min(len(group), len(by.get((pair, not valid), [])))
        keep.update(id(e) for e in group[:n])
    return [e for e in entries if id(e) in keep]


def claim_read_rate(completions: list[str], entries: list[dict[str, Any]]) -> float:
    """The share of ``completions`` (one per entry, in order) that restate their entry's claim right."""
    return sum(map(restates_claim, completions, entries)) / max(len(entries), 1)


def verdict_balance(completions: list[str], entries: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Which verdicts a policy gives and how often each kind of question gets its own right: ``{"answered":
    {verdict: share of the questions answered so}, "right_when": {answer: accuracy on the questions whose
    answer it is}}`` — the verdicts as the reward reads them (``None`` for an answer it cannot read).

    Why: a policy whose verdict leans one way (say "Yes" on 70% of questions where 52.5% are "Yes") loses its
    accuracy on the other answer's questions, and GRPO can gain by moving the lean alone — without reading
    more of each question. This tells that apart from a gain on both kinds of question."""
    from kimina_edu.rewards import correctness_reward, extract_answer

    if len(completions) != len(entries):
        raise ValueError(f"verdict_balance: {len(completions)} completions for {len(entries)} questions")
    given = [extract_answer(t) for t in completions]
    counts = Counter(str((g or "").strip() or None) for g in given)
    answered = {verdict: n / max(len(entries), 1) for verdict, n in counts.items()}
    right_when: dict[str, float] = {}
    for answer in sorted({e["answer"] for e in entries}):
        on = [correctness_reward(g, e) for g, e in zip(given, entries) if e["answer"] == answer]
        right_when[answer] = sum(on) / len(on)
    return {"answered": answered, "right_when": right_when}


_FORM_ORDER = ("all", "no", "some", "some-not")


def what_follows(entry: dict[str, Any]) -> tuple[str, list[str]]:
    """``("A C", ["all", "some"])``: the claim's two terms, lettered as :func:`restatement` letters them, and
    the forms of statement about them (subject first, as in the claim) that follow from the premises.

    Decided by reasoning-gym's own rules, the ones that made the question's verdict: a claim about the two
    terms the premises do not share is a syllogism (``SyllogismDataset._is_valid_syllogism``); a claim about
    one premise's terms, turned round, an inversion of that premise (``_check_logical_equivalence``). The
    claim follows exactly when its form is in the list (tests/test_tasks.py checks this on 5,400 questions).
    """
    from reasoning_gym.logic.syllogisms import Quantifier, SyllogismDataset, Term

    quantifier = {"all": Quantifier.ALL, "no": Quantifier.NO, "some": Quantifier.SOME, "some-not": Quantifier.SOME_NOT}
    meta = entry["metadata"]
    (f1, s1, p1), (f2, s2, p2), (_, sc, pc) = (syllogism_form(meta[k]) for k in ("premise1", "premise2", "conclusion"))
    letters: dict[str, str] = {}
    for term in (s1, p1, s2, p2, sc, pc):
        if term not in letters:
            letters[term] = "ABCDEF"[len(letters)]
    term = {t: Term(t, t) for t in letters}

    def statement(form: str, s: str, p: str):
        return quantifier[form], term[s], term[p]

    shared = {s1, p1} & {s2, p2}
    if {sc, pc} == {s1, p1, s2, p2} - shared:
        def follows(form: str) -> bool:
            return SyllogismDataset._is_valid_syllogism(statement(f1, s1, p1), statement(f2, s2, p2), statement(form, sc, pc))
    else:
        premise = (f1, s1, p1) if {sc, pc} == {s1, p1} else (f2, s2, p2)

        def follows(form: str) -> bool:  # the method reads nothing of its instance
            return SyllogismDataset._check_logical_equivalence(None, statement(*premise), statement(form, sc, pc))
    return f"{letters[sc]} {letters[pc]}", [form for form in _FORM_ORDER if follows(form)]


TRACES = ("restate", "derive")  # what the rule-based teacher writes before its verdict (SFTRecipe.trace)


def teacher_trace(entry: dict[str, Any], valid: bool | None = None, trace: str = "restate") -> str:
    """The rule-based teacher's reasoning: the restatement, then the verdict from the metadata
    (a syllogism's ``valid`` given: that verdict instead, right or not).

    ``trace="derive"`` (syllogisms): between the two, what follows about the claim's terms
    (:func:`what_follows`) — "… Claim is some A C. What follows about A C: all, some. So the claim
    follows." — so the verdict is read off the line above it.
    """
    if trace not in TRACES:
        raise ValueError(f"the teacher writes a trace of {TRACES}, not {trace!r}")
    meta = entry["metadata"]
    steps = [restatement(entry)]
    if meta["source_dataset"] == "syllogism":
        if trace == "derive":
            if valid is not None:
                raise ValueError("a derived trace states what follows: its verdict cannot be chosen (valid=None)")
            pair, forms = what_follows(entry)
            steps.append(f"What follows about {pair}: {', '.join(forms) or 'nothing'}.")
        valid = meta["is_valid"] if valid is None else valid
        steps.append("So the claim follows." if valid else "So the claim does not follow.")
    else:
        steps.append(f"A statement they entail is {oracle_answer(entry)}.")
    return " ".join(steps)


def oracle_answer(entry: dict[str, Any]) -> str:
    """The answer a teacher writes: the oracle, or for open-ended tasks one valid example.

    propositional_logic: one the course's reward pays (:func:`kimina_edu.rewards.paid_conclusion`) —
    reasoning-gym's own example often restates a premise, which that reward does not pay. A rare
    question whose premises allow nothing new (tautologies plus one premise) keeps reasoning-gym's
    example. How often each happens: benchmarks/README.md, "Task data".
    """
    if entry["answer"] is not None:
        return entry["answer"]
    if entry["metadata"]["source_dataset"] == "propositional_logic":
        from kimina_edu.rewards import paid_conclusion

        try:
            return paid_conclusion(entry)
        except ValueError:
            pass  # nothing new follows from these premises: no answer is paid, the example is as good as any
    return entry["metadata"]["example_answer"]
