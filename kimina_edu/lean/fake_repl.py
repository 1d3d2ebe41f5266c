"""A fake Lean REPL — a **test double, not a proof checker** — that speaks the REPL's protocol,
so the real kimina-lean-server code can run here without Lean.

The protocol (leanprover-community/repl ``REPL/Main.lean``, ``REPL/JSON.lean``; facts in
``shared/reference/kimina-server-repl-protocol.md``):

- a query is JSON text ended by a blank line; EOF ends the process; a query starting with
  ``#`` or ``--`` is skipped; unparsable JSON kills the process (as the real REPL dies);
- ``{"cmd": str, "env"?: int, …}`` answers ``{"env": n, "messages"?, "sorries"?}`` pretty
  printed (multi-line, keys sorted, UTF-8 kept) and ended by a blank line; empty lists are
  omitted; every command records a new environment 0, 1, 2, …; an unknown ``env`` answers
  ``{"message": "Unknown environment."}``;
- messages have ``severity``, ``pos``/``endPos`` (1-based line, 0-based column, relative to the
  command) and ``data``.

What it "checks" (so tests can script outcomes in the code itself):

- ``theorem``/``lemma``/``def``/… names are declared in the environment the command extends; a
  name declared again fails "'X' has already been declared" (header-less snippets on the real
  server share environment 0, which is how that error reaches users);
- a ``sorry`` outside comments gives a ``sorries`` entry and the warning "declaration uses 'sorry'";
  ``sorryAx`` gives the warning alone (Lean reports no proof state for it, so no ``sorries`` entry);
- ``#check X`` / ``#eval X`` answer an ``info`` message on their line;
- directives in comments: ``-- fake: error <text>`` (an error on that line),
  ``-- fake: sleep <seconds>``, ``-- fake: die`` (exit without answering),
  ``-- fake: empty`` (answer an empty line, as ``rw?`` does in kimina-lean-server issue #66);
- ``FAKE_REPL_LATENCY`` (seconds, default 0) is added to every command.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time

_DECL = re.compile(r"^\s*(?:@\[[^\]]*\]\s*)?(?:private\s+|protected\s+|noncomputable\s+)*"
                   r"(theorem|lemma|def|abbrev|structure|inductive|class|instance)\s+([^\s:(\[{]+)")
_DIRECTIVE = re.compile(r"--\s*fake:\s*(\w+)\s*(.*)$")
_SORRY = re.compile(r"(?<![\w.])sorry(?![\w])")
_SORRY_AX = re.compile(r"(?<![\w.])sorryAx(?![\w])")


def _message(severity: str, line: int, column: int, end: int, data: str) -> dict:
    return {"severity": severity, "pos": {"line": line, "column": column},
            "endPos": {"line": line, "column": end}, "data": data}


def _code_part(line: str) -> str:
    cut = line.find("--")
    return line if cut == -1 else line[:cut]


def run_command(cmd: str, declared: set[str]) -> tuple[dict, set[str], str | None]:
    """``(answer, names declared afterwards, action)``; action is ``"die"``, ``"empty"`` or None."""
    messages, sorries, names, action = [], [], set(declared), None
    for number, line in enumerate(cmd.split("\n"), 1):
        directive = _DIRECTIVE.search(line)
        if directive:
            kind, arg = directive.group(1), directive.group(2).strip()
            if kind == "error":
                messages.append(_message("error", number, 0, len(line), arg or "fake error"))
            elif kind == "sleep":
                time.sleep(float(arg or 0))
            elif kind in ("die", "empty"):
                action = kind
        code = _code_part(line)
        decl = _DECL.match(code)
        if decl:
            name = decl.group(2)
            if name in names:
                col = decl.start(2)
                messages.append(_message("error", number, col, col + len(name), f"'{name}' has already been declared"))
            names.add(name)
        stripped = code.strip()
        if stripped.startswith(("#check", "#eval")):
            what = stripped.split(None, 1)[1] if " " in stripped else ""
            data = f"{what} : Type" if stripped.startswith("#check") else what
            messages.append(_message("info", number, 0, len(stripped), data))
        for m in _SORRY.finditer(code):
            sorries.append({"pos": {"line": number, "column": m.start()},
                            "endPos": {"line": number, "column": m.end()}, "goal": "⊢ False", "proofState": len(sorries)})
            messages.append(_message("warning", number, m.start(), m.end(), "declaration uses 'sorry'"))
        for m in _SORRY_AX.finditer(code):
            messages.append(_message("warning", number, m.start(), m.end(), "declaration uses 'sorry'"))
    answer: dict = {}
    if messages:
        answer["messages"] = messages
    if sorries:
        answer["sorries"] = sorries
    return answer, names, action


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def main() -> None:
    latency = float(os.environ.get("FAKE_REPL_LATENCY", "0") or 0)
    envs: list[set[str]] = []
    lines: list[str] = []
    for raw in sys.stdin:
        if raw.strip():
            lines.append(raw)
            continue
        query = "".join(lines).strip()
        lines = []
        if not query or query.startswith(("#", "--")):
            continue
        try:
            request = json.loads(query)
        except ValueError:
            sys.exit(1)  # the real REPL dies on unparsable input
        if not isinstance(request, dict) or not isinstance(request.get("cmd"), str):
            _write(json.dumps({"message": "fake REPL: only {\"cmd\": …} commands are supported"}) + "\n\n")
            continue
        env = request.get("env")
        if env is not None and not (isinstance(env, int) and 0 <= env < len(envs)):
            _write(json.dumps({"message": "Unknown environment."}, indent=2) + "\n\n")
            continue
        if latency:
            time.sleep(latency)
        answer, names, action = run_command(request["cmd"], envs[env] if env is not None else set())
        if action == "die":
            sys.exit(1)
        if action == "empty":
            _write("\n\n")
            continue
        envs.append(names)
        answer["env"] = len(envs) - 1
        _write(json.dumps(answer, indent=2, sort_keys=True, ensure_ascii=False) + "\n\n")


if __name__ == "__main__":
    main()
