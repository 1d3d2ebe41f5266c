"""What every notebook does first and last: versions, device, seeds, cache, metrics.

Side effects (files, environment) live here so the math modules stay pure.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import random
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Self

from kimina_edu.errors import ParameterError, SetupError
from kimina_edu.params import device_problem, ipython_shell

DEFAULT_PACKAGES = ("torch", "transformers", "trl", "peft", "reasoning-gym")


def package_versions(packages: tuple[str, ...] | list[str] = DEFAULT_PACKAGES) -> dict[str, str]:
    """Installed version of each package, or "not installed"."""
    out = {"python": platform.python_version()}
    for name in packages:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def print_versions(packages: tuple[str, ...] | list[str] = DEFAULT_PACKAGES) -> dict[str, str]:
    versions = package_versions(packages)
    print("  ".join(f"{k} {v}" for k, v in versions.items()))
    return versions


def resolve_device(device: str | None = "auto") -> str:
    """"auto" → "cuda" when a GPU is visible, else "cpu"; any other device is checked
    (:func:`kimina_edu.params.device_problem`) so a wrong one is one line now, not a torch error later."""
    if device in (None, "auto"):
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"

    if (problem := device_problem(device)) is not None:
        raise ParameterError(f"device {problem}")
    return device


def seed_everything(seed: int) -> None:
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:
        pass
    try:
        import torch

        torch.manual_seed(seed)
    except ImportError:
        pass


def cache_dir() -> Path:
    """Where built artifacts (pocket model, adapters, teacher data) live between runs.

    ``KIMINA_EDU_CACHE`` wins; else ``$XDG_CACHE_HOME/kimina-edu``; else ``~/.cache/kimina-edu``. Returned
    absolute (``~`` expanded, a relative value taken against the current folder, once): a path handed on to a
    process that runs elsewhere still names the same folder. ``make course`` makes a relative value absolute
    against the folder it was typed in before a notebook's kernel starts (``course.absolute_path_variables``).
    """
    root = os.environ.get("KIMINA_EDU_CACHE")
    if not root:
        root = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "kimina-edu")
    path = Path(os.path.abspath(os.path.expanduser(root)))
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        where = "KIMINA_EDU_CACHE" if os.environ.get("KIMINA_EDU_CACHE") else "the cache folder"
        raise SetupError(f"{where} points at {path}, which cannot be a folder ({exc.strerror or exc}): set "
                         "KIMINA_EDU_CACHE to a folder you can write, or move that file away") from None
    if not path.is_dir():
        raise SetupError(f"KIMINA_EDU_CACHE points at {path}, which is a file: set it to a folder, or move the file away")
    return path


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 of a file, read in 1 MiB blocks (shipped models and checkpoints are checked against it)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def recipe_hash(recipe: dict[str, Any]) -> str:
    """A short, stable hash of a recipe dict: change any value and the artifact is rebuilt."""
    blob = json.dumps(recipe, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def write_metrics(metrics: dict[str, Any], output_dir: str | os.PathLike = ".") -> Path:
    """Write ``metrics.json`` — the numbers the notebook tests assert on."""
    path = Path(output_dir) / "metrics.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(metrics, indent=2, sort_keys=True, default=float))
    print(f"wrote {path}")
    return path


def figure_path(name: str, output_dir: str | os.PathLike = ".") -> Path:
    """Where a notebook saves a figure so `make course` collects it beside the run."""
    path = Path(output_dir) / "figures" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def run_sync(coro):
    """Run a coroutine from sync code — also inside Jupyter, whose event loop is already running
    (there ``asyncio.run`` refuses, so the coroutine runs on a fresh loop in a worker thread)."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


class PeakMemory:
    """Peak resident memory (MB) of this process while the ``with`` block runs, sampled every 20 ms
    from /proc (Linux); on a GPU, the peak CUDA allocation is reported too."""

    def __init__(self, interval: float = 0.02):
        self.interval, self.peak_mb, self.cuda_peak_mb = interval, 0.0, None

    def _rss_mb(self) -> float:
        try:
            with open("/proc/self/statm") as fh:
                return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
        except (OSError, ValueError):
            return 0.0

    def __enter__(self) -> Self:
        import threading

        self._stop = threading.Event()

        def sample():
            while not self._stop.is_set():
                self.peak_mb = max(self.peak_mb, self._rss_mb())
                self._stop.wait(self.interval)

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.reset_peak_memory_stats()
        except ImportError:
            pass
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_mb = max(self.peak_mb, self._rss_mb())
        try:
            import torch

            if torch.cuda.is_available():
                self.cuda_peak_mb = torch.cuda.max_memory_allocated() / 2**20
        except ImportError:
            pass


_TRAINER_PRINTERS = ("PrinterCallback", "ProgressCallback", "NotebookProgressCallback")


def use_progress_bar(trainer, desc: str):
    """Show a Hugging Face ``Trainer``'s run as one progress bar, with the last reward (or loss)
    beside it, instead of its own per-step output: with ``disable_tqdm`` its ``PrinterCallback``
    prints every log as a dict, and in a notebook its progress callback grows a table by one row
    per logged step. The logs themselves stay in ``trainer.state.log_history``. Returns ``trainer``."""
    from tqdm.auto import tqdm
    from transformers import TrainerCallback

    for callback in list(trainer.callback_handler.callbacks):
        if type(callback).__name__ in _TRAINER_PRINTERS:
            trainer.remove_callback(callback)

    class ProgressBar(TrainerCallback):
        bar = None

        def on_train_begin(self, args, state, control, **kwargs):
            self.bar = tqdm(total=state.max_steps, initial=state.global_step, desc=desc)

        def on_step_end(self, args, state, control, **kwargs):
            if self.bar is not None:
                self.bar.update(state.global_step - self.bar.n)

        def on_log(self, args, state, control, logs=None, **kwargs):
            key = next((k for k in ("reward", "loss") if isinstance((logs or {}).get(k), (int, float))), None)
            if self.bar is not None and key:
                self.bar.set_postfix({key: f"{logs[key]:.2f}"}, refresh=False)

        def on_train_end(self, args, state, control, **kwargs):
            if self.bar is not None:
                done = self.bar.n
                if self.bar.total and done < self.bar.total:
                    # an early stop (a dev target, a collapse guard): the saved bar must read 100% of
                    # what ran and say why, not "50%" beside "target reached"
                    self.bar.set_description(f"{desc} (stopped early: {done} of {self.bar.total} steps)")
                    self.bar.reset(total=done)  # tqdm.notebook's reset also sets the widget's maximum
                    self.bar.update(done)
                self.bar.close()
                self.bar = None

    trainer.add_callback(ProgressBar())
    return trainer


def cpu_calibration(seconds: float = 0.5) -> dict[str, Any]:
    """This machine's fp32 matrix-multiply rate, measured now (GFLOP/s with torch's current thread count),
    and which CPU it is: printed beside every timing the course reports, so a time measured here can be
    compared with one measured on another machine (divide by the ratio of their rates). The shape is a
    SmolLM2 MLP projection at a batch of 256 tokens (256 × 576 · 576 × 1536), the work real-model steps are made of."""
    import torch

    a, b = torch.randn(256, 576), torch.randn(576, 1536)
    torch.mm(a, b)  # warm-up
    n, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        torch.mm(a, b)
        n += 1
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), cpu)
    except OSError:
        pass
    return {"gemm_gflops": round(2 * 256 * 576 * 1536 * n / elapsed / 1e9, 1), "threads": torch.get_num_threads(),
            "cpu": cpu or "unknown CPU"}


def calibration_line(cal: dict[str, Any] | None = None) -> str:
    cal = cal or cpu_calibration()
    return f"CPU calibration: fp32 GEMM {cal['gemm_gflops']:.1f} GFLOP/s on {cal['threads']} thread(s), {cal['cpu']}"


def _statement_text(code_obj) -> str:
    """A top-level statement's source on one line (a call written over several lines joined), at most 120
    characters, read back from the source IPython cached for the cell."""
    import ast
    import linecache

    lines = [line for _, _, line in code_obj.co_lines() if line]
    if not lines:
        return ""
    first, last = min(lines), max(lines)
    source = linecache.getlines(code_obj.co_filename)
    try:  # the statement's last line: the code's last instruction can sit above a closing bracket
        last = next(n.end_lineno or last for n in ast.parse("".join(source)).body if n.lineno == first)
    except (SyntaxError, ValueError, StopIteration):
        pass
    return " ".join(p for p in (ln.strip() for ln in source[first - 1:last]) if p)[:120]


def time_statements(path: str | os.PathLike) -> bool:
    """In a kernel the course runner starts: time every top-level statement of every cell, and append one JSON
    line per cell to ``path`` (``{"execution_count": n, "statements": [[first line, seconds], …]}``), so the
    run's summary names the statement a slow cell spent its time in, not the cell's first line. IPython runs a
    cell's top-level statements one ``run_code`` call each; wrapping that call measures them without changing
    the code run or what the cell shows. Returns ``False`` outside IPython."""
    shell = ipython_shell()
    if shell is None:
        return False
    cell: list[list[Any]] = []
    run_code = shell.run_code

    async def timed_run_code(code_obj, *args, **kwargs):
        start = time.perf_counter()
        try:
            return await run_code(code_obj, *args, **kwargs)
        finally:
            seconds = round(time.perf_counter() - start, 4)
            cell.append([_statement_text(code_obj), seconds])

    def pre_run_cell(info) -> None:
        cell.clear()

    def post_run_cell(result) -> None:
        if cell and getattr(result, "execution_count", None):
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"execution_count": result.execution_count, "statements": cell}) + "\n")
        cell.clear()

    shell.run_code = timed_run_code
    shell.events.register("pre_run_cell", pre_run_cell)
    shell.events.register("post_run_cell", post_run_cell)
    return True
