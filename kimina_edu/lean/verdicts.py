"""What one ``/api/check`` result means: its shape check, the verdict taxonomy, and :class:`Verdict`.

Pure functions, no network: the client (:mod:`kimina_edu.lean.client`), the reward and the
stand-in server all decide validity here, with one rule (:func:`classify`). A proof is ``valid``
only on positive evidence; a result whose shape :func:`result_problem` rejects is ``server_error``.

**kimina-client.** The verdict taxonomy is kimina-client's (``ReplResponse.analyze()``).
Its PyPI release 0.2.1 fails to import on Python 3.11 (pydantic rejects ``typing.TypedDict``
before 3.12; fixed upstream in PR #63, unreleased) and imports the undeclared ``pygments``.
We import it with ``typing.TypedDict`` temporarily pointed at ``typing_extensions.TypedDict``
— the upstream fix, applied from outside — and use its ``analyze()`` on results that passed
our shape check; otherwise :func:`classify` applies the same rules itself.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

SEVERITIES = ("error", "warning", "info")


@dataclass
class Verdict:
    """One proof's outcome. ``response`` is the server's result dict (for feedback)."""

    id: str
    status: str
    messages: list[dict] = field(default_factory=list)
    time: float | None = None
    error: str | None = None
    response: dict | None = None
    code: str | None = None  # the code as sent (with the header the client added): what line numbers count

    @property
    def valid(self) -> bool:
        return self.status == "valid"


def _import_kimina_client():
    """``(module, None)`` when kimina-client imports (with the 3.11 shim), else ``(None, reason)``."""
    import typing

    try:
        import typing_extensions
    except ImportError:  # pragma: no cover - typing_extensions ships with pydantic
        typing_extensions = None
    original = typing.TypedDict
    try:
        if typing_extensions is not None:
            typing.TypedDict = typing_extensions.TypedDict
        import kimina_client

        return kimina_client, None
    except Exception as exc:  # noqa: BLE001 — any import failure means "use our classifier"
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    finally:
        typing.TypedDict = original


KIMINA_CLIENT, KIMINA_CLIENT_IMPORT_ERROR = _import_kimina_client()


def is_int(x: Any) -> bool:
    """A JSON integer (``True`` is not one, though Python says it is an ``int``)."""
    return isinstance(x, int) and not isinstance(x, bool)


def is_seconds(x: Any, *, zero_ok: bool = False) -> bool:
    """A finite number of seconds, > 0 (or >= 0 with ``zero_ok``)."""
    return (isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
            and (x >= 0 if zero_ok else x > 0))


class KeyGivenTwice(dict):
    """A JSON object in which a key appeared more than once (the value kept is the last one).

    The client's parser marks such objects instead of silently keeping the last value, so that
    :func:`result_problem` can reject the one result that holds it."""

    def __init__(self, pairs: list[tuple[str, Any]], twice: str):
        super().__init__(pairs)
        self.twice = twice


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # a valid pair is one code point once parsed


def value_problem(value: Any) -> str | None:
    """Why parsed JSON ``value`` holds what no JSON writer sends, or ``None``.

    Python's parser accepts three things no REPL sends: a key given twice (which value the server
    meant is unknowable), ``NaN``/``Infinity``, and a lone surrogate (not Unicode text: feedback
    carrying one fails wherever it is printed or tokenized). Iterative, so any depth is walked."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if not v.isascii() and _LONE_SURROGATE.search(v):
                return "a string holds a lone surrogate (not Unicode text)"
        elif isinstance(v, float):
            if not math.isfinite(v):
                return "a number is NaN or infinite (not JSON)"
        elif isinstance(v, dict):
            if isinstance(v, KeyGivenTwice):
                return f"an object gives the key {ascii(v.twice)[:60]} twice"
            stack.extend(v)
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return None


def _position_problem(pos: Any, name: str) -> str | None:
    if pos is None and name == "endPos":
        return None
    if not isinstance(pos, dict) or not is_int(pos.get("line")) or not is_int(pos.get("column")):
        return f"{name} is not {{line: int, column: int}}"
    return None


def _message_problem(m: Any) -> str | None:
    if not isinstance(m, dict):
        return "a message is not an object"
    if m.get("severity") not in SEVERITIES:
        return f"a message has severity {m.get('severity')!r}"
    if not isinstance(m.get("data"), str):
        return "a message has no text"
    for key in ("pos", "endPos"):
        if key in m and (problem := _position_problem(m[key], key)):
            return problem
    return None


def _response_problem(response: Any) -> str | None:
    if not isinstance(response, dict):
        return "neither a response object nor an error"
    if "message" in response:
        return None if isinstance(response["message"], str) else "REPL message is not a string"
    if not is_int(response.get("env")):
        return "response has no integer env"
    messages = response.get("messages", [])
    if not isinstance(messages, list):
        return "messages is not a list"
    for m in messages:
        if problem := _message_problem(m):
            return problem
    sorries = response.get("sorries", [])
    if not isinstance(sorries, list) or not all(isinstance(s, dict) for s in sorries):
        return "sorries is not a list of objects"
    return None


def result_problem(result: Any) -> str | None:
    """Why ``result`` is not a shape the client recognises, or ``None`` when it is.

    Recognised: ``{"id": str, "time"?: seconds >= 0 or null, "error": non-empty str, …}`` or
    ``{"id": str, "time"?: …, "response": R, …}`` with R either ``{"message": str}`` (the REPL's
    own error) or ``{"env": int, "messages"?: [M], "sorries"?: [object], …}``; M has ``severity``
    in :data:`SEVERITIES`, ``data`` a string and, if present, ``pos`` (and ``endPos``, which may
    be ``null``) as ``{line, column}`` integers (the REPL's JSON, ``REPL/JSON.lean``). Nowhere a
    value :func:`value_problem` rejects.
    """
    if not isinstance(result, dict):
        return "result is not an object"
    if problem := value_problem(result):
        return problem
    if not isinstance(result.get("id"), str):
        return "result id is not a string"
    if result.get("time") is not None and not is_seconds(result["time"], zero_ok=True):
        return "time is not a number of seconds >= 0"
    error = result.get("error")
    if error is not None:
        return None if isinstance(error, str) and error.strip() else "error is not a non-empty string"
    return _response_problem(result.get("response"))


SORRY_WARNING = "declaration uses 'sorry'"  # Lean's warning, also for ``exact sorryAx _`` (no ``sorries`` entry)
_SORRY_WORDS = re.compile(r"(?<![\w.'])(?:sorry|sorryAx|admit)(?![\w'])")


def _without_comments(code: str) -> str:
    """``code`` with Lean comments blanked (``--`` to the end of the line; ``/- … -/``, nested), in
    one pass. An unclosed ``/-`` comments out the rest (Lean then fails the file anyway)."""
    out, i, n, depth = [], 0, len(code), 0
    while i < n:
        if depth:
            j = code.find("-/", i)
            k = code.find("/-", i)
            if j == -1:
                break
            if k != -1 and k < j:
                depth, i = depth + 1, k + 2
            else:
                depth, i = depth - 1, j + 2
            continue
        j, k = code.find("--", i), code.find("/-", i)
        stops = [x for x in (j, k) if x != -1]
        if not stops:
            out.append(code[i:])
            break
        cut = min(stops)
        out.append(code[i:cut])
        if cut == j:
            end = code.find("\n", j)
            i = n if end == -1 else end
        else:
            depth, i = 1, k + 2
    return " ".join(out)


def mentions_sorry(code: Any) -> bool:
    """Does the code (outside comments) use ``sorry``, ``sorryAx`` or ``admit``? Lean reports
    ``sorry`` in ``sorries`` but ``sorryAx`` only as a warning, and a server may drop either; the
    code itself is evidence no server answer can hide. Linear time."""
    return isinstance(code, str) and _SORRY_WORDS.search(_without_comments(code)) is not None


def _our_status(result: dict[str, Any], code: str | None) -> str:
    error = result.get("error")
    if error:
        return "timeout_error" if "timed out" in error else "server_error"
    response = result["response"]
    if "message" in response:  # the REPL's own error, with or without an env
        return "repl_error"
    messages = response.get("messages", [])
    if any(m["severity"] == "error" for m in messages):
        return "lean_error"
    if response.get("sorries") or any(SORRY_WARNING in m["data"] for m in messages) or mentions_sorry(code):
        return "sorry"
    return "valid"


def classify(result: dict[str, Any], *, code: str | None = None, use_kimina_client: bool = True) -> str:
    """kimina-client's ``SnippetStatus`` for one ``/api/check`` result — ``valid`` only on positive
    evidence; ``server_error`` for a shape :func:`result_problem` rejects.

    timeout_error: ``error`` says "timed out"; server_error: any other ``error``;
    repl_error: the REPL answered ``{"message": …}`` (even beside an ``env``); lean_error: a
    message with severity "error"; sorry: non-empty ``sorries``, Lean's "declaration uses
    'sorry'" in any message, or ``sorry``/``sorryAx``/``admit`` in ``code`` (the code sent); else
    valid. This is the one rule (the reward and the stand-in ask it); kimina-client's own
    ``analyze()`` is consulted and may only make a verdict stricter, never turn one ``valid``.
    """
    if result_problem(result) is not None:
        return "server_error"
    ours = _our_status(result, code)
    if ours == "valid" and use_kimina_client and KIMINA_CLIENT is not None:
        try:
            theirs = KIMINA_CLIENT.ReplResponse.model_validate(result).analyze().status.value
        except Exception:  # noqa: BLE001 — a shape kimina-client rejects: our rules stand
            return ours
        return theirs
    return ours


def has_header(code: str) -> bool:
    """Does the server's header split (``split_snippet``) find an ``import`` line?"""
    for line in code.splitlines():
        stripped = line.strip()
        if stripped.startswith("import "):
            return True
        if stripped:
            return False
    return False
