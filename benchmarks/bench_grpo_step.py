"""One GRPO step (generation + scoring + update) ours vs TRL's GRPOTrainer on the same model,
batch and lengths (goal, issue 26: TRL/ours ≥ 3)."""

import json
import os
import tempfile
import time

from kimina_edu.lora import lora_config
from kimina_edu.models import load_policy
from kimina_edu.sft import ensure_sft_adapter
from kimina_edu.tasks import SEEDS, make_entries
from kimina_edu.trainer import GRPOTrainer, TrainConfig
from kimina_edu.trl_bridge import REWARD_FUNCS, build_dataset, grpo_config

STEPS = 4


def main():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    entries = make_entries("syllogism", 400, SEEDS["rl"])
    cfg = TrainConfig.cpu_pocket(steps=STEPS, epochs=1, max_new_tokens=64)
    base, adapter = ensure_sft_adapter("pocket")  # an SFT'd policy, so groups have reward variance and both update
    model, tok = load_policy(base, adapter=adapter, lora=lora_config(), verbose=False)
    ours = GRPOTrainer(model, tok, cfg, train_entries=entries, output_dir=tempfile.mkdtemp(), progress=False)
    ours.train_step()  # warm-up
    start = time.perf_counter()
    for _ in range(STEPS):
        ours.train_step()
    ours_s = (time.perf_counter() - start) / STEPS

    from trl import GRPOTrainer as TRLTrainer

    model, tok = load_policy(base, adapter=adapter, lora=lora_config(), verbose=False)
    args = grpo_config(cfg, tempfile.mkdtemp(), max_steps=STEPS + 1)
    trl = TRLTrainer(model=model, reward_funcs=REWARD_FUNCS, args=args, train_dataset=build_dataset(entries),
                     processing_class=tok)
    trl.train()
    times = [r["step_time"] for r in trl.state.log_history if "step_time" in r][1:]  # drop the warm-up step
    trl_s = sum(times) / max(len(times), 1)
    print(json.dumps({"benchmark": "grpo-step", "figures": [
        {"figure": "one GRPO step, B=8 G=6, 64 new tokens", "value": ours_s, "unit": "s",
         "baseline": "TRL GRPOTrainer, same work", "baseline_value": trl_s, "ratio": trl_s / ours_s,
         "goal": "TRL/ours >= 3"},
    ]}))


if __name__ == "__main__":
    main()
