"""The fake Lean REPL speaks the REPL's protocol (framing, environments, positions, failures).

These run anywhere; ``tests/test_lean_real_server.py`` puts the fake behind the real server.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kimina_edu.lean.fake_repl import run_command


class Repl:
    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, "-m", "kimina_edu.lean.fake_repl"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, encoding="utf-8")

    def send(self, obj) -> dict | None:
        text = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)
        self.proc.stdin.write(text + "\n\n")
        self.proc.stdin.flush()
        lines = []
        while (line := self.proc.stdout.readline()) not in ("\n", ""):
            lines.append(line)
        return json.loads("".join(lines)) if lines else None

    def close(self) -> int:
        self.proc.stdin.close()
        return self.proc.wait(5)


@pytest.fixture
def repl():
    r = Repl()
    yield r
    if r.proc.poll() is None:
        r.proc.kill()


def test_environments_are_numbered_and_extend_each_other(repl):
    assert repl.send({"cmd": "import Mathlib"}) == {"env": 0}
    assert repl.send({"cmd": "theorem a : True := trivial", "env": 0, "gc": True}) == {"env": 1}
    # a body on env 0 does not see env 1's theorem; one on env 1 does
    assert repl.send({"cmd": "theorem a : True := trivial", "env": 0}) == {"env": 2}
    again = repl.send({"cmd": "theorem a : True := trivial", "env": 1})
    assert again["messages"][0]["data"] == "'a' has already been declared"
    assert again["messages"][0]["pos"] == {"line": 1, "column": 8}
    assert repl.send({"cmd": "x", "env": 99}) == {"message": "Unknown environment."}
    assert repl.close() == 0  # EOF ends the REPL


def test_messages_positions_and_sorries(repl):
    answer = repl.send({"cmd": "theorem t : True := by\n  sorry\n#check Nat\n  simp -- fake: error simp failed"})
    sev = [(m["severity"], m["pos"]["line"], m["pos"]["column"]) for m in answer["messages"]]
    assert sev == [("warning", 2, 2), ("info", 3, 0), ("error", 4, 0)]
    assert answer["sorries"][0]["pos"] == {"line": 2, "column": 2}
    assert "ℕ" in repl.send({"cmd": "#check ℕ"})["messages"][0]["data"]  # UTF-8 kept


def test_comment_queries_are_skipped_and_bad_json_kills_the_repl(repl):
    repl.proc.stdin.write("-- a comment\n\n")
    assert repl.send({"cmd": "#eval 1"})["messages"][0]["data"] == "1"
    repl.proc.stdin.write("{not json\n\n")
    repl.proc.stdin.flush()
    assert repl.proc.wait(5) == 1


def test_scripted_death_and_empty_answer(repl):
    repl.proc.stdin.write(json.dumps({"cmd": "x -- fake: empty"}) + "\n\n")
    repl.proc.stdin.flush()
    assert repl.proc.stdout.readline() == "\n"
    repl.proc.stdin.write(json.dumps({"cmd": "x -- fake: die"}) + "\n\n")
    repl.proc.stdin.flush()
    assert repl.proc.wait(5) == 1


def test_sorry_in_a_comment_or_a_name_is_not_a_sorry():
    answer, _, _ = run_command("theorem no_sorry_here : True := trivial -- sorry", set())
    assert answer == {}
