"""Run the course headless: every notebook, in order, with papermill.

    python -m kimina_edu.course            # full run  → runs/<timestamp>/, runs/latest
    python -m kimina_edu.course --smoke    # SMOKE=True, seconds per notebook
    python -m kimina_edu.course --quick    # QUICK=True: a learner's first pass (chapters 4–5 shorter)
    python -m kimina_edu.course --only 03 04
    MODEL_ID=HuggingFaceTB/SmolLM-135M-Instruct SEED=1 make course

Overrides — ``MODEL_ID``, ``SEED``, ``DEVICE``, ``SMOKE`` and ``QUICK`` from the environment (``make
course`` passes them through) or ``--model-id/--seed/--device/--smoke/--quick`` — reach the
notebooks as papermill parameters (``QUICK`` only those that declare it: chapters 4 and 5). They
are checked first (:func:`kimina_edu.params.check_params`), and a bad one stops the run in one
line before any notebook starts. ``runs/latest`` moves to a run only when it has
finished; until then the run's folder holds a ``RUNNING`` marker (``INTERRUPTED`` after Ctrl-C).

Each notebook gets its own folder with the executed notebook, an HTML export, its figures
and its ``metrics.json``. A failing notebook does not stop the others; it is marked FAIL in
the summary, its executed copy (with the traceback) is kept, and the exit code is 1.
A full run (not SMOKE, not QUICK) on the pocket model also checks the course's learning goals
(:mod:`kimina_edu.goals`) on what each notebook measured; a missed goal is listed and exits 1.
The test suite (tests/test_notebooks.py) calls :func:`run_notebook` too: one harness.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from kimina_edu.cell_timing import kernel_manager, slowest_cell
from kimina_edu.goals import (  # noqa: F401 (course.X)
    GOALS,
    LEARNING_GOALS,
    SMOLLM2_GOALS,
    goal_lines,
    goals_for,
    missed_goals,
)

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
# a hang catcher per cell: the longest, SmolLM2's GRPO (2,304 rollouts), took 3,800 s on one busy core
# (benchmarks/README.md)
CELL_TIMEOUT_S = 2 * 3600


@dataclass
class NotebookResult:
    name: str
    ok: bool
    seconds: float
    output_dir: Path
    metrics: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    slowest_cell: str = ""  # "cell 18, 52.1 s: sft_model, … = sft_train(…" — where this notebook's time went


def list_notebooks(only: list[str] | None = None) -> list[Path]:
    """The course's notebooks in order; with ``only``, those whose name starts with one of its prefixes
    (a path such as ``notebooks/03_sft_warmup.ipynb``, as tab completion writes it, counts by its name).
    An empty prefix is refused (``ParameterError``): it would match every notebook, and ``--only ""`` means
    a selection that went wrong, not "no filter"."""
    paths = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if only is None:
        return paths
    prefixes = [Path(o.strip()).name if o.strip() else "" for o in only]
    if "" in prefixes or not prefixes:
        from kimina_edu.params import ParameterError

        raise ParameterError(f"--only got an empty notebook prefix ({' '.join(map(repr, only))}): name the notebooks, "
                             "e.g. --only 03 04, or leave --only out to run them all")
    return [p for p in paths if any(p.name.startswith(o) for o in prefixes)]


# MODEL_ID values that name no folder, whatever folders the current directory holds (kimina_edu.models)
MODEL_KEYWORDS = ("auto", "pocket", "smollm2")
# Environment variables holding a folder that the notebooks' kernels read (runtime.cache_dir, transformers)
PATH_VARIABLES = ("KIMINA_EDU_CACHE", "XDG_CACHE_HOME", "HF_HOME", "HF_HUB_CACHE")


def _looks_like_a_path(text: str) -> bool:
    """``./m``, ``../m``, ``~/m``, ``/m``, ``m/``: a folder, never a hub id (``org/name``)."""
    return text in (".", "..") or text.startswith(("./", "../", "~", "/", ".\\", "..\\")) or text.endswith(("/", "\\"))


def resolve_model_id(model_id: str, cwd: str | os.PathLike | None = None) -> str:
    """``MODEL_ID`` as the notebooks must read it: a folder relative to ``cwd`` (the folder the learner typed it
    in) as its absolute path, since papermill runs each notebook in ``notebooks/``, where ``my_model`` names
    nothing; a keyword or a hub id unchanged. A path-shaped value (``./m``, ``m/``) that is no folder is refused
    in one line (``ParameterError``) before any notebook starts."""
    if model_id in MODEL_KEYWORDS:
        return model_id
    typed = os.path.expanduser(model_id)
    folder = os.path.abspath(os.path.join(cwd or os.getcwd(), typed))
    if os.path.isdir(folder):
        return folder
    if _looks_like_a_path(model_id):
        from kimina_edu.params import ParameterError

        raise ParameterError(f"MODEL_ID={model_id!r} names a folder, but {folder} is not a folder: point MODEL_ID at "
                             "a folder written by save_pretrained, or use MODEL_ID='pocket' or 'smollm2'")
    return model_id


def absolute_path_variables(environ: Mapping[str, str], cwd: str | os.PathLike | None = None) -> dict[str, str]:
    """The :data:`PATH_VARIABLES` of ``environ`` that are relative (or start with ``~``), as absolute paths against
    ``cwd``: a kernel runs in ``notebooks/`` and would read ``KIMINA_EDU_CACHE=.cache`` as ``notebooks/.cache``
    while ``make smollm2``, run where the learner typed it, filled ``./.cache``."""
    changes = {}
    for name in PATH_VARIABLES:
        value = environ.get(name)
        if value:
            resolved = os.path.abspath(os.path.join(cwd or os.getcwd(), os.path.expanduser(value)))
            if resolved != value:
                changes[name] = resolved
    return changes


def quiet_library_bars(environ: Mapping[str, str]) -> dict[str, str]:
    """The libraries' own progress bars off in a headless kernel (unless the environment says otherwise): an
    executed notebook keeps a bar's first frame, and transformers' "Loading weights: 0%" on every model load
    reads as a hang. The course's own bars (training, evaluation) are unaffected."""
    quiet = {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}
    return {k: v for k, v in quiet.items() if k not in environ}


@contextmanager
def _environment(changes: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` with ``changes`` applied while the block runs (a kernel inherits it when it starts)."""
    before = {name: os.environ.get(name) for name in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _failure_message(exc: Exception) -> str:
    """The failing cell's source and traceback, not papermill's wrapper."""
    lines = [f"{type(exc).__name__}: {exc}"]
    for attr in ("ename", "evalue"):
        if hasattr(exc, attr):
            lines.append(f"{attr}: {getattr(exc, attr)}")
    return "\n".join(lines)


def _failing_cell(executed: Path) -> str:
    import nbformat

    if not executed.exists():
        return ""
    nb = nbformat.read(executed, as_version=4)
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                tb = "\n".join(out.get("traceback", []))
                return f"--- failing cell ---\n{cell.source}\n--- traceback ---\n{_strip_ansi(tb)}"
    return ""


def _strip_ansi(text: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def export_html(executed: Path) -> Path | None:
    """The HTML a reader opens: consecutive prints joined as JupyterLab joins them (nbconvert leaves its
    stream-coalescing step off, so output written in pieces came out one word per line), and widgets drawn
    from their saved state (``kimina_edu.widgets.freeze_widgets``), so nothing is fetched from a CDN."""
    import nbformat
    from nbconvert import HTMLExporter
    from traitlets.config import Config

    from kimina_edu.widgets import freeze_widgets

    try:
        nb = nbformat.read(executed, as_version=4)
        freeze_widgets(nb)
        exporter = HTMLExporter(config=Config({"CoalesceStreamsPreprocessor": {"enabled": True}}))
        body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": executed.stem,
                                                                          "path": str(executed.parent)}})
    except Exception as exc:  # noqa: BLE001 — an export failure must not hide the run's verdict
        print(f"  (HTML export of {executed.name} failed: {exc})")
        return None
    html = executed.with_suffix(".html")
    html.write_text(body)
    return html


def _with_solutions(path: Path, workdir: Path) -> Path:
    """``path`` itself when it has no stub cell; otherwise a copy in ``workdir`` with every stub filled by its
    solution (:mod:`kimina_edu.stubs`). The notebook in ``notebooks/`` is never written."""
    from kimina_edu.stubs import inject_solutions

    nb = json.loads(path.read_text(encoding="utf-8"))
    if not inject_solutions(nb):
        return path
    filled = workdir / path.name
    filled.write_text(json.dumps(nb, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return filled


def run_notebook(
    path: Path, output_dir: Path, *, smoke: bool, timeout: int = CELL_TIMEOUT_S, extra: dict[str, Any] | None = None,
    inject_solutions: bool = True,
) -> NotebookResult:
    """Execute one notebook into ``output_dir`` and read back its ``metrics.json``. With ``inject_solutions``
    (the default: ``make course`` and the tests) each ``stub`` cell runs its solution from
    ``notebooks/solutions/derive.py``; without it the stubs run as a learner gets them."""
    import tempfile

    import papermill

    output_dir.mkdir(parents=True, exist_ok=True)
    executed = output_dir / path.name
    params = {"SMOKE": smoke, "OUTPUT_DIR": str(output_dir.resolve()), **(extra or {})}
    start = time.perf_counter()
    error = ""
    workdir = tempfile.TemporaryDirectory(prefix="kimina-solutions-")
    statements = Path(workdir.name) / "statements.jsonl"  # the kernel's per-statement timings (slowest_cell)
    slowest = ""
    try:
        source = _with_solutions(path, Path(workdir.name)) if inject_solutions else path
        with _environment({**quiet_library_bars(os.environ), **absolute_path_variables(os.environ)}):
            papermill.execute_notebook(
                str(source),
                str(executed),
                parameters=params,
                cwd=str(NOTEBOOKS),
                kernel_name="python3",
                execution_timeout=timeout,
                start_timeout=max(60, min(timeout, 600)),  # a kernel start under load: a hang catcher, not a speed test
                progress_bar=False,
                log_output=False,
                kernel_manager_class=kernel_manager(Path(workdir.name), statements),
            )
    except Exception as exc:  # noqa: BLE001 — reported with the failing cell below
        error = (_failing_cell(executed) or "") + "\n" + _failure_message(exc)
    finally:
        slowest = slowest_cell(executed, statements)
        workdir.cleanup()
    seconds = time.perf_counter() - start
    metrics_path = output_dir / "metrics.json"
    metrics = json.loads(metrics_path.read_text()) if metrics_path.exists() and not error else {}
    if not error and not metrics:
        error = "the notebook finished but wrote no metrics.json (its last cell must call write_metrics)"
    return NotebookResult(path.stem, not error, seconds, output_dir, metrics, error.strip(), slowest)


def _headline(metrics: dict[str, Any], width: int = 70) -> list[str]:
    """A notebook's headline figures as lines of at most ``width`` characters, split between figures, never
    inside one (a cut figure loses its value)."""
    lines: list[str] = []
    for key, value in metrics.get("headline", {}).items():
        part = f"{key}={value:.3g}" if isinstance(value, float) else f"{key}={value}"
        if lines and len(lines[-1]) + 2 + len(part) <= width:
            lines[-1] += ", " + part
        else:
            lines.append(part)
    return lines or [""]


def summary_table(results: list[NotebookResult]) -> str:
    rows = [f"{'notebook':<28} {'time':>8}  {'status':<6} key metrics", "-" * 100]
    for r in results:
        status = "ok" if r.ok else "FAIL"
        first, *more = _headline(r.metrics) if r.ok else [r.error.splitlines()[-1][:60]]
        rows.append(f"{r.name:<28} {r.seconds:>7.1f}s  {status:<6} {first}")
        rows += [f"{'':<46}{line}" for line in more]  # under the first line's figures
    total = sum(r.seconds for r in results)
    rows.append("-" * 100)
    rows.append(f"{len([r for r in results if r.ok])}/{len(results)} notebooks ok, {total:.0f}s in all")
    timed = [r for r in results if r.slowest_cell]
    if timed:
        rows.append("where the time went (each notebook's slowest cell, named by its slowest statement and its seconds):")
        rows += [f"  {r.name:<26} {r.seconds:>7.1f}s  {r.slowest_cell}" for r in sorted(timed, key=lambda r: -r.seconds)]
    return "\n".join(rows)


def notebook_parameters(path: Path) -> set[str]:
    """The names the notebook's ``parameters`` cell assigns (``NAME = …`` at the start of a line)."""
    import re

    for cell in json.loads(path.read_text(encoding="utf-8")).get("cells", []):
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            return set(re.findall(r"^([A-Z_][A-Z0-9_]*)\s*=", "".join(cell["source"]), flags=re.MULTILINE))
    return set()


ENV_OVERRIDES = ("MODEL_ID", "SEED", "DEVICE", "SMOKE", "QUICK")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


def overrides_from(args: argparse.Namespace, environ: dict[str, str] | None = None,
                   sources: dict[str, str] | None = None) -> dict[str, Any]:
    """The notebook parameters this run sets for every notebook: a command-line flag that was given
    wins over the environment (``None`` is "not given" — never truthiness, so ``--seed 0`` beats
    ``SEED=5``); ``SMOKE`` and ``SEED`` are converted from text (``SMOKE=1``, ``SEED=3``) and every
    value is checked by :func:`kimina_edu.params.check_params`. ``sources`` (optional) receives where
    each value came from. Raises ``ParameterError`` (one line)."""
    from kimina_edu.params import ParameterError, check_params

    env = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    problems = []
    for name in ENV_OVERRIDES:
        flag = getattr(args, name.lower(), None)
        if flag is not None:
            out[name] = flag
            if sources is not None:
                sources[name] = "--" + name.lower().replace("_", "-")
        elif name in env:
            out[name] = env[name]
            if sources is not None:
                sources[name] = "environment"
    for switch in ("SMOKE", "QUICK"):
        if isinstance(out.get(switch), str):
            text = out[switch].strip().lower()
            if text in _TRUE + _FALSE:
                out[switch] = text in _TRUE
            else:
                problems.append(f"{switch}={out[switch]!r} must be 1/0, true/false, yes/no or on/off")
    if isinstance(out.get("SEED"), str):
        try:
            out["SEED"] = int(out["SEED"])
        except ValueError:
            problems.append(f"SEED={out['SEED']!r} must be a whole number")
    if problems:
        raise ParameterError("bad course override: " + "; ".join(problems) + ". Fix the environment variable or flag.")
    check_params(out, verbose=False)
    if "MODEL_ID" in out:
        out["MODEL_ID"] = resolve_model_id(out["MODEL_ID"])
    return out


def _new_run_dir(runs: Path) -> Path:
    """``runs/<timestamp>``, made unique (two runs in the same second get ``-2``, ``-3``…)."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    for n in range(1, 1000):
        run_dir = runs / (stamp if n == 1 else f"{stamp}-{n}")
        try:
            run_dir.mkdir(parents=True)
            return run_dir
        except FileExistsError:
            continue
        except OSError as exc:  # --runs-dir names a file, a read-only folder, a full disk: one line, not a traceback
            from kimina_edu.params import SetupError

            raise SetupError(f"cannot make the run folder {run_dir} ({exc.strerror or exc}): point --runs-dir at a "
                             "folder you can write") from None
    raise RuntimeError(f"could not make a new run folder under {runs}; clean up old runs")


def _in_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def point_latest_at(run_dir: Path) -> None:
    """Switch ``runs/latest`` to ``run_dir`` in one step (a new link renamed over the old one)."""
    latest = run_dir.parent / "latest"
    if latest.exists() and not latest.is_symlink():
        print(f"  {latest} is a real folder, not a link: left alone (move it away to get runs/latest back)")
        return
    tmp = run_dir.parent / f".latest-{os.getpid()}"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(run_dir.name)
    os.replace(tmp, latest)


class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a mistake is one ``ParameterError`` line (not usage text), and a flag is never
    silently dropped: ``--only`` with no value, an unknown flag, a missing value are all errors."""

    def error(self, message: str):
        from kimina_edu.params import ParameterError

        raise ParameterError(f"{message} (python -m kimina_edu.course --help lists the flags)")


# The longest per-cell deadline: a week. nbclient waits on the kernel in milliseconds held in a C int, so past
# 2,147,483 s every notebook fails with "OverflowError: value too large to convert to int".
MAX_TIMEOUT_S = 7 * 24 * 3600


def _positive_seconds(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"must be a whole number of seconds from 1 to {MAX_TIMEOUT_S} (a week; a "
                                         f"per-cell deadline), got {text!r}")
    return value


class _Once(argparse.Action):
    """Store a flag's value, refusing the flag given twice: argparse would keep the last one and drop the first
    without a word (``--seed 1 --seed 2`` runs seed 2)."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = namespace.__dict__.setdefault("_given_flags", set())
        if self.dest in given:
            parser.error(f"{option_string} was given twice; give it once")
        given.add(self.dest)
        setattr(namespace, self.dest, values)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = _OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # None = not given: the environment (or the notebook's own default) decides
    parser.add_argument("--smoke", action="store_const", const=True, help="run with SMOKE=True (tiny sizes); or SMOKE=1")
    parser.add_argument("--quick", action="store_const", const=True,
                        help="run with QUICK=True (a first pass: chapters 4 and 5 a third as long); or QUICK=1 in the env")
    parser.add_argument("--model-id", action=_Once, help="MODEL_ID for every notebook (or MODEL_ID in the environment)")
    parser.add_argument("--seed", type=int, action=_Once, help="SEED for every notebook (or SEED in the environment)")
    parser.add_argument("--device", action=_Once, help="DEVICE for every notebook: auto, cpu, cuda, mps (or DEVICE in the env)")
    parser.add_argument("--only", nargs="+", action="extend",
                        help="notebook number prefixes to run, e.g. 03 04 (repeated flags add up: --only 03 --only 04)")
    parser.add_argument("--runs-dir", default=str(REPO / "runs"), action=_Once)
    parser.add_argument("--timeout", type=_positive_seconds, default=CELL_TIMEOUT_S, action=_Once,
                        help="per-cell timeout in seconds (1 to a week)")
    return parser.parse_args(argv)


class _Terminated(KeyboardInterrupt):
    """SIGTERM (``timeout 3600 make course``, a closed terminal): stop as Ctrl-C does, marked INTERRUPTED."""


# Seconds a terminated run may spend shutting its kernel down before it exits anyway. The deadline is
# needed: when SIGTERM lands while nbclient's event loop is between tasks (a kernel still starting, on a
# busy machine), the loop is left holding a cell's task, and papermill's kernel clean-up resumes it — a
# blocking wait for that cell's reply, as long as the cell runs.
TERMINATE_GRACE_S = 20.0
_terminating: dict[str, Any] = {}  # the run being stopped: its folder and marker (set by main)


def _on_sigterm(signum, frame):
    if not _terminating.get("deadline"):
        import threading

        _terminating["deadline"] = threading.Timer(TERMINATE_GRACE_S, _exit_terminated)
        _terminating["deadline"].daemon = True
        _terminating["deadline"].start()
    raise _Terminated


def _mark_interrupted(run_dir: Path, marker: Path, done: int, total: int, why: str) -> bool:
    """RUNNING → INTERRUPTED, and the one line that says so; False when another path already did it."""
    try:
        marker.rename(run_dir / "INTERRUPTED")
    except FileNotFoundError:
        return False
    print(f"\n{why} after {done} of {total} notebooks: {run_dir} is marked INTERRUPTED; "
          "runs/latest still points at the last finished run", flush=True)
    return True


def _exit_terminated() -> None:
    """The grace period is over and the kernel's clean-up still hangs: mark the run and leave (the kernel
    sees its parent gone and shuts itself down)."""
    t = _terminating
    _mark_interrupted(t["run_dir"], t["marker"], len(t["results"]), t["total"],
                      f"terminated (SIGTERM; the kernel's shutdown took over {TERMINATE_GRACE_S:.0f} s)")
    os._exit(143)


def _run_header(notebooks: list[Path], run_dir: Path, smoke: bool, overrides: dict[str, Any],
                sources: dict[str, str], args: argparse.Namespace) -> str:
    """One line with every setting of this run and where it came from."""
    parts = [f"SMOKE={smoke} ({sources.get('SMOKE', 'default')})"]
    for name in ("QUICK", "MODEL_ID", "SEED", "DEVICE"):
        parts.append(f"{name}={overrides[name]!r} ({sources[name]})" if name in overrides
                     else f"{name}: the notebook's default")
    parts += [f"timeout {args.timeout} s per cell", f"only {' '.join(args.only)}" if args.only else "all notebooks"]
    return f"running {len(notebooks)} notebooks into {run_dir} — " + ", ".join(parts)


def main(argv: list[str] | None = None) -> int:
    import signal

    from kimina_edu.params import ParameterError, SetupError

    sources: dict[str, str] = {}
    try:
        args = _parse_args(argv)
        notebooks = list_notebooks(args.only)
        if not notebooks:
            names = ", ".join(p.name[:2] for p in list_notebooks())
            raise ParameterError(f"--only {' '.join(args.only or [])} matched no notebook; the notebooks are {names}")
        overrides = overrides_from(args, sources=sources)
    except ParameterError as exc:
        print(f"ParameterError: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    smoke = bool(overrides.pop("SMOKE", False))
    from kimina_edu.runtime import calibration_line

    calibration = calibration_line()  # beside the timings: how fast this machine is, measured before the run
    runs = Path(args.runs_dir)
    try:
        run_dir = _new_run_dir(runs)
    except SetupError as exc:
        print(f"SetupError: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    marker = run_dir / "RUNNING"
    # the handler is in place before the marker exists: a SIGTERM seen by anyone who saw RUNNING is caught
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if _in_main_thread() else None
    marker.write_text(json.dumps({"pid": os.getpid(), "started": datetime.now().isoformat(timespec="seconds"),
                                  "smoke": smoke, "overrides": overrides}) + "\n")
    print(_run_header(notebooks, run_dir, smoke, overrides, sources, args), flush=True)
    print(calibration, flush=True)
    results: list[NotebookResult] = []
    _terminating.clear()
    _terminating.update(run_dir=run_dir, marker=marker, results=results, total=len(notebooks))
    try:
        for nb in notebooks:
            print(f"▶ {nb.name} …", end=" ", flush=True)  # finished on the same line: one line per notebook
            # QUICK goes only where it means something; the other overrides reach every notebook (a
            # wrong one should fail there, not vanish)
            extra = {k: v for k, v in overrides.items() if k != "QUICK" or k in notebook_parameters(nb)}
            result = run_notebook(nb, run_dir / nb.stem, smoke=smoke, timeout=args.timeout, extra=extra)
            export_html(result.output_dir / nb.name)
            print(f"{'ok' if result.ok else 'FAIL'} in {result.seconds:.1f}s"
                  + (f" (slowest: {result.slowest_cell})" if result.slowest_cell else ""), flush=True)
            if not result.ok:
                print("  " + result.error.replace("\n", "\n  ")[-3000:])
            results.append(result)
    except KeyboardInterrupt as exc:
        why = "terminated (SIGTERM)" if isinstance(exc, _Terminated) else "interrupted"
        _mark_interrupted(run_dir, marker, len(results), len(notebooks), why)
        return 143 if isinstance(exc, _Terminated) else 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if _terminating.get("deadline"):
            _terminating["deadline"].cancel()
    goals = goal_lines([(r.name, r.metrics) for r in results if r.ok])
    missed = goals[1:]  # after the count line, one line per goal missed
    table = summary_table(results) + f"\n{calibration}" + "".join(f"\n{line}" for line in goals)
    (run_dir / "summary.txt").write_text(table + "\n")
    marker.unlink()
    point_latest_at(run_dir)
    print("\n" + table)
    return 0 if all(r.ok for r in results) and not missed else 1


if __name__ == "__main__":
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    sys.exit(main())
