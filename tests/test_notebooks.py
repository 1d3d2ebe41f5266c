"""Every notebook, executed headless with SMOKE=True, then judged on its metrics.json.

Each notebook has a checker below; a notebook without one fails (a run that asserts nothing
is not a test). Budgets are per-notebook wall-time limits for the SMOKE run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kimina_edu.course import list_notebooks, run_notebook


def check_00(m):
    assert m["device"] in ("cpu", "cuda")
    assert m["model_choice"] == "pocket"
    assert "pocket" in m["unknown_id_message"] and "\n" not in m["unknown_id_message"]


def check_01(m):
    assert m["paid_wrong_raw"] >= 3, "the audit should show reasoning-gym paying partial credit to wrong answers"
    assert m["paid_wrong_binarized"] == 0, "binarized correctness must pay nothing to a wrong answer"
    assert m["correct_binarized"] == [1.0, 1.0]


def check_02(m):
    assert m["worked_example_advantages"] == pytest.approx([0.7071, -0.7071], abs=1e-4)
    assert m["all_equal_group_advantages"] == [0.0] * 4
    assert abs(m["loss_at_ratio_one"]) < 1e-6 and m["grad_norm_at_ratio_one"] > 1e-4
    w = {lt: list(v["token_weight_by_length"].values()) for lt, v in m["aggregation"].items()}
    assert w["grpo"][0] > 5 * w["grpo"][-1], "grpo must weigh short completions' tokens more"
    assert w["dr_grpo"][0] == pytest.approx(w["dr_grpo"][-1]), "dr_grpo weighs every token the same"


def check_06(m):
    assert m["checks_agree"], "every format example must get its expected verdict"
    assert len(m["error_kinds_covered"]) == 12
    assert m["helper_lemma_dropped"]
    assert m["batch_scores"] == [1.0, 0.0, 0.0, 0.0, 0.0]
    tp = {int(k): v for k, v in m["throughput"].items()}
    assert tp[32] > 2 * tp[1], "more requests in flight must raise throughput (at most 4x: 32 workers / batches of 8)"


def check_07(m):
    assert m["verdict_status"] == "lean_error"
    assert "# Error 1:" in m["feedback"] and ">|   linarith" in m["feedback"]
    for row in m["pitfall"]:
        assert "linarith" in row["ours marks"] and "linarith" not in row["recipe's window marks"]
    assert m["cache_counts"]["added"] > 0 and m["cache_counts"]["exceed_max_turn"] > 0
    assert m["second_turn_format_clean"] == "NONE"


CHECKS = {"00": check_00, "01": check_01, "02": check_02, "06": check_06, "07": check_07}
BUDGET_S = {"00": 60, "01": 60, "02": 60, "06": 60, "07": 90}


@pytest.fixture(scope="session")
def smoke_env(tmp_path_factory):
    """Notebooks share one cache so chapter artifacts (pocket model, adapter) are built once."""
    cache = os.environ.get("KIMINA_EDU_TEST_CACHE") or str(tmp_path_factory.mktemp("cache"))
    os.environ["KIMINA_EDU_CACHE"] = cache
    os.environ["HF_HUB_OFFLINE"] = "1"  # no test leaves localhost
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    return Path(cache)


@pytest.mark.parametrize("notebook", list_notebooks(), ids=lambda p: p.stem)
def test_notebook_smoke(notebook, smoke_env, tmp_path):
    prefix = notebook.name[:2]
    assert prefix in CHECKS, f"{notebook.name} has no metrics checker in tests/test_notebooks.py"
    result = run_notebook(notebook, tmp_path / notebook.stem, smoke=True, timeout=600)
    assert result.ok, f"{notebook.name} failed:\n{result.error[-6000:]}"
    CHECKS[prefix](result.metrics)
    assert result.metrics.get("smoke") is True
    assert result.seconds < BUDGET_S[prefix] * 2, f"{notebook.name} took {result.seconds:.0f}s in SMOKE mode"
