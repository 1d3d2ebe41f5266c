"""Chapter 8's wiring, in the main environment (verl itself is checked by `make verl-check`)."""

import shlex
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from kimina_edu.lean.data import load_offline_problems
from kimina_edu.lean.examples import passing_response
from kimina_edu.lean.feedback import VALID_FEEDBACK
from kimina_edu.lean.proof import extract_proof
from kimina_edu.lean.standin import StandinServer
from kimina_edu.verl.data import GROUND_TRUTH, prepare_data, to_verl_row
from kimina_edu.verl.dataset import SecondTurnMixin
from kimina_edu.verl.launch import PreflightError, preflight
from kimina_edu.verl.recipe import GO_TO_REPO_ROOT, PRESETS, launch_script, overrides_list, recipe_overrides

PROBLEMS = load_offline_problems()


def _as_dict(preset):
    return dict(ov.lstrip("+").split("=", 1) for ov in overrides_list(preset))


def test_full_recipe_values():
    o = _as_dict("full")
    assert o["actor_rollout_ref.model.path"] == "AI-MO/Kimina-Prover-Distill-1.7B"
    assert (o["data.train_batch_size"], o["actor_rollout_ref.rollout.n"]) == ("256", "8")
    assert (o["data.max_prompt_length"], o["data.max_response_length"]) == ("8192", "24576")
    assert o["actor_rollout_ref.actor.optim.lr"] == "2e-6" and o["actor_rollout_ref.actor.ppo_mini_batch_size"] == "32"
    assert (o["actor_rollout_ref.actor.clip_ratio_low"], o["actor_rollout_ref.actor.clip_ratio_high"]) == ("0.2", "0.3")
    assert o["algorithm.norm_adv_by_std_in_grpo"] == "False" and o["actor_rollout_ref.actor.use_kl_loss"] == "False"
    assert o["actor_rollout_ref.actor.loss_agg_mode"] == "seq-mean-token-sum-norm"
    assert o["actor_rollout_ref.actor.loss_scale_factor"] == o["data.max_response_length"]
    assert o["actor_rollout_ref.rollout.gpu_memory_utilization"] == "0.6"
    assert o["actor_rollout_ref.rollout.val_kwargs.n"] == "8" and o["actor_rollout_ref.rollout.val_kwargs.top_p"] == "0.95"
    assert (o["trainer.test_freq"], o["trainer.save_freq"], o["trainer.total_epochs"]) == ("5", "5", "15")
    assert o["data.multiturn"] == "True" and o["data.multiturn_sampling_rate"] == "0.5"
    assert "reward.custom_reward_function.path" in o and "custom_reward_function.path" not in o


@pytest.mark.parametrize("preset", PRESETS)
def test_every_value_names_its_source_and_keys_are_unique(preset):
    rows = recipe_overrides(preset)
    assert all(src for _, src in rows)
    keys = [ov.split("=", 1)[0].lstrip("+") for ov, _ in rows]
    assert len(keys) == len(set(keys))
    script = launch_script(preset)
    assert script.count("verl.trainer.main_ppo") == 1 and "kimina_edu.verl.launch" in script


REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("preset", PRESETS)
def test_the_launch_script_names_files_relative_to_the_repository_root(preset):
    script = launch_script(preset)
    assert str(REPO) not in script and str(Path.home()) not in script
    overrides = [shlex.split(line.removesuffix(" \\"))[0] for line in script.splitlines() if line.startswith("    ")]
    assert len(overrides) == len(recipe_overrides(preset))
    values = [ov.split("=", 1)[1].strip("[]") for ov in overrides]
    assert not [v for v in values if v.startswith("/")], "an absolute path in the script"
    files = [ov.split("=", 1)[1] for ov in overrides if ".path=" in ov and ov.endswith(".py")]
    assert len(files) == 2 and all((REPO / f).is_file() for f in files), files  # dataset.py and reward.py


def _header_then_pwd(tmp_path) -> Path:
    header = tmp_path / "header.sh"
    header.write_text(f"set -euo pipefail\n{GO_TO_REPO_ROOT}\npwd\n")
    return header


def test_the_launch_script_moves_to_the_checkout_root_from_inside_it_or_stops_in_one_line(tmp_path):
    checkout, outside = tmp_path / "checkout", tmp_path / "outside"
    (checkout / "kimina_edu" / "verl").mkdir(parents=True)
    (checkout / "kimina_edu" / "verl" / "reward.py").write_text("")
    (checkout / "runs" / "08").mkdir(parents=True)
    outside.mkdir()
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    header = _header_then_pwd(tmp_path)
    inside = subprocess.run(["bash", str(header)], check=False, cwd=checkout / "runs" / "08", capture_output=True, text=True)
    assert inside.returncode == 0 and Path(inside.stdout.strip()).resolve() == checkout.resolve(), inside
    lost = subprocess.run(["bash", str(header)], check=False, cwd=outside, capture_output=True, text=True)
    assert lost.returncode == 1 and lost.stderr.strip() == "run this script from inside a kimina-edu checkout"


def test_presets_differ_where_they_should():
    dry, one = _as_dict("dry_run"), _as_dict("one_gpu")
    assert dry["data.train_batch_size"] == "8" and dry["data.multiturn"] == "False"
    assert one["trainer.n_gpus_per_node"] == "1" and one["actor_rollout_ref.model.path"].endswith("0.6B")


def test_preflight_one_line_errors(tmp_path):
    with pytest.raises(PreflightError, match="needs 8 CUDA GPU") as e:
        preflight("full", tmp_path, gpus_available=0, lean_ok=True)
    assert "\n" not in str(e.value)
    with pytest.raises(PreflightError, match="kimina-lean-server"):
        preflight("full", tmp_path, gpus_available=8, lean_ok=False)
    with pytest.raises(PreflightError, match="missing .*train.parquet"):
        preflight("full", tmp_path, gpus_available=8, lean_ok=True)
    prepare_data(tmp_path)
    preflight("full", tmp_path, gpus_available=8, lean_ok=True)


def test_parquet_rows(tmp_path):
    paths = prepare_data(tmp_path)
    df = pd.read_parquet(paths["train"])
    assert len(df) == len(PROBLEMS)
    row = df.iloc[0]
    assert list(row["prompt"][0].keys()) == ["role", "content"] and row["prompt"][1]["role"] == "user"
    assert row["reward_model"]["ground_truth"] == GROUND_TRUTH
    assert row["extra_info"]["formal_statement"].startswith("import Mathlib") and row["extra_info"]["index"]


def test_compute_score_through_the_standin(monkeypatch):
    from kimina_edu.verl import reward

    p = PROBLEMS[0]
    good = passing_response(p)
    with StandinServer({extract_proof(good, p["formal_statement"]): {"response": {"env": 0, "messages": []}}}) as url:
        monkeypatch.setenv("LEAN_SERVER_API_URL", url)
        reward.reset_verifier()
        info = to_verl_row(p, "train")["extra_info"]
        ok = reward.compute_score(p["data_source"], good, GROUND_TRUTH, info)
        bad = reward.compute_score(p["data_source"], good + "\n!", GROUND_TRUTH, info)
    reward.reset_verifier()
    assert (ok["score"], ok["acc"], ok["format_error"]) == (1.0, 1.0, "NONE")
    assert (bad["score"], bad["acc"], bad["format_error"]) == (0.0, 1.0, "NO_VALID_LEAN4_CODE_BLOCK")
    assert ok["tool_feedback"] == VALID_FEEDBACK and ok["pred"].startswith("import Mathlib")
    with pytest.raises(ValueError, match="formal_statement"):
        reward.compute_score(p["data_source"], good, GROUND_TRUTH, {})


class _Rows(SecondTurnMixin):
    def __init__(self, rows, multiturn=True):
        self.rows = rows
        self.init_second_turn({"multiturn": multiturn, "multiturn_sampling_rate": 0.5})

    def __getitem__(self, i):
        return self.mix({**self.rows[i], "raw_prompt": self.rows[i]["prompt"]})


def test_second_turn_mixing():
    ds = _Rows([to_verl_row(p, "train") for p in PROBLEMS])
    assert all(ds[i]["data_source"] != "multiturn" for i in range(20))  # empty cache: first turns only
    infos = [ds[i]["extra_info"] for i in range(4)]
    batch = SimpleNamespace(non_tensor_batch={
        "extra_info": np.array(infos, dtype=object), "response": np.array(["r"] * 4, dtype=object),
        "tool_feedback": np.array(["# Error 1: x", "# Error 1: y", VALID_FEEDBACK, "filtered proof."], dtype=object),
        "format_error": np.array(["NONE"] * 4, dtype=object)})
    assert ds.on_batch_end(batch) == {"added": 2, "valid": 1, "filtered": 1}
    items = [ds[i % len(PROBLEMS)] for i in range(400)]
    second = [it for it in items if it["data_source"] == "multiturn"]
    assert 0.4 < len(second) / len(items) < 0.6
    assert second[0]["raw_prompt"][-1]["content"].startswith("# Error 1:")
    assert second[0]["extra_info"]["prompt"] == second[0]["raw_prompt"]
    off = _Rows([to_verl_row(PROBLEMS[0], "train")], multiturn=False)
    off.on_batch_end(batch)
    assert len(off.second_turns) == 0 and off.format_errors["NONE"] == 4


def test_the_model_given_is_the_model_used_in_every_preset():
    for preset in PRESETS:
        rows = dict(recipe_overrides(preset, model="my-org/my-prover")).keys()
        assert "actor_rollout_ref.model.path=my-org/my-prover" in rows, preset
    assert "actor_rollout_ref.model.path=AI-MO/Kimina-Prover-Distill-0.6B" in dict(recipe_overrides("one_gpu"))
    assert "actor_rollout_ref.model.path=AI-MO/Kimina-Prover-Distill-1.7B" in dict(recipe_overrides("full"))
    assert "actor_rollout_ref.model.path=AI-MO/Kimina-Prover-Distill-0.6B" in dict(recipe_overrides("full", model="0.6B"))
    with pytest.raises(ValueError, match="model"):
        recipe_overrides("full", model="")
