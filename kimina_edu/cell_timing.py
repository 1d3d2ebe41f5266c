"""Where a headless notebook's time went: each cell's seconds (papermill's), and inside the slowest cell
the top-level statement that took them (timed by the kernel itself, :func:`kimina_edu.runtime.time_statements`,
started by :func:`kernel_manager`). ``make course`` prints it per notebook and in ``summary.txt``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def kernel_manager(folder: Path, statements: Path):
    """A kernel manager whose kernel talks over Unix sockets in ``folder`` and times each top-level statement
    into ``statements`` (:func:`kimina_edu.runtime.time_statements`, run as the kernel's start-up line).

    Unix sockets: over TCP, ipykernel warns on every start that code and outputs travel unencrypted (ten
    warnings per ``make course``), and it is right — any local user could read them. Windows has no IPC
    transport: TCP there. A start-up line that fails costs the summary its statement names, nothing else."""
    from jupyter_client.manager import KernelManager

    hook = f"__import__('kimina_edu.runtime', fromlist=['_']).time_statements({str(statements)!r})"

    class CourseKernelManager(KernelManager):
        def __init__(self, **kwargs):
            if os.name != "nt":
                kwargs.setdefault("transport", "ipc")
                kwargs.setdefault("ip", str(folder / "kernel"))
            super().__init__(**kwargs)

        def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
            return super().format_kernel_cmd(extra_arguments) + [f"--IPKernelApp.exec_lines={hook}"]

    return CourseKernelManager


def _statement_times(statements: Path | None) -> dict[int, list[tuple[str, float]]]:
    """``{execution count: [(statement's first line, seconds), …]}`` from the kernel's timings file; a line
    that cannot be read is skipped (a kernel killed mid-write leaves half a line)."""
    out: dict[int, list[tuple[str, float]]] = {}
    try:
        lines = statements.read_text(encoding="utf-8").splitlines() if statements else []
    except OSError:
        return out
    for line in lines:
        try:
            record = json.loads(line)
            out[int(record["execution_count"])] = [(str(t), float(s)) for t, s in record["statements"]]
        except (ValueError, TypeError, KeyError):
            continue
    return out


def slowest_cell(executed: Path, statements: Path | None = None) -> str:
    """Where an executed notebook's time went: its slowest cell (papermill times each), its seconds, and the
    statement that took them — the cell's slowest top-level statement with its own seconds, from the kernel's
    timings (``statements``, :func:`kimina_edu.runtime.time_statements`). Without them, the cell's first line
    of work (imports and comments skipped: "import json" names no cell), or its first line when it has
    nothing else. ``""`` when the notebook has no timings."""
    try:
        cells = json.loads(executed.read_text(encoding="utf-8")).get("cells", [])
    except (OSError, ValueError):
        return ""
    timed = [(c.get("metadata", {}).get("papermill", {}).get("duration"), i, c) for i, c in enumerate(cells)]
    timed = [(d, i, c) for d, i, c in timed if isinstance(d, int | float)]
    if not timed:
        return ""
    seconds, index, cell = max(timed, key=lambda t: t[0])
    measured = [(t, s) for t, s in _statement_times(statements).get(cell.get("execution_count") or -1, []) if t]
    if measured:
        text, statement_s = max(measured, key=lambda m: m[1])
        return f"cell {index}, {seconds:.1f} s: {text[:50]} ({statement_s:.1f} s)"
    lines = [ln.strip() for ln in "".join(cell.get("source", "")).splitlines() if ln.strip()]
    work = [ln for ln in lines if not ln.startswith(("import ", "from ", "#"))]
    first = (work or lines or [""])[0]
    return f"cell {index}, {seconds:.1f} s: {first[:50]}"
