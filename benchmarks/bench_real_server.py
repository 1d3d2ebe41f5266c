"""Client throughput against the **real** kimina-lean-server code (PyPI kimina-ast-server, run from
``.venv-lean``) with fake Lean REPLs answering after 50 ms: proofs per second as a share of the
ideal ``repls / latency``, and the client's CPU time per proof.

The gap to the ideal is the server's own work per proof (HTTP, header split, REPL I/O, logging),
its 0.1 s response poll, and the fake REPLs' Python start-up of each command — not Lean. The
stand-in row (``bench_client.py``) measures the same client without the server's costs.
"""

import json
import resource
import sys
import time

from kimina_edu.lean.client import LeanVerifier
from kimina_edu.lean.real_server import RealLeanServer, server_python

N, LATENCY, REPLS = 1024, 0.05, 32


def main() -> int:
    if server_python() is None:
        print("kimina-ast-server is not installed: run `make lean-check` first (builds .venv-lean)", file=sys.stderr)
        return 1
    codes = [f"import Mathlib\n\ntheorem t{i} : True := by\n  trivial" for i in range(N)]
    with RealLeanServer(repls=REPLS, latency=LATENCY, max_wait=600) as url:
        verifier = LeanVerifier(url, repls=REPLS, timeout=30, line_scheme="relative")
        verifier.verify(codes[: 2 * REPLS])  # warm-up: start every REPL, run its header once
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        start = time.perf_counter()
        verdicts = verifier.verify(codes)
        wall = time.perf_counter() - start
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    bad = [v for v in verdicts if not v.valid]
    if bad:
        print(f"{len(bad)} of {N} proofs not valid, e.g. {bad[0].status}: {bad[0].error}", file=sys.stderr)
        return 1
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    ideal = REPLS / LATENCY
    print(json.dumps({"benchmark": "lean-real", "figures": [
        {"figure": f"{N} proofs, real server, {REPLS} fake REPLs, {LATENCY * 1000:.0f} ms", "value": N / wall,
         "unit": "proofs/s", "baseline": "ideal repls/latency", "baseline_value": ideal, "ratio": N / wall / ideal,
         "goal": "info (server-bound)"},
        {"figure": "client CPU time per proof (real server)", "value": 1000 * cpu / N, "unit": "ms",
         "baseline": "fake REPL latency per proof", "baseline_value": 1000 * LATENCY, "ratio": cpu / N / LATENCY,
         "goal": "small"},
    ]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
