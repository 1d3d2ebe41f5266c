"""The tuning runs behind benchmarks/README.md's chapter-4 table (not part of `make bench`: minutes
per run). For the same comparison over seeds, use `benchmarks/robustness.py --set grpo.KEY=VALUE`.

One GRPO run from a cached SFT adapter, held-out greedy accuracy (the chapter's questions: 400 for the
pocket model, 200 for SmolLM2) before and every ``eval_every`` steps, the per-step log in
runs/tune/<name>/log.jsonl, one line per step and a summary line at the end (also summary.json):

    python benchmarks/tune_chapter4.py f2 sft_epochs=8 lr=2e-4 min_p=0.1 steps=300 seed=0
    python benchmarks/tune_chapter4.py s1 model=smollm2 sft_seed=1 seed=1 before=0.765 lr=2e-5

Any ``TrainConfig`` field can be set as key=value on top of ``TrainConfig.preset(model)``;
``sft_epochs`` and ``sft_seed`` pick the chapter-3 warm-up (cached by recipe, trained when missing);
``pool=claim_balanced`` trains on the RL questions subsampled so that, within every pair of premises,
"Yes" and "No" are equally common (:func:`claim_balanced`: ignoring the claim scores 50% there);
``before=<accuracy>`` skips the evaluation before training (chapter 3's figure, when its evaluation
length equals the preset's ``max_new_tokens``, as SmolLM2's does).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import torch

from kimina_edu.eval import eval_questions
from kimina_edu.lora import lora_config
from kimina_edu.models import load_policy
from kimina_edu.sft import SFTRecipe, ensure_sft_adapter
from kimina_edu.tasks import claim_balanced, held_out
from kimina_edu.train_config import TrainConfig
from kimina_edu.trainer import GRPOTrainer


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
    model_id, before = args.pop("model", "pocket"), args.pop("before", None)
    pool = args.pop("pool", None)
    sft = SFTRecipe.preset(model_id, epochs=args.pop("sft_epochs", None), seed=args.pop("sft_seed", None))
    base, adapter = ensure_sft_adapter(model_id, recipe=sft)
    cfg = TrainConfig.preset(model_id, **args)
    model, tok = load_policy(base, adapter=adapter, lora=lora_config(), seed=cfg.seed, verbose=False)
    out = f"runs/tune/{name}"
    shutil.rmtree(out, ignore_errors=True)
    if pool not in (None, "claim_balanced"):
        raise SystemExit(f"pool={pool!r}: only pool=claim_balanced is known")
    trainer = GRPOTrainer(model, tok, cfg, eval_entries=held_out(cfg.task, eval_questions(model_id)), output_dir=out,
                          progress=False)
    if pool == "claim_balanced":  # the trainer's own RL questions, subsampled (before its first draw)
        trainer.train_entries = claim_balanced(trainer.train_entries)
    before = trainer.evaluate()["eval_accuracy"] if before is None else before
    start = time.perf_counter()

    def report(row):
        print(f"step {row['step']:4d}  {time.perf_counter() - start:6.0f} s  reward {row['reward_mean']:.2f}  "
              f"correct {row['correct']:.2f}  length {row['completion_length']:.0f}"
              + (f"  held-out accuracy {row['eval_accuracy']:.4f}" if "eval_accuracy" in row else ""), flush=True)

    log = trainer.train(report)
    seconds = time.perf_counter() - start
    last = trainer.evaluate()["eval_accuracy"] if "eval_accuracy" not in log[-1] else log[-1]["eval_accuracy"]
    evals = [r["eval_accuracy"] for r in log if "eval_accuracy" in r] + [last]
    summary = {"name": name, "model": model_id, "sft_seed": sft.seed, "sft_epochs": sft.epochs, "config": args, "pool": pool,
               "pool_size": len(trainer.train_entries),
               "before": before, "last": last, "gain": last - before, "best": max(evals),
               "skipped_steps": sum(1 for r in log if r.get("skipped")), "steps": len(log),
               "guard_stopped": getattr(trainer, "guard_stopped", None), "grpo_seconds": round(seconds),
               "total_seconds": round(time.perf_counter() - start), "threads": torch.get_num_threads()}
    Path(out, "summary.json").write_text(json.dumps(summary))
    print(json.dumps(summary))


if __name__ == "__main__":
    main(*sys.argv[1:])
