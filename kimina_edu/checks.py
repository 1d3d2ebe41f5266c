"""A claim checked against this run's numbers, printed as ✓ or ✗ — and every ✗ with its why.

CONVENTIONS.md: a claim in prose holds in every run, or the cell prints this run's value beside it with a
visible check. A bare ✗ tells a learner that the lesson did not hold here and nothing else, so under
every ✗ the course prints ``  why:`` lines computed from the run's own numbers: what happened instead.

:func:`check` prints one claim and, when it fails, its why lines; :func:`check_all` prints several, with
consecutive ✗ sharing one explanation. :func:`unexplained_crosses` finds the ✗ lines of printed output
that no computed why line follows, and :func:`unexplained_in_notebook` runs it over an executed notebook:
the notebook tests hold it empty for every chapter.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

TICK, CROSS = "✓", "✗"
WHY = "  why:"  # the prefix of an explanation line, printed right under a ✗ line
# Set (to 1) by the notebook tests: a passing check computes its why too, and drops it, so the code that
# explains a failure runs on every run and not only on the rare one that fails.
EVERY_WHY_ENV = "KIMINA_EDU_COMPUTE_EVERY_WHY"

Why = Callable[[], Sequence[str]] | Sequence[str] | str


def why_lines(why: Why) -> list[str]:
    """The explanation as printed lines, each starting with :data:`WHY`. ``why`` is a string, lines, or a
    function that computes them — called only when the check fails, so it may read numbers that exist
    only then (the tokens that moved, the cases that failed)."""
    lines = why() if callable(why) else why
    lines = [lines] if isinstance(lines, str) else list(lines)
    return [line if line.startswith(WHY) else f"{WHY} {line.strip()}" for line in lines if line.strip()]


def check(ok: object, claim: str, *, why: Why) -> bool:
    """Print ``✓ claim`` or ``✗ claim``; under a ✗, the why lines. Returns ``bool(ok)``.

    ``why`` has no default: a check written without its explanation fails where it is written, on
    the run where it passes too, not only on the rare run where it fails."""
    ok = bool(ok)
    print(f"{TICK if ok else CROSS} {claim}")
    if not ok:
        print("\n".join(why_lines(why)))
    elif os.environ.get(EVERY_WHY_ENV):
        why_lines(why)
    return ok


def check_all(results: Sequence[tuple[object, str]], *, why: Why) -> list[bool]:
    """Print several ``(ok, claim)`` checks in order; after each run of consecutive ✗ lines, the why
    lines once (computed once): checks that fail for one reason share its explanation."""
    lines: list[str] | None = None
    out, pending = [], False
    for ok, claim in results:
        ok = bool(ok)
        if ok and pending:
            lines = why_lines(why) if lines is None else lines
            print("\n".join(lines))
        print(f"{TICK if ok else CROSS} {claim}")
        pending = not ok
        out.append(ok)
    if pending:
        print("\n".join(why_lines(why) if lines is None else lines))
    elif lines is None and os.environ.get(EVERY_WHY_ENV):
        why_lines(why)
    return out


def _computed(block: Sequence[str]) -> bool:
    """A why block cites at least one of the run's numbers (a digit): fixed prose cites none."""
    return any(ch.isdigit() for line in block for ch in line)


def unexplained_crosses(lines: str | Sequence[str]) -> list[str]:
    """The ✗ lines of printed output that no computed explanation follows.

    A ✗ line is any printed line holding ✗ (a check that failed, wherever the mark sits) that is not
    itself a why line. It is explained when the lines right after it start with ``"  why:"`` and cite at
    least one number (a digit) — computed from the run, as :func:`check` prints them. Consecutive ✗
    lines may share the why lines after the last of them. Anything else after a ✗ line (a blank line, an
    indented remark without ``why:``, the end of the output) leaves it unexplained.
    """
    lines = lines.splitlines() if isinstance(lines, str) else list(lines)
    out: list[str] = []
    pending: list[str] = []
    block: list[str] = []
    for line in lines + [""]:
        if line.startswith(WHY):
            block.append(line)
            continue
        if block:  # a why block just ended: it explains the pending ✗ lines if it cites a number
            if not _computed(block):
                out.extend(pending)
            pending, block = [], []
        if CROSS in line:
            pending.append(line)
        else:
            out.extend(pending)
            pending = []
    return out


def printed_lines(notebook: dict) -> list[list[str]]:
    """Each code cell's printed text (its stdout streams) of an executed notebook's JSON, as lines."""
    cells = []
    for cell in notebook.get("cells", []):
        text = "".join("".join(o.get("text", "")) for o in cell.get("outputs", [])
                       if o.get("output_type") == "stream" and o.get("name") == "stdout")
        cells.append(text.splitlines())
    return cells


def unexplained_in_notebook(notebook: dict) -> list[str]:
    """Every ✗ line an executed notebook printed without a computed why, as ``cell N: line``."""
    return [f"cell {i}: {line.strip()}" for i, lines in enumerate(printed_lines(notebook))
            for line in unexplained_crosses(lines)]


__all__ = ["CROSS", "EVERY_WHY_ENV", "TICK", "WHY", "check", "check_all", "printed_lines", "unexplained_crosses",
           "unexplained_in_notebook", "why_lines"]
