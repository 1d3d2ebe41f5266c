"""README's measured figures come from the record (benchmarks/measured/, rendered by benchmarks/figures.py):
README cannot drift from it, states no measured number outside its generated blocks, and stays short."""

import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # benchmarks/ is a folder of the repository, not installed

from benchmarks.figures import (
    BLOCKS,
    read_records,
    readme_blocks,
    real_size_record,
    render_block,
    render_record,
    rewrite_readme,
)

README = (REPO / "README.md").read_text(encoding="utf-8")
# a measured quantity: a number with a unit of time, speed, share or size (settings such as "lr 2e-5",
# "8 × 6" or "≥ 65%" in a goal are written with a comparison sign or no unit, and are allowed)
MEASURED = re.compile(r"(?<![≥≤<>±+\w.])(?<![≥≤<>±+] )\d[\d,.]*\s?(%|s\b|min\b|GFLOP/s|tokens/s|MiB|GiB|points\b)")


def _row(model, phase, seconds, tokens, peak_gib, **settings):
    base = {"minibatch": 16, "gen_prompts": 8, "gen_samples": 6, "gen_tokens": 300}
    return {"model": model, "phase": phase, "seconds": seconds, "tokens": tokens, "peak_bytes": peak_gib * 2**30,
            "settings": {**base, **settings}}


def test_real_size_record_is_computed_from_the_rows_and_says_what_is_missing():
    gpu = {"date": "d", "device": "GPU X", "rows": [
        _row("smollm", "generate", 10.0, 15_000, 0.5),
        _row("smollm", "learn", 0.5, 6_544, 8.0),
        _row("qwen3", "generate", 10.0, 14_000, 2.5),
    ]}
    text = render_record(real_size_record(gpu))
    assert "|  | SmolLM-135M-Instruct | Qwen3-0.6B |" in text
    assert "| generation, 48 rows × 300 tokens | 1,500 tokens/s | 1,400 tokens/s |" in text
    assert "| learning memory per token | 1.25 MiB | not measured |" in text
    # 48 × 300 tokens at 1,500/s + 48 × 409 tokens at 13,088/s = 9.6 + 1.5 s
    assert "| one article step, from these rates | 11 s | not measured |" in text
    assert "GPU X, bf16" in text and "· d" in text


def test_every_record_says_what_how_where_and_when():
    records = read_records()
    assert {name for names in BLOCKS.values() for name in names} <= set(records)
    for name, rec in records.items():
        assert rec["title"] and rec["machine"], name
        dated = rec.get("date") or all(re.search(r"\d{4}-\d\d-\d\d", " ".join(map(str, row))) for row in rec["rows"])
        commanded = rec.get("command") or any("`" in " ".join(map(str, row)) for row in rec["rows"])
        assert dated and commanded, f"{name}: every figure needs its date and the command that made it"
        assert all(len(row) == len(rec["columns"]) for row in rec["rows"]), name


def test_readme_blocks_are_what_the_record_renders():
    records = read_records()
    blocks = readme_blocks(README)
    assert set(blocks) == set(BLOCKS)
    for name, body in blocks.items():
        assert body == render_block(name, records), (
            f"README's {name} block differs from benchmarks/measured/: run python -m benchmarks.figures")
    assert rewrite_readme(README, records) == README


def test_a_record_edited_by_hand_in_readme_is_caught():
    records = read_records()
    tampered = README.replace("| 04 GRPO gain (points) |", "| 04 GRPO gain (points) | +99 |", 1)
    assert tampered != README
    assert any(body != render_block(name, records) for name, body in readme_blocks(tampered).items())


def test_readme_states_measured_numbers_only_inside_its_generated_blocks():
    outside = re.sub(r"<!-- figures:(\w+):start -->.*?<!-- figures:\1:end -->", "", README, flags=re.DOTALL)
    found = [m.group(0) for m in MEASURED.finditer(outside)]
    assert not found, f"measured figures typed into README (put them in benchmarks/measured/): {found}"


@pytest.mark.parametrize("text", ["took 9 min 10 s", "71.2% accuracy", "at 167.7 GFLOP/s", "1,523 tokens/s"])
def test_the_measured_number_check_can_fail(text):
    assert MEASURED.search(text)


def test_readme_is_a_front_door():
    assert len(README.splitlines()) <= 160
