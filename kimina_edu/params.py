"""Every notebook parameter, checked in one place — and learner mistakes shown as one line.

A notebook's ``parameters`` cell is where a learner (or ``make course``, through papermill) types
values; the derived-values cell right after it calls::

    from kimina_edu.params import check_params, one_line_errors

    one_line_errors(OUTPUT_DIR)   # a LearnerError ends the cell in one line; full traceback kept
    globals().update(check_params(globals(), smoke={"N_PROOFS": (1024, 128)}))

:func:`check_params` knows every parameter name the course uses (:data:`SPECS`): its type (``SMOKE``
must be a real ``bool`` — papermill's ``-p SMOKE False`` passes the *string* "False", which is
truthy), its range, and for ``DEVICE`` whether that device is present on this machine. ``SMOKE``
only fills values left as ``None``: an explicit ``STEPS = 50`` is never replaced by the smoke size.
"""

from __future__ import annotations

import html
import math
import os
import re
import tempfile
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kimina_edu.errors import LearnerError, ParameterError, SetupError


@dataclass(frozen=True)
class Spec:
    """How one parameter is checked: ``check(value)`` returns a problem (text) or ``None``."""

    check: Callable[[Any], str | None]
    hint: str  # an example of a good value, shown with the problem


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return (isinstance(v, int | float) and not isinstance(v, bool)) and math.isfinite(v)


def _boolean(v: Any) -> str | None:
    if isinstance(v, bool):
        return None
    extra = " (a string is always truthy: 'False' would switch it on)" if isinstance(v, str) else ""
    return f"must be True or False, not {type(v).__name__} {v!r}{extra}"


def _integer(low: int, high: int | None = None) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        if not _is_int(v):
            return f"must be a whole number, not {type(v).__name__} {v!r}"
        if v < low or (high is not None and v > high):
            return f"must be {'≥ ' + str(low) if high is None else f'between {low} and {high}'}, got {v}"
        return None

    return check


def _real(low: float, high: float | None = None, *, low_open: bool = False) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        if not _is_number(v):
            return f"must be a finite number, not {type(v).__name__} {v!r}"
        if v < low or (low_open and v == low) or (high is not None and v > high):
            bound = f"{'>' if low_open else '≥'} {low}" + ("" if high is None else f" and ≤ {high}")
            return f"must be {bound}, got {v}"
        return None

    return check


def _text(v: Any) -> str | None:
    if isinstance(v, os.PathLike):
        v = os.fspath(v)
    if not isinstance(v, str) or not v.strip():
        return f"must be a non-empty string, not {type(v).__name__} {v!r}"
    if v != v.strip():  # a pasted "pocket " is no keyword, no folder and no hub id: every notebook fails on it
        return f"has spaces at its ends: {v!r} (write {v.strip()!r})"
    return None


def _one_of(choices: Callable[[], tuple[str, ...]]) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        allowed = choices()
        return None if isinstance(v, str) and v in allowed else f"must be one of {list(allowed)}, got {v!r}"

    return check


def device_problem(device: Any) -> str | None:
    """Why ``device`` cannot be used on this machine, or ``None``.

    "auto" and "cpu" always work; "cuda" (or "cuda:N") needs a GPU that torch can see, "mps" an
    Apple-silicon GPU. Checked here, not when the first tensor moves, so the learner hears it in
    the second cell rather than as a driver error minutes later.
    """
    if not isinstance(device, str):
        return f"must be a string such as 'auto', not {type(device).__name__} {device!r}"
    if device in ("auto", "cpu"):
        return None
    padded = re.fullmatch(r"cuda:0+([0-9]+)", device, flags=re.ASCII)
    if padded:  # torch.device("cuda:00") raises "Invalid device string": the index is written without zeros
        return f"is {device!r}, which torch refuses: write the index without leading zeros, 'cuda:{int(padded.group(1))}'"
    cuda = re.fullmatch(r"cuda(?::(0|[1-9][0-9]*))?", device, flags=re.ASCII)  # what torch.device accepts, no more
    index = cuda.group(1) or "" if cuda else ""
    if cuda:
        import torch

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            return f"is {device!r} but no CUDA GPU is visible on this machine: use 'auto' (CUDA when present) or 'cpu'"
        if index and int(index) >= count:
            return f"is {device!r} but this machine has {count} CUDA device(s): use 'cuda:0'…'cuda:{count - 1}'"
        return None
    if device == "mps":
        import torch

        if not torch.backends.mps.is_available():
            return "is 'mps' but no Apple-silicon GPU is available here: use 'auto' or 'cpu'"
        return None
    return f"must be 'auto', 'cpu', 'cuda' (or 'cuda:N') or 'mps', got {device!r}"


def _tasks() -> tuple[str, ...]:
    from kimina_edu.tasks import TASK_CONFIGS

    return tuple(TASK_CONFIGS)


def _loss_types() -> tuple[str, ...]:
    from kimina_edu.grpo import LOSS_TYPES

    return LOSS_TYPES


# Every parameter any notebook declares. A name a notebook adds must be added here, or it goes
# unchecked (tests/test_params.py fails on a notebook parameter missing from this table).
SPECS: dict[str, Spec] = {
    "SMOKE": Spec(_boolean, "True or False"),
    "QUICK": Spec(_boolean, "True or False"),
    "SEED": Spec(_integer(0, 2**32 - 1), "0 (numpy's seeds stop at 2**32 - 1)"),
    "DEVICE": Spec(device_problem, '"auto"'),
    "MODEL_ID": Spec(_text, '"pocket"'),
    "OUTPUT_DIR": Spec(_text, '"."'),
    "TASK": Spec(_one_of(_tasks), '"syllogism"'),
    "N_EXAMPLES": Spec(_integer(1), "3"),
    "N_EVAL": Spec(_integer(1), "400"),
    "N_SFT": Spec(_integer(1), "200"),
    "SFT_EPOCHS": Spec(_integer(1), "8"),
    "SFT_LR": Spec(_real(0.0, 1.0, low_open=True), "3e-3"),
    "TEACHER": Spec(_one_of(lambda: ("rule-based", "openai")), '"rule-based"'),
    "TEACHER_MODEL": Spec(_text, '"gpt-4.1-mini"'),
    "STEPS": Spec(_integer(1), "300"),
    "LR": Spec(_real(0.0, 1.0, low_open=True), "1e-4"),
    "LOSS_TYPE": Spec(_one_of(_loss_types), '"grpo"'),
    "EVAL_EVERY": Spec(_integer(0), "25 (0: only at the end)"),
    "VARIANT_STEPS": Spec(_integer(1), "15"),
    "TRL_STEPS": Spec(_integer(1), "100 (chapter 4's whole run: 300)"),
    "EPS_LOW": Spec(_real(0.0, 1.0, low_open=True), "0.2"),
    "EPS_HIGH": Spec(_real(0.0, 1.0, low_open=True), "0.28"),
    # chapter 6 draws the ideal throughput WORKERS / LATENCY: 0 divides by zero, and a denormal gives inf
    "LATENCY": Spec(_real(0.001, 60.0), "0.05 (seconds, at least 0.001: the chapter draws WORKERS / LATENCY)"),
    "WORKERS": Spec(_integer(1, 1024), "32"),
    "N_PROOFS": Spec(_integer(1), "1024"),
    "N_BATCHES": Spec(_integer(1), "40"),
    "BATCH": Spec(_integer(1), "64"),
    "PRESET": Spec(_one_of(lambda: ("full", "dry_run", "one_gpu")), '"full"'),
    # chapter 9 reports pass@k and best@k for k = 1, 2, 4, 8 from these samples; pass@k needs k ≤ n
    "N_SAMPLES": Spec(_integer(8), "8 (at least 8: chapter 9 reports pass@k and best@k up to k = 8)"),
    "FIX_RATE": Spec(_real(0.0, 1.0), "0.35"),
    "PROBE_HUB": Spec(_boolean, "False"),
    "REBUILD_POCKET": Spec(_boolean, "False"),
}


def check_params(namespace: Mapping[str, Any], *, smoke: Mapping[str, tuple[Any, Any]] | None = None,
                 optional: Iterable[str] = (), verbose: bool = True) -> dict[str, Any]:
    """The notebook's parameters, checked, with the ``None`` ones filled in.

    ``namespace``: usually ``globals()``; every name of :data:`SPECS` found in it is checked.
    ``smoke``: ``{name: (full_value, smoke_value)}`` for parameters whose default depends on
    ``SMOKE``; the notebook's parameters cell sets them to ``None``. A value the learner (or
    papermill) set explicitly is kept and checked like any other — SMOKE never overrides it.
    ``optional``: parameters whose ``None`` means "the preset decides" (``TrainConfig.preset``,
    ``SFTRecipe.preset`` check what they fill in); a value other than ``None`` is checked.
    Every problem is collected and raised together as one :class:`ParameterError` line.
    Returns ``{name: value}`` for the parameters checked (``globals().update(...)`` applies it).
    """
    values = {name: namespace[name] for name in SPECS if name in namespace}
    problems = []
    smoke_on = values.get("SMOKE", False)
    if "SMOKE" in values and (problem := _boolean(smoke_on)):
        problems.append(f"SMOKE {problem}")
        smoke_on = False
    filled, kept = [], []
    for name, (full, small) in (smoke or {}).items():
        if name not in SPECS:
            raise ValueError(f"check_params: {name!r} has no entry in kimina_edu.params.SPECS; add one there")
        if namespace.get(name) is None:
            values[name] = small if smoke_on is True else full
            filled.append(f"{name}={values[name]!r}")
        else:
            values[name] = namespace[name]
            kept.append(f"{name}={values[name]!r}")
    skip = set(optional)
    unknown = skip - set(SPECS)
    if unknown:
        raise ValueError(f"check_params: {sorted(unknown)} have no entry in kimina_edu.params.SPECS; add them there")
    for name, value in values.items():
        if name == "SMOKE" or (name in skip and value is None):
            continue
        if (problem := SPECS[name].check(value)) is not None:
            problems.append(f"{name} {problem} (e.g. {name} = {SPECS[name].hint})")
    if problems:
        raise ParameterError("bad notebook parameter: " + "; ".join(problems)
                             + ". Fix it in the parameters cell (or the -p/make override) and run again.")
    if verbose and smoke:
        mode = "SMOKE sizes" if smoke_on else "full sizes"
        print(f"{mode}: {', '.join(filled) or 'none left to fill'}"
              + (f"; kept as set: {', '.join(kept)}" if kept else ""))
    return values


# ------------------------------------------------------------------ one-line errors in notebooks


def learner_error_types() -> tuple[type[BaseException], ...]:
    """The exception types a learner causes and can fix, shown as one line by :func:`one_line_errors`:
    every class of :mod:`kimina_edu.errors` derives from :class:`LearnerError`."""
    return (LearnerError,)


def one_line(exc: BaseException) -> str:
    """``"ParameterError: …"`` on one line, whatever newlines the message had."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def save_traceback(exc: BaseException, output_dir: str | os.PathLike | None = None) -> Path:
    """Write the full traceback of ``exc`` to ``<output_dir>/errors/`` (a temp folder for None or ".")."""
    # "." is the notebooks folder when a learner runs a notebook by hand: keep tracebacks out of the repo
    here = output_dir is None or str(output_dir) in ("", ".")
    root = Path(tempfile.gettempdir()) / "kimina-edu" if here else Path(output_dir)
    folder = root / "errors"
    folder.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f"{type(exc).__name__}-", suffix=".txt", dir=folder)
    with os.fdopen(fd, "w") as fh:
        fh.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    return Path(name)


def ipython_shell():
    """The running IPython shell (a notebook's kernel), or ``None`` in a plain script or without IPython."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def one_line_errors(output_dir: str | os.PathLike | None = None) -> bool:
    """In IPython/Jupyter: a learner error ends its cell in one line, not a traceback through the package.

    Installs an IPython custom exception handler (``InteractiveShell.set_custom_exc``) for
    :func:`learner_error_types`. The full traceback is not lost: it is kept in the notebook as a
    collapsed "full traceback" block just above the line, and written to ``<output_dir>/errors/``.
    Every other exception shows its usual traceback (a bug in the learner's own code needs it).
    Returns ``False`` outside IPython (a plain script keeps Python's traceback).
    """
    shell = ipython_shell()
    if shell is None:
        return False

    def handler(shell, etype, value, tb, tb_offset=None):
        value.__traceback__ = tb
        path = save_traceback(value, output_dir)
        full = "".join(traceback.format_exception(etype, value, tb))
        try:
            from IPython.display import display

            display({"text/plain": f"(full traceback collapsed; also in {path})",
                     "text/html": f"<details><summary>full traceback (also in {html.escape(str(path))})</summary>"
                                  f"<pre>{html.escape(full)}</pre></details>"}, raw=True)
        except Exception as exc:  # noqa: BLE001 — the line below must show even if display fails
            print(f"(could not display the full traceback inline: {one_line(exc)})")
        # IPython 8–9 drop the handler's returned traceback instead of showing it, so show it here;
        # ipykernel's _showtraceback sends it as the cell's error output (ename, evalue, 1-line traceback).
        shell._showtraceback(etype, value, [f"{one_line(value)}  [full traceback: {path}]"])

    shell.set_custom_exc(learner_error_types(), handler)
    return True


__all__ = [
    "SPECS",
    "LearnerError",
    "ParameterError",
    "SetupError",
    "Spec",
    "check_params",
    "device_problem",
    "learner_error_types",
    "one_line",
    "one_line_errors",
    "save_traceback",
]
