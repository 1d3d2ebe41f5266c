"""Chapter 6 — every format check of the Kimina-Prover-RL recipe, in its order.

A response earns reward 1 only if Lean accepts its proof **and** it passes all of these
checks (recipe: ``recipe/kimina_prover_rl/kimina_prover_rl/reward/format_reward.py`` and
``proof_utils.py`` in project-numina/kimina-prover-rl, default thresholds). The semantics
are the recipe's; the code is ours and scans with ``str.find`` instead of lazy regexes, so an
adversarial 1 MB response is checked in linear time (a regex like ``<think>(.*?)</think>`` is
quadratic on a string of many unclosed ``<think>`` tags).

The expected output ("formal reasoning pattern")::

    <think>
    reasoning … ```tactics
    step one
    ``` … more reasoning … ```tactics
    step two
    ```
    </think>
    ```lean4
    <the full proof, starting with the formal statement>
    ```
"""

from __future__ import annotations

import re
from collections import Counter
from enum import Enum

# A small stop-word list: a repeated line only counts if it has >= 10 *content* words.
STOPWORDS = frozenset(
    ["a", "an", "the", "and", "or", "but", "if", "then", "else", "so", "of", "to", "in", "on", "at", "by", "for", "with", "from", "into", "onto", "as", "is", "are", "was", "were", "be", "been", "being", "this", "that", "these", "those", "it", "its", "we", "i", "you", "he", "she", "they", "them", "our", "us", "let", "lets", "can", "could", "should", "would", "will", "may", "might", "must", "do", "does", "did", "not", "no", "yes", "have", "has", "had", "which", "what", "when", "where", "who", "whom", "how", "why", "all", "any", "each", "every", "some", "such", "there", "here", "than", "too", "very", "just", "also", "only", "now", "again", "further", "once", "both", "more", "most", "other", "same", "own", "up", "down", "out", "over", "under", "between", "about", "above", "below", "after", "before", "because", "while", "during", "through", "until", "against", "use", "using", "get"]
)


class FormatError(Enum):
    """The recipe's error kinds (values are its messages); ``NONE`` means the format passes."""

    NONE = "No error."
    NO_VALID_LEAN4_CODE_BLOCK = "Could not find a valid lean4 code block."
    NO_VALID_THINK_BLOCK = "Could not find a valid think block."
    INVALID_THINK_BLOCK_COUNT = "There must be exactly one think block."
    INVALID_LEAN4_CODE_BLOCK_COUNT = "There must be exactly one lean4 code block."
    GENERATION_REPEATS = "Generation repeats."
    INSUFFICIENT_TACTICS_BLOCKS = "There must be more than one tactics block."
    TACTIC_CODE_TOO_MANY_LINES = "Tactic code contains too many lines."
    TACTIC_BLOCK_FORMATTING_ERROR = "Tactic block formatting error."
    TACTICS_LEAN4_NOT_MATCH = "Tactics and Lean4 code do not match."
    LEAN4_CODE_NOT_START_WITH_STATEMENT = "Lean 4 code does not start with the formal statement."
    UNKNOWN = "Unknown error (empty response)."


# The recipe's default thresholds (FormatReward()).
DEFAULT_THRESHOLDS = {
    "tactics_blocks_threshold": 2,
    "total_tactic_blocks_lines_threshold": 0.95,
    "tactics_lean4_match_threshold": 0.7,
    "repeated_lines_threshold": 6,
    "repeat_significant_min_tokens": 10,
}


# ------------------------------------------------------------------ Lean text helpers


def remove_comments(code: str) -> str:
    """Drop ``/- … -/`` block comments and ``-- …`` line comments (linear scan)."""
    out, i, n = [], 0, len(code)
    while i < n:
        if code.startswith("/-", i):
            end = code.find("-/", i + 2)
            i = n if end == -1 else end + 2
        elif code.startswith("--", i):
            end = code.find("\n", i)
            i = n if end == -1 else end
        else:
            nxt = min((p for p in (code.find("/-", i), code.find("--", i)) if p != -1), default=n)
            out.append(code[i:nxt])
            i = nxt
    return "".join(out)


def code_lines(code: str) -> list[str]:
    """Non-blank, stripped lines of ``code`` after removing comments."""
    return [ln.strip() for ln in remove_comments(code).split("\n") if ln.strip()]


def _fenced_blocks(text: str, opener: str) -> list[tuple[int, int, str]]:
    """Blocks written ``<opener>\\n body \\n```` — the recipe's strict newline form.

    Returns ``(start, end, body)`` for each, left to right without overlap: the same blocks as
    ``re.findall(r"```lean4\\n(.*?)\\n```", text, re.DOTALL)``, found with ``str.find``.
    """
    head = opener + "\n"
    blocks, i = [], 0
    while (start := text.find(head, i)) != -1:
        body_start = start + len(head)
        close = text.find("\n```", body_start)
        if close == -1:
            break
        blocks.append((start, close + 4, text[body_start:close]))
        i = close + 4
    return blocks


def _first_loose_lean4_block_end(text: str) -> int | None:
    """End of the first ```` ```lean4 … ``` ```` block, ``None`` if there is none.

    Same as ``re.search(r"```lean4\\s*([\\s\\S]+?)\\s*```", text).end()``: the body needs at
    least one character (whitespace counts), and the block closes at the first fence after it.
    A later ```` ```lean4 ```` cannot succeed where the first failed, so only the first is tried.
    """
    start = text.find("```lean4")
    if start == -1:
        return None
    close = text.find("```", start + len("```lean4") + 1)
    return None if close == -1 else close + 3


def parse_tactics_blocks(text: str) -> list[str] | None:
    """Line-based ```` ```tactics ```` blocks; ``None`` for an unclosed block or a stray fence inside."""
    lines = text.split("\n")
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].strip() == "```tactics":
            for j in range(i + 1, len(lines)):
                if lines[j].strip() == "```":
                    blocks.append("\n".join(lines[i + 1 : j]))
                    i = j
                    break
            else:
                return None
        i += 1
    if any("```" in b for b in blocks):
        return None
    return blocks


def _significant_lines(think: str, min_tokens: int) -> list[str]:
    kept, pos = [], 0
    for start, end, _ in _fenced_blocks(think, "```tactics"):
        kept.append(think[pos:start])
        pos = end
    without_tactics = "".join(kept) + think[pos:]
    lines = []
    for raw in without_tactics.splitlines():
        line = raw.strip().lower()
        words = re.findall(r"\b\w+\b", line)
        if sum(w not in STOPWORDS for w in words) >= min_tokens:
            lines.append(line)
    return lines


def _tactic_block_lines(block: str) -> int:
    """Code lines + comment lines of a tactics block: with the recipe's counting (comment lines
    are "all lines" minus "code lines") that is every line of the block."""
    return len(block.split("\n"))


def normalize_statement_blocks(formal_statement: str) -> list[str]:
    """The statement's blocks (split on blank lines), comment- and ``sorry``-free, whitespace
    collapsed; ``import``/``set_option``/``open`` blocks skipped."""
    blocks = []
    for block in remove_comments(formal_statement).split("\n\n"):
        norm = " ".join(block.replace("sorry", "").split())
        if norm and not norm.startswith(("import", "set_option", "open")):
            blocks.append(norm)
    return blocks


# ------------------------------------------------------------------ the checks


def _check_turn(text: str, formal_statement: str, t: dict) -> FormatError:
    # 1–2. a lean4 block exists, and nothing but whitespace follows the first one
    end = _first_loose_lean4_block_end(text)
    if end is None or text[end:].strip():
        return FormatError.NO_VALID_LEAN4_CODE_BLOCK
    # 3–4. exactly one think block, from the first <think> on
    if "<think>" not in text:
        return FormatError.NO_VALID_THINK_BLOCK
    after = text[text.index("<think>"):]
    if after.count("<think>") != 1 or after.count("</think>") != 1:
        return FormatError.INVALID_THINK_BLOCK_COUNT
    think = after[len("<think>"): after.index("</think>")]
    # 5. exactly one lean4 block in the strict newline form
    lean4 = _fenced_blocks(after, "```lean4")
    if len(lean4) != 1:
        return FormatError.INVALID_LEAN4_CODE_BLOCK_COUNT
    lean4_code = lean4[0][2]
    # 6. no significant line repeated >= 6 times in the reasoning (tactics blocks excluded)
    counts = Counter(_significant_lines(think, t["repeat_significant_min_tokens"]))
    if any(c >= t["repeated_lines_threshold"] for c in counts.values()):
        return FormatError.GENERATION_REPEATS
    # 7. at least two tactics blocks
    tactics = _fenced_blocks(after, "```tactics")
    if len(tactics) < t["tactics_blocks_threshold"]:
        return FormatError.INSUFFICIENT_TACTICS_BLOCKS
    # 8. no tactics block longer than max(5, 95% of the final code's lines)
    limit = max(5, int(len(lean4_code.strip().split("\n")) * t["total_tactic_blocks_lines_threshold"]))
    if any(_tactic_block_lines(b) > limit for _, _, b in tactics):
        return FormatError.TACTIC_CODE_TOO_MANY_LINES
    # 9. tactics lines cover >= 70% of the final code's lines
    blocks = parse_tactics_blocks(text)
    if blocks is None:
        return FormatError.TACTIC_BLOCK_FORMATTING_ERROR
    final = set(code_lines(lean4_code.strip()))
    covered = {ln for b in blocks for ln in code_lines(b)} & final
    if not final or len(covered) / len(final) < t["tactics_lean4_match_threshold"]:
        return FormatError.TACTICS_LEAN4_NOT_MATCH
    # 10. the statement is reproduced; no axiom / local_instance
    code = " ".join(remove_comments(lean4_code.strip()).replace("sorry", "").split())
    if "axiom" in code or "local_instance" in code:
        return FormatError.LEAN4_CODE_NOT_START_WITH_STATEMENT
    if not all(block in code for block in normalize_statement_blocks(formal_statement)):
        return FormatError.LEAN4_CODE_NOT_START_WITH_STATEMENT
    return FormatError.NONE


def check_format(response: str, formal_statement: str, **thresholds) -> FormatError:
    """The recipe's checks on one assistant response; the first failure wins.

    Never raises on a string; ``UNKNOWN`` for empty input. ``thresholds`` override the
    recipe's defaults (:data:`DEFAULT_THRESHOLDS`).
    """
    unknown = set(thresholds) - set(DEFAULT_THRESHOLDS)
    if unknown:
        raise ValueError(f"unknown thresholds {sorted(unknown)}; known: {sorted(DEFAULT_THRESHOLDS)}")
    if not isinstance(response, str) or not response.strip():
        return FormatError.UNKNOWN
    return _check_turn(response, formal_statement or "", {**DEFAULT_THRESHOLDS, **thresholds})


def check_conversation(messages: list[dict], formal_statement: str, **thresholds) -> FormatError:
    """Check **every** assistant turn, as the recipe does; the first failing turn's error wins.

    Consequence: in a second turn (error correction), a perfect fix still fails if the first
    turn — now part of the prompt — was malformed. The recipe's cache admits such samples (a
    format-failing response whose proof could still be extracted gets Lean feedback), so all
    eight second-turn rollouts of that prompt score 0: a zero-variance group, no gradient.
    """
    assistant = [m.get("content", "") for m in messages if m.get("role") == "assistant"]
    if not assistant:
        return FormatError.UNKNOWN
    for content in assistant:
        err = check_format(content, formal_statement, **thresholds)
        if err is not FormatError.NONE:
            return err
    return FormatError.NONE
