"""README's measured figures, generated from the record so README never carries a number typed by hand.

The record is ``benchmarks/measured/*.json``, one file per topic: what was measured, the command, the
machine (and its CPU calibration), the date, and the figures as a table. README.md holds each record
in the block it names, between ``<!-- figures:NAME:start -->`` and ``<!-- figures:NAME:end -->``;
``tests/test_figures.py`` fails when README's blocks differ from what this module renders, so a figure
cannot drift from its record.

    python -m benchmarks.figures                                   # rewrite README's blocks from the record
    python -m benchmarks.figures --record-robustness runs/robustness.json   # `make robustness` → the record
    python -m benchmarks.figures --record-real-size runs/real_size_gpu.json # bench_real_size → the record
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

from kimina_edu.record import MEASURED  # the record's folder: one place, read by the notebooks too

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
BLOCK = re.compile(r"<!-- figures:(\w+):start -->\n(.*?)<!-- figures:\1:end -->", re.DOTALL)
# the records each README block shows, in this order
BLOCKS = {"setup": ["course"], "results": ["pocket_seeds", "smollm2"]}  # the rest: benchmarks/README.md


def read_records(folder: Path = MEASURED) -> dict[str, dict]:
    """``{name: record}`` for every ``*.json`` in the record folder."""
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))}


def render_record(record: dict) -> str:
    """One record as Markdown: a caption (title, command, machine, date — those the rows do not carry)
    and its table, then its note."""
    said = [f"`{record['command']}`" if record.get("command") else "",
            record.get("machine", ""), record.get("date", "")]
    caption = f"**{record['title']}**" + "".join(f" · {part}" for part in said if part)
    cols = record["columns"]
    lines = [caption, "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in record["rows"]]
    if record.get("note"):
        lines += ["", record["note"]]
    return "\n".join(lines)


def render_block(name: str, records: dict[str, dict]) -> str:
    """The text of README's block ``name``: its records, one after another."""
    return "\n\n".join(render_record(records[r]) for r in BLOCKS[name] if r in records) + "\n"


def readme_blocks(text: str) -> dict[str, str]:
    """``{name: body}`` of every figures block in README's text."""
    return {m.group(1): m.group(2) for m in BLOCK.finditer(text)}


def rewrite_readme(text: str, records: dict[str, dict]) -> str:
    """README's text with every block replaced by what the record renders."""
    return BLOCK.sub(lambda m: (f"<!-- figures:{m.group(1)}:start -->\n{render_block(m.group(1), records)}"
                                f"<!-- figures:{m.group(1)}:end -->"), text)


# ------------------------------------------------------------------ measurement files → records

MODEL_NAMES = {"smollm": "SmolLM-135M-Instruct", "qwen3": "Qwen3-0.6B"}
ARTICLE_STEP = (48 * 300, 48 * 409)  # tokens generated, tokens learned in one step at the article's sizes


def real_size_record(measured: dict) -> dict:
    """What the hub path costs on a GPU (``bench_real_size --device cuda --out …``): generation rate by
    batch, learning memory per token, and one article step from those rates."""
    rows = measured["rows"]
    models = [m for m in MODEL_NAMES if any(r["model"] == m for r in rows)]

    def pick(model, phase, **settings):
        return next((r for r in rows if r["model"] == model and r["phase"] == phase
                     and all(r["settings"][k] == v for k, v in settings.items())), None)

    out = []
    generated = {}  # rows per round → the settings of that round
    for r in rows:
        if r["phase"] == "generate":
            generated.setdefault(r["settings"]["gen_prompts"] * r["settings"]["gen_samples"], r["settings"])
    for n, st in sorted(generated.items()):
        found = [pick(m, "generate", gen_prompts=st["gen_prompts"], gen_samples=st["gen_samples"]) for m in models]
        out.append([f"generation, {n} rows × {st['gen_tokens']} tokens",
                    *(f"{r['tokens'] / r['seconds']:,.0f} tokens/s" if r else "not measured" for r in found)])
    per_token = [min((r["peak_bytes"] / r["tokens"] / 2**20 for r in rows if r["model"] == m and r["phase"] == "learn"),
                     default=None) for m in models]
    out.append(["learning memory per token", *(f"{v:.2f} MiB" if v else "not measured" for v in per_token)])
    steps = []
    for m in models:
        gen = pick(m, "generate", gen_prompts=8, gen_samples=6)
        learn = [r for r in rows if r["model"] == m and r["phase"] == "learn"]
        if gen and learn:
            tr = min(learn, key=lambda r: r["settings"]["minibatch"])
            steps.append(f"{ARTICLE_STEP[0] / (gen['tokens'] / gen['seconds']) + ARTICLE_STEP[1] / (tr['tokens'] / tr['seconds']):.0f} s")
        else:
            steps.append("not measured")
    out.append(["one article step, from these rates", *steps])
    return {"block": "results", "title": "The hub path at real size on a GPU (random weights of the real shapes)",
            "command": "python -m benchmarks.bench_real_size --device cuda", "machine": measured.get("device", "GPU") + ", bf16",
            "date": measured.get("date", ""), "columns": ["", *(MODEL_NAMES[m] for m in models)], "rows": out}


def robustness_record(measured: dict, keys: list[str] | None = None) -> dict:
    """`make robustness`'s runs as a record: min, median and max of each figure over the runs."""
    from benchmarks.robustness import FIGURES, goals_missed

    keys = keys or ["sft_accuracy", "sft_format_rate", "grpo_after", "grpo_gain", "grpo_seconds", "shift_gap_frac",
                    "shift_pos_mean", "shift_neg_mean", "trl_minus_ours", "trl_seconds"]
    runs = measured["runs"]
    rows = []
    for key, label, fmt in FIGURES:
        vals = [r[key] for r in runs if r.get(key) is not None]
        if key in keys and vals:
            rows.append([label, fmt(min(vals)), fmt(statistics.median(vals)), fmt(max(vals)), str(len(vals))])
    missed = sorted({g for r in runs for g in goals_missed(r)})
    seeds = ", ".join(str(s) for s in sorted({r["seed"] for r in runs}))
    return {"block": "results", "title": f"Chapters 3 → 4 → 5 over {len(runs)} runs (seeds {seeds})",
            "command": "python -m benchmarks.robustness", "machine": measured.get("machine", ""),
            "date": measured.get("date", ""), "columns": ["figure", "min", "median", "max", "runs"], "rows": rows,
            "note": "Every goal met in every run." if not missed else "Missed in some run: " + "; ".join(missed) + "."}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--record-robustness", type=Path, metavar="JSON", help="write pocket_seeds.json from it")
    parser.add_argument("--record-real-size", type=Path, metavar="JSON", help="write real_size_gpu.json from it")
    args = parser.parse_args(argv)
    for source, name, make in ((args.record_robustness, "pocket_seeds", robustness_record),
                               (args.record_real_size, "real_size_gpu", real_size_record)):
        if source:
            record = make(json.loads(source.read_text(encoding="utf-8")))
            (MEASURED / f"{name}.json").write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
            print(f"benchmarks/measured/{name}.json written from {source}")
    text = README.read_text(encoding="utf-8")
    if not readme_blocks(text):
        print("README.md has no <!-- figures:NAME:start --> … <!-- figures:NAME:end --> blocks", file=sys.stderr)
        return 2
    README.write_text(rewrite_readme(text, read_records()), encoding="utf-8")
    print("README.md: figures blocks rewritten from benchmarks/measured/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
