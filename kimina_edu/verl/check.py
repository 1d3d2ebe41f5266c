"""``make verl-check``: prove on a CPU that the verl run is wired right (runs in ``.venv-verl``).

1. compose every preset's overrides against verl 0.9.1's own Hydra config — an unknown key,
   or a ``+key`` that already exists, fails composition;
2. aggregate one batch of per-token losses with verl's own ``core_algos.agg_loss`` in the recipe's
   mode (``seq-mean-token-sum-norm``, its ``loss_scale_factor``) and with chapter 2's ``dr_grpo``:
   chapter 8 restates verl's formula in the course's venv, this runs verl's function;
3. load the reward function the way verl does (``load_extern_object`` on the file path) and
   score a batch through the stand-in server;
4. write the parquet files and read them back with our ``SecondTurnRLDataset`` (verl's
   ``RLHFDataset`` subclass), then push one step's rollouts through ``on_batch_end`` and see
   second-turn prompts come back.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace


def _step(name: str, fn) -> bool:
    start = time.perf_counter()
    try:
        detail = fn()
    except Exception as exc:  # noqa: BLE001 — every failure is reported with its check's name
        print(f"FAIL  {name}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        return False
    print(f"ok    {name} ({time.perf_counter() - start:.1f}s){': ' + detail if detail else ''}")
    return True


def verl_config_dir() -> Path:
    import verl

    return Path(verl.__file__).parent / "trainer" / "config"


def compose(preset: str, **kwargs):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from kimina_edu.verl.recipe import overrides_list

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(verl_config_dir()), version_base=None):
        return hydra_compose(config_name="ppo_trainer", overrides=overrides_list(preset, **kwargs))


def check_compose() -> str:
    from kimina_edu.verl.recipe import PRESETS

    for preset in PRESETS:
        cfg = compose(preset)
        assert cfg.algorithm.norm_adv_by_std_in_grpo is False
        assert cfg.actor_rollout_ref.actor.loss_agg_mode == "seq-mean-token-sum-norm"
        assert cfg.reward.custom_reward_function.name == "compute_score"
    return f"{len(PRESETS)} presets, zero unknown keys"


def check_reward() -> str:
    from verl.utils.import_utils import load_extern_object

    from kimina_edu.lean.data import load_offline_problems
    from kimina_edu.lean.examples import passing_response
    from kimina_edu.lean.proof import extract_proof
    from kimina_edu.lean.standin import StandinServer
    from kimina_edu.verl import reward as reward_module
    from kimina_edu.verl.data import GROUND_TRUTH, to_verl_row

    cfg = compose("full")
    fn = load_extern_object(module_path=cfg.reward.custom_reward_function.path,
                            object_name=cfg.reward.custom_reward_function.name)
    problems = load_offline_problems()[:4]
    responses = [passing_response(p) for p in problems]
    responses[1] += "\ntrailing text"  # a format error
    script = {extract_proof(r, p["formal_statement"]): {"response": {"env": 0, "messages": []}}
              for r, p in zip(responses[:2], problems[:2])}
    with StandinServer(script) as url:
        reward_module.reset_verifier()
        import os

        os.environ["LEAN_SERVER_API_URL"] = url
        rows = [fn(data_source=p["data_source"], solution_str=r, ground_truth=GROUND_TRUTH,
                   extra_info=to_verl_row(p, "train")["extra_info"]) for p, r in zip(problems, responses)]
    scores = [r["score"] for r in rows]
    assert scores == [1.0, 0.0, 0.0, 0.0], scores
    assert [r["acc"] for r in rows] == [1.0, 1.0, 0.0, 0.0]
    assert {"score", "acc", "pred", "format_error", "tool_feedback"} <= set(rows[0])
    return f"scores {scores}, acc {[r['acc'] for r in rows]}"


def check_dr_grpo_matches_verl_agg_loss() -> str:
    import torch
    from verl.trainer.ppo.core_algos import agg_loss

    from kimina_edu.grpo import aggregate

    actor = compose("full").actor_rollout_ref.actor
    scale = int(actor.loss_scale_factor)
    g = torch.Generator().manual_seed(0)  # chapter 8's batch: six rows of 1 to 20 tokens
    per_token = torch.randn(6, 20, generator=g)
    mask = (torch.arange(20)[None] < torch.tensor([3, 20, 7, 12, 1, 9])[:, None]).float()
    theirs = agg_loss(per_token, mask, actor.loss_agg_mode, loss_scale_factor=scale)
    ours = aggregate(per_token, mask, "dr_grpo", max_len=scale)
    assert torch.allclose(theirs, ours, rtol=1e-5, atol=0.0), (float(theirs), float(ours))
    return f"verl agg_loss({actor.loss_agg_mode}, loss_scale_factor={scale}) {float(theirs):.6e} == dr_grpo {float(ours):.6e}"


def check_dataset() -> str:
    import numpy as np

    from kimina_edu.lean.feedback import VALID_FEEDBACK
    from kimina_edu.pocket import train_tokenizer
    from kimina_edu.verl.data import prepare_data
    from kimina_edu.verl.dataset import SecondTurnRLDataset

    tmp = Path(tempfile.mkdtemp())
    paths = prepare_data(tmp / "data")
    tok = train_tokenizer([Path(paths["train"]).read_bytes().decode("latin-1")[:200_000]], 512)
    cfg = compose("full", data_dir=tmp / "data")
    ds = SecondTurnRLDataset([str(paths["train"])], tok, cfg.data)
    first = ds[0]
    assert first["raw_prompt"][0]["role"] == "system" and "formal_statement" in first["extra_info"]
    n = 8
    infos = [ds[i]["extra_info"] for i in range(n)]
    batch = SimpleNamespace(non_tensor_batch={
        "extra_info": np.array(infos, dtype=object), "response": np.array(["attempt"] * n, dtype=object),
        "tool_feedback": np.array(["# Error 1:\nlinarith failed"] * (n - 1) + [VALID_FEEDBACK], dtype=object),
        "format_error": np.array(["NONE"] * n, dtype=object)})
    counts = ds.on_batch_end(batch)
    assert counts == {"added": n - 1, "valid": 1}, counts
    drawn = [ds[i % len(ds)]["data_source"] for i in range(200)]
    share = drawn.count("multiturn") / len(drawn)
    assert 0.35 < share < 0.65, share
    return f"{len(ds)} rows read by SecondTurnRLDataset; after one step {share:.0%} of items are second turns"


def main() -> int:
    start = time.perf_counter()
    checks = [("overrides compose against verl's Hydra config", check_compose),
              ("verl's own agg_loss equals chapter 2's dr_grpo", check_dr_grpo_matches_verl_agg_loss),
              ("reward loaded as verl loads it, scored through the stand-in", check_reward),
              ("parquet read back by verl's RLHFDataset subclass + on_batch_end", check_dataset)]
    results = [_step(name, fn) for name, fn in checks]
    print(f"{sum(results)} passed, {len(results) - sum(results)} failed ({time.perf_counter() - start:.0f}s)")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
