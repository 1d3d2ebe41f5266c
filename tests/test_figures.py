"""README's generated tables (benchmarks/figures.py): every cell comes from a measurement file."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ is a folder of the repository, not installed

from benchmarks.figures import render


def _row(model, phase, seconds, tokens, peak_gib, **settings):
    base = {"minibatch": 16, "gen_prompts": 8, "gen_samples": 6, "gen_tokens": 300}
    return {"model": model, "phase": phase, "seconds": seconds, "tokens": tokens, "peak_bytes": peak_gib * 2**30,
            "settings": {**base, **settings}}


def test_real_size_table_is_computed_from_the_rows_and_says_what_is_missing():
    gpu = {"date": "d", "device": "GPU X", "rows": [
        _row("smollm", "generate", 10.0, 15_000, 0.5),
        _row("smollm", "learn", 0.5, 6_544, 8.0),
        _row("qwen3", "generate", 10.0, 14_000, 2.5),
    ]}
    text = render(None, None, gpu)
    assert "| GPU X, bf16 | SmolLM-135M-Instruct | Qwen3-0.6B |" in text
    assert "| generation, 48 rows × 300 tokens | 1,500 tokens/s | 1,400 tokens/s |" in text
    assert "| learning memory per token | 1.25 MiB | not measured |" in text
    # 48 × 300 tokens at 1,500/s + 48 × 409 tokens at 13,088/s = 9.6 + 1.5 s
    assert "| one article step, from these rates | 11 s | not measured |" in text


def test_no_measurement_file_no_table():
    assert render(None, None, None) == ""
