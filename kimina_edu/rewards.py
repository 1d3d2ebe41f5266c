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


def raw_score(answer: str | None, entry: dict[str, Any]) -> float:
    """reasoning-gym's own score for ``answer``, partial credit included (0..1).

    Use :func:`correctness_reward` for training; this one exists to show the audit.
    A scorer that raises on malformed model text gives 0.0: model text is untrusted input,
    and a crash is not a correct answer.
    """
    source = entry.get("metadata", {}).get("source_dataset")
    if source is None:
        raise ValueError("entry has no metadata['source_dataset']; pass an item made by reasoning_gym.create_dataset")
    if answer is None:
        return 0.0
    try:
        return float(_scorer(source)(answer, entry))
    except Exception:  # noqa: BLE001 — untrusted text; the verdict is "not correct"
        return 0.0


def correctness_reward(answer: str | None, entry: dict[str, Any]) -> float:
    """1.0 only for a full-score answer under reasoning-gym's scorer, else 0.0.

    Why binarize: reasoning-gym's default scorer pays ``len(oracle)/len(answer)`` to any
    answer that *contains* the oracle, so "Yes No" earns 0.5 against "Yes". A policy trained
    on that reward learns to hedge. Binarizing closes the hole.
    """
    return 1.0 if raw_score(answer, entry) >= 1.0 else 0.0


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
