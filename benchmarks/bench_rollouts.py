"""Rollout generation as chapter 4 runs it (the SFT'd policy with a fresh LoRA, its sampler, 64 new
tokens): one batched call for B=8 questions × G=6 through ``TransformersBackend``, as the trainer
runs it, vs the article's loop of one transformers ``model.generate(num_return_sequences=G)`` per
question (goal: batched ≥ 3×); the same batched call with ``model.generate`` in place of
``kimina_edu.smalldecode`` (what the plain-torch decoder buys); and training tokens/s."""

import json
import os
import time

import torch

from kimina_edu import smalldecode
from kimina_edu.lora import lora_config
from kimina_edu.models import load_policy
from kimina_edu.rollouts import TransformersBackend, chat_prompt, encode_prompts, generate
from kimina_edu.sft import ensure_sft_adapter
from kimina_edu.tasks import SEEDS, make_entries
from kimina_edu.train_config import TrainConfig
from kimina_edu.trainer import GRPOTrainer

B, G = 8, 6
ROUNDS = 5  # generation calls timed per method
CFG = TrainConfig.cpu_pocket(steps=1)
SAMPLING = {"temperature": CFG.temperature, "top_p": CFG.top_p, "min_p": CFG.min_p}


def main():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    base, adapter = ensure_sft_adapter("pocket")
    model, tok = load_policy(base, adapter=adapter, lora=lora_config(), verbose=False)
    model.eval()  # as GRPOTrainer.collect_experience does: no LoRA dropout while sampling
    entries = make_entries("syllogism", B, SEEDS["rl"])
    prompts = [chat_prompt(tok, e["question"]) for e in entries]
    generate(model, tok, prompts[:2], max_new_tokens=8)  # warm-up

    backend = TransformersBackend()

    prompt_ids = encode_prompts(tok, prompts)

    def batched():  # what GRPOTrainer runs per step (one round per step here): merged-LoRA copy included
        backend.load_policy(model)
        return backend.generate(tok, prompt_ids, CFG.sampling()).completion_ids

    def per_question():  # the article's loop: transformers' generate(num_return_sequences=G) per question, LoRA unmerged
        out = []
        for ids in prompt_ids:
            with torch.no_grad():
                rows = model.generate(input_ids=torch.tensor([ids]), max_new_tokens=CFG.max_new_tokens, do_sample=True,
                                      num_return_sequences=G, pad_token_id=tok.pad_token_id, top_k=0, **SAMPLING)
            out += [[t for t in row if t != tok.pad_token_id] for row in rows[:, len(ids):].tolist()]
        return out

    def batched_generate():  # the batched call with transformers' model.generate as the sampler
        real = smalldecode.supported
        smalldecode.supported = lambda m: "this baseline samples with model.generate"
        try:
            return batched()
        finally:
            smalldecode.supported = real

    # rounds alternate between the two, so a machine that speeds up or slows down mid-run
    # (this 2-core box does, by 10-15% between runs) weighs on both alike
    methods = {"batched": batched, "per_question": per_question, "batched_generate": batched_generate}
    tokens, seconds = dict.fromkeys(methods, 0), dict.fromkeys(methods, 0.0)
    torch.manual_seed(0)
    for _ in range(ROUNDS):
        for name, fn in methods.items():
            start = time.perf_counter()
            tokens[name] += sum(len(c) for c in fn())
            seconds[name] += time.perf_counter() - start
    rates = {name: tokens[name] / seconds[name] for name in tokens}
    trainer = GRPOTrainer(model, tok, CFG, train_entries=make_entries("syllogism", 64, SEEDS["rl"]),
                          output_dir="runs/bench_rollouts", progress=False)
    buffer, _ = trainer.collect_experience()
    for r in buffer:  # make every rollout count for the timing
        r.advantage = r.advantage or 0.1
    train = trainer.learn(buffer)["train_tokens_per_s"]
    print(json.dumps({"benchmark": "rollouts", "figures": [
        {"figure": f"generation B={B} G={G} batched", "value": rates["batched"], "unit": "tok/s",
         "baseline": "per-question generate loop", "baseline_value": rates["per_question"],
         "ratio": rates["batched"] / rates["per_question"], "goal": ">= 3"},
        {"figure": "sampler: smalldecode vs model.generate", "value": rates["batched"], "unit": "tok/s",
         "baseline": "the batched call through model.generate", "baseline_value": rates["batched_generate"],
         "ratio": rates["batched"] / rates["batched_generate"], "goal": "info"},
        {"figure": "training (forward+backward) tokens/s", "value": train, "unit": "tok/s",
         "baseline": "batched generation tokens/s", "baseline_value": rates["batched"],
         "ratio": train / rates["batched"], "goal": "info"},
    ]}))


if __name__ == "__main__":
    main()
