"""The reasoning-gym tasks the course trains on, and what the course knows about each.

One place for: each task's generator settings, the seeds that keep pretraining, SFT, RL and
evaluation data apart, and the task-specific text the offline path writes (a restatement of
the question, and the rule-based teacher's reasoning trace).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

# syllogism: reasoning-gym's default invalid_ratio is 0.3, so "Yes" is right 70% of the time and
# a constant answer scores 70%. The course uses 0.5 so that chance is 50% and accuracy means
# something (tests/test_trainer.py checks that "Yes" stays near half of the RL questions).
TASK_CONFIGS: dict[str, dict[str, Any]] = {"syllogism": {"invalid_ratio": 0.5}, "propositional_logic": {}}

# Disjoint seeds: the pocket model's corpus, the SFT examples, the RL questions and the
# held-out evaluation never come from the same generator stream.
SEEDS = {"pretrain": 1234, "sft": 7, "rl": 31337, "eval": 999_001, "dev": 424_242}


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


def teacher_trace(entry: dict[str, Any], valid: bool | None = None) -> str:
    """The rule-based teacher's reasoning: the restatement, then the verdict from the metadata
    (a syllogism's ``valid`` given: that verdict instead, right or not)."""
    meta = entry["metadata"]
    if meta["source_dataset"] == "syllogism":
        valid = meta["is_valid"] if valid is None else valid
        verdict = "So the claim follows." if valid else "So the claim does not follow."
    else:
        verdict = f"A statement they entail is {oracle_answer(entry)}."
    return f"{restatement(entry)} {verdict}"


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
