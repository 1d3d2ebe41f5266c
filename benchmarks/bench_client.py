"""2,048 proofs through LeanVerifier against the stand-in (50 ms per proof, 32 workers):
throughput against the ideal workers/latency (goal ≥ 90%), and client CPU time per proof."""

import json
import resource
import time

from kimina_edu.lean.client import LeanVerifier
from kimina_edu.lean.standin import StandinServer

N, LATENCY, WORKERS = 2048, 0.05, 32


def main():
    codes = [f"theorem t{i} : True := by trivial" for i in range(N)]
    with StandinServer({}, workers=WORKERS, latency=LATENCY) as url:
        verifier = LeanVerifier(url, concurrency=32, batch_size=8)
        verifier.verify(codes[:64])  # warm-up: connections, imports
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        start = time.perf_counter()
        verdicts = verifier.verify(codes)
        wall = time.perf_counter() - start
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    assert len(verdicts) == N
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    ideal = WORKERS / LATENCY
    print(json.dumps({"benchmark": "lean-client", "figures": [
        {"figure": f"{N} proofs, {WORKERS} workers, {LATENCY * 1000:.0f} ms", "value": N / wall, "unit": "proofs/s",
         "baseline": "ideal workers/latency", "baseline_value": ideal, "ratio": N / wall / ideal, "goal": ">= 0.90"},
        {"figure": "client CPU time per proof", "value": 1000 * cpu / N, "unit": "ms",
         "baseline": "stand-in latency per proof", "baseline_value": 1000 * LATENCY,
         "ratio": cpu / N / LATENCY, "goal": "small"},
    ]}))


if __name__ == "__main__":
    main()
