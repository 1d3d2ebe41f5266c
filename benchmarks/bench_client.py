"""2,048 proofs through LeanVerifier against the stand-in (50 ms per proof, 32 workers):
throughput against the ideal workers/latency (goal ≥ 90%), and CPU time per proof in the client and in
the stand-in. The stand-in answers from one asyncio event loop: while it parses and serialises
requests its 50 ms timers fire late, so its own CPU time is part of the gap to the ideal."""

import json
import resource
import time

import psutil

from kimina_edu.lean.client import LeanVerifier
from kimina_edu.lean.standin import StandinServer

N, LATENCY, WORKERS = 2048, 0.05, 32


def main():
    # with an import header, as real proofs have: header-less snippets share a REPL environment
    codes = [f"import Mathlib\n\ntheorem t{i} : True := by trivial" for i in range(N)]
    server = StandinServer({}, workers=WORKERS, latency=LATENCY)
    with server as url:
        server_process = psutil.Process(server.proc.pid)
        verifier = LeanVerifier(url, repls=WORKERS, concurrency=32, batch_size=8, line_scheme="relative")
        verifier.verify(codes[:64])  # warm-up: connections, imports
        cpu0, server0 = resource.getrusage(resource.RUSAGE_SELF), server_process.cpu_times()
        start = time.perf_counter()
        verdicts = verifier.verify(codes)
        wall = time.perf_counter() - start
        cpu1, server1 = resource.getrusage(resource.RUSAGE_SELF), server_process.cpu_times()
    assert len(verdicts) == N
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    server_cpu = (server1.user - server0.user) + (server1.system - server0.system)
    ideal = WORKERS / LATENCY
    print(json.dumps({"benchmark": "lean-client", "figures": [
        {"figure": f"{N} proofs, {WORKERS} workers, {LATENCY * 1000:.0f} ms", "value": N / wall, "unit": "proofs/s",
         "baseline": "ideal workers/latency", "baseline_value": ideal, "ratio": N / wall / ideal, "goal": ">= 0.90"},
        {"figure": "client CPU time per proof", "value": 1000 * cpu / N, "unit": "ms",
         "baseline": "stand-in latency per proof", "baseline_value": 1000 * LATENCY,
         "ratio": cpu / N / LATENCY, "goal": "small"},
        {"figure": "stand-in CPU time per proof", "value": 1000 * server_cpu / N, "unit": "ms",
         "baseline": "stand-in latency per proof", "baseline_value": 1000 * LATENCY,
         "ratio": server_cpu / N / LATENCY, "goal": "info"},
    ]}))


if __name__ == "__main__":
    main()
