"""Run a two-cell notebook (import, then `clip_explorer()`) N times through papermill and count the
runs that take longer than the cell budget — the headless widget stall of nbclient issue #312.

    python benchmarks/stress_widget_cell.py 120

Not part of `make bench`: it checks a failure mode, not a speed. Exits 1 when any run stalled.
"""

import sys
import tempfile
import time
from pathlib import Path

import nbformat
import papermill

CELL_TIMEOUT_S = 15  # a stalled cell waits this long; a healthy run takes ~1.5 s


def main(runs: int) -> int:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("from kimina_edu.widgets import clip_explorer"),
                nbformat.v4.new_code_cell("clip_explorer(eps_low=0.2, eps_high=0.28)")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    stalls = 0
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "widget_cell.ipynb"
        nbformat.write(nb, src)
        for i in range(runs):
            start = time.perf_counter()
            papermill.execute_notebook(str(src), str(Path(tmp) / "out.ipynb"), kernel_name="python3",
                                       execution_timeout=CELL_TIMEOUT_S, progress_bar=False)
            seconds = time.perf_counter() - start
            stalls += seconds > CELL_TIMEOUT_S * 0.8
            print(f"run {i + 1:3d}: {seconds:5.1f} s", flush=True)
    print(f"stalled runs: {stalls} of {runs}")
    return 1 if stalls else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 50))
