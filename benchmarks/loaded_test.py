"""`make test` on a busy machine: every core taken by a busy loop while the suite runs.

The suite must pass whatever else the machine does (its waits are on progress, never on speed);
this script is how that is shown. It starts one spinning process per core (``--spinners``), runs
the command, samples the 1-minute load average every 30 s, stops the spinners and prints one line:
the command's exit status, its minutes, the load it ran under and the CPU calibration at the start.

    python -m benchmarks.loaded_test                      # make test, with a spinner on every core
    python -m benchmarks.loaded_test --spinners 1 -- make smoke
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import subprocess
import sys
import threading
import time


def _spin(stop) -> None:
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x = (x * 1103515245 + 12345) & 0xFFFFFFFF


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spinners", type=int, default=os.cpu_count() or 2, help="busy processes (default: one per core)")
    ap.add_argument("command", nargs="*", default=["make", "test"])
    args = ap.parse_args(argv)

    from kimina_edu.runtime import calibration_line

    print(f"loaded_test: before the spinners: {calibration_line()}", flush=True)
    stop = mp.Event()
    spinners = [mp.Process(target=_spin, args=(stop,), daemon=True) for _ in range(args.spinners)]
    for p in spinners:
        p.start()
    loads: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(30):
            loads.append(os.getloadavg()[0])

    threading.Thread(target=sample, daemon=True).start()
    start = time.perf_counter()
    try:
        rc = subprocess.call(args.command)
    finally:
        done.set()
        stop.set()
        for p in spinners:
            p.join(5)
            if p.is_alive():
                p.terminate()
    minutes = (time.perf_counter() - start) / 60
    load = f"load average {min(loads):.1f}–{max(loads):.1f} (median {sorted(loads)[len(loads) // 2]:.1f})" if loads else "load not sampled"
    print(f"loaded_test: `{' '.join(args.command)}` exit {rc} in {minutes:.1f} min with {args.spinners} spinner(s) "
          f"on {os.cpu_count()} core(s); {load}", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
