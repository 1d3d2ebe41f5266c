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
from pathlib import Path

_STOPWORDS_FILE = Path(__file__).with_name("recipe_stopwords.txt")


def load_recipe_stopwords(path: Path = _STOPWORDS_FILE) -> frozenset[str]:
    """The recipe's ``COMMON_STOPWORDS`` (``definitions.py``, Apache-2.0, attribution in the file).

    Shipped as data, one entry a line, so the repetition check counts exactly the words the
    recipe counts; a few entries are phrases or LaTeX commands that can never equal a ``\\w+``
    token, kept anyway so the list stays the recipe's.
    """
    words = [ln.rstrip("\n") for ln in path.read_text(encoding="utf-8").splitlines()]
    return frozenset(w for w in words if w and not w.startswith("#"))


# A repeated line only counts if it has >= 10 tokens outside this list.
STOPWORDS = load_recipe_stopwords()


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


def _remove_block_comments(code: str) -> str:
    """``re.sub(r"/-.*?(--/|-/)", "", code, flags=re.DOTALL)`` in one pass.

    Each ``/-`` closes at the first ``-/`` after it (``--/`` ends at the same place); an
    unclosed ``/-`` and everything after it are **kept** — no later ``/-`` can close either.
    ``/-`` inside a ``--`` line comment still opens a block here, as in the recipe.
    """
    out, i = [], 0
    while (start := code.find("/-", i)) != -1:
        end = code.find("-/", start + 2)
        if end == -1:
            break
        out.append(code[i:start])
        i = end + 2
    out.append(code[i:])
    return "".join(out)


def _remove_line_comments(code: str) -> str:
    """``re.sub(r"--.*", "", code)``: from each ``--`` to the next ``\\n`` (``.`` stops only there)."""
    out, i = [], 0
    while (dash := code.find("--", i)) != -1:
        out.append(code[i:dash])
        newline = code.find("\n", dash)
        i = len(code) if newline == -1 else newline
    out.append(code[i:])
    return "".join(out)


def remove_comments(code: str) -> str:
    """The recipe's ``remove_comments``: block comments first (whole text), then line comments.

    Linear time (two ``str.find`` passes). Lean itself nests ``/- … -/`` and lets an unclosed
    one run to the end of the file; the recipe does neither, and the reward follows the recipe.
    """
    return _remove_line_comments(_remove_block_comments(code))


def remove_comments_lean(code: str) -> str:
    """Comments as **Lean** reads them, for comparison with :func:`remove_comments` (the recipe's):
    ``/- … -/`` nest, an unclosed ``/-`` runs to the end of the text, and ``--`` starts a line
    comment in which ``/-`` means nothing. String literals are not treated specially (neither
    does the recipe). The reward never uses this; notebook 06 shows where the two differ.
    """
    out, i, n = [], 0, len(code)
    block, line = code.find("/-"), code.find("--")  # next markers, refreshed only once passed: linear
    while i < n:
        if block != -1 and block < i:
            block = code.find("/-", i)
        if line != -1 and line < i:
            line = code.find("--", i)
        if block == -1 and line == -1:
            out.append(code[i:])
            break
        if line != -1 and (block == -1 or line < block):
            out.append(code[i:line])
            newline = code.find("\n", line)
            i = n if newline == -1 else newline
            continue
        out.append(code[i:block])
        depth, j = 1, block + 2
        opener, closer = code.find("/-", j), code.find("-/", j)
        while depth:
            if closer == -1:
                j = n
                break
            if opener != -1 and opener < closer:
                depth, j = depth + 1, opener + 2
            else:
                depth, j = depth - 1, closer + 2
            if opener != -1 and opener < j:
                opener = code.find("/-", j)
            if closer < j:
                closer = code.find("-/", j)
        i = j
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
    """End of ``re.search(r"```lean4\\s*([\\s\\S]+?)\\s*```", text)``, ``None`` if no match.

    Backtracking order of that regex: the first ``\\s*`` takes the whole whitespace run after
    the opener, the lazy body at least one more character, so the block closes at the first
    ```` ``` ```` at least one character past that run (a doubled ```` ```lean4 ```` opener is
    body, not the close). Only if there is none may the close sit right at the end of the run
    (the body is then the run's last whitespace character). Only the first opener can match.
    """
    start = text.find("```lean4")
    if start == -1:
        return None
    run_start = start + len("```lean4")
    run_end = run_start
    while run_end < len(text) and text[run_end].isspace():
        run_end += 1
    close = text.find("```", run_end + 1)
    if close != -1:
        return close + 3
    if run_end > run_start and text.startswith("```", run_end):
        return run_end + 3
    return None


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


_WORD = re.compile(r"\w+")


def _significant_lines(think: str, min_tokens: int) -> list[str]:
    kept, pos = [], 0
    for start, end, _ in _fenced_blocks(think, "```tactics"):
        kept.append(think[pos:start])
        pos = end
    without_tactics = "".join(kept) + think[pos:]
    lines = []
    for raw in without_tactics.splitlines():
        line = raw.strip().lower()
        words = _WORD.findall(line)
        if sum(w not in STOPWORDS for w in words) >= min_tokens:
            lines.append(line)
    return lines


def _tactic_block_lines(block: str) -> int:
    """Code lines + comment lines of a tactics block: with the recipe's counting (comment lines
    are "all lines" minus "code lines") that is every line of the block."""
    return len(block.split("\n"))


def _clean_and_normalize(text: str) -> str:
    """The recipe's ``clean_and_normalize``: comments and every ``sorry`` dropped, whitespace collapsed."""
    return " ".join(remove_comments(text).replace("sorry", "").split())


def normalize_statement_blocks(formal_statement: str) -> list[str]:
    """The statement's blocks (split on blank lines after removing comments from the whole
    statement), each cleaned again; ``import``/``set_option``/``open`` blocks skipped."""
    blocks = []
    for block in remove_comments(formal_statement).split("\n\n"):
        norm = _clean_and_normalize(block)
        if norm and not norm.startswith(("import", "set_option", "open")):
            blocks.append(norm)
    return blocks


# ------------------------------------------------------------------ the checks


def _check_turn(text: str, formal_statement: str, t: dict) -> FormatError:
    """``FormatReward.check_one_turn_format_error`` of the recipe, step by step."""
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
    # 9. tactics lines cover >= 70% of the final code's lines — both read from the WHOLE text
    blocks = parse_tactics_blocks(text)
    if blocks is None:
        return FormatError.TACTIC_BLOCK_FORMATTING_ERROR
    whole = _fenced_blocks(text, "```lean4")
    if len(whole) != 1:
        # The recipe's ``extract_lean4_block`` asserts here and the reward call raises
        # AssertionError (a strict lean4 block before <think>); we fail the format instead.
        return FormatError.INVALID_LEAN4_CODE_BLOCK_COUNT
    final = set(code_lines(whole[0][2].strip()))
    covered = {ln for b in blocks for ln in code_lines(b)} & final
    if not final or len(covered) / len(final) < t["tactics_lean4_match_threshold"]:
        return FormatError.TACTICS_LEAN4_NOT_MATCH
    # 10. the statement is reproduced; no axiom / local_instance
    code = _clean_and_normalize(whole[0][2].strip())
    if "axiom" in code or "local_instance" in code:
        return FormatError.LEAN4_CODE_NOT_START_WITH_STATEMENT
    if not all(block in code for block in normalize_statement_blocks(formal_statement)):
        return FormatError.LEAN4_CODE_NOT_START_WITH_STATEMENT
    return FormatError.NONE


def _thresholds(overrides: dict) -> dict:
    unknown = set(overrides) - set(DEFAULT_THRESHOLDS)
    if unknown:
        raise ValueError(f"unknown thresholds {sorted(unknown)}; known: {sorted(DEFAULT_THRESHOLDS)}")
    return {**DEFAULT_THRESHOLDS, **overrides}


def check_format(response: str, formal_statement: str, **thresholds) -> FormatError:
    """The recipe's checks on one assistant response (``check_format_error(str)``); the first
    failure wins.

    Never raises on a string; ``UNKNOWN`` for ``""`` or a non-string (a whitespace-only string
    is checked, and fails ``NO_VALID_LEAN4_CODE_BLOCK``, as in the recipe). ``thresholds``
    override the recipe's defaults (:data:`DEFAULT_THRESHOLDS`).
    """
    t = _thresholds(thresholds)
    if not isinstance(response, str) or not response:
        return FormatError.UNKNOWN
    return _check_turn(response, formal_statement if isinstance(formal_statement, str) else "", t)


def check_conversation(messages: list[dict], formal_statement: str, **thresholds) -> FormatError:
    """Check **every** assistant turn, as the recipe does; the first failing turn's error wins.

    Consequence: in a second turn (error correction), a perfect fix still fails if the first
    turn — now part of the prompt — was malformed. The recipe's cache admits such samples (a
    format-failing response whose proof could still be extracted gets Lean feedback), so all
    eight second-turn rollouts of that prompt score 0: a zero-variance group, no gradient.

    An empty assistant turn fails ``NO_VALID_LEAN4_CODE_BLOCK`` (the recipe's list path); a
    conversation without an assistant turn, or a turn whose content is not a string, is
    ``UNKNOWN`` (the recipe raises on both).
    """
    t = _thresholds(thresholds)
    statement = formal_statement if isinstance(formal_statement, str) else ""
    assistant = [m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "assistant"]
    if not assistant:
        return FormatError.UNKNOWN
    for content in assistant:
        err = _check_turn(content, statement, t) if isinstance(content, str) else FormatError.UNKNOWN
        if err is not FormatError.NONE:
            return err
    return FormatError.NONE
