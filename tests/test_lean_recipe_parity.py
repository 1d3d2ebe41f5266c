"""Differential tests: our format checks, proof extraction and feedback against the recipe's semantics.

Two oracles, neither of them our code:
- the recipe's own regexes (quoted in our docstrings as the spec) for each helper we rewrote as a
  linear scan — always run;
- the recipe itself (project-numina/kimina-prover-rl, ``recipe/kimina_prover_rl``), when
  ``KIMINA_RECIPE_DIR`` points at a checkout of that folder — the recipe's code is never copied
  into this repository. Its reward module imports ``kimina_client`` at import time, so only
  ``format_reward``, ``proof_utils`` and ``error_fixing`` are loaded.

The generator assembles responses from fragments chosen to sit on every boundary the checks
have: fences with and without newlines, doubled openers, think tags, ``--``/``/-``/``-/``
comment markers (``---/-``, unclosed blocks), stop-word lines repeated, ``\\r`` and unicode
line breaks, statements with and without ``sorry``.
"""

from __future__ import annotations

import importlib
import os
import random
import re
import sys
import time
from pathlib import Path

import pytest

from kimina_edu.lean.data import load_offline_problems
from kimina_edu.lean.examples import failing_examples, passing_response
from kimina_edu.lean.feedback import build_feedback
from kimina_edu.lean.format import (
    FormatError,
    _first_loose_lean4_block_end,
    _remove_block_comments,
    _remove_line_comments,
    check_format,
    remove_comments,
)
from kimina_edu.lean.proof import extract_proof, is_commented

PROBLEMS = load_offline_problems()

PIECES = ["```lean4", "```lean4\n", "```lean4 \n", "```", "\n```", "```tactics\n", "```tactics", " ```tactics\n",
          "<think>", "</think>", "\n", "\n\n", " ", "\r\n", "\u2028", "\t", "-- note", "--", "---/-", "/-", "-/",
          "--/", "/- c -/", "sorry", ":= by", ":=", "by", "theorem", "lemma", "axiom ", "local_instance",
          "import Mathlib\n", "  nlinarith [sq_nonneg (a - b)]\n", "  simp\n", "x", "ℕ", "∀ n, n = n",
          "count_heartbeats in ", "we have the sum of squares is always nonnegative for every real pair here\n"]


def generate(rng: random.Random, problem: dict) -> str:
    """One response: a realistic one mutated by splicing in fragments, or fragments alone."""
    stmt = problem["formal_statement"]
    if rng.random() < 0.6:
        cases = failing_examples(problem)
        text = rng.choice(cases)["response"] if rng.random() < 0.5 else passing_response(problem)
        for _ in range(rng.randint(0, 4)):
            at = rng.randint(0, len(text))
            piece = rng.choice(PIECES + [stmt, stmt.replace("sorry", ""), "\n".join(stmt.splitlines()[-1:])])
            if rng.random() < 0.2:  # delete a stretch instead
                text = text[:at] + text[at + rng.randint(1, 40):]
            else:
                text = text[:at] + piece + text[at:]
        return text
    parts = [rng.choice(PIECES + [stmt, normalize_tail(stmt)]) for _ in range(rng.randint(1, 14))]
    return "".join(parts)


def normalize_tail(stmt: str) -> str:
    return stmt.replace("sorry", "") + "\n  simp"


# ---------------------------------------------------------------- the recipe's regexes as oracles


def test_loose_block_end_is_the_recipe_regex():
    rng = random.Random(1)
    alphabet = ["```lean4", "```", "`", " ", "\n", "\t", "x", "\u00a0", "\x1c", "```lean4```"]
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 9)))
        m = re.search(r"```lean4\s*([\s\S]+?)\s*```", text)
        assert _first_loose_lean4_block_end(text) == (m.end() if m else None), repr(text)


def test_comment_removal_is_the_recipe_regex():
    rng = random.Random(2)
    alphabet = ["/-", "-/", "--/", "-", "/", "--", "\n", "a", " ", "\r", "/--/"]
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10)))
        blocks = re.sub(r"/-.*?(--/|-/)", "", text, flags=re.DOTALL)
        assert _remove_block_comments(text) == blocks, repr(text)
        assert _remove_line_comments(blocks) == re.sub(r"--.*", "", blocks) == remove_comments(text), repr(text)


def test_is_commented_follows_the_recipe():
    # ``/-`` in a line comment with no closing ``-/`` hides nothing: the statement below it counts
    code = "---/- helper\ntheorem t : True := by\n  trivial"
    assert not is_commented(code, code.index("theorem"))
    stmt = "theorem t : True := by sorry"
    response = f"<think>\n</think>\n```lean4\n{code}\n```"
    assert extract_proof(response, stmt) == "theorem t : True := by\n  trivial"
    # an unclosed /- hides nothing either (Lean would comment out the rest of the file)
    assert not is_commented("/- open\ntheorem t", 9)
    assert is_commented("/- a -/ x", 3) and not is_commented("/- a -/ x", 8)


def test_doubled_lean4_opener_passes_as_in_the_recipe():
    p = PROBLEMS[0]
    good = passing_response(p)
    doubled = good.replace("```lean4\n", "```lean4\n```lean4\n", 1) if good.count("```lean4\n") == 1 else None
    assert doubled is not None
    end = _first_loose_lean4_block_end(doubled)
    assert end == len(doubled.rstrip())  # the loose block runs to the final fence


def test_recipe_stopwords_are_shipped_with_attribution():
    from kimina_edu.lean.format import _STOPWORDS_FILE, STOPWORDS

    head = _STOPWORDS_FILE.read_text(encoding="utf-8")
    assert "Apache License, Version 2.0" in head and "project-numina/kimina-prover-rl" in head
    assert len(STOPWORDS) == 138 and {"the", "we", "hence", "lemma"} <= STOPWORDS


def test_position_less_error_gets_no_invented_snippet():
    code = "theorem t : True := by\n  trivial"
    msg = {"severity": "error", "data": "unexpected end of input"}
    text = build_feedback(code, {"response": {"messages": [msg]}}, line_scheme="absolute")
    assert text == "# Error 1:\nError message: \nunexpected end of input\n\n"
    assert "```lean4" not in text


@pytest.mark.parametrize("size", [1_000_000])
@pytest.mark.parametrize("shape", ["dash_comments", "open_blocks", "openers", "tactics_openers", "think_tags",
                                   "nested_markers", "statement_floods"])
def test_linear_time_on_adversarial_megabyte(shape, size):
    p = PROBLEMS[0]
    unit = {"dash_comments": "  -- c\n", "open_blocks": "/-", "openers": "```lean4\n", "tactics_openers": "```tactics\n",
            "think_tags": "<think>", "nested_markers": "---/-/--", "statement_floods": "theorem :="}[shape]
    body = unit * (size // len(unit))
    two_tactics = "<think>\n```tactics\nx\n```\n```tactics\ny\n```\n"
    texts = [f"{two_tactics}</think>\n```lean4\n{body}\n```", f"{two_tactics}{body}</think>\n```lean4\nx\n```",
             body, f"```lean4\n{body}"]
    for text in texts:
        start = time.perf_counter()
        check_format(text, p["formal_statement"])
        extract_proof(text, p["formal_statement"])
        remove_comments(text)
        # a loose bound (not a timing goal — benchmarks/bench_format.py measures that): a quadratic
        # scan of 1 MB takes minutes, a linear one well under a second
        assert time.perf_counter() - start < 20, shape


# ---------------------------------------------------------------- the recipe itself, when available


def _recipe():
    root = os.environ.get("KIMINA_RECIPE_DIR")
    if not root or not (Path(root) / "kimina_prover_rl" / "reward" / "format_reward.py").exists():
        pytest.skip("set KIMINA_RECIPE_DIR to a checkout of recipe/kimina_prover_rl to run the differential test")
    sys.path.insert(0, root)
    try:
        fmt = importlib.import_module("kimina_prover_rl.reward.format_reward")
        proof = importlib.import_module("kimina_prover_rl.reward.proof_utils")
        fix = importlib.import_module("kimina_prover_rl.reward.error_fixing")
    finally:
        sys.path.remove(root)
    return fmt, proof, fix


def recipe_verdicts(recipe, text: str, stmt: str) -> tuple[str, str | None]:
    fmt, proof, _ = recipe
    try:
        err = fmt.FormatReward().check_format_error(text, stmt)[0].name
    except AssertionError:
        err = "INVALID_LEAN4_CODE_BLOCK_COUNT"  # the recipe raises; ours fails the format (see _check_turn)
    extracted = proof.extract_proof_from_text(text, stmt)
    if extracted in ("No proof found in the output.", "Theorem statement couldn't be parsed from statement."):
        extracted = None
    return err, extracted


def test_agrees_with_the_recipe_on_generated_responses():
    recipe = _recipe()
    rng = random.Random(int(os.environ.get("KIMINA_PARITY_SEED", "0")))
    n = int(os.environ.get("KIMINA_PARITY_N", "3000"))
    disagreements = []
    for k in range(n):
        p = PROBLEMS[k % len(PROBLEMS)]
        text = generate(rng, p)
        ours = (check_format(text, p["formal_statement"]).name, extract_proof(text, p["formal_statement"]))
        theirs = recipe_verdicts(recipe, text, p["formal_statement"])
        if ours != theirs:
            disagreements.append((text, ours, theirs))
    assert not disagreements, f"{len(disagreements)}/{n} disagree; first: {disagreements[0]!r}"


def test_feedback_agrees_with_the_recipe():
    recipe = _recipe()
    rng = random.Random(3)
    for k in range(2000):
        p = PROBLEMS[k % len(PROBLEMS)]
        body = generate(rng, p)
        code = rng.choice(["import Mathlib\nimport Aesop\n\n", "import Mathlib\n", "", "\nimport X\ny\nimport Z\n"]) + body
        n_lines = max(1, len(code.splitlines()))
        msgs = []
        for _ in range(rng.randint(0, 5)):
            m = {"severity": rng.choice(["error", "warning", "info"]), "data": rng.choice(["bad", " x \n", "ℕ"])}
            if rng.random() < 0.8:
                m["pos"] = {"line": rng.randint(-1, n_lines + 3), "column": 0}
            elif rng.random() < 0.5:
                m["pos"] = {}
            msgs.append(m)
        result = {"response": {"messages": msgs}} if rng.random() < 0.8 else {"error": rng.choice(["", " boom ", None])}
        theirs = recipe[2].create_tool_message(code, result)
        assert build_feedback(code, result, line_scheme="recipe") == theirs, (code, result)


def test_known_format_errors_are_named_alike():
    recipe = _recipe()
    ours = {e.name for e in FormatError}
    theirs = {e.name for e in recipe[1].FormatError}
    assert ours - {"UNKNOWN"} <= theirs


def test_lean_comment_semantics_differ_from_the_recipe_where_documented():
    from kimina_edu.lean.format import remove_comments_lean

    nested = "a /- x /- y -/ z -/ b"
    assert remove_comments_lean(nested) == "a  b" and remove_comments(nested) == "a  z -/ b"
    unclosed = "theorem t : True := trivial\n/- open\ntheorem u : True := trivial"
    assert remove_comments_lean(unclosed) == "theorem t : True := trivial\n"
    assert remove_comments(unclosed) == unclosed  # the recipe keeps it all
    in_line = "x -- a /- b\ny -/ z"
    assert remove_comments_lean(in_line) == "x \ny -/ z" and remove_comments(in_line) == "x "
    # linear on floods of markers
    start = time.perf_counter()
    for flood in ("/- " * 300_000 + "-/", "-- x\n" * 200_000 + "/-", "/-" * 500_000, "a-/" * 300_000):
        remove_comments_lean(flood)
    assert time.perf_counter() - start < 20


def _lean_comments_char_by_char(code: str) -> str:
    """Lean's comment rules read one character at a time (the oracle for the linear scan)."""
    out, i, n = [], 0, len(code)
    while i < n:
        if code.startswith("--", i):
            j = code.find("\n", i)
            i = n if j == -1 else j
        elif code.startswith("/-", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if code.startswith("/-", i):
                    depth, i = depth + 1, i + 2
                elif code.startswith("-/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        else:
            out.append(code[i])
            i += 1
    return "".join(out)


def test_lean_comment_removal_matches_a_char_by_char_reading():
    from kimina_edu.lean.format import remove_comments_lean

    rng = random.Random(4)
    alphabet = ["/-", "-/", "--", "-", "/", "\n", "a", " "]
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10)))
        assert remove_comments_lean(text) == _lean_comments_char_by_char(text), repr(text)
