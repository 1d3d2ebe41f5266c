"""Chapter 6 — example model outputs: one that passes every check, and for each check a
minimal edit that fails it (and near misses that still pass). Written by the course, not by a
model; the notebooks label them illustrative."""

from __future__ import annotations

from typing import Any

from kimina_edu.lean.format import FormatError
from kimina_edu.lean.proof import normalize_formal_statement

REPEATED = "Carefully expand binomial coefficients, compare numerator denominator parity, track remainder modulo seven."


def _parts(problem: dict[str, Any]) -> tuple[str, str, list[str]]:
    statement = normalize_formal_statement(problem["formal_statement"])
    header_lines = [ln for ln in statement.split("\n") if ln.strip() and not ln.startswith(("theorem", "lemma"))]
    theorem_line = statement[statement.index("theorem"):] if "theorem" in statement else statement.split("\n")[-1]
    header = [ln for ln in header_lines if not theorem_line.startswith(ln)]
    proof = problem.get("illustrative_proof") or ["sorry"]
    return "\n".join(header + [theorem_line]), statement, ["  " + p for p in proof]


def passing_response(problem: dict[str, Any], *, repeats: int = 0, extra_tactic_lines: int = 0) -> str:
    """A response in the recipe's format: reasoning with two tactics blocks, then one lean4 block."""
    block_one, statement, proof = _parts(problem)
    think = [
        "<think>",
        f"The goal: {problem['informal_problem']}",
        "First I restate the theorem with its header so Lean has the context.",
        "```tactics", block_one, "```",
        *([REPEATED] * repeats),
        "Now the main step: a single decision procedure should close the goal.",
        "```tactics", *proof, *(["  -- more"] * extra_tactic_lines), "```",
        "</think>",
    ]
    final = ["```lean4", statement, *proof, "```"]
    return "\n".join(think + final)


def failing_examples(problem: dict[str, Any]) -> list[dict[str, Any]]:
    """For each check: a minimal failing edit and (where it makes sense) a near miss that passes."""
    ok = passing_response(problem)
    block_one, statement, proof = _parts(problem)
    lean_block = "```lean4\n" + statement + "\n" + "\n".join(proof) + "\n```"
    think_part = ok[: ok.index("```lean4")]
    broken_statement = statement.replace(":= by", "∧ True := by", 1)
    rows = [
        ("passes every check", ok, FormatError.NONE),
        ("empty response", "", FormatError.UNKNOWN),
        ("no lean4 block", think_part, FormatError.NO_VALID_LEAN4_CODE_BLOCK),
        ("text after the lean4 block", ok + "\nHope this helps!", FormatError.NO_VALID_LEAN4_CODE_BLOCK),
        ("no <think> tag", ok.replace("<think>", "", 1), FormatError.NO_VALID_THINK_BLOCK),
        ("two think blocks", ok.replace("</think>", "</think>\n<think>again</think>", 1), FormatError.INVALID_THINK_BLOCK_COUNT),
        ("lean4 block closed on its last line", ok[: ok.rindex("\n```")] + "```", FormatError.INVALID_LEAN4_CODE_BLOCK_COUNT),
        ("a line repeated 6 times", passing_response(problem, repeats=6), FormatError.GENERATION_REPEATS),
        ("near miss: repeated 5 times", passing_response(problem, repeats=5), FormatError.NONE),
        ("one tactics block", ok.replace("```tactics\n" + "\n".join(proof) + "\n```", "", 1),
         FormatError.INSUFFICIENT_TACTICS_BLOCKS),
        ("tactics block too long", passing_response(problem, extra_tactic_lines=8), FormatError.TACTIC_CODE_TOO_MANY_LINES),
        ("unclosed tactics fence", ok.replace("</think>", "```tactics\n</think>", 1), FormatError.TACTIC_BLOCK_FORMATTING_ERROR),
        ("tactics skip the header", ok.replace(block_one, "-- (header omitted)\n" + proof[0].strip(), 1),
         FormatError.TACTICS_LEAN4_NOT_MATCH),
        ("statement changed", think_part + lean_block.replace(statement, broken_statement), FormatError.LEAN4_CODE_NOT_START_WITH_STATEMENT),
        ("axiom added", think_part + lean_block.replace("```lean4\n", "```lean4\naxiom cheat : False\n", 1),
         FormatError.LEAN4_CODE_NOT_START_WITH_STATEMENT),
        ("near miss: statement re-spaced", think_part + lean_block.replace(" : ", "  :  "), FormatError.NONE),
    ]
    return [{"case": name, "response": text, "expected": err} for name, text, err in rows]
