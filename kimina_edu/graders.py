"""Grade a learner's function against the package's, case by case, in one verdict line.

The notebooks' "stub, grade, import" cells (CONVENTIONS.md): the learner writes ``my_x`` from a stub, a
grader cell calls :func:`grade` with the package's ``x`` and a dict of named cases, and the notebook
goes on with ``result.function`` — the learner's function when every case matched, the package's
otherwise. ``grade`` never raises: a stub not written yet, a wrong value, a wrong type or shape, a NaN,
an exception inside the learner's code (a ``sys.exit()`` or any other ``BaseException`` too), even a
mistake in the grader's own arguments, all end in one printed verdict line that names the case (and
under it a ``  why:`` line: how many cases matched first, and which function the notebook goes on with), and
the notebook carries on. Only ``KeyboardInterrupt``, the learner's own stop, stops the cell.

    graded = grade("my_extract_answer", my_extract_answer, extract_answer, extract_answer_cases())
    ✓ my_extract_answer matches the package on 10 cases
    ✗ my_format_reward: case 'two answers' — expected 0.0, got 1.0 — using the package's version
      why: my_format_reward matched 7 of 13 cases before 'two answers'; the cells below use
      kimina_edu.rewards.format_reward until yours passes all 13  (one line, wrapped here)

Values compare by kind: tensors with ``allclose`` (any dtype, any device; shape first, NaN named),
numbers within ``atol``, everything else (strings, ``None``, bools) with ``==``; tuples, lists and dicts
element by element; a subclass is compared as its plain base type, so an ``__eq__`` that lies cannot
pass. A case with ``grad_wrt`` also compares the gradient of the (scalar) output with respect to those
tensors: two losses with the same value can still train differently.

Each function gets its own copy of a case's arguments (:class:`FreshInputs`): a function that changes an
input in place (``ids = prompt; ids += completion`` lengthens the caller's list) can never change what the
notebook's later cells see, and it fails, naming the argument, because in the training loop the same
function would corrupt the rollouts. A model cannot be copied per case: a function that changes its
weights or leaves gradients in them fails too. The random generators are put back after grading, so a
stub that draws or reseeds does not change later samples.
"""

from __future__ import annotations

import contextlib
import copy as copy_module
import dataclasses
import inspect
import math
import numbers
import random
import sys
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
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 — a broken __repr__ must not break the verdict
        text = f"<{type(value).__name__}: repr failed: {type(exc).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


def _message(exc: BaseException, limit: int = 100) -> str:
    """An exception's message on one line, cut to ``limit`` characters (a ``__str__`` that raises: a note)."""
    try:
        text = " ".join(str(exc)[: limit * 4].split())
    except KeyboardInterrupt:
        raise
    except BaseException:  # noqa: BLE001 — the learner's exception class decides what str() does
        return "(its message could not be read)"
    return text if len(text) <= limit else text[:limit] + "…"


def _raised(exc: BaseException, limit: int = 100) -> str:
    """``Name: message`` of what a function raised; a ``sys.exit()`` says what to do instead."""
    message = _message(exc, limit)
    text = type(exc).__name__ + (f": {message}" if message else "")
    if isinstance(exc, SystemExit):
        text += " (it called sys.exit(); a function returns its value instead)"
    return text


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
    if expected.requires_grad and not got.requires_grad:
        raise _Mismatch(f"returned a tensor with no gradient{where}: cut from the graph (detached, .item(), no_grad); "
                        "the loss needs its gradient")
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


def _plain_number(value: Any) -> float | int:
    """A learner's number as a plain ``float``/``int``: a subclass's own ``-``, ``abs`` or ``==`` never runs."""
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, int):
        return int.__int__(value)
    return float(value)  # numpy integers, fractions.Fraction: their own conversion


def _plain_items(value: list | tuple | dict) -> list | dict:
    """A list's, tuple's or dict's own items, read past any ``__iter__``/``__len__``/``__getitem__`` a
    subclass overrides (what the object really holds is what the notebook goes on with)."""
    if isinstance(value, dict):
        return dict(dict.items(value))
    return list((list if isinstance(value, list) else tuple).__iter__(value))


def compare(got: Any, expected: Any, atol: float = 1e-6, where: str = "") -> None:
    """Raise :class:`_Mismatch` with a one-line reason when ``got`` is not ``expected``."""
    if _is_tensor(expected):
        if not _is_tensor(got):
            raise _Mismatch(f"returned {_kind(got)}{where}, expected a tensor")
        _compare_tensors(got, expected, atol, where)
    elif _is_number(expected):
        if _is_tensor(got) or not _is_number(got):
            raise _Mismatch(f"returned {_kind(got)} {short(got)}{where}, expected a number ({expected!r})")
        got = _plain_number(got)
        if got == expected:  # also ±inf, which the difference below makes NaN
            return
        if math.isnan(got) and not math.isnan(expected):
            raise _Mismatch(f"NaN{where}, expected {expected!r}")
        if not (abs(got - expected) <= atol or (math.isnan(got) and math.isnan(expected))):
            raise _Mismatch(f"expected {expected!r}{where}, got {got!r}")
    elif isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)):
            raise _Mismatch(f"returned {_kind(got)}{where}, expected {_kind(expected)} of {len(expected)}")
        got = _plain_items(got)
        if len(got) != len(expected):
            raise _Mismatch(f"returned {len(got)} values{where}, expected {len(expected)}")
        for i, (g, e) in enumerate(zip(got, expected)):
            compare(g, e, atol, f"{where} [item {i}]")
    elif isinstance(expected, dict):
        got = _plain_items(got) if isinstance(got, dict) else got
        if not isinstance(got, dict) or set(got) != set(expected):
            raise _Mismatch(f"returned {short(got)}{where}, expected a dict with keys {sorted(expected, key=str)}")
        for k in expected:
            compare(got[k], expected[k], atol, f"{where} [{k!r}]")
    elif isinstance(expected, str) and isinstance(got, str):
        got = str.__str__(got)  # a subclass's own == or != never runs
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


def _clone_tensor(t):
    """A copy that trains like ``t``: a leaf that needs a gradient stays such a leaf (``grad_wrt`` is mapped to
    it); a tensor in the middle of a graph stays in it, so gradients still reach the leaves it came from."""
    import torch

    if not t.is_leaf:
        return t.clone()
    copy = t.detach().clone().requires_grad_(t.requires_grad)
    return torch.nn.Parameter(copy, requires_grad=t.requires_grad) if isinstance(t, torch.nn.Parameter) else copy


def _is_model(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.nn.Module)


def _weights(model) -> dict[str, tuple]:
    """Each weight of ``model``: the tensor, its in-place version counter, ``requires_grad``, its ``.grad``."""
    state = {}
    for name, p in model.named_parameters():
        try:
            version = p._version
        except RuntimeError:  # an inference-mode tensor keeps no version: its values cannot be watched
            version = None
        state[name] = (p, version, p.requires_grad, p.grad, None if p.grad is None else p.grad._version)
    return state


class FreshInputs:
    """One function's own copy of a case's arguments, and what tells whether the function changed it.

    Tensors are cloned (see :func:`_clone_tensor`); lists, tuples, dicts, sets and dataclass instances (a
    ``Rollout``) are copied all the way down, objects shared between arguments staying shared (one group's
    prompt list). Anything else — a model, a config, a function — is passed as it is: a model cannot be
    copied per case, so its weights are watched instead (their version counters, ``requires_grad`` and
    ``.grad``).
    """

    def __init__(self, case: Case):
        self._copies: dict[int, tuple[Any, Any]] = {}  # id(original) → (original, its copy)
        self._models: list = []
        self.args = tuple(self._copy(a) for a in case.args)
        self.kwargs = {k: self._copy(v) for k, v in case.kwargs.items()}
        self.grad_wrt = None if case.grad_wrt is None else [self._copies.get(id(w), (w, w))[1] for w in case.grad_wrt]
        self._originals = (case.args, dict(case.kwargs))
        self._weights = [(model, _weights(model)) for model in self._models]

    def _copy(self, value: Any) -> Any:
        key = id(value)
        if key in self._copies:
            return self._copies[key][1]
        if _is_tensor(value):
            copy = _clone_tensor(value)
        elif type(value) in (list, dict, set):
            copy = type(value)()
            self._copies[key] = (value, copy)  # before the items: a list that holds itself
            if isinstance(copy, list):
                copy.extend(self._copy(v) for v in value)
            elif isinstance(copy, dict):
                copy.update((k, self._copy(v)) for k, v in value.items())
            else:
                copy.update(value)
            return copy
        elif type(value) is tuple or (isinstance(value, tuple) and hasattr(value, "_make")):
            items = [self._copy(v) for v in value]
            copy = tuple(items) if type(value) is tuple else value._make(items)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            copy = copy_module.copy(value)
            self._copies[key] = (value, copy)
            for f in dataclasses.fields(value):
                object.__setattr__(copy, f.name, self._copy(getattr(value, f.name)))
            return copy
        else:
            if _is_model(value) and all(value is not m for m in self._models):
                self._models.append(value)
            return value
        self._copies[key] = (value, copy)
        return copy

    def changes(self, fn: Callable) -> str:
        """What ``fn`` changed in its inputs, on one line, or ``""``."""
        seen: set[int] = set()
        args, kwargs = self._originals
        for where, original in [*zip(_argument_names(fn, len(args)), args), *kwargs.items()]:
            found = self._change(original, where, seen)
            if found:
                return (f"changed its argument {found}: a function must leave its inputs as they came, so build "
                        "new values (a + b, not a += b; x - m, not x -= m)")
        for model, state in self._weights:
            found = _weights_change(model, state)
            if found:
                return found
        return ""

    def _change(self, original: Any, where: str, seen: set[int]) -> str:
        entry = self._copies.get(id(original))
        if entry is None or id(original) in seen:  # immutable or shared (models are watched apart), or done
            return ""
        seen.add(id(original))
        copy = entry[1]
        if _is_tensor(original):
            return _tensor_change(original, copy, where)
        if isinstance(original, set):
            return "" if copy == original else f"{where} in place (a set of {len(original)} became {short(copy)})"
        if isinstance(original, list) and len(copy) != len(original):
            return f"{where} in place (a list of {len(original)} items became {len(copy)})"
        if isinstance(original, list) and _reordered(original, copy, self._copies):
            return f"{where} in place (its items were reordered, e.g. by .sort(): use sorted(...) for a new list)"
        if isinstance(original, dict) and set(copy) != set(original):
            return f"{where} in place (its keys {short(sorted(original, key=str))} became {short(sorted(copy, key=str))})"
        for sub, old, new in _slots(original, copy, where):
            kept = self._copies[id(old)][1] if id(old) in self._copies else old
            if new is not kept and not (id(old) not in self._copies and _same_plain(old, new)):
                return f"{sub} in place ({short(old)} became {short(new)})"
            found = self._change(old, sub, seen)
            if found:
                return found
        return ""


def _slots(original: Any, copy: Any, where: str) -> list[tuple[str, Any, Any]]:
    """``(name, original item, the copy's item)`` for each item of a list, tuple, dict or dataclass."""
    if isinstance(original, dict):
        return [(f"{where}[{k!r}]", v, copy[k]) for k, v in original.items()]
    if isinstance(original, (list, tuple)):
        return [(f"{where}[{i}]", v, copy[i]) for i, v in enumerate(original)]
    return [(f"{where}.{f.name}", getattr(original, f.name), getattr(copy, f.name))
            for f in dataclasses.fields(original)]


def _reordered(original: list, copy: list, copies: dict[int, tuple[Any, Any]]) -> bool:
    """Whether ``copy`` holds exactly the copies of ``original``'s items, in another order."""
    kept = [copies[id(v)][1] if id(v) in copies else v for v in original]
    return any(a is not b for a, b in zip(kept, copy)) and sorted(map(id, kept)) == sorted(map(id, copy))


def _same_plain(old: Any, new: Any) -> bool:
    """An immutable item put back with an equal one (an int 1000 for an int 1000)."""
    try:
        return type(old) is type(new) and bool(old == new)
    except Exception:  # noqa: BLE001 — an object that cannot say whether it equals its own kind: changed
        return False


def _tensor_change(original, copy, where: str) -> str:
    if tuple(copy.shape) != tuple(original.shape) or copy.dtype != original.dtype:
        return (f"{where} in place (a {original.dtype} tensor of shape {tuple(original.shape)} became "
                f"{copy.dtype} {tuple(copy.shape)})")
    a, b = original.detach(), copy.detach().to(original.device)
    same = (a == b) | (a.isnan() & b.isnan())  # NaN stays NaN
    if bool(same.all()):
        return ""
    at = tuple((~same).nonzero()[0].tolist())
    return f"{where} in place (at index {at}: {a[at].item():.6g} became {b[at].item():.6g})"


def _weights_change(model, state: dict[str, tuple]) -> str:
    now = dict(model.named_parameters())
    for name, (p, version, requires_grad, grad, grad_version) in state.items():
        if now.get(name) is not p:
            return f"replaced its model's weight {name}: the notebook goes on with this model, leave it as it came"
        if version is not None and p._version != version:
            return (f"changed its model's weight {name} in place: the notebook goes on with this model, "
                    "compute with it and leave its weights as they came")
        if p.requires_grad != requires_grad:
            return f"switched requires_grad of its model's weight {name}: leave the model as it came"
        if p.grad is not grad or (grad is not None and grad._version != grad_version):
            return (f"left a gradient in its model's weight {name} (it called backward()): return the loss "
                    "and let the caller differentiate it")
    return ""


def _argument_names(fn: Callable, n: int) -> list[str]:
    """The names of ``fn``'s first ``n`` positional parameters (``argument 3`` where it has none)."""
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"argument {i + 1}" for i in range(n)]


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
    """Run ``fn`` and ``reference`` on every case; print one verdict line (under a ✗, its why line); never
    raise (but on ``KeyboardInterrupt``).

    ``cases`` maps a case's name to a :class:`Case`, a tuple of positional arguments, or a single argument.
    ``atol`` is the tolerance on numbers and tensors, ``grad_atol`` on gradients (default ``atol``). Each
    function gets its own copy of a case's arguments (:class:`FreshInputs`), so neither can change the
    cases, the other's inputs, or what the notebook holds; a learner's function that changes its own copy
    fails, with the argument it changed named.
    """
    problem = _check_arguments(name, fn, reference, cases)
    if problem:
        return _verdict(name, False, f"✗ {problem} — using the package's version", 0,
                        reference if callable(reference) else None, quiet,
                        why=f"the grader ran 0 of its cases; the cells below use {_reference_name(reference)}")
    grad_atol = atol if grad_atol is None else grad_atol
    with _random_state_kept():
        for i, (case_name, case) in enumerate(cases.items()):
            if not isinstance(case, Case):
                case = Case(case if isinstance(case, tuple) else (case,))
            line = _grade_case(name, fn, reference, case_name, case, atol, grad_atol, first=i == 0)
            if line:
                return _verdict(name, False, line, 0 if line.startswith("✗ grader problem") else len(cases),
                                reference, quiet, why=_why(name, reference, line, i, case_name, len(cases)))
    grads = " (values and gradients)" if any(isinstance(c, Case) and c.grad_wrt for c in cases.values()) else ""
    return _verdict(name, True, f"✓ {name} matches the package on {len(cases):,} cases{grads}", len(cases), fn, quiet)


USING_PACKAGE = " — using the package's version"


@contextlib.contextmanager
def _random_state_kept():
    """Put Python's, NumPy's and torch's random generators back as they were: a function that draws random
    numbers (or reseeds) while graded must not change the samples the notebook's later cells draw."""
    py_state = random.getstate()
    np = sys.modules.get("numpy")
    np_state = np.random.get_state() if np is not None else None
    torch = sys.modules.get("torch")
    torch_state = torch.get_rng_state() if torch is not None else None
    cuda_states = torch.cuda.get_rng_state_all() if torch is not None and torch.cuda.is_initialized() else None
    try:
        yield
    finally:
        random.setstate(py_state)
        if np_state is not None:
            np.random.set_state(np_state)
        if torch_state is not None:
            torch.set_rng_state(torch_state)
        if cuda_states is not None:
            torch.cuda.set_rng_state_all(cuda_states)


def _grade_case(name, fn, reference, case_name, case: Case, atol: float, grad_atol: float, first: bool) -> str:
    """One case: ``""`` when ``fn`` matches ``reference`` on it, else the verdict line saying why not. A
    ``NotImplementedError`` on the first case is a stub not written yet; on a later one, a named case."""
    try:
        expected_inputs = FreshInputs(case)
        expected = reference(*expected_inputs.args, **expected_inputs.kwargs)
        expected_grads = _gradients(expected, expected_inputs.grad_wrt) if case.grad_wrt else None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 — a grader bug is reported, not raised
        return (f"✗ grader problem: the package's {getattr(reference, '__name__', 'function')} raised "
                f"{_raised(exc, 120)} on case {case_name!r}")
    inputs = FreshInputs(case)
    try:
        got = fn(*inputs.args, **inputs.kwargs)
    except KeyboardInterrupt:
        raise
    except NotImplementedError as exc:
        if first:
            return f"✗ {name}: not written yet (NotImplementedError){USING_PACKAGE}"
        return f"✗ {name} raised {_raised(exc)} on case {case_name!r}{USING_PACKAGE}"
    except BaseException as exc:  # noqa: BLE001 — the learner's bug (even a sys.exit()) is the verdict
        return f"✗ {name} raised {_raised(exc)} on case {case_name!r}{USING_PACKAGE}"
    try:
        changed = inputs.changes(fn)
        if changed:
            return f"✗ {name}: case {case_name!r} — {changed}{USING_PACKAGE}"
        compare(got, expected, atol)
        if expected_grads is not None:
            for i, (g, e) in enumerate(zip(_gradients(got, inputs.grad_wrt), expected_grads)):
                compare(g, e, grad_atol, f" in the gradient of input {i}")
    except KeyboardInterrupt:
        raise
    except _Mismatch as exc:
        return f"✗ {name}: case {case_name!r} — {exc}{USING_PACKAGE}"
    except BaseException as exc:  # noqa: BLE001 — e.g. a backward pass through the learner's graph fails
        return f"✗ {name}: case {case_name!r} — comparing raised {_raised(exc)}{USING_PACKAGE}"
    return ""


def _reference_name(reference) -> str:
    """The package's function as a learner would import it: ``kimina_edu.eval.pass_at_k``."""
    name = getattr(reference, "__name__", None)
    if not callable(reference) or not name or name.startswith("<"):
        return "the package's function"
    module = getattr(reference, "__module__", "")
    return f"{module}.{name}" if module else name


def _why(name, reference, line, index, case_name, n) -> str:
    """The why line under a ✗ verdict, from the grading itself: how far the function got, and what the
    notebook goes on with (kimina_edu.checks: every ✗ a learner reads comes with one)."""
    used = _reference_name(reference)
    if line.startswith("✗ grader problem"):
        return f"case {index + 1} of {n} ({case_name!r}) could not be graded; the cells below use {used}"
    if "not written yet" in line:
        return (f"{name} raised NotImplementedError on case 1 of {n}, the stub's placeholder; the cells below "
                f"use {used} until yours passes all {n}")
    return (f"{name} matched {index} of {n} cases before {case_name!r}; the cells below use {used} until yours "
            f"passes all {n}")


def _verdict(name, passed, line, n, function, quiet, why: str = "") -> GradeResult:
    line = " ".join(line.split())  # one line, whatever the messages held
    if not quiet:
        print(line)
        if why:  # under a ✗, the why computed from the grading (kimina_edu.checks.WHY)
            print(f"  why: {' '.join(why.split())}")
    return GradeResult(name, passed, line, n, function)
