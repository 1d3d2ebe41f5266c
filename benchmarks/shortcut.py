"""Why GRPO's gain on the pocket model depends on the seed: the premise-only shortcut.

A syllogism's verdict depends on the premises *and* the claim. A policy that reads only the
premises can still score up to ``tasks.premises_only_accuracy`` on the held-out split; GRPO from
an SFT'd model that rarely reads the claim right climbs to about there and stops once its samples
agree. Three measurements (results: benchmarks/README.md, "Chapter 4: how RL was made to work on a 1 M-parameter model";
benchmarks/LOG.md, 2026-12-01):

    python -m benchmarks.shortcut reading                 # the ceiling; how often the base model restates the claim
    python -m benchmarks.shortcut reading --pocket-steps 1200   # the same for a pocket model pretrained longer (built, cached)
    python -m benchmarks.shortcut sft-curve --seed 0      # held-out and dev accuracy after each SFT epoch (saves each adapter)
    python -m benchmarks.shortcut grpo --seed 0 --adapter DIR --set epochs=2   # GRPO from any saved adapter

Each prints one JSON line per result and appends it to ``--out`` (default runs/shortcut.jsonl).
Run with one thread per process (``OMP_NUM_THREADS=1``), two side by side on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def reading(pocket_steps: int | None = None) -> dict:
    """The shortcut's ceiling, and how often the base model restates the claim when asked to restate:
    the shipped one, or one pretrained for ``pocket_steps`` steps (built into the cache if missing)."""
    from kimina_edu.models import base_model_path, load_policy
    from kimina_edu.pocket import RESTATE_PROMPT, PocketRecipe
    from kimina_edu.rewards import chat_messages
    from kimina_edu.rollouts import generate
    from kimina_edu.tasks import (
        SEEDS,
        claim_read_rate,
        held_out,
        make_entries,
        premises_only_accuracy,
        restatement,
    )

    test, rl = held_out(), make_entries("syllogism", 5000, SEEDS["rl"])
    recipe = PocketRecipe(pretrain_steps=pocket_steps) if pocket_steps else PocketRecipe()
    model, tok = load_policy(base_model_path("pocket", recipe), verbose=False)
    prompts = [tok.apply_chat_template(chat_messages(e["question"], system=RESTATE_PROMPT), tokenize=False,
                                       add_generation_prompt=True) for e in test]
    texts = []
    for i in range(0, len(prompts), 100):
        texts += tok.batch_decode(generate(model, tok, prompts[i : i + 100], max_new_tokens=48)[1], skip_special_tokens=True)
    n = len(test)
    return {"what": "reading", "pretrain_steps": recipe.pretrain_steps, "premises_only_accuracy": premises_only_accuracy(test, rl),
            "base_restates_claim": claim_read_rate(texts, test),
            "base_restates_all": sum(t.strip() == restatement(e) for t, e in zip(texts, test)) / n}


def sft_curve(seed: int, out_dir: Path, last_epoch: int) -> list[dict]:
    """The preset's SFT (its schedule, no early stop) for ``seed``; after each epoch from 4 to
    ``last_epoch``: greedy held-out (400) and dev (600; the preset's check uses its first 200)."""
    from transformers import TrainerCallback

    from kimina_edu.eval import evaluate_policy
    from kimina_edu.lora import lora_config
    from kimina_edu.models import base_model_path
    from kimina_edu.sft import SFTRecipe, make_sft_examples, sft_train
    from kimina_edu.tasks import dev_split, held_out, make_entries

    recipe = SFTRecipe.preset("pocket", seed=seed)
    examples, _ = make_sft_examples(make_entries(recipe.task, recipe.n_examples, recipe.data_seed))
    test, dev = held_out(), dev_split("syllogism", 600)
    rows: list[dict] = []

    class Curve(TrainerCallback):
        def on_epoch_end(self, args, state, control, model=None, processing_class=None, **_):
            epoch = round(state.epoch or 0)
            if epoch < 4:
                return control
            tok, side = processing_class, processing_class.padding_side
            tok.padding_side = "left"
            model.eval()

            def acc(entries):  # greedy, chapter 3's 96 tokens
                return evaluate_policy(model, tok, entries, max_new_tokens=96, progress=False)["accuracy"]

            dev200, dev_rest = acc(dev[:200]), acc(dev[200:])  # the preset's check is the first 200
            row = {"what": "sft-curve", "seed": seed, "epoch": epoch, "held_out": acc(test),
                   "dev600": (200 * dev200 + (len(dev) - 200) * dev_rest) / len(dev), "dev200": dev200}
            tok.padding_side = side
            model.train()
            model.save_pretrained(out_dir / f"seed{seed}-epoch{epoch}")
            rows.append(row)
            print(json.dumps(row), flush=True)
            control.should_training_stop = epoch >= last_epoch
            return control

    class Every:  # sft_train's `stop` hook takes any object with a callback()
        def callback(self):
            return Curve()

    sft_train(base_model_path("pocket"), examples, output_dir=out_dir / f"work-{seed}", epochs=recipe.epochs,
              lr=recipe.lr, batch_size=recipe.batch_size, seed=seed,
              lora=lora_config(r=recipe.lora_r, alpha=recipe.lora_alpha), stop=Every())
    return rows


def grpo(seed: int, adapter: str, sets: dict, eval_every: int) -> dict:
    """Chapter 4's GRPO (the preset, ``sets`` on top) from ``adapter``; held-out accuracy every ``eval_every`` steps."""
    import tempfile

    from kimina_edu.eval import evaluate_policy
    from kimina_edu.lora import lora_config
    from kimina_edu.models import base_model_path, load_policy
    from kimina_edu.tasks import SEEDS, held_out, make_entries
    from kimina_edu.train_config import TrainConfig
    from kimina_edu.trainer import GRPOTrainer

    cfg = TrainConfig.preset("pocket", seed=seed, eval_every=0, **sets)
    test = held_out(cfg.task, 400)
    model, tok = load_policy(base_model_path("pocket"), adapter=adapter, lora=lora_config(), seed=seed, verbose=False)
    before = evaluate_policy(model, tok, test, max_new_tokens=cfg.max_new_tokens, progress=False)["accuracy"]
    curve = []

    def look(row):
        if eval_every and row["step"] % eval_every == 0:
            curve.append((row["step"], evaluate_policy(model, tok, test, max_new_tokens=cfg.max_new_tokens,
                                                       progress=False)["accuracy"]))

    with tempfile.TemporaryDirectory() as tmp:
        trainer = GRPOTrainer(model, tok, cfg, train_entries=make_entries(cfg.task, 5000, SEEDS["rl"]),
                              output_dir=tmp, progress=False)
        start = time.perf_counter()
        log = trainer.train(on_step=look)
        seconds = time.perf_counter() - start
    after = evaluate_policy(model, tok, test, max_new_tokens=cfg.max_new_tokens, progress=False)["accuracy"]
    return {"what": "grpo", "seed": seed, "adapter": adapter, "set": sets, "before": before, "after": after,
            "steps": len(log), "skipped": sum(1 for r in log if r.get("skipped")), "seconds": round(seconds),
            "curve": curve}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["reading", "sft-curve", "grpo"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pocket-steps", type=int, help="reading: a pocket model pretrained this many steps")
    parser.add_argument("--last-epoch", type=int, default=10)
    parser.add_argument("--adapters", default="/tmp/kimina-sft-curve", help="sft-curve: where each epoch's adapter goes")
    parser.add_argument("--adapter", help="grpo: the SFT adapter to start from")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="grpo: TrainConfig fields")
    parser.add_argument("--eval-every", type=int, default=0)
    parser.add_argument("--out", default=str(REPO / "runs" / "shortcut.jsonl"))
    args = parser.parse_args(argv)
    if args.what == "reading":
        rows = [reading(args.pocket_steps)]
    elif args.what == "sft-curve":
        rows = sft_curve(args.seed, Path(args.adapters), args.last_epoch)
    else:
        if not args.adapter:
            parser.error("grpo needs --adapter")
        sets = {k: json.loads(v) for k, v in (item.split("=", 1) for item in args.set)}
        rows = [grpo(args.seed, args.adapter, sets, args.eval_every)]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "a") as f:
        f.writelines(json.dumps(row) + "\n" for row in rows)
    if args.what != "sft-curve":
        print(json.dumps(rows[0]))


if __name__ == "__main__":
    main()
