"""Grade a learner's function against the package's, case by case, in one line.

The notebooks' "stub, grade, import" cells (CONVENTIONS.md): the learner writes ``my_x`` from a stub, a
grader cell calls :func:`grade` with the package's ``x`` and a dict of named cases, and the notebook
goes on with ``result.function`` — the learner's function when every case matched, the package's
otherwise. ``grade`` never raises: a stub not written yet, a wrong value, a wrong type or shape, a NaN,
an exception inside the learner's code, even a mistake in the grader's own arguments, all end in one
printed line that names the case, and the notebook carries on.

    graded = grade("my_extract_answer", my_extract_answer, extract_answer, extract_answer_cases())
    ✓ my_extract_answer matches the package on 10 cases
    ✗ my_format_reward: case 'two answers' — expected 0.0, got 1.0 — using the package's version

Values compare by kind: tensors with ``allclose`` (any dtype, any device; shape first, NaN named),
numbers within ``atol``, everything else (strings, ``None``, bools) with ``==``; tuples, lists and dicts
element by element. A case with ``grad_wrt`` also compares the gradient of the (scalar) output with
respect to those tensors: two losses with the same value can still train differently.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_REPR = 60  # characters of a value shown in a verdict line


@dataclass(frozen=True)
class Case:
    """One input: the positional and keyword arguments both functions get. ``grad_wrt``: tensors (leaves
    with ``requires_grad``) to compare the output's gradient on as well."""

    args: tuple = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    grad_wrt: Sequence[Any] | None = None


@dataclass
class GradeResult:
    """The verdict: ``passed``, the one ``line`` printed, and ``function`` — the one the notebook uses from
    here on (the learner's when it passed, the package's when not)."""

    name: str
    passed: bool
    line: str
    cases: int
    function: Callable | None

    def __bool__(self) -> bool:
        return self.passed


class _Mismatch(Exception):
    """A case's output differs from the package's: the message says how."""


def short(value: Any, limit: int = MAX_REPR) -> str:
    """``repr`` cut to ``limit`` characters, in time linear in ``limit`` (never the whole of a huge string)."""
    if isinstance(value, str) and len(value) > limit:
        return repr(value[:limit]) + f"… ({len(value):,} characters)"
    if isinstance(value, (list, tuple)) and len(value) > 8:
        return f"a {type(value).__name__} of {len(value)}"
    try:
        text = repr(value)
    except Exception as exc:  # noqa: BLE001 — a broken __repr__ must not break the verdict
        text = f"<{type(value).__name__}: repr failed: {type(exc).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


def _message(exc: BaseException, limit: int = 100) -> str:
    """An exception's message on one line, cut to ``limit`` characters."""
    text = " ".join(str(exc)[: limit * 4].split())
    return text if len(text) <= limit else text[:limit] + "…"


def _kind(value: Any) -> str:
    if _is_tensor(value):
        return "a tensor"
    if value is None:
        return "None"
    return {bool: "a bool", str: "a str", list: "a list", tuple: "a tuple", dict: "a dict"}.get(
        type(value), "a number" if _is_number(value) else f"a {type(value).__name__}")


def _is_tensor(value: Any) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "shape") and hasattr(value, "dtype")


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _first_difference(a: str, b: str) -> int:
    """Index of the first differing character (linear, in C for long strings: halves compared by ``==``)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # invariant: a[:lo] == b[:lo]
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _compare_tensors(got, expected, atol: float, where: str) -> None:
    import torch

    if tuple(got.shape) != tuple(expected.shape):
        raise _Mismatch(f"wrong shape {tuple(got.shape)}{where}, expected {tuple(expected.shape)}")
    g = got.detach().to("cpu", torch.float64)
    e = expected.detach().to("cpu", torch.float64)
    new_nan = torch.isnan(g) & ~torch.isnan(e)
    if bool(new_nan.any()):
        at = tuple(new_nan.nonzero()[0].tolist())
        raise _Mismatch(f"NaN{where} at index {at} ({int(new_nan.sum())} NaN in all)")
    close = torch.isclose(g, e, atol=atol, rtol=0.0, equal_nan=True)
    if not bool(close.all()):
        bad = (~close).nonzero()[0]
        at = tuple(bad.tolist())
        diff = (g - e).abs().nan_to_num(nan=math.inf).max().item()
        raise _Mismatch(f"expected {e[tuple(bad)].item():.6g}{where} at index {at}, got {g[tuple(bad)].item():.6g} "
                        f"(largest difference {diff:.2g}, tolerance {atol:g})")


def compare(got: Any, expected: Any, atol: float = 1e-6, where: str = "") -> None:
    """Raise :class:`_Mismatch` with a one-line reason when ``got`` is not ``expected``."""
    if _is_tensor(expected):
        if not _is_tensor(got):
            raise _Mismatch(f"returned {_kind(got)}{where}, expected a tensor")
        _compare_tensors(got, expected, atol, where)
    elif _is_number(expected):
        if _is_tensor(got) or not _is_number(got):
            raise _Mismatch(f"returned {_kind(got)} {short(got)}{where}, expected a number ({expected!r})")
        if math.isnan(got) and not math.isnan(expected):
            raise _Mismatch(f"NaN{where}, expected {expected!r}")
        if not (abs(got - expected) <= atol or (math.isnan(got) and math.isnan(expected))):
            raise _Mismatch(f"expected {expected!r}{where}, got {got!r}")
    elif isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)):
            raise _Mismatch(f"returned {_kind(got)}{where}, expected {_kind(expected)} of {len(expected)}")
        if len(got) != len(expected):
            raise _Mismatch(f"returned {len(got)} values{where}, expected {len(expected)}")
        for i, (g, e) in enumerate(zip(got, expected)):
            compare(g, e, atol, f"{where} [item {i}]")
    elif isinstance(expected, dict):
        if not isinstance(got, dict) or set(got) != set(expected):
            raise _Mismatch(f"returned {short(got)}{where}, expected a dict with keys {sorted(expected, key=str)}")
        for k in expected:
            compare(got[k], expected[k], atol, f"{where} [{k!r}]")
    elif isinstance(expected, str) and isinstance(got, str):
        if got != expected:
            i = _first_difference(got, expected)
            start = max(0, i - 20)
            raise _Mismatch(f"expected {short(expected[start:])}{where}, got {short(got[start:])} "
                            f"(first difference at character {i})")
    else:
        same = type(got) is type(expected) and got == expected
        if not same:
            raise _Mismatch(f"expected {short(expected)}{where}, got {short(got)}")


def _gradients(output, wrt):
    import torch

    if not _is_tensor(output) or output.numel() != 1:
        raise _Mismatch(f"returned {_kind(output)} of shape {tuple(getattr(output, 'shape', ()))}: a gradient "
                        "needs a single-number loss")
    if output.grad_fn is None:
        raise _Mismatch("returned a loss with no gradient (detached, or built with .item() / torch.tensor(...))")
    grads = torch.autograd.grad(output, list(wrt), allow_unused=True, retain_graph=False)
    return [torch.zeros_like(w) if g is None else g for g, w in zip(grads, wrt)]


def _check_arguments(name, fn, reference, cases) -> str:
    if not isinstance(name, str) or not name:
        return "the grader's first argument is the function's name, e.g. grade('my_x', my_x, x, cases)"
    if not callable(reference):
        return f"the grader's reference for {name} is {_kind(reference)}, not a function"
    if not isinstance(cases, Mapping) or not cases:
        return f"the grader needs a non-empty dict of named cases for {name}, got {short(cases)}"
    if not callable(fn):
        return f"{name} is {_kind(fn)}, not a function: run the cell that defines it (def {name}(...):)"
    return ""


def grade(name: str, fn: Callable, reference: Callable, cases: Mapping[str, Any], *, atol: float = 1e-6,
          grad_atol: float | None = None, quiet: bool = False) -> GradeResult:
    """Run ``fn`` and ``reference`` on every case; print one line; never raise.

    ``cases`` maps a case's name to a :class:`Case`, a tuple of positional arguments, or a single argument.
    ``atol`` is the tolerance on numbers and tensors, ``grad_atol`` on gradients (default ``atol``). The
    reference runs first on each case, so a learner's function that changes its inputs in place cannot
    change what it is compared with.
    """
    problem = _check_arguments(name, fn, reference, cases)
    if problem:
        return _verdict(name, False, f"✗ {problem} — using the package's version", 0,
                        reference if callable(reference) else None, quiet)
    grad_atol = atol if grad_atol is None else grad_atol
    for case_name, case in cases.items():
        if not isinstance(case, Case):
            case = Case(case if isinstance(case, tuple) else (case,))
        try:
            expected = reference(*case.args, **case.kwargs)
            expected_grads = _gradients(expected, case.grad_wrt) if case.grad_wrt else None
        except Exception as exc:  # noqa: BLE001 — a grader bug is reported, not raised
            return _verdict(name, False, f"✗ grader problem: the package's {getattr(reference, '__name__', 'function')} "
                            f"raised {type(exc).__name__}: {_message(exc, 120)} on case {case_name!r}", 0,
                            reference, quiet)
        try:
            got = fn(*case.args, **case.kwargs)
        except NotImplementedError:
            return _verdict(name, False, f"✗ {name}: not written yet (NotImplementedError) — using the package's "
                            "version", len(cases), reference, quiet)
        except Exception as exc:  # noqa: BLE001 — the learner's bug is the verdict
            return _verdict(name, False, f"✗ {name} raised {type(exc).__name__}: {_message(exc)} on case "
                            f"{case_name!r} — using the package's version", len(cases), reference, quiet)
        try:
            compare(got, expected, atol)
            if expected_grads is not None:
                for i, (g, e) in enumerate(zip(_gradients(got, case.grad_wrt), expected_grads)):
                    compare(g, e, grad_atol, f" in the gradient of input {i}")
        except _Mismatch as exc:
            return _verdict(name, False, f"✗ {name}: case {case_name!r} — {exc} — using the package's version",
                            len(cases), reference, quiet)
        except Exception as exc:  # noqa: BLE001 — e.g. a backward pass through the learner's graph fails
            return _verdict(name, False, f"✗ {name}: case {case_name!r} — comparing raised {type(exc).__name__}: "
                            f"{_message(exc)} — using the package's version", len(cases), reference, quiet)
    grads = " (values and gradients)" if any(isinstance(c, Case) and c.grad_wrt for c in cases.values()) else ""
    return _verdict(name, True, f"✓ {name} matches the package on {len(cases):,} cases{grads}", len(cases), fn, quiet)


def _verdict(name, passed, line, n, function, quiet) -> GradeResult:
    line = " ".join(line.split())  # one line, whatever the messages held
    if not quiet:
        print(line)
    return GradeResult(name, passed, line, n, function)
