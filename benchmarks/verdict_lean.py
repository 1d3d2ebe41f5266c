"""Which way a SmolLM2 policy's verdicts lean, before and after GRPO, for runs already recorded.

    python -m benchmarks.verdict_lean RUN [RUN ...] [--threads 1]

RUN is a folder with a ``policy.json`` (``make robustness``'s ``seedS-tT``) or a chapter 4 folder whose
``metrics.json`` has ``"policy"``: ``{"base", "adapters": [warm-up, GRPO's]}`` (``models.save_policy``). For
each, the warm-up (the base with its adapter merged) and the trained policy are evaluated greedily on the
400 held-out questions at chapter 4's 96 tokens, and :func:`kimina_edu.tasks.verdict_balance` says how often
each verdict was given and how often each answer's questions were right. An evaluation the course cache
already holds is read back (the same weights, questions, settings and thread count: ``--threads`` as the run
had). Rows written by ``benchmarks.robustness`` since this script exists carry the same figures
(``verdicts_sft``, ``verdicts_after``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch


def policy_spec(run: Path) -> dict:
    if (run / "policy.json").exists():
        return json.loads((run / "policy.json").read_text())
    metrics = json.loads((run / "metrics.json").read_text())
    if "policy" not in metrics:
        raise SystemExit(f"{run}: its metrics.json has no \"policy\" (a chapter 4 run from before it was kept)")
    return metrics["policy"]


def lean(run: Path) -> dict:
    from kimina_edu.eval import evaluate_policy, scored
    from kimina_edu.lora import lora_config
    from kimina_edu.models import load_policy
    from kimina_edu.record import paired_gain
    from kimina_edu.tasks import held_out, verdict_balance
    from kimina_edu.train_config import TrainConfig

    spec = policy_spec(run)
    *merged, trained = spec["adapters"]
    if len(merged) != 1:
        raise SystemExit(f"{run}: expected a warm-up adapter then GRPO's, got {spec['adapters']}")
    entries, tokens = held_out(), TrainConfig.preset("smollm2").max_new_tokens
    out: dict = {"run": str(run)}
    right: dict = {}
    for name, kw in (("sft", {}), ("after", {"lora": lora_config()})):
        model, tok = load_policy(spec["base"], adapter=merged[0], verbose=False, **kw)
        if name == "after":  # GRPO's adapter on top of the merged warm-up, as chapter 4 trained it
            from peft import set_peft_model_state_dict
            from safetensors.torch import load_file

            set_peft_model_state_dict(model, load_file(str(Path(trained) / "adapter_model.safetensors")))
        r = evaluate_policy(model, tok, entries, max_new_tokens=tokens, progress=False, keep_completions=True)
        out[f"accuracy_{name}"] = r["accuracy"]
        out[f"verdicts_{name}"] = verdict_balance(r["completions"], entries)
        right[name] = scored(r["completions"], entries)
    out["gain_paired"] = list(paired_gain(right["sft"], right["after"]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--threads", type=int, default=1, help="the thread count the run evaluated with (default 1)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for run in args.runs:
        row = lean(run)
        parts = []
        for name in ("sft", "after"):
            v = row[f"verdicts_{name}"]
            parts.append(f"{name}: {row[f'accuracy_{name}']:.2%}, 'Yes' {v['answered'].get('Yes', 0):.2%} of answers, right on "
                         f"{v['right_when']['Yes']:.1%} 'Yes' / {v['right_when']['No']:.1%} 'No' questions")
        g, lo, hi = row["gain_paired"]
        print(f"{run}: " + " → ".join(parts) + f"; gain {g:+.2f} [{lo:+.1f}, {hi:+.1f}]")
        print(json.dumps(row))


if __name__ == "__main__":
    main()
