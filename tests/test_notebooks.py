"""Every notebook, executed headless with SMOKE=True, then judged on its metrics.json.

Each notebook has a checker below; a notebook without one fails (a run that asserts nothing
is not a test). No test here times a notebook: a busy machine is slower, not broken. The per-cell
deadline (``tests/deadlines.py``) only catches hangs; speed is measured in benchmarks/.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from deadlines import CELL_DEADLINE_S

from kimina_edu.checks import EVERY_WHY_ENV, unexplained_in_notebook
from kimina_edu.course import list_notebooks, run_notebook


def check_00(m):
    assert m["device"] in ("cpu", "cuda")
    assert m["model_choice"] == "pocket"
    assert "pocket" in m["unknown_id_message"] and "\n" not in m["unknown_id_message"]
    assert m["primer_advantages"] == pytest.approx([0.866, -0.866, -0.866, 0.866], abs=1e-3)
    assert m["figure_formula_matches"], "rl_loop.png's advantage formula must give group_advantages' numbers"


def check_01(m):
    assert m["paid_wrong_raw"] >= 3, "the audit should show reasoning-gym paying partial credit to wrong answers"
    assert m["paid_wrong_binarized"] == 0, "binarized correctness must pay nothing to a wrong answer"
    assert m["refused_right_binarized"] == 0, "the audit's ✓ line says no right answer is refused"
    assert m["audit_question_satisfiable"], "the audit's question must not contradict itself (ex falso pays anything)"
    assert m["verbatim_paid_raw_some"] == m["verbatim_echoes"], "the prose says reasoning-gym pays every copied premise"
    assert 0 < m["verbatim_paid_raw_full"] < m["verbatim_echoes"], "…some in full, the lone variables 0.25"
    assert m["correct_binarized"] == [1.0, 1.0]
    assert m["derive_checks"] == {"extract_answer": True, "format_reward": True}


def check_02(m):
    assert m["worked_example_advantages"] == pytest.approx([0.7071, -0.7071], abs=1e-4)
    assert m["all_equal_group_advantages"] == [0.0] * 4
    assert abs(m["loss_at_ratio_one"]) < 1e-6 and m["grad_norm_at_ratio_one"] > 1e-4
    rise_high, rise_low = m["toy_rounds_rise"]  # the article's picture: rounds on one batch
    assert rise_high > 0.5 and rise_low < -0.5
    w = {lt: list(v["token_weight_by_length"].values()) for lt, v in m["aggregation"].items()}
    assert w["grpo"][0] > 5 * w["grpo"][-1], "grpo must weigh short completions' tokens more"
    assert w["dr_grpo"][0] == pytest.approx(w["dr_grpo"][-1]), "dr_grpo weighs every token the same"
    assert m["derive_checks"] == {"group_advantages": True, "policy_loss": True, "kl_k3": True}


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
    assert m["derive_checks"] == {"feedback": True}
    assert m["cache_sizes"][-1] == m["cache_capacity"], "the prose says the cache fills to its capacity"


def check_03(m):
    for key in ("model", "baseline_accuracy", "baseline_format_rate", "sft_accuracy", "sft_format_rate", "n_eval",
                "sft_seconds", "pocket_build_seconds"):
        assert key in m
    assert m["model"] == "pocket" and m["n_eval"] == 40 and m["n_sft"] == 64
    assert m["sft_format_rate"] > m["baseline_format_rate"], "SFT must raise the format rate"
    assert m["teacher"].startswith("rule-based")
    gain, lo, hi = m["sft_gain_paired_points"]  # SFT's gain, paired over the same questions: the accuracy gain, interval
    assert math.isclose(gain, 100 * (m["sft_accuracy"] - m["baseline_accuracy"]), abs_tol=1e-9) and lo <= gain <= hi
    look = m["smollm2_zero_shot"]  # the real SmolLM2 (make smollm2, linked into the test cache) beside the pocket model
    assert look is not None and look["n"] == 3, "chapter 3 must show the real SmolLM2's zero-shot answers"
    assert look["format_rate"] <= 1 / 3, "the prose says untouched SmolLM2 almost never writes the format"


def check_04(m):
    for key in ("model", "accuracy_before", "accuracy_after", "n_eval", "reward_first", "reward_last",
                "grpo_seconds", "steps"):
        assert key in m
    assert m["steps"] == 6 and m["n_eval"] == 40
    assert m["logprob_objective_change"] > 0, "one update must raise the advantage-weighted log-prob"
    assert "greedy" in m["sampler_accuracy"] and len(m["sampler_accuracy"]) == 3
    assert all(0.0 <= v <= 1.0 for v in m["sampler_accuracy"].values())
    assert m["derive_checks"] == {"completion_logprobs": True, "grpo_loss": True, "grpo_iteration": True,
                                  "own_loop_trains": True}
    clip = m["clip_phase"]["clip_frac"]  # one buffer in several minibatch steps: the ratio leaves 1
    assert clip[0] == 0.0 and max(clip) > 0.0
    gain, lo, hi = m["gain_paired_points"]  # the paired gain is the accuracy gain, with its interval around it
    assert math.isclose(gain, 100 * (m["accuracy_after"] - m["accuracy_before"]), abs_tol=1e-9) and lo <= gain <= hi
    # the trained policy, kept (section 8): the base, chapter 3's adapter merged into it, this run's LoRA on top
    policy = m["policy"]
    assert policy["adapters"][0] == str(Path(m["sft_adapter"]).resolve()) and len(policy["adapters"]) == 2
    assert policy["adapters"][1].endswith("/grpo_run/policy") and policy["dtype"] in ("float32", "bfloat16")
    for folder in (policy["base"], *policy["adapters"]):
        assert Path(folder).is_absolute() and Path(folder).is_dir(), folder
    assert (Path(policy["adapters"][1]) / "adapter_model.safetensors").is_file()
    assert m["policy_reload_max_abs_diff"] < 1e-5, "transformers + PEFT alone must rebuild the policy the run ended with"
    assert len(m["own_loop"]) == 2
    # the probes across the run: recorded at step 0, every probe_every steps and at the end
    assert m["probe_checkpoints"] == 1 + m["steps"] // m["probe_every"] + (m["steps"] % m["probe_every"] > 0)
    assert "high" in m["probe_roles"] and "low" in m["probe_roles"], "the probe batches have signal in SMOKE"
    assert m["probe_questions"] == 4, "SMOKE's probe set follows 4 questions (a full run PROBE_QUESTIONS)"
    for key in ("probe_high_rise", "probe_low_rise", "probe_noise", "probe_drift_z", "adv_std_mean"):
        assert isinstance(m[key], float) and math.isfinite(m[key]), key
    assert m["probe_noise"] >= 0 and isinstance(m["probe_rise_beats_noise"], bool)
    # every update measured on its own buffer (SMOKE: shift_every = 1): rewarded above penalised
    assert m["shift_every"] == 1 and m["shift_updates"] >= 1, "no update was measured"
    if m["shift_updates"] >= 2:
        assert 0.0 <= m["shift_gap_frac"] <= 1.0 and m["shift_pos_mean"] > m["shift_neg_mean"], m


def check_05(m):
    assert m["parity_max_abs_diff"] < 1e-6
    assert set(m["parity"]) == {"grpo", "bnpo", "dapo", "dr_grpo"}
    assert m["variant_parity_max_abs_diff"] < 1e-6 and set(m["variant_parity"]) == {"cispo", "sapo", "gspo"}
    assert m["derive_checks"] == {"surrogate": True}  # the injected solution passes its grader
    adam = m["adam_update_rel_diff"]  # the prose: AdamW cancels a constant loss scale, not a per-sequence reweighting
    assert adam["dr_grpo × 8"] < 1e-6 and adam["dapo"] < 1e-6, "a constant loss scale must leave AdamW's step unchanged (ε 1e-16)"
    assert adam["grpo"] > 0.1, "grpo's per-completion 1/|o_i| must change AdamW's step on completions of 4 to 30 tokens"
    assert isinstance(m["variants_identical"], bool) and set(m["variant_length_range"]) == {"grpo", "dapo", "dr_grpo"}
    for key in ("trl_accuracy_after", "scratch_accuracy_after", "n_eval"):
        assert 0.0 <= m[key] <= 1.0 if key != "n_eval" else m[key] == 40
    # SMOKE takes make course's branch: TRL runs the first half of chapter 4's steps, compared at that step
    assert m["compare_step"] == m["trl_steps"] == 3 and m["whole_run"] is False and m["compare_n_eval"] == 40
    # no chapter 4 beside it: ours ran here, so TRL − ours is paired over the same questions
    diff, lo, hi = m["trl_minus_ours_paired_points"]
    assert math.isclose(diff, 100 * (m["trl_accuracy_after"] - m["scratch_accuracy_after"]), abs_tol=1e-9) and lo <= diff <= hi
    assert m["variant_length_range"]["grpo"][0] is not None


def check_08(m):
    assert m["reward_scores"] == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    assert m["reward_acc"] == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert m["dr_grpo_matches_restated_verl"], "dr_grpo must equal the course's restatement of verl's agg_loss"
    assert m["second_turn_counts"] == {"added": 6, "valid": 1, "filtered": 1}
    assert 0.3 < m["second_turn_share"] < 0.7
    assert "GPU" in m["preflight_message"] and "\n" not in m["preflight_message"]
    assert m["script_is_relative"], "the launch script must not carry this machine's absolute paths"
    assert m["lean_url_restored"] and not m["real_server"], \
        "the reward cell must leave LEAN_SERVER_API_URL as the learner had it (a re-run must not keep a dead stand-in)"


def check_09(m):
    assert m["pass_at_k"]["8"] >= m["best_at_k"]["8"], "bootstrap best@8 cannot beat pass@8 on the same samples"
    assert m["turn2_pass"]["pass@1"] >= m["turn1_pass"]["pass@1"]
    assert m["second_turns"] > 0
    assert m["turn2_outcomes"] == "scripted" and 0 < m["scripted_fixes"] < m["second_turns"], \
        "the prose says turn 2's outcomes are FIX_RATE's coin flips, some fixed and some not"
    assert m["derive_checks"] == {"pass_at_k": True}
    assert len(m["equal_budget"]) == 2, "turn 1 and turn 2 compared at an equal sampling budget"
    assert m["published_pass32"] == {"Kimina-Prover-RL-1.7B": 76.63, "Kimina-Prover-RL-0.6B": 71.30}


CHECKS = {"00": check_00, "01": check_01, "02": check_02, "03": check_03, "04": check_04, "05": check_05,
          "06": check_06, "07": check_07, "08": check_08, "09": check_09}


@pytest.mark.parametrize("notebook", list_notebooks(), ids=lambda p: p.stem)
def test_notebook_smoke(notebook, smoke_env, tmp_path, monkeypatch):
    monkeypatch.setenv(EVERY_WHY_ENV, "1")  # every check computes its why, passing or not: a broken one fails here
    prefix = notebook.name[:2]
    assert prefix in CHECKS, f"{notebook.name} has no metrics checker in tests/test_notebooks.py"
    result = run_notebook(notebook, tmp_path / notebook.stem, smoke=True, timeout=CELL_DEADLINE_S)
    assert result.ok, f"{notebook.name} failed:\n{result.error[-6000:]}"
    CHECKS[prefix](result.metrics)
    assert result.metrics.get("smoke") is True
    spam = _log_spam(result.output_dir / notebook.name)
    assert not spam, f"{notebook.name}: {spam}"
    bare = _unexplained(result.output_dir / notebook.name)
    assert not bare, f"{notebook.name} printed ✗ without a why computed from the run:\n" + "\n".join(bare)


def test_unfilled_stubs_run_on_the_package_version(smoke_env, tmp_path):
    """A learner's notebook as `make lab` gives it (the stubs not written): each grader says so in one line and
    the notebook goes on with the package's function to the end."""
    notebook = next(p for p in list_notebooks(["09"]))
    result = run_notebook(notebook, tmp_path / notebook.stem, smoke=True, timeout=CELL_DEADLINE_S, inject_solutions=False)
    assert result.ok, f"{notebook.name} with its stub unfilled failed:\n{result.error[-6000:]}"
    assert result.metrics["derive_checks"] == {"pass_at_k": False}
    text = [line for cell in json.loads((result.output_dir / notebook.name).read_text())["cells"]
            for out in cell.get("outputs", []) for line in "".join(out.get("text", "")).splitlines()]
    assert "✗ my_pass_at_k: not written yet (NotImplementedError) — using the package's version" in text
    assert result.metrics["pass_at_k"]["8"] >= result.metrics["best_at_k"]["8"], "the rest ran on the package's pass_at_k"
    assert not _unexplained(result.output_dir / notebook.name), "a grader's ✗ comes with its why"


def _unexplained(executed: Path) -> list[str]:
    """The ✗ lines an executed notebook printed with no ``  why:`` line computed from the run under them."""
    return unexplained_in_notebook(json.loads(executed.read_text()))


def _log_spam(executed: Path) -> list[str]:
    """Per-step trainer logs in an executed notebook's outputs: Hugging Face's ``PrinterCallback``
    prints every log as a dict, and its notebook callback grows a table by one row per step. A
    learner gets a progress bar and the figures instead (``runtime.use_progress_bar``)."""
    found = []
    for i, cell in enumerate(json.loads(executed.read_text())["cells"]):
        for out in cell.get("outputs", []):
            text = "".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/html", ""))
            dicts = sum(line.lstrip().startswith("{'") and "'loss'" in line for line in text.splitlines())
            if dicts:
                found.append(f"cell {i} prints {dicts} trainer log dict(s)")
            if "Training Loss</th>" in text:
                found.append(f"cell {i} shows a per-step training-loss table")
    return found


# ---- the real model: chapters 3 → 4 → 5 in SMOKE mode on the real SmolLM2-135M-Instruct (`make smollm2`,
# linked into the test cache), run into one run folder as `MODEL_ID=smollm2 make course` runs them: every
# branch a non-pocket model takes (ChatML, <|im_end|> as EOS and pad, a real tokenizer), on trained weights.
# SMOKE sizes learn little beyond the format; tests/test_hub_shaped.py checks one GRPO update on a
# SmolLM-shaped folder in bf16.

HUB_CHAPTERS = ("03", "04", "05")


def _nan_paths(value, path="metrics"):
    """Where a NaN sits in a metrics tree: a figure a notebook could not compute must be None, not NaN."""
    if isinstance(value, float) and math.isnan(value):
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _nan_paths(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _nan_paths(v, f"{path}[{i}]")]
    return []


@pytest.fixture(scope="module")
def hub_course(smoke_env, tmp_path_factory):
    from kimina_edu.models import choose_model

    folder, _ = choose_model("smollm2")  # fails here, in one line, when `make smollm2` has not run
    run = tmp_path_factory.mktemp("smollm2-run")
    results, adapter_stamp = {}, None
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(EVERY_WHY_ENV, "1")  # every check computes its why, passing or not: a broken one fails here
        for notebook in list_notebooks(list(HUB_CHAPTERS)):
            prefix = notebook.name[:2]
            results[prefix] = run_notebook(notebook, run / notebook.stem, smoke=True, timeout=CELL_DEADLINE_S,
                                           extra={"MODEL_ID": "smollm2"})
            if prefix == "03" and results[prefix].ok:
                adapter_stamp = (Path(results[prefix].metrics["adapter_dir"]) / "adapter_model.safetensors").stat()
    return {"folder": folder, "run": run, "results": results, "adapter_stamp": adapter_stamp}


def check_hub_03(m, course):
    assert m["model"] == course["folder"], "chapter 3 must say which model it trained: the folder given"
    assert m["n_eval"] == 40 and m["n_sft"] == 64 and m["pocket_build_seconds"] is None
    assert m["sft_loss_last"] < 0.5 * m["sft_loss_first"], "SFT must lower the completion loss on the real model too"
    assert m["baseline_format_rate"] <= 0.1, "untouched SmolLM2 does not write the format (the warm-up's reason)"
    assert m["zero_variance_groups_before"] == 1.0, "untouched, no group has reward variance: GRPO gets no signal"
    assert m["zero_variance_groups_after"] < 1.0, "after SMOKE's 16 SFT steps some sampled groups carry signal"
    for key in ("baseline_accuracy", "baseline_format_rate", "sft_accuracy", "sft_format_rate"):
        assert 0.0 <= m[key] <= 1.0


def check_hub_04(m, course):
    m03 = course["results"]["03"].metrics
    assert m["model"] == course["folder"] and m["model_id"] == "smollm2"
    assert m["sft_adapter"] == m03["adapter_dir"], "chapter 4 must start from chapter 3's adapter"
    stamp = (Path(m03["adapter_dir"]) / "adapter_model.safetensors").stat()
    assert (stamp.st_ino, stamp.st_mtime_ns) == (course["adapter_stamp"].st_ino, course["adapter_stamp"].st_mtime_ns), \
        "chapters 4 and 5 must find chapter 3's adapter, not train another"
    assert m["steps"] == m["config"]["steps"] == 6 and m["n_eval"] == 40
    assert m["config"]["lr"] == 1e-4 and m["config"]["max_new_tokens"] == 32, "the hub SMOKE preset"
    assert m["derive_checks"] == {"completion_logprobs": True, "grpo_loss": True, "grpo_iteration": True,
                                  "own_loop_trains": True}
    # the probes are drawn as on the pocket model (ProbeSet.sample), not from section 2's one batch
    assert m["probe_questions"] == 4, "SMOKE's probe set follows 4 questions on every model"
    for key in ("accuracy_before", "accuracy_after", "format_before", "format_after"):
        assert 0.0 <= m[key] <= 1.0


def check_hub_05(m, course):
    assert m["model_id"] == "smollm2"
    assert m["scratch_run"] == str((course["run"] / "04_grpo_from_scratch").resolve()), \
        "chapter 5 must compare with chapter 4's run of the same model and settings"
    # float32 through 30 layers: ours runs the shared prompt once, TRL every sequence whole — another summation
    # order, 1.2e-6 measured (the pocket model's 4 layers stay under 1e-6)
    assert m["parity_max_abs_diff"] < 1e-5 and set(m["parity"]) == {"grpo", "bnpo", "dapo", "dr_grpo"}
    # CISPO's value is Σ A·log π of random tokens (|loss| ~ 10): 1.3e-5 absolute measured, the same relative
    # rounding as the losses above
    assert m["variant_parity_max_rel_diff"] < 1e-5 and set(m["variant_parity"]) == {"cispo", "sapo", "gspo"}
    assert m["steps"] == course["results"]["04"].metrics["config"]["steps"]
    assert 0.0 <= m["trl_accuracy_after"] <= 1.0 and m["n_eval"] == 40
    # a real model is compared at chapter 4's first held-out check during its run (SMOKE: step 3 of 6)
    assert m["whole_run"] is False and m["compare_step"] == m["trl_steps"] == 3 and m["compare_n_eval"] == 40
    import torch

    if not torch.cuda.is_available():  # 45 TRL steps of SmolLM2 would take about an hour on 2 cores
        assert m["variant_model"] == "pocket", "on a CPU the variant study runs on the pocket model"


HUB_CHECKS = {"03": check_hub_03, "04": check_hub_04, "05": check_hub_05}


@pytest.mark.parametrize("prefix", HUB_CHAPTERS)
def test_real_smollm2_notebook_smoke(prefix, hub_course):
    result = hub_course["results"][prefix]
    assert result.ok, f"{result.name} on the real SmolLM2 failed:\n{result.error[-6000:]}"
    assert result.metrics.get("smoke") is True
    assert not _nan_paths(result.metrics), f"NaN in {result.name}'s metrics.json: {_nan_paths(result.metrics)}"
    bare = _unexplained(result.output_dir / f"{result.name}.ipynb")
    assert not bare, f"{result.name} printed ✗ without a why computed from the run:\n" + "\n".join(bare)
    HUB_CHECKS[prefix](result.metrics, hub_course)
