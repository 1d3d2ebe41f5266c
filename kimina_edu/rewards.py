"""Chapter 1 — text in, reward out.

A verifiable reward is a plain function of the model's text and the task's ground truth.
This module knows nothing about torch or models: it reads strings and returns floats.

The output format the course asks for is the one in the reference article
(a from-scratch GRPO tutorial on reasoning-gym):

    <think> reasoning </think> <answer> final answer </answer>

and the reward is 0.85 × correctness + 0.15 × format, correctness binarized.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

SYSTEM_PROMPT = (
    "You are a careful assistant. First think about the question step by step inside "
    "<think> </think> tags, then give only the final answer inside <answer> </answer> tags. "
    "Your answer is graded by reading the text between the answer tags, so write nothing after them."
)



def chat_messages(question: str, *, system: str = SYSTEM_PROMPT, answer: str | None = None) -> list[dict[str, str]]:
    """The course's one chat-message list: system + user (+ the assistant's answer, for SFT data)."""
    messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
    if answer is not None:
        messages.append({"role": "assistant", "content": answer})
    return messages


THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"

# The reference article's weights: correctness dominates, format is a small shaping bonus.
W_CORRECT = 0.85
W_FORMAT = 0.15


def extract_answer(text: str) -> str | None:
    """The stripped content of the last ``<answer>…</answer>`` block, or ``None``.

    "Last" matters: a model that writes an answer, reconsiders and writes another is graded
    on its final word. Runs in linear time with ``str.rfind`` (no regex backtracking), so a
    1 MB adversarial string costs microseconds. Never raises on a ``str``.
    """
    if not isinstance(text, str):
        raise TypeError(f"extract_answer expects a str, got {type(text).__name__}")
    close = text.rfind(ANSWER_CLOSE)
    if close == -1:
        return None
    start = text.rfind(ANSWER_OPEN, 0, close)
    if start == -1:
        return None
    return text[start + len(ANSWER_OPEN) : close].strip()


def format_reward(text: str) -> float:
    """1.0 when ``text`` is exactly ``<think>…</think><answer>…</answer>``, else 0.0.

    Whitespace is allowed around the tags; anything else outside them, a second block,
    or a tag nested inside another block makes the format wrong. Each tag must occur
    exactly once, which also rules out tags inside tags.
    """
    if not isinstance(text, str):
        raise TypeError(f"format_reward expects a str, got {type(text).__name__}")
    tags = (THINK_OPEN, THINK_CLOSE, ANSWER_OPEN, ANSWER_CLOSE)
    if any(text.count(tag) != 1 for tag in tags):
        return 0.0
    t_open, t_close, a_open, a_close = (text.index(tag) for tag in tags)
    if not t_open < t_close < a_open < a_close:
        return 0.0
    outside = text[:t_open] + text[t_close + len(THINK_CLOSE) : a_open] + text[a_close + len(ANSWER_CLOSE) :]
    return 1.0 if outside.strip() == "" else 0.0


@cache
def _scorer(source_dataset: str) -> Callable[[str | None, dict], float]:
    import reasoning_gym

    return reasoning_gym.get_score_answer_fn(source_dataset)


# reasoning-gym's propositional-logic parser re-scans the string at every level of nesting: a
# chain of 1,000 "¬" or "Q ∧ " costs seconds per answer, so one long completion could stall a
# whole training step. A conclusion drawn from the course's premises (a few dozen characters
# each) fits well inside these limits; anything longer is not graded (score 0).
MAX_ANSWER_CHARS = 4096
ANSWER_CHAR_LIMITS: dict[str, int] = {"propositional_logic": 256}


def raw_score(answer: str | None, entry: dict[str, Any]) -> float:
    """reasoning-gym's own score for ``answer``, partial credit included (0..1).

    Use :func:`correctness_reward` for training; this one exists to show the audit.
    A scorer that raises on malformed model text gives 0.0: model text is untrusted input,
    and a crash is not a correct answer. An answer over the task's length limit
    (:data:`ANSWER_CHAR_LIMITS`, else :data:`MAX_ANSWER_CHARS`) gives 0.0 without calling the scorer.
    """
    source = entry.get("metadata", {}).get("source_dataset")
    if source is None:
        raise ValueError("entry has no metadata['source_dataset']; pass an item made by reasoning_gym.create_dataset")
    if answer is None:
        return 0.0
    if len(answer) > ANSWER_CHAR_LIMITS.get(source, MAX_ANSWER_CHARS):
        return 0.0
    try:
        return float(_scorer(source)(answer, entry))
    except Exception:  # noqa: BLE001 — untrusted text; the verdict is "not correct"
        return 0.0


def _truth_table(expr, variables: list[str]) -> tuple[bool, ...] | None:
    """The formula's value under every assignment of ``variables`` — its normal form: two formulas
    with the same table say the same thing. ``None`` when it names anything else."""
    import itertools

    leaves, stack = set(), [expr]
    while stack:
        node = stack.pop()
        if node.operator is None:
            leaves.add(str(node.left).strip())
        else:
            stack.extend(n for n in (node.left, node.right) if n is not None)
    if not leaves <= set(variables):
        return None
    rows = itertools.product((False, True), repeat=len(variables))
    return tuple(expr.evaluate(dict(zip(variables, row))) for row in rows)


def echoes_premise(answer: str, entry: dict[str, Any]) -> bool:
    """True when a propositional-logic ``answer`` says no more than one of the question's premises.

    Why: a premise follows from the premises, so reasoning-gym's scorer pays 1.0 for copying one
    verbatim — the task asks to *infer* a conclusion, and a policy finds the copy long before the
    logic. "The same premise" is judged after normalising to the truth table over the question's
    variables, so rewrites that add nothing — ``(Q ∧ Q)``, ``¬¬Q``, ``(P ∨ Q)`` for ``(Q ∨ P)``,
    spacing, brackets — are echoes too. An answer naming a symbol that is not one of the question's
    variables, or that cannot be parsed, counts as an echo: fail closed.
    """
    from reasoning_gym.logic.propositional_logic import Expression

    meta = entry["metadata"]
    variables = sorted(meta["variables"])
    try:
        table = _truth_table(Expression.from_string(answer), variables)
        if table is None:
            return True
        return any(table == _truth_table(Expression.from_string(p), variables) for p in meta["premises"])
    except Exception:  # noqa: BLE001 — untrusted text; an answer we cannot check is not paid
        return True


# Holes in reasoning-gym's scorers that the course's reward closes, by task: an answer the scorer
# pays in full but that this check rejects earns 0. Chapter 1's audit shows each one.
REJECT_FULL_SCORE: dict[str, Callable[[str, dict[str, Any]], bool]] = {"propositional_logic": echoes_premise}


def correctness_reward(answer: str | None, entry: dict[str, Any]) -> float:
    """1.0 only for a full-score answer under reasoning-gym's scorer, else 0.0.

    Why binarize: reasoning-gym's default scorer pays ``len(oracle)/len(answer)`` to any
    answer that *contains* the oracle, so "Yes No" earns 0.5 against "Yes". A policy trained
    on that reward learns to hedge. Binarizing closes the hole. A full score is still refused
    when :data:`REJECT_FULL_SCORE` names a hole for the task (a propositional-logic answer that
    merely repeats a premise: :func:`echoes_premise`).
    """
    if raw_score(answer, entry) < 1.0:
        return 0.0
    reject = REJECT_FULL_SCORE.get(entry["metadata"]["source_dataset"])
    return 0.0 if reject is not None and reject(answer, entry) else 1.0


def paid_conclusion(entry: dict[str, Any]) -> str:
    """A propositional-logic conclusion the course's reward pays in full — what a teacher writes.

    reasoning-gym's ``example_answer`` when :func:`correctness_reward` accepts it; but many of
    them restate a premise (``(R ∨ R)`` from the premise ``R``), so otherwise the first
    short formula — two literals joined by ∧, ∨, → or ↔, in a fixed order — that is paid, and as a
    last resort the conjunction of all premises. Deterministic: the same entry, the same answer.
    """
    import itertools

    meta = entry["metadata"]
    if correctness_reward(meta["example_answer"], entry) == 1.0:
        return meta["example_answer"]
    literals = list(meta["variables"]) + [f"¬{v}" for v in meta["variables"]]
    for a, op, b in itertools.product(literals, ("∧", "∨", "→", "↔"), literals):
        if a != b and correctness_reward(candidate := f"({a} {op} {b})", entry) == 1.0:
            return candidate
    everything = "(" + " ∧ ".join(meta["premises"]) + ")"
    if correctness_reward(everything, entry) == 1.0:
        return everything
    raise ValueError(f"no conclusion of these premises says more than one of them: {meta['premises']}")


@dataclass(frozen=True)
class RewardBreakdown:
    """Every part of one completion's reward, so logs can show format and correctness apart."""

    answer: str | None
    format: float
    correct: float
    total: float


def score_completion(
    text: str, entry: dict[str, Any], w_correct: float = W_CORRECT, w_format: float = W_FORMAT
) -> RewardBreakdown:
    answer = extract_answer(text)
    fmt = format_reward(text)
    correct = correctness_reward(answer, entry)
    return RewardBreakdown(answer, fmt, correct, w_correct * correct + w_format * fmt)


def total_reward(text: str, entry: dict[str, Any], w_correct: float = W_CORRECT, w_format: float = W_FORMAT) -> float:
    """``w_correct × correctness + w_format × format`` — the reference article's reward."""
    return score_completion(text, entry, w_correct, w_format).total


def score_completions(texts: list[str], entries: list[dict[str, Any]]) -> list[RewardBreakdown]:
    """The batched path: one breakdown per (completion, entry) pair, in order."""
    if len(texts) != len(entries):
        raise ValueError(f"got {len(texts)} completions but {len(entries)} entries; pair them one to one")
    return [score_completion(t, e) for t, e in zip(texts, entries)]
