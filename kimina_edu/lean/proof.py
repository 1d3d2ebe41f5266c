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
    """Strip a trailing ``sorry`` (then all surrounding whitespace) and make the statement end with ``by``."""
    s = formal_statement.rstrip()
    if s.endswith("sorry"):
        s = s[: -len("sorry")].strip()
    if not s.endswith("by"):
        s += " by"
    return s


def theorem_signature(formal_statement: str) -> str | None:
    """The text between the first ``theorem`` (else ``lemma``, else ``example``) and the first
    ``:=`` after it, stripped — the recipe's ``extract_first_theorem_statement``
    (``re.findall(r"theorem\\s*(.*?)\\s*:=", …)[0].strip()``). May be ``""``; ``None`` only
    when no keyword is followed by ``:=``."""
    for keyword in ("theorem", "lemma", "example"):
        start = formal_statement.find(keyword)
        if start == -1:
            continue
        end = formal_statement.find(":=", start + len(keyword))
        if end != -1:
            return formal_statement[start + len(keyword) : end].strip()
    return None


def is_commented(code: str, index: int) -> bool:
    """The recipe's ``is_index_commented``: inside a closed ``/- … -/`` block, or after ``--`` on its line.

    Recipe semantics, in linear time: an unclosed ``/-`` comments nothing (so ``---/-`` above
    the theorem does not hide it), and lines are found with ``str.splitlines()`` while the
    offset advances one character per line break (as the recipe counts).
    """
    if not 0 <= index < len(code):
        return False
    i = 0
    while (start := code.find("/-", i)) != -1 and start <= index:
        end = code.find("-/", start + 2)
        if end == -1:
            break
        if index < end + 2:
            return True
        i = end + 2
    offset = 0
    for line in code.splitlines():
        if offset <= index < offset + len(line):
            dash = line.find("--")
            return dash != -1 and index >= offset + dash
        if offset > index:
            break
        offset += len(line) + 1
    return False


_BY = re.compile(r":=\s*by")


def extract_proof(response: str, formal_statement: str) -> str | None:
    """The code Lean should check, or ``None`` when no usable proof is in the response
    (the recipe's two sentinel strings, which it never sends to Lean)."""
    if not isinstance(response, str) or not isinstance(formal_statement, str):
        return None
    statement = normalize_formal_statement(formal_statement)
    signature = theorem_signature(statement)
    if signature is None:
        return None
    for _, _, code in reversed(_fenced_blocks(response, "```lean4")):
        at = code.find(signature)
        if at == -1 or is_commented(code, at):
            continue
        match = _BY.search(code, at)
        if match:
            return statement + code[match.end():]
    return None
