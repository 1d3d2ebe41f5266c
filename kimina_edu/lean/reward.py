"""Chapter 7 — the Kimina-Prover-RL reward: 1 only if Lean accepts the proof AND the format
passes; 0 otherwise, however valid the proof (recipe ``reward.py``).

The batch path runs the cheap work locally first — format checks and proof extraction — and
sends only extractable proofs to the server.
"""

from __future__ import annotations

from typing import Any

from kimina_edu.lean.client import LeanVerifier
from kimina_edu.lean.feedback import FILTERED_FEEDBACK, VALID_FEEDBACK, LineScheme, build_feedback
from kimina_edu.lean.format import FormatError, check_conversation, check_format
from kimina_edu.lean.proof import extract_proof
from kimina_edu.lean.standin import STANDIN_NOTICE, is_unchecked
from kimina_edu.lean.verdicts import Verdict


def lean_reward(response: str, formal_statement: str, verdict: Verdict | None) -> float:
    """``1.0`` if the verdict is valid and the response's format is ``NONE``, else ``0.0``."""
    if verdict is None or not verdict.valid:
        return 0.0
    return 1.0 if check_format(response, formal_statement) is FormatError.NONE else 0.0


LEAN_STATUSES = ("lean_error", "sorry")  # verdicts about the proof; every other failure is about the verifier
NOT_CHECKED = "not_checked_standin"  # the stand-in had no script for the proof: no verdict at all, reward 0


def _status(verdict: Verdict | None) -> str:
    """The row's status: the verifier's, except that the stand-in's notice for an unscripted proof is
    no Lean error — it says no proof was checked."""
    if verdict is None:
        return "not_sent"
    if verdict.status == "lean_error" and is_unchecked(verdict.response):
        return NOT_CHECKED
    return verdict.status


def score_batch(responses: list[str], formal_statements: list[str], verifier: LeanVerifier,
                prompts: list[list[dict]] | None = None, *,
                line_scheme: LineScheme | None = None) -> list[dict[str, Any]]:
    """Score a batch: per item ``score``, ``acc`` (Lean validity alone), ``format_error``,
    ``feedback`` (for the second turn), ``pred`` (the code sent to Lean, or None) and ``status``.

    ``prompts``: the conversation each response answers; with it, every assistant turn is
    format-checked (a second turn inherits its first turn's format error).
    ``line_scheme``: how the server numbers error lines; ``None`` asks the verifier
    (:meth:`LeanVerifier.resolve_line_scheme`, probed once per server), only when a proof failed.
    Feedback for a failure that is not Lean's verdict on the proof (server, timeout, malformed
    answer, input, a proof the stand-in has no script for: status ``not_checked_standin``) is
    ``# System Error`` text, which :class:`SecondTurnCache` never caches.
    """
    if len(responses) != len(formal_statements) or (prompts is not None and len(prompts) != len(responses)):
        raise ValueError("responses, formal_statements (and prompts) must have the same length")
    format_errors = []
    for i, (resp, stmt) in enumerate(zip(responses, formal_statements)):
        if prompts is not None:
            format_errors.append(check_conversation(list(prompts[i]) + [{"role": "assistant", "content": resp}], stmt))
        else:
            format_errors.append(check_format(resp, stmt))
    proofs = [extract_proof(r, s) for r, s in zip(responses, formal_statements)]
    to_check = [i for i, p in enumerate(proofs) if p is not None]
    verdicts = dict(zip(to_check, verifier.verify([proofs[i] for i in to_check]))) if to_check else {}
    statuses = {i: _status(v) for i, v in verdicts.items()}
    if line_scheme is None and any(s in LEAN_STATUSES for s in statuses.values()):
        line_scheme = verifier.resolve_line_scheme()
    rows = []
    for i, (fmt, proof) in enumerate(zip(format_errors, proofs)):
        verdict, status = verdicts.get(i), statuses.get(i, "not_sent")
        acc = 1.0 if verdict is not None and verdict.valid else 0.0
        if verdict is None:
            feedback = FILTERED_FEEDBACK
        elif verdict.valid:
            feedback = VALID_FEEDBACK
        elif status == NOT_CHECKED:
            feedback = build_feedback(proof, {"error": f"not checked (stand-in): {STANDIN_NOTICE}"})
        elif status in LEAN_STATUSES:
            # numbered as the code sent (the client may have added a header the server counts)
            feedback = build_feedback(verdict.code or proof, verdict.response or {}, line_scheme=line_scheme or "relative")
        else:
            feedback = build_feedback(proof, {"error": f"{verdict.status}: {verdict.error or 'no detail'}"})
        rows.append({"score": acc * (fmt is FormatError.NONE), "acc": acc, "format_error": fmt.name,
                     "feedback": feedback, "pred": proof, "status": status})
    return rows
