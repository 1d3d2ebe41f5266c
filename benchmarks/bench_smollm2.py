"""The real SmolLM2-135M-Instruct on this CPU: decoding and learning, each against the plain way, and
against what this machine's own matrix-multiply rate allows (measured in the same run).

- **evaluate** — greedy answers to 48 held-out questions (96 new tokens at most), as chapters 3–5
  evaluate: ``model.generate`` against :func:`kimina_edu.rollouts.decode_dropping_finished` (finished
  rows leave the batch). Same tokens (checked here too).
- **sample** — a GRPO round, 4 questions × 6 samples at T 0.7 / top-p 0.95: ``generate`` (prefills every
  copy of a prompt, computes finished rows) against the same loop (one prefill per prompt).
- **learn** — log-probs + backward of those 24 completions through the LoRA policy (r 32):
  :func:`kimina_edu.trainer.completion_logprobs` run whole against its shared-prompt path.

The physical limit beside each rate: a token costs ~2 × 134.5 M multiply-adds forward (×2 more
backward, through the activations only: the base is frozen), so the GEMM rate bounds tokens/s.

    python benchmarks/bench_smollm2.py        # needs `make smollm2`; ~5 minutes on 2 cores
"""

from __future__ import annotations

import json
import time

PARAMS = 134.5e6


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def main() -> int:
    import torch

    from kimina_edu import rollouts
    from kimina_edu.lora import lora_config
    from kimina_edu.models import load_policy
    from kimina_edu.rollouts import SamplingSettings, chat_prompt, encode_prompts, generate_ids
    from kimina_edu.runtime import calibration_line, cpu_calibration
    from kimina_edu.tasks import held_out
    from kimina_edu.trainer import Rollout, completion_logprobs

    cal = cpu_calibration()
    print(calibration_line(cal), flush=True)
    limit = cal["gemm_gflops"] * 1e9 / (2 * PARAMS)  # forward tokens/s the arithmetic allows
    model, tok = load_policy("smollm2", device="cpu", verbose=False)
    entries = held_out("syllogism", 48)
    prompts = encode_prompts(tok, [chat_prompt(tok, e["question"]) for e in entries])
    figures = []

    def both(name, prompt_ids, settings, seed):
        rollouts.ARITHMETIC_BOUND_PARAMS = 10**12  # model.generate
        torch.manual_seed(seed)
        plain, t_plain = _timed(lambda: generate_ids(model, tok, prompt_ids, settings))
        rollouts.ARITHMETIC_BOUND_PARAMS = 0  # decode_dropping_finished
        torch.manual_seed(seed)
        ours, t_ours = _timed(lambda: generate_ids(model, tok, prompt_ids, settings))
        n_plain, n_ours = sum(map(len, plain)), sum(map(len, ours))
        rate = n_ours / t_ours
        print(f"{name}: generate {t_plain:.1f} s ({n_plain} tokens), ours {t_ours:.1f} s ({n_ours} tokens, "
              f"{rate:.0f} tokens/s = {rate / limit:.0%} of the {limit:.0f} tokens/s the GEMM rate allows)", flush=True)
        figures.append({"figure": f"{name}: tokens/s", "value": rate, "unit": "tokens/s",
                        "baseline": "model.generate", "baseline_value": n_plain / t_plain,
                        "ratio": rate / (n_plain / t_plain), "goal": "≥ 50% of the GEMM limit",
                        "share_of_gemm_limit": rate / limit})
        return plain, ours

    plain, ours = both("evaluate (48 questions, greedy)", prompts, SamplingSettings(max_new_tokens=96, temperature=0.0), 0)
    print(f"greedy tokens identical: {plain == ours}", flush=True)
    group = SamplingSettings(max_new_tokens=96, temperature=0.7, top_p=0.95, n=6)
    _, sampled = both("sample (4 questions x 6)", prompts[:4], group, 1)

    policy, _ = load_policy("smollm2", device="cpu", lora=lora_config(), seed=0, verbose=False)
    batch = [Rollout(prompts[i // 6], c, [], 0.0, 0.0, False) for i, c in enumerate(sampled) if c]
    lora = [p for p in policy.parameters() if p.requires_grad]

    def learn(share):
        logp, mask = completion_logprobs(policy, batch, tok.pad_token_id, share_prompts=share)
        torch.autograd.grad((logp * mask).sum(), lora)

    _, t_whole = _timed(lambda: learn(False))
    _, t_shared = _timed(lambda: learn(True))
    tokens = sum(len(r.prompt_ids) + len(r.completion_ids) for r in batch)
    print(f"learn ({len(batch)} completions, {tokens} tokens run whole): whole {t_whole:.1f} s, shared prompts "
          f"{t_shared:.1f} s ({t_whole / t_shared:.2f}x); whole runs at {tokens / t_whole:.0f} tokens/s against a "
          f"limit of {limit / 2:.0f} (forward + backward through the activations)", flush=True)
    figures.append({"figure": "learn: seconds per 24 completions", "value": t_shared, "unit": "s",
                    "baseline": "whole sequences", "baseline_value": t_whole, "ratio": t_whole / t_shared,
                    "goal": "faster than whole"})
    print(json.dumps({"benchmark": "smollm2", "calibration": cal, "figures": figures}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
