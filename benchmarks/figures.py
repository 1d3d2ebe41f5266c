"""Write README's table of current figures from the latest measurements, so README never carries a
number typed by hand: ``python -m benchmarks.figures`` after `make robustness` / `make bench`.

Sources: ``runs/robustness.json`` (`make robustness`: chapters 3 → 4 → 5 over five seeds),
``runs/bench.json`` (`make bench`), ``runs/real_size_gpu.json`` (`benchmarks/bench_real_size.py --device cuda
--out …` on a GPU machine). The tables go between the markers
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


MODEL_NAMES = {"smollm": "SmolLM-135M-Instruct", "qwen3": "Qwen3-0.6B"}


def real_size_lines(measured: dict) -> list[str]:
    """What the hub path costs on a GPU: generation rate by batch, learning memory per token, and one
    article step (48 completions of 300 tokens generated, 48 × 409 tokens learned) from those rates."""
    rows = measured["rows"]
    models = [m for m in MODEL_NAMES if any(r["model"] == m for r in rows)]
    out = ["| " + measured.get("device", "GPU") + ", bf16 | " + " | ".join(MODEL_NAMES[m] for m in models) + " |",
           "|---" * (len(models) + 1) + "|"]

    def pick(model, phase, **settings):
        return next((r for r in rows if r["model"] == model and r["phase"] == phase
                     and all(r["settings"][k] == v for k, v in settings.items())), None)

    generated = {}  # rows per round → the settings of that round
    for r in rows:
        if r["phase"] == "generate":
            generated.setdefault(r["settings"]["gen_prompts"] * r["settings"]["gen_samples"], r["settings"])
    for n, st in sorted(generated.items()):
        found = [pick(m, "generate", gen_prompts=st["gen_prompts"], gen_samples=st["gen_samples"]) for m in models]
        out.append(f"| generation, {n} rows × {st['gen_tokens']} tokens | "
                   + " | ".join(f"{r['tokens'] / r['seconds']:,.0f} tokens/s" if r else "not measured" for r in found)
                   + " |")
    per_token = [min((r["peak_bytes"] / r["tokens"] / 2**20 for r in rows if r["model"] == m and r["phase"] == "learn"),
                     default=None) for m in models]
    out.append("| learning memory per token | " + " | ".join(f"{v:.2f} MiB" if v else "not measured" for v in per_token) + " |")
    steps = []
    for m in models:
        gen = pick(m, "generate", gen_prompts=8, gen_samples=6)
        learn = [r for r in rows if r["model"] == m and r["phase"] == "learn"]
        if gen and learn:
            tr = min(learn, key=lambda r: r["settings"]["minibatch"])
            steps.append(f"{48 * 300 / (gen['tokens'] / gen['seconds']) + 48 * 409 / (tr['tokens'] / tr['seconds']):.0f} s")
        else:
            steps.append("not measured")
    out.append("| one article step, from these rates | " + " | ".join(steps) + " |")
    return out


def render(robustness: dict | None, bench: list[dict] | None, real_size_gpu: dict | None = None) -> str:
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
    if real_size_gpu:
        out += ["", (f"The hub path at real size on a GPU (random weights of the real shapes, "
                f"`benchmarks/bench_real_size.py --device cuda`, {real_size_gpu.get('date', '')}; the CPU's "
                "figures and the settings they imply: `benchmarks/README.md`):"), "", *real_size_lines(real_size_gpu)]
    return "\n".join(out)


def main() -> int:
    def read(path: Path):
        return json.loads(path.read_text()) if path.exists() else None

    text = README.read_text()
    if START not in text or END not in text:
        print(f"README.md has no {START} … {END} markers", file=sys.stderr)
        return 2
    body = render(read(REPO / "runs" / "robustness.json"), read(REPO / "runs" / "bench.json"),
                  read(REPO / "runs" / "real_size_gpu.json"))
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    README.write_text(f"{head}{START}\n{body}\n{END}{tail}")
    print("README.md figures table rewritten")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
