"""Peak memory of one GRPO learning minibatch at SmolLM-135M size: a plain log-prob implementation
(right padding, a full fp32 log-softmax over every position) against ``completion_logprobs`` now
(completion positions only, blockwise logsumexp).

Random weights with SmolLM-135M-Instruct's exact shape (``--model qwen3``: Qwen3-0.6B's; configs in
``bench_real_size.py``), the article's LoRA (r=32 on every projection), the article's sequence
shape: a ~109-token prompt and 300 completion tokens. Each variant runs in a fresh process and reports its peak resident memory
during the minibatch above what the process held once the model and batch were built
(``bench_real_size.peak_meter``).

    python benchmarks/bench_logprob_memory.py [--model smollm|qwen3] [--minibatch 4]
                                              [--prompt 109] [--completion 300]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def child(variant: str, key: str, minibatch: int, prompt: int, completion: int) -> dict:
    """One learning minibatch as ``GRPOTrainer._minibatch_backward`` runs it, in this process."""
    import torch
    import transformers
    from peft import get_peft_model

    sys.path.insert(0, str(HERE))
    from bench_real_size import MODELS, peak_meter

    from kimina_edu.grpo import policy_loss
    from kimina_edu.logprobs import Rollout, completion_logprobs
    from kimina_edu.logprobs import reference_completion_logprobs as plain_completion_logprobs
    from kimina_edu.lora import lora_config

    _, config_cls, cfg = MODELS[key]
    torch.manual_seed(0)
    config = getattr(transformers, config_cls)(**cfg)
    model = get_peft_model(transformers.AutoModelForCausalLM.from_config(config), lora_config()).train()
    vocab = cfg["vocab_size"]
    g = torch.Generator().manual_seed(0)
    rollouts = [Rollout(torch.randint(3, vocab, (prompt - i % 7,), generator=g).tolist(),
                        torch.randint(3, vocab, (completion - (i % 3) * 20,), generator=g).tolist(), [],
                        1.0 if i % 2 else -1.0, 0.0, False) for i in range(minibatch)]
    fn = completion_logprobs if variant == "after" else plain_completion_logprobs
    peak = peak_meter()
    start = time.perf_counter()
    logp, mask, ent = fn(model, rollouts, 2, with_entropy=True)
    adv = torch.tensor([r.advantage for r in rollouts])
    loss, _ = policy_loss(logp, logp.detach(), adv, mask, loss_type="grpo", max_len=completion)
    loss.backward()
    seconds = time.perf_counter() - start
    peak_bytes = peak()
    tokens = sum(len(r.prompt_ids) + len(r.completion_ids) for r in rollouts)
    return {"variant": variant, "peak_bytes": peak_bytes, "seconds": seconds, "tokens": tokens,
            "entropy_mean": float((ent * mask).sum() / mask.sum())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["smollm", "qwen3"], default="smollm")
    parser.add_argument("--minibatch", type=int, default=4)
    parser.add_argument("--prompt", type=int, default=109)
    parser.add_argument("--completion", type=int, default=300)
    parser.add_argument("--variant", choices=["before", "after"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant:
        print(json.dumps(child(args.variant, args.model, args.minibatch, args.prompt, args.completion)))
        return 0
    results = {}
    for variant in ("before", "after"):
        cmd = [sys.executable, __file__, "--variant", variant, "--model", args.model, "--minibatch", str(args.minibatch),
               "--prompt", str(args.prompt), "--completion", str(args.completion)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            print(proc.stderr[-3000:], file=sys.stderr)
            return 1
        results[variant] = json.loads(proc.stdout.strip().splitlines()[-1])
    before, after = results["before"], results["after"]
    gib = 2**30
    shape = f"{args.model} {args.minibatch}x({args.prompt}+{args.completion})"
    for r in (before, after):
        print(f"{r['variant']:<7} minibatch {shape}: peak +{r['peak_bytes'] / gib:.2f} GiB, "
              f"{r['peak_bytes'] / r['tokens'] / 2**20:.2f} MiB/token, {r['seconds']:.1f} s")
    print(json.dumps({"benchmark": "logprob-memory", "figures": [
        {"figure": f"learning minibatch peak, {shape}", "value": after["peak_bytes"] / gib, "unit": "GiB",
         "baseline": "full fp32 log-softmax (right-padded)", "baseline_value": before["peak_bytes"] / gib,
         "ratio": before["peak_bytes"] / after["peak_bytes"], "goal": "> 1 (less memory)"},
    ]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
