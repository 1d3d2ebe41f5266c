"""Rollout generation: one batched generate call for B=8 questions × G=6 vs the article's loop of
one generate(num_return_sequences=G) per question (goal: batched ≥ 3×); and training tokens/s."""

import json
import os
import time

import torch

from kimina_edu.models import PocketRecipe, chat_prompt, generate, load_policy, lora_config
from kimina_edu.tasks import SEEDS, make_entries
from kimina_edu.trainer import GRPOTrainer, TrainConfig

B, G, NEW = 8, 6, 96


def main():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    model, tok = load_policy("pocket", recipe=PocketRecipe(), lora=lora_config(), verbose=False)
    entries = make_entries("syllogism", B, SEEDS["rl"])
    prompts = [chat_prompt(tok, e["question"]) for e in entries]
    generate(model, tok, prompts[:2], max_new_tokens=8)  # warm-up

    def batched():
        return generate(model, tok, prompts, max_new_tokens=NEW, temperature=0.7, top_p=0.95, num_return_sequences=G)[1]

    def per_question():
        return [c for p in prompts for c in generate(model, tok, [p], max_new_tokens=NEW, temperature=0.7, top_p=0.95,
                                                      num_return_sequences=G)[1]]

    rates = {}
    for name, fn in (("batched", batched), ("per_question", per_question)):
        torch.manual_seed(0)
        start = time.perf_counter()
        tokens = sum(len(c) for _ in range(3) for c in fn())
        rates[name] = tokens / (time.perf_counter() - start)
    cfg = TrainConfig.cpu_pocket(steps=1, max_new_tokens=NEW)
    trainer = GRPOTrainer(model, tok, cfg, train_entries=make_entries("syllogism", 64, SEEDS["rl"]),
                          output_dir="runs/bench_rollouts", progress=False)
    buffer, _ = trainer.collect_experience()
    for r in buffer:  # make every rollout count for the timing
        r.advantage = r.advantage or 0.1
    train = trainer.learn(buffer)["train_tokens_per_s"]
    print(json.dumps({"benchmark": "rollouts", "figures": [
        {"figure": f"generation B={B} G={G} batched", "value": rates["batched"], "unit": "tok/s",
         "baseline": "per-question generate loop", "baseline_value": rates["per_question"],
         "ratio": rates["batched"] / rates["per_question"], "goal": ">= 3"},
        {"figure": "training (forward+backward) tokens/s", "value": train, "unit": "tok/s",
         "baseline": "batched generation tokens/s", "baseline_value": rates["batched"],
         "ratio": train / rates["batched"], "goal": "info"},
    ]}))


if __name__ == "__main__":
    main()
