"""One SmolLM2 arc on a CPU — a warm-up, GRPO, and the held-out gain paired over the same questions — for
trying warm-ups and GRPO settings (not part of `make bench`: tens of minutes a run).

    python benchmarks/arc_smollm2.py NAME [sft_KEY=VALUE ...] [n_eval=400] [KEY=VALUE ...]

``sft_KEY=VALUE`` overrides a field of ``SFTRecipe.preset("smollm2")`` (``sft_epochs=1``: a warm-up of one
epoch; ``sft_trace=derive``: traces that state what follows before the verdict; the adapter is cached by recipe); any other ``KEY=VALUE`` a field of ``TrainConfig.preset("smollm2")``.
Held-out greedy accuracy and format on ``n_eval`` questions before and after GRPO, the paired gain with its
95% interval (``record.paired_gain``), the share of answers that restate the claim right
(``tasks.claim_read_rate``), the share whose answer is the verdict their own trace states, the gain on the claim-balanced part (``tasks.claim_balanced``: where ignoring
the claim scores 50%); the per-step log in runs/arc/NAME/log.jsonl, the trained LoRA in runs/arc/NAME/policy,
a summary line at the end (also runs/arc/NAME/summary.json).
``KIMINA_EDU_PRECISION=fp32`` runs the fp32 path.

    python benchmarks/arc_smollm2.py --fresh NAME [n_eval=400]

evaluates run NAME's warm-up and its trained policy on the fresh draw (``tasks.fresh_draw``: questions no
chapter touches), paired, and adds the figures to its summary.json.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

from tune_chapter4 import _value  # run as a script from the repository: benchmarks/ is on the path

from kimina_edu.eval import evaluate_policy, scored
from kimina_edu.lora import lora_config
from kimina_edu.models import load_policy
from kimina_edu.record import paired_gain
from kimina_edu.rewards import extract_answer, format_reward
from kimina_edu.runtime import calibration_line
from kimina_edu.sft import SFTRecipe, ensure_sft_adapter
from kimina_edu.tasks import claim_balanced, claim_read_rate, fresh_draw, held_out
from kimina_edu.train_config import TrainConfig
from kimina_edu.trainer import GRPOTrainer


def answers_its_trace(completion: str) -> bool:
    """Whether the completion answers "Yes" after a trace ending "So the claim follows." (or "No" after "does not
    follow"): its answer read off its own reasoning, right or wrong."""
    think = completion.split("</think>")[0]
    said = "No" if "So the claim does not follow" in think else "Yes" if "So the claim follows" in think else None
    return said is not None and extract_answer(completion) == said


def main(name: str, *pairs: str) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args = {k: _value(v) for k, v in (p.split("=", 1) for p in pairs)}
    sft_args = {k.removeprefix("sft_"): args.pop(k) for k in list(args) if k.startswith("sft_")}
    n_eval = args.pop("n_eval", 400)
    print(calibration_line(), flush=True)
    start = time.perf_counter()
    base, adapter = ensure_sft_adapter("smollm2", recipe=SFTRecipe.preset("smollm2", **sft_args))
    entries = held_out("syllogism", n_eval)
    balanced = {id(e) for e in claim_balanced(entries)}

    def scores(model, tok):
        out = evaluate_policy(model, tok, entries, max_new_tokens=96, keep_completions=True, progress=False)
        return (scored(out["completions"], entries), sum(map(format_reward, out["completions"])) / len(entries), claim_read_rate(out["completions"], entries),
                sum(map(answers_its_trace, out["completions"])) / len(entries))

    cfg = TrainConfig.preset("smollm2", **args)
    model, tok = load_policy(base, adapter=adapter, lora=lora_config(), seed=cfg.seed, verbose=False)
    before, format_before, read_before, agree_before = scores(model, tok)
    print(f"warm-up: accuracy {sum(before) / n_eval:.3f}, format {format_before:.3f}, claim restated right {read_before:.3f}, "
          f"answer as the trace concludes {agree_before:.3f} ({time.perf_counter() - start:.0f} s)", flush=True)
    out = Path("runs/arc") / name
    shutil.rmtree(out, ignore_errors=True)
    trainer = GRPOTrainer(model, tok, cfg, output_dir=out, progress=False)
    print(trainer.path_line(), flush=True)
    grpo_start = time.perf_counter()

    def report(r):
        print(f"step {r['step']} {time.perf_counter() - grpo_start:.0f} s reward {r['reward_mean']:.2f} "
              f"correct {r['correct']:.2f} no-signal groups {r['frac_zero_std_groups']:.2f} "
              f"length {r['completion_length']:.0f} gap {r.get('mismatch_kl', float('nan')):.4f}", flush=True)

    log = trainer.train(report)
    grpo_seconds = time.perf_counter() - grpo_start
    model.save_pretrained(out / "policy")
    after, format_after, read_after, agree_after = scores(model, tok)
    on_balanced = [(b, a) for (b, a), e in zip(zip(before, after), entries) if id(e) in balanced]
    summary = {"name": name, "sft": sft_args, "config": args, "questions": n_eval,
               "before": sum(before) / n_eval, "after": sum(after) / n_eval,
               "gain_points": paired_gain(before, after), "format_before": format_before, "format_after": format_after,
               "claim_read_before": read_before, "claim_read_after": read_after,
               "answers_its_trace_before": agree_before, "answers_its_trace_after": agree_after,
               "balanced_questions": len(on_balanced),
               "balanced_gain_points": paired_gain([b for b, _ in on_balanced], [a for _, a in on_balanced]),
               "steps": len(log), "rollouts": len(log) * cfg.questions_per_batch * cfg.group_size,
               "grpo_seconds": round(grpo_seconds), "total_seconds": round(time.perf_counter() - start),
               "path": trainer.path_line()}
    (out / "summary.json").write_text(json.dumps(summary))
    print(json.dumps(summary), flush=True)


def fresh(name: str, *pairs: str) -> None:
    """Run ``name``'s warm-up and trained policy (runs/arc/NAME/policy) on the fresh draw: the gain, paired."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    n_eval = int(dict(p.split("=", 1) for p in pairs).get("n_eval", 400))
    out = Path("runs/arc") / name
    summary = json.loads((out / "summary.json").read_text())
    print(calibration_line(), flush=True)
    base, adapter = ensure_sft_adapter("smollm2", recipe=SFTRecipe.preset("smollm2", **summary["sft"]))
    model, tok = load_policy(base, adapter=adapter, lora=lora_config(), verbose=False)  # a zero LoRA: the warm-up
    entries = fresh_draw("syllogism", n_eval)

    def right() -> list[float]:
        return scored(evaluate_policy(model, tok, entries, max_new_tokens=96, keep_completions=True,
                                      progress=False)["completions"], entries)

    before = right()
    set_peft_model_state_dict(model, load_file(out / "policy" / "adapter_model.safetensors"))  # GRPO's adapter
    after = right()
    summary.update(fresh_questions=n_eval, fresh_before=sum(before) / n_eval, fresh_after=sum(after) / n_eval,
                   fresh_gain_points=paired_gain(before, after))
    (out / "summary.json").write_text(json.dumps(summary))
    print(json.dumps({k: v for k, v in summary.items() if k.startswith("fresh")}), flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--fresh"]:
        fresh(*sys.argv[2:])
    else:
        main(*sys.argv[1:])
