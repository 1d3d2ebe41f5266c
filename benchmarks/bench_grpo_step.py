"""One GRPO step (generation + scoring + update) ours vs TRL's GRPOTrainer on the same model,
batch and lengths (the course's speed goal: TRL/ours ≥ 3).

``--model smollm2``: the same figure at the real SmolLM2's size and chapter 4's CPU preset
(``TrainConfig.cpu_smollm2``: 8 × 6, 96 new tokens), where a step is matmuls, not Python — minutes a
step on 2 cores, so one timed step each after a warm-up; not part of `make bench`."""

import argparse
import json
import os
import tempfile
import time

from kimina_edu.lora import lora_config
from kimina_edu.models import load_policy
from kimina_edu.sft import ensure_sft_adapter
from kimina_edu.tasks import SEEDS, make_entries
from kimina_edu.train_config import TrainConfig
from kimina_edu.trainer import GRPOTrainer
from kimina_edu.trl_bridge import REWARD_FUNCS, build_dataset, grpo_config

STEPS = 4


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["pocket", "smollm2"], default="pocket")
    model_id = parser.parse_args().model
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    entries = make_entries("syllogism", 400, SEEDS["rl"])
    steps = STEPS if model_id == "pocket" else 1
    cfg = (TrainConfig.cpu_pocket(steps=steps, epochs=1, max_new_tokens=64) if model_id == "pocket"
           else TrainConfig.cpu_smollm2(steps=steps, guard_window=0, shift_every=0))
    base, adapter = ensure_sft_adapter(model_id)  # an SFT'd policy, so groups have reward variance and both update
    model, tok = load_policy(base, adapter=adapter, lora=lora_config(), verbose=False)
    ours = GRPOTrainer(model, tok, cfg, train_entries=entries, output_dir=tempfile.mkdtemp(), progress=False)
    ours.train_step()  # warm-up
    start = time.perf_counter()
    for _ in range(steps):
        ours.train_step()
    ours_s = (time.perf_counter() - start) / steps

    from trl import GRPOTrainer as TRLTrainer

    model, tok = load_policy(base, adapter=adapter, lora=lora_config(), verbose=False)
    args = grpo_config(cfg, tempfile.mkdtemp(), max_steps=steps + 1)
    trl = TRLTrainer(model=model, reward_funcs=REWARD_FUNCS, args=args, train_dataset=build_dataset(entries),
                     processing_class=tok)
    trl.train()
    times = [r["step_time"] for r in trl.state.log_history if "step_time" in r][1:]  # drop the warm-up step
    trl_s = sum(times) / max(len(times), 1)
    print(json.dumps({"benchmark": "grpo-step", "figures": [
        {"figure": f"one GRPO step, B={cfg.questions_per_batch} G={cfg.group_size}, {cfg.max_new_tokens} new tokens"
                   + ("" if model_id == "pocket" else ", SmolLM2"), "value": ours_s, "unit": "s",
         "baseline": "TRL GRPOTrainer, same work", "baseline_value": trl_s, "ratio": trl_s / ours_s,
         "goal": "TRL/ours >= 3"},
    ]}))


if __name__ == "__main__":
    main()
