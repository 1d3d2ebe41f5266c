"""benchmarks/robustness.py keeps each seed's row as it lands and resumes from them (SmolLM2's runs take hours)."""

import json

from benchmarks.robustness import _kept_rows, _write


def test_rows_are_kept_as_they_land_and_resumed_only_for_the_same_model_recipe_and_stage(tmp_path, capsys):
    out = tmp_path / "robustness-smollm2.json"
    sets = {"sft": {"epochs": 3}, "grpo": {}}
    rows = [{"seed": 1, "threads": 1, "model": "smollm2", "sft_accuracy": 0.7},
            {"seed": 0, "threads": 1, "model": "smollm2", "sft_accuracy": 0.8}]
    _write(out, rows[:1], sets, "sft", 10.0)
    assert [r["seed"] for r in json.loads(out.read_text())["runs"]] == [1]
    _write(out, rows, sets, "sft", 20.0)
    assert [r["seed"] for r in json.loads(out.read_text())["runs"]] == [0, 1] and not out.with_suffix(".tmp").exists()
    assert [r["seed"] for r in _kept_rows(out, "smollm2", sets, "sft")] == [0, 1]
    assert _kept_rows(out, "pocket", sets, "sft") == []
    assert _kept_rows(out, "smollm2", sets, "grpo") == [], "rows that stopped after SFT cannot stand for GRPO runs"
    assert _kept_rows(out, "smollm2", {"sft": {}, "grpo": {}}, "sft") == []
    assert "other recipe changes" in capsys.readouterr().out
    out.write_text("{torn")
    assert _kept_rows(out, "smollm2", sets, "sft") == []
