"""`make bench`: run every benchmarks/bench_*.py, print one table of ratios, write runs/bench.json.

Each script prints one JSON line: {"benchmark": name, "figures": [{"figure", "value", "unit",
"baseline", "baseline_value", "ratio", "goal"}]} — a ratio against a baseline measured in the
same run, never an absolute time compared with a constant.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# minutes each and several GiB of memory: run on their own (README, "What the hub path costs")
SLOW = {"bench_real_size.py", "bench_logprob_memory.py", "bench_smollm2.py"}


def main() -> int:
    rows, failed = [], []
    for script in sorted(HERE.glob("bench_*.py")):
        if script.name in SLOW:
            continue
        print(f"▶ {script.name}", flush=True)
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=HERE.parent,
                              check=False)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('{"benchmark"')]
        if proc.returncode != 0 or not lines:
            failed.append(script.name)
            print(proc.stderr[-2000:])
            continue
        result = json.loads(lines[-1])
        for fig in result["figures"]:
            rows.append({"benchmark": result["benchmark"], **fig})
    print(f"\n{'benchmark':<14} {'figure':<40} {'value':>12} {'baseline':>12} {'ratio':>7}  goal")
    for r in rows:
        print(f"{r['benchmark']:<14} {r['figure']:<40} {r['value']:>10.4g} {r['unit'][:2]:<2}"
              f"{r['baseline_value']:>10.4g}   {r['ratio']:>6.2f}  {r.get('goal', '')}")
    out = HERE.parent / "runs" / "bench.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(rows, indent=2))
    print(f"\nwrote {out}" + (f"; FAILED: {failed}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
