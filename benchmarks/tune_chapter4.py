"""The tuning runs behind benchmarks/README.md's chapter-4 table (not part of `make bench`: minutes
per run). For the same comparison over seeds, use `benchmarks/robustness.py --set grpo.KEY=VALUE`.

One GRPO run from a cached SFT adapter, held-out greedy accuracy (400 questions) before and every
25 steps, the per-step log in runs/tune/<name>/log.jsonl, one summary line at the end:

    python benchmarks/tune_chapter4.py f2 sft_epochs=8 lr=2e-4 min_p=0.1 steps=300 seed=0

Any ``TrainConfig`` field can be set as key=value on top of ``TrainConfig.preset("pocket")``;
``sft_epochs`` and ``sft_seed`` pick the chapter-3 warm-up (cached by recipe, trained when missing).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time

import torch

from kimina_edu.lora import lora_config
from kimina_edu.models import load_policy
from kimina_edu.sft import SFTRecipe, ensure_sft_adapter
from kimina_edu.tasks import held_out
from kimina_edu.trainer import GRPOTrainer, TrainConfig


def _value(text: str):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def main(name: str, *pairs: str) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(int(os.environ.get("THREADS", torch.get_num_threads())))
    args = {k: _value(v) for k, v in (p.split("=", 1) for p in pairs)}
    sft = SFTRecipe.preset("pocket", epochs=args.pop("sft_epochs", None), seed=args.pop("sft_seed", None))
    base, adapter = ensure_sft_adapter("pocket", recipe=sft)
    model, tok = load_policy(base, adapter=adapter, lora=lora_config(), verbose=False)
    cfg = TrainConfig.preset("pocket", **args)
    out = f"runs/tune/{name}"
    shutil.rmtree(out, ignore_errors=True)
    trainer = GRPOTrainer(model, tok, cfg, eval_entries=held_out(), output_dir=out, progress=False)
    before = trainer.evaluate()["eval_accuracy"]

    def report(row):
        if "eval_accuracy" in row:
            print(f"step {row['step']:4d}  held-out accuracy {row['eval_accuracy']:.4f}", flush=True)

    start = time.perf_counter()
    log = trainer.train(report)
    evals = [r["eval_accuracy"] for r in log if "eval_accuracy" in r]
    print(json.dumps({"name": name, "sft_epochs": sft.epochs, "config": args, "before": before, "last": evals[-1],
                      "best": max(evals), "skipped_steps": sum(1 for r in log if r.get("skipped")),
                      "steps": len(log), "seconds": round(time.perf_counter() - start)}))


if __name__ == "__main__":
    main(*sys.argv[1:])
