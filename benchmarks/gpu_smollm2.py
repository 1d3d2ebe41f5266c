"""Chapters 3 → 4 on the real SmolLM2-135M-Instruct at the GPU preset, in one run: the zero-shot look,
the LoRA SFT warm-up, GRPO — held-out accuracy after each, beside the article's SmolLM-135M figures
(46% after SFT, 60% after RL).

The course's own code throughout (``smollm2_path``, ``ensure_sft_adapter``, ``load_policy``,
``GRPOTrainer`` with ``TrainConfig.preset("smollm2", device="cuda")``); nothing here is a second
implementation. GRPO runs step by step until its preset's steps or the time budget, whichever comes
first, and the results file is rewritten after every phase, so a run cut short still reports what it
measured. With time left after the first seed, the next seed runs (SFT and GRPO).

    python -m benchmarks.gpu_smollm2 --device cuda --budget 420 --out runs/gpu_smollm2
    python -m benchmarks.gpu_smollm2 --device cpu --tiny          # the same path in minutes on a CPU

``--tiny``: 16 held-out questions, 8 SFT examples × 1 epoch, 2 GRPO steps of 2 × 2 completions of 16
tokens — a check that the path runs, not a measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

ARTICLE = {"sft": 0.46, "grpo": 0.60}  # SmolLM-135M-Instruct on syllogisms, the source article


def calibration(device: str) -> dict:
    """This machine's matmul rate, printed beside every timing (bf16 on a GPU, fp32 on a CPU)."""
    import torch

    if not device.startswith("cuda"):
        from kimina_edu.runtime import cpu_calibration

        return cpu_calibration()
    n = 8192
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(10):
        a @ b
    torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / 10
    return {"device": torch.cuda.get_device_name(0), "bf16_tflops": round(2 * n**3 / seconds / 1e12, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--budget", type=float, default=420.0, help="seconds for everything after the imports")
    ap.add_argument("--out", default="runs/gpu_smollm2")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="TrainConfig overrides")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()

    import torch

    from kimina_edu.eval import eval_questions, evaluate_policy
    from kimina_edu.lora import lora_config
    from kimina_edu.models import load_policy
    from kimina_edu.runtime import package_versions, resolve_device
    from kimina_edu.sft import SFTRecipe, ensure_sft_adapter
    from kimina_edu.smollm2 import smollm2_path
    from kimina_edu.tasks import held_out
    from kimina_edu.train_config import TrainConfig
    from kimina_edu.trainer import GRPOTrainer

    device = resolve_device(args.device)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sets = {k: json.loads(v) if v[:1].isdigit() or v in ("true", "false") else v
            for k, v in (s.split("=", 1) for s in args.set)}
    result: dict = {"device": device, "versions": package_versions(["torch", "transformers", "peft", "trl"]),
                    "article": ARTICLE, "calibration": calibration(device), "seeds": []}

    def save() -> None:
        result["seconds"] = round(time.perf_counter() - start, 1)
        (out / "gpu_smollm2.json").write_text(json.dumps(result, indent=1))

    def left() -> float:
        return args.budget - (time.perf_counter() - start)

    print(f"{device}: {result['calibration']}; {result['versions']}", flush=True)
    t = time.perf_counter()
    base = str(smollm2_path(progress=False))
    result["convert_seconds"] = round(time.perf_counter() - t, 1)
    n_eval = 16 if args.tiny else eval_questions("smollm2")
    questions = held_out("syllogism", n_eval)
    tiny_cfg = dict(steps=2, eval_every=0, questions_per_batch=2, group_size=2, max_new_tokens=16, buffer_size=4,
                    minibatch_size=4, grad_accum=1) if args.tiny else {}

    def look(model, tok, cfg: TrainConfig) -> dict:
        t = time.perf_counter()
        r = evaluate_policy(model, tok, questions, max_new_tokens=cfg.max_new_tokens, progress=False)
        return {"accuracy": r["accuracy"], "format_rate": r["format_rate"], "mean_length": round(r["mean_length"], 1),
                "seconds": round(time.perf_counter() - t, 1), "sample": r["samples"][0]["completion"][:300]}

    for i, seed in enumerate(args.seeds):
        if i and left() < 0.9 * result["seeds"][0].get("seconds", 1e9):
            print(f"seed {seed} not run: {left():.0f} s left, seed {args.seeds[0]} took "
                  f"{result['seeds'][0]['seconds']:.0f} s", flush=True)
            break
        row: dict = {"seed": seed}
        result["seeds"].append(row)
        seed_start = time.perf_counter()
        cfg = TrainConfig.preset("smollm2", device=device, seed=seed, **{**tiny_cfg, **sets})
        row["config"] = {k: getattr(cfg, k) for k in ("steps", "questions_per_batch", "group_size", "max_new_tokens",
                                                      "lr", "buffer_size", "minibatch_size", "grad_accum")}
        try:
            if i == 0:  # the zero-shot look: what the raw model writes (once; it has no seed)
                model, tok = load_policy(base, device=device, verbose=False)
                row["zero_shot"] = look(model, tok, cfg)
                print(f"zero-shot: accuracy {row['zero_shot']['accuracy']:.1%}, format "
                      f"{row['zero_shot']['format_rate']:.1%} ({row['zero_shot']['seconds']} s): "
                      f"{row['zero_shot']['sample'][:120]!r}", flush=True)
                del model
                save()
            recipe = SFTRecipe.preset("smollm2", seed=seed, **({"n_examples": 8, "epochs": 1} if args.tiny else {}))
            t = time.perf_counter()
            _, adapter = ensure_sft_adapter("smollm2", recipe=recipe, device=device)
            row["sft_seconds"] = round(time.perf_counter() - t, 1)
            model, tok = load_policy(base, device=device, adapter=adapter, lora=lora_config(), seed=seed, verbose=False)
            row["sft"] = look(model, tok, cfg)
            print(f"seed {seed}: SFT {row['sft_seconds']} s → accuracy {row['sft']['accuracy']:.1%}, format "
                  f"{row['sft']['format_rate']:.1%} (article: {ARTICLE['sft']:.0%})", flush=True)
            save()
            trainer = GRPOTrainer(model, tok, cfg, eval_entries=questions, output_dir=out / f"grpo_seed{seed}",
                                  progress=False)
            t, curve = time.perf_counter(), [(0, row["sft"]["accuracy"])]
            reserve = 2.5 * row["sft"]["seconds"] + 5  # the final evaluation must still fit
            while trainer.step < cfg.steps and left() > reserve:
                r = trainer.train_step()
                if "eval_accuracy" in r:
                    curve.append((r["step"], r["eval_accuracy"]))
                print(f"  step {r['step']:3d} {time.perf_counter() - t:5.0f} s  reward {r['reward_mean']:.2f}  "
                      f"correct {r['correct']:.2f}  length {r['completion_length']:.0f}  "
                      f"no-signal groups {r['frac_zero_std_groups']:.2f}"
                      + (f"  held-out {r['eval_accuracy']:.1%}" if "eval_accuracy" in r else ""), flush=True)
                if trainer.collapsed():
                    break
            row["grpo_steps"], row["grpo_seconds"] = trainer.step, round(time.perf_counter() - t, 1)
            row["guard_stopped"] = getattr(trainer, "guard_stopped", None)
            if curve[-1][0] != trainer.step or row["guard_stopped"]:
                final = look(model, tok, cfg)
                curve.append((trainer.step, final["accuracy"]))
            row["curve"] = curve
            row["grpo"] = {"accuracy": curve[-1][1], "gain_points": round(100 * (curve[-1][1] - curve[0][1]), 1)}
            print(f"seed {seed}: GRPO {trainer.step} steps, {row['grpo_seconds']} s → accuracy "
                  f"{row['grpo']['accuracy']:.1%} ({row['grpo']['gain_points']:+.1f} points; article: "
                  f"{ARTICLE['sft']:.0%} → {ARTICLE['grpo']:.0%}); curve {curve}", flush=True)
            del model, trainer
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
        except Exception as exc:  # noqa: BLE001 — report what broke and keep what was measured
            row["error"] = f"{type(exc).__name__}: {exc}"
            traceback.print_exc()
        row["seconds"] = round(time.perf_counter() - seed_start, 1)
        save()
        if "error" in row:
            break
    save()
    print(json.dumps({k: v for k, v in result.items() if k != "seeds"}), flush=True)
    return 1 if any("error" in r for r in result["seeds"]) else 0


if __name__ == "__main__":
    sys.exit(main())
