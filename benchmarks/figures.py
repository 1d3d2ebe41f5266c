"""Write README's table of current figures from the latest measurements, so README never carries a
number typed by hand: ``python -m benchmarks.figures`` after `make robustness` / `make bench`.

Sources: ``runs/robustness.json`` (`make robustness`: chapters 3 → 4 → 5 over five seeds),
``runs/bench.json`` (`make bench`). The table goes between the markers
``<!-- figures:start -->`` and ``<!-- figures:end -->`` in README.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from benchmarks.robustness import table as robustness_table

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
START, END = "<!-- figures:start -->", "<!-- figures:end -->"


def bench_lines(rows: list[dict]) -> list[str]:
    """One row per `make bench` figure: the value, its baseline measured in the same run, the ratio."""
    out = ["| benchmark | figure | value | baseline (same run) | ratio | goal |", "|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['benchmark']} | {r['figure']} | {r['value']:.4g} {r['unit']} | {r['baseline']}: "
                   f"{r['baseline_value']:.4g} | {r['ratio']:.3g} | {r.get('goal', '')} |")
    return out


def render(robustness: dict | None, bench: list[dict] | None) -> str:
    out = []
    if robustness:
        runs = robustness["runs"]
        threads = sorted({r["threads"] for r in runs})
        seeds = ", ".join(str(s) for s in sorted({r["seed"] for r in runs}))
        stages = "3 → 4 → 5" if all("trl_after" in r for r in runs) else "3 → 4 (no TRL run)"
        out += [f"Chapters {stages} over {len(runs)} runs (`benchmarks/robustness.py`; seeds {seeds}; "
                f"{' and '.join(str(t) for t in threads)} thread(s) per run; {robustness.get('date', '')}"
                + (f"; {robustness['note']}" if robustness.get("note") else "") + "):", "", robustness_table(runs)]
    if bench:
        out += ["", "Speed (`make bench`; each ratio against a baseline measured in the same run):", "",
                *bench_lines(bench)]
    return "\n".join(out)


def main() -> int:
    def read(path: Path):
        return json.loads(path.read_text()) if path.exists() else None

    text = README.read_text()
    if START not in text or END not in text:
        print(f"README.md has no {START} … {END} markers", file=sys.stderr)
        return 2
    body = render(read(REPO / "runs" / "robustness.json"), read(REPO / "runs" / "bench.json"))
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    README.write_text(f"{head}{START}\n{body}\n{END}{tail}")
    print("README.md figures table rewritten")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
