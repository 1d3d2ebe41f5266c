"""benchmarks/gpu_smollm2.py — chapters 3 → 4 on the real SmolLM2 in one script — on its ``--tiny``
CPU path: the same code the GPU run takes (conversion check, zero-shot look, SFT, GRPO step by step,
the final evaluation), checked on what it writes. About a minute and a half on 2 cores."""

import json
import os

import pytest
from real_models import share_real_smollm2

from benchmarks import gpu_smollm2


@pytest.fixture
def cache_with_smollm2(offline_private_cache):
    share_real_smollm2(os.environ["KIMINA_EDU_CACHE"])


def test_tiny_run_reports_every_phase(cache_with_smollm2, tmp_path, capsys):
    assert gpu_smollm2.main(["--device", "cpu", "--tiny", "--seeds", "0", "1", "--budget", "3600",
                             "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "gpu_smollm2.json").read_text())
    assert result["device"] == "cpu" and result["calibration"]["gemm_gflops"] > 0
    first, second = result["seeds"]
    assert "error" not in first and "error" not in second
    assert set(first["zero_shot"]) >= {"accuracy", "format_rate", "sample"}
    assert "zero_shot" not in second  # the raw model has no seed: looked at once
    for row in (first, second):
        assert row["grpo_steps"] == row["config"]["steps"] == 2
        assert row["curve"][0] == [0, row["sft"]["accuracy"]]  # GRPO starts from SFT's figure
        assert row["curve"][-1][0] == 2 and row["grpo"]["accuracy"] == row["curve"][-1][1]
        assert (tmp_path / f"grpo_seed{row['seed']}" / "log.jsonl").is_file()
    out = capsys.readouterr().out
    assert "seed 0: GRPO 2 steps" in out and "article: 46% → 60%" in out


def test_a_spent_budget_still_reports_sft_and_skips_the_next_seed(cache_with_smollm2, tmp_path, capsys):
    assert gpu_smollm2.main(["--device", "cpu", "--tiny", "--seeds", "0", "1", "--budget", "1",
                             "--out", str(tmp_path)]) == 0
    (row,) = json.loads((tmp_path / "gpu_smollm2.json").read_text())["seeds"]
    assert row["grpo_steps"] == 0 and row["curve"][0][1] == row["sft"]["accuracy"]
    assert "seed 1 not run" in capsys.readouterr().out
