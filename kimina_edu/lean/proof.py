"""Chapter 6 — which code goes to Lean: the dataset's statement + the model's proof.

Recipe (``extract_proof_from_text`` in project-numina/kimina-prover-rl ``proof_utils.py``):
take the last ```` ```lean4 ```` block that contains the theorem's statement outside a
comment, keep the model's text after ``:= by``, and prepend the **dataset's own** statement.
The model can therefore not weaken the theorem, change the header, or sneak in an ``axiom``
before it — and auxiliary lemmas it wrote *before* the theorem are thrown away.
"""

from __future__ import annotations

import re

from kimina_edu.lean.format import _fenced_blocks


def normalize_formal_statement(formal_statement: str) -> str:
    """Strip a trailing ``sorry`` and make the statement end with ``by``."""
    s = formal_statement.rstrip()
    if s.endswith("sorry"):
        s = s[: -len("sorry")].rstrip()
    if not s.endswith("by"):
        s += " by"
    return s


def theorem_signature(formal_statement: str) -> str | None:
    """The text between the first ``theorem`` (else ``lemma``, else ``example``) and ``:=``."""
    for keyword in ("theorem", "lemma", "example"):
        start = formal_statement.find(keyword)
        if start == -1:
            continue
        end = formal_statement.find(":=", start + len(keyword))
        if end != -1:
            return formal_statement[start + len(keyword) : end].strip()
    return None


def is_commented(code: str, index: int) -> bool:
    """Is ``code[index]`` inside a ``/- … -/`` block comment or after ``--`` on its line?"""
    if not 0 <= index < len(code):
        return False
    i = 0
    while (start := code.find("/-", i)) != -1 and start <= index:
        end = code.find("-/", start + 2)
        end = len(code) if end == -1 else end + 2
        if index < end:
            return True
        i = end
    line_start = code.rfind("\n", 0, index) + 1
    dash = code.find("--", line_start, index + 2)
    return dash != -1 and dash <= index


_BY = re.compile(r":=\s*by")


def extract_proof(response: str, formal_statement: str) -> str | None:
    """The code Lean should check, or ``None`` when no usable proof is in the response."""
    if not isinstance(response, str) or not isinstance(formal_statement, str):
        return None
    statement = normalize_formal_statement(formal_statement)
    signature = theorem_signature(statement)
    if not signature:
        return None
    for _, _, code in reversed(_fenced_blocks(response, "```lean4")):
        at = code.find(signature)
        if at == -1 or is_commented(code, at):
            continue
        match = _BY.search(code, at)
        if match:
            return statement + code[match.end():]
    return None
