"""Chapter 7 — Lean's errors as the second turn's prompt, and the cache that holds them.

Feedback (the recipe's ``create_tool_message`` in ``error_fixing.py``): the first three
messages with ``severity == "error"``, each as ``# Error i:``, the message, and a 5-line
numbered window of the code with the error line marked; ``# System Error:`` for timeouts and
server failures. There is no "please fix" sentence: the feedback *is* the user turn.

Line numbers: kimina-lean-server 2.0.0 (the pinned image, Lean v4.15.0) reports positions
relative to the body after the import header (imports **and** the blank lines after them);
servers built after PR #56 (Oct 2025) report absolute lines. The recipe numbers its window
from after the import lines only, so its marker lands one line too high on 2.0.0 and several
lines too low on newer servers. Here the window is numbered as the code the model wrote
(absolute lines), and ``line_scheme`` says which numbering the server used.
"""

from __future__ import annotations

import random
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Literal

VALID_FEEDBACK = "valid proof found."
FILTERED_FEEDBACK = "filtered proof."
LineScheme = Literal["relative", "absolute"]


def header_line_count(code: str) -> int:
    """Leading lines that are blank or ``import …`` — what the server splits off as the header."""
    count = 0
    for line in code.split("\n"):
        if line.strip() == "" or line.startswith("import "):
            count += 1
        else:
            break
    return count


def absolute_line(code: str, reported_line: int, line_scheme: LineScheme = "relative") -> int:
    """The 1-based line of ``code`` a server message points at."""
    if line_scheme == "absolute":
        return reported_line
    if line_scheme == "relative":
        return reported_line + header_line_count(code)
    raise ValueError(f"line_scheme must be 'relative' (server 2.0.0) or 'absolute' (after PR #56); got {line_scheme!r}")


def code_window(code: str, line: int, radius: int = 2) -> str:
    """Lines ``line-radius … line+radius`` of ``code``, numbered, the error line marked ``>``."""
    lines = code.split("\n")
    out = []
    for n in range(max(1, line - radius), min(len(lines), line + radius) + 1):
        out.append(f"{n:03d}{' >' if n == line else '  '}| {lines[n - 1]}")
    return "\n".join(out)


def recipe_window(code: str, reported_line: int) -> str:
    """The recipe's numbering (kept to show the pitfall): lines counted after the leading
    ``import`` lines only, the reported line taken as is."""
    lines = code.split("\n")
    k = 0
    while k < len(lines) and lines[k].startswith("import"):
        k += 1
    context = lines[k:]
    idx = reported_line - 1
    out = [f"{ln + 1:03d}{' >' if ln == idx else '  '}| {context[ln]}"
           for ln in range(max(0, idx - 2), min(len(context), idx + 3))]
    return "\n".join(out)


def build_feedback(code: str, result: dict[str, Any], *, max_errors: int = 3,
                   line_scheme: LineScheme = "relative") -> str:
    """The second-turn user message for a failed proof (``result``: one ``/api/check`` result)."""
    response = result.get("response") if isinstance(result.get("response"), dict) else {}
    errors = [m for m in (response.get("messages") or []) if m.get("severity") == "error"][:max_errors]
    if not errors:
        problem = result.get("error") or response.get("message") or (
            "the proof uses sorry" if response.get("sorries") else "no error message was returned")
        return f"# System Error:\nError message: \n{str(problem).strip()}\n\n"
    parts = []
    for i, msg in enumerate(errors, 1):
        reported = int((msg.get("pos") or {}).get("line", 1))
        line = absolute_line(code, reported, line_scheme)
        parts.append(f"# Error {i}:\nError message: \n{str(msg.get('data', '')).strip()}\n\n"
                     f"Lean 4 code snippet with error:\n```lean4\n{code_window(code, line)}\n```\n")
    return "\n".join(parts)


@dataclass
class SecondTurnCache:
    """The recipe's error-correction cache (``NuminaRLDataset`` in ``dataset.py``).

    - one correction round (``n_turns=2``): a second turn that fails is not cached again;
    - feedback over 3000 characters is **dropped**, not truncated;
    - the newest 5000 prompts are kept;
    - each training item is drawn from the cache with probability 0.5 (:meth:`draw`);
    - every sample not added is counted by reason.
    """

    capacity: int = 5000
    max_feedback_chars: int = 3000
    sampling_rate: float = 0.5
    n_turns: int = 2
    max_prompt_tokens: int | None = None
    tokenizer: Any = None
    seed: int = 0
    prompts: deque = field(init=False)
    counts: Counter = field(default_factory=Counter)

    def __post_init__(self):
        self.prompts = deque(maxlen=self.capacity)
        self._rng = random.Random(self.seed)

    def add(self, messages: list[dict], response: str, feedback: str, **extra) -> str:
        """Offer one scored rollout; returns the reason it was or was not added."""
        turn = sum(m.get("role") == "user" for m in messages)
        if feedback == VALID_FEEDBACK:
            reason = "valid"
        elif feedback == FILTERED_FEEDBACK:
            reason = "filtered"
        elif len(feedback) > self.max_feedback_chars:
            reason = "feedback_too_long"
        elif turn >= self.n_turns:
            reason = "exceed_max_turn"
        else:
            conversation = list(messages) + [{"role": "assistant", "content": response},
                                             {"role": "user", "content": feedback}]
            if self.max_prompt_tokens and self.tokenizer is not None and len(self.tokenizer.apply_chat_template(
                    conversation, tokenize=True, add_generation_prompt=True)) > self.max_prompt_tokens:
                reason = "prompt_too_long"
            else:
                self.prompts.append({"messages": conversation, **extra})
                reason = "added"
        self.counts[reason] += 1
        return reason

    def draw(self, item: dict) -> dict:
        """With probability ``sampling_rate`` (and a non-empty cache) a cached second-turn prompt,
        else ``item`` unchanged."""
        if self.prompts and self._rng.random() < self.sampling_rate:
            return self.prompts[self._rng.randrange(len(self.prompts))]
        return item

    def __len__(self) -> int:
        return len(self.prompts)
