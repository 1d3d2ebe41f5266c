"""Chapter 7 — Lean's errors as the second turn's prompt, and the cache that holds them.

Feedback (the recipe's ``create_tool_message`` in ``error_fixing.py``): the first three
messages with ``severity == "error"``, each as ``# Error i:``, the message, and a numbered
window of the code (the error line ± 2, cut at the code's ends) with the error line marked;
``# System Error:`` for timeouts and server failures. There is no "please fix" sentence: the
feedback *is* the user turn.

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
LineScheme = Literal["relative", "absolute", "recipe"]
LINE_SCHEMES = ("relative", "absolute", "recipe")


def header_line_count(code: str) -> int:
    """Leading lines the server splits off as the header: on ``str.splitlines()``, every line
    whose ``strip()`` is empty or starts with ``"import "`` (``split_snippet`` in the server's
    ``split.py``)."""
    count = 0
    for line in code.splitlines():
        stripped = line.strip()
        if stripped == "" or stripped.startswith("import "):
            count += 1
        else:
            break
    return count


def absolute_line(code: str, reported_line: int, line_scheme: LineScheme = "relative") -> int:
    """The 1-based line of ``code`` (numbered as ``code.splitlines()``) a server message points at."""
    if line_scheme == "absolute":
        return reported_line
    if line_scheme == "relative":
        return reported_line + header_line_count(code)
    raise ValueError(f"line_scheme must be 'relative' (server 2.0.0, kimina-ast-server) or 'absolute' "
                     f"(kimina-lean-server after PR #56); got {line_scheme!r}")


def _window(lines: list[str], index: int) -> str:
    """The recipe's window: 0-based ``index`` ± 2, numbered 1-based, ``count_heartbeats in`` dropped."""
    out = []
    for ln in range(max(0, index - 2), min(len(lines), index + 3)):
        out.append(f"{ln + 1:03d}{' >' if ln == index else '  '}| {lines[ln].replace('count_heartbeats in', '')}")
    return "\n".join(out)


def code_window(code: str, line: int, radius: int = 2) -> str:
    """Lines ``line-2 … line+2`` of ``code``, numbered, the error line marked ``>``."""
    if radius != 2:
        raise ValueError("the recipe's window is 2 lines either side; radius must be 2")
    return _window(code.splitlines(), line - 1)


def _recipe_context(code: str) -> list[str]:
    """The recipe's ``split_proof_header`` (``error_fixing.py``): strip, then skip every line starting
    ``import`` up to the first non-import line that follows an import line."""
    lines = code.strip().split("\n")
    index, in_header = 0, False
    for line in lines:
        if line.startswith("import"):
            in_header = True
            index += 1
        elif in_header:
            break
    return "\n".join(lines[index:]).split("\n")


def recipe_window(code: str, reported_line: int) -> str:
    """The recipe's numbering (kept to show the pitfall): lines counted after the leading
    ``import`` lines only, the reported line taken as is."""
    return _window(_recipe_context(code), reported_line - 1)


def _error_messages(result: dict[str, Any], max_errors: int) -> list[dict]:
    response = result.get("response") if isinstance(result, dict) else None
    if not (isinstance(response, dict) and response.get("messages")):
        return []
    messages = response["messages"] if isinstance(response["messages"], list) else []
    return [m for m in messages if isinstance(m, dict) and m.get("severity") == "error"][:max_errors]


def build_feedback(code: str, result: dict[str, Any], *, max_errors: int = 3,
                   line_scheme: LineScheme = "relative") -> str:
    """The second-turn user message for a failed proof (``result``: one ``/api/check`` result).

    The recipe's ``create_tool_message``: per error (first three with ``severity == "error"``)
    ``# Error i:``, the message and — only when the message has a position — the window of
    up to 5 lines; with no such error, ``# System Error:`` and the result's top-level ``error``, or
    ``""`` when there is none (a proof with only ``sorry`` gets no feedback in the recipe).
    ``line_scheme="recipe"`` numbers the window as the recipe does; ``"relative"`` /
    ``"absolute"`` number it as the code the model wrote, for a server that reports body-relative
    or absolute lines (:meth:`kimina_edu.lean.client.LeanVerifier.resolve_line_scheme` finds out which).
    """
    if line_scheme not in LINE_SCHEMES:
        raise ValueError(f"line_scheme must be one of {LINE_SCHEMES}; got {line_scheme!r}")
    code = code if isinstance(code, str) else ""
    context = _recipe_context(code) if line_scheme == "recipe" else code.splitlines()
    parts = []
    for i, msg in enumerate(_error_messages(result, max_errors), 1):
        text = f"# Error {i}:\n"
        data = msg.get("data", "Unknown error")
        text += f"Error message: \n{str(data).strip()}\n\n"
        pos = msg.get("pos")
        if pos and isinstance(pos, dict):
            reported = pos.get("line", 1)
            if isinstance(reported, int) and not isinstance(reported, bool):
                line = reported if line_scheme == "recipe" else absolute_line(code, reported, line_scheme)
                window = _window(context, line - 1)
                text += "Lean 4 code snippet with error:\n```lean4\n" + (window + "\n" if window else "") + "```\n"
        parts.append(text)
    if parts:
        return "".join(parts)
    error = result.get("error") if isinstance(result, dict) else None
    if isinstance(error, str) and error.strip():
        return f"# System Error:\nError message: \n{error.strip()}\n\n"
    return ""


def is_system_feedback(feedback: str) -> bool:
    """Feedback about the verifier, not the proof — never a second-turn prompt here (the recipe
    caches it; a model cannot fix a server outage, and the text may carry server internals)."""
    return feedback.startswith("# System Error:")


@dataclass
class SecondTurnCache:
    """The recipe's error-correction cache (``NuminaRLDataset`` in ``dataset.py``).

    - one correction round (``n_turns=2``): a second turn that fails is not cached again;
    - feedback over 3000 characters is **dropped**, not truncated;
    - the newest 5000 prompts are kept;
    - each training item is drawn from the cache with probability 0.5 (:meth:`draw`);
    - every sample not added is counted by reason;
    - unlike the recipe, empty feedback (a ``sorry``-only proof) and ``# System Error``
      feedback (timeouts, server failures) are not cached: reasons ``no_feedback`` and
      ``system_error``.
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
        elif not feedback.strip():
            reason = "no_feedback"
        elif is_system_feedback(feedback):
            reason = "system_error"
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
