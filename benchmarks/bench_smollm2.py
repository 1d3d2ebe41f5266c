"""The real SmolLM2-135M-Instruct on this CPU: decoding and learning, each against the plain way, and
against what this machine's own matrix-multiply rate allows (measured in the same run).

- **evaluate** — greedy answers to 48 held-out questions (96 new tokens at most), as chapters 3–5
  evaluate, by three decoders: ``model.generate``; :func:`kimina_edu.rollouts.decode_dropping_finished`
  (transformers' cached forward, finished rows leave the batch: a GPU's path); and the course's CPU path,
  :class:`kimina_edu.smalldecode.SmallLlama` (the shared system turn run once, finished rows dropped).
  Same tokens (checked here too).
- **sample** — a GRPO round, 8 questions × 6 samples at T 0.7 / top-p 0.95, by the same three (the
  same distribution, other draws: tokens/s is the figure).
- **learn** — log-probs + backward of those completions through the LoRA policy (r 32):
  :func:`kimina_edu.logprobs.completion_logprobs` run whole against its shared-prompt path.

The physical limits beside each rate:
- the big-GEMM limit: a token costs ~2 × 134.5 M multiply-adds forward (×2 more backward, through the
  activations only: the base is frozen), at the calibration's large-matrix GEMM rate;
- the limit at that batch (the issue's goal: ≥ 50% of it): the very matmuls smalldecode's run made —
  each layer's q/k/v, o, gate/up and down projections and the LM head, at the row counts its run sent
  through them (``SmallLlama.matmul_rows``: the shared system turn, the prefill, then each step's live
  rows) — timed alone, back to back (the fastest of three), on random inputs of those sizes. At 48 rows
  or fewer these matmuls stream the weights more than they multiply, so this limit is well below the
  big-GEMM one; the gap between it and the run is what is not a matmul (attention, norms, sampling,
  Python).

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


def at_batch_seconds(decoder, timings: dict) -> float:
    """Seconds the matmuls of ``decoder``'s last run take alone: each distinct size timed once (the
    fastest of three after a warm-up) and counted as often as the run used it."""
    import torch

    hidden, inter = decoder.embed.shape[1], decoder.layers[0]["down"].shape[0]
    total = 0.0
    for rows, head_rows in decoder.matmul_rows:
        if (rows, head_rows) not in timings:
            x, xi, xh = torch.randn(rows, hidden), torch.randn(rows, inter), torch.randn(head_rows, hidden)

            def once(x=x, xi=xi, xh=xh, head_rows=head_rows):
                for layer in decoder.layers:
                    x @ layer["qkv"], x @ layer["o"], x @ layer["gate_up"], xi @ layer["down"]
                if head_rows:
                    xh @ decoder.head.t()

            with torch.inference_mode():
                once()
                timings[rows, head_rows] = min(_timed(once)[1] for _ in range(3))
        total += timings[rows, head_rows]
    return total


def main() -> int:
    import torch

    from kimina_edu import rollouts
    from kimina_edu.logprobs import Rollout, completion_logprobs
    from kimina_edu.lora import lora_config
    from kimina_edu.models import load_policy
    from kimina_edu.rollouts import SamplingSettings, chat_prompt, encode_prompts, generate_ids
    from kimina_edu.runtime import calibration_line, cpu_calibration
    from kimina_edu.tasks import held_out

    cal = cpu_calibration()
    print(calibration_line(cal), flush=True)
    limit = cal["gemm_gflops"] * 1e9 / (2 * PARAMS)  # forward tokens/s the arithmetic allows
    model, tok = load_policy("smollm2", device="cpu", verbose=False)
    entries = held_out("syllogism", 48)
    prompts = encode_prompts(tok, [chat_prompt(tok, e["question"]) for e in entries])
    figures = []

    decoders = {"generate": (10**12, "model.generate"), "transformers' forward": (0, "decode_dropping_finished"),
                "smalldecode": (0, None)}

    decoders_run, timings = [], {}
    real_decode = rollouts.smalldecode.SmallLlama.decode

    def spy(self, *args, **kwargs):  # keeps the decoder generate_ids builds, for its matmul sizes
        decoders_run.append(self)
        return real_decode(self, *args, **kwargs)

    rollouts.smalldecode.SmallLlama.decode = spy

    def run(name, prompt_ids, settings, seed):
        """Each decoder on the same call; figures: smalldecode against the other two."""
        out, rates = {}, {}
        for label, (bound, not_small) in decoders.items():
            rollouts.ARITHMETIC_BOUND_PARAMS = bound
            rollouts.smalldecode.supported = (lambda m, why=not_small: why) if not_small else supported
            torch.manual_seed(seed)
            rows, seconds = _timed(lambda: generate_ids(model, tok, prompt_ids, settings))
            out[label], rates[label] = rows, sum(map(len, rows)) / seconds
            print(f"{name}, {label}: {seconds:.1f} s, {sum(map(len, rows))} tokens, {rates[label]:.0f} tokens/s "
                  f"= {rates[label] / limit:.0%} of the {limit:.0f} tokens/s the GEMM rate allows", flush=True)
            if label == "smalldecode":
                alone = at_batch_seconds(decoders_run[-1], timings)
                at_batch = sum(map(len, rows)) / alone
                steps = [m for m, h in decoders_run[-1].matmul_rows if m == h]  # one position a row
                print(f"  the same matmuls alone, at this run's sizes (prefill, then {len(steps)} steps of "
                      f"{steps[0]} → {steps[-1]} live rows): {alone:.1f} s = {at_batch:.0f} tokens/s, the limit at "
                      f"that batch; smalldecode runs at {rates[label] / at_batch:.0%} of it", flush=True)
        rollouts.smalldecode.supported = supported
        for label in ("generate", "transformers' forward"):
            figures.append({"figure": f"{name}: tokens/s", "value": rates["smalldecode"], "unit": "tokens/s",
                            "baseline": label, "baseline_value": rates[label],
                            "ratio": rates["smalldecode"] / rates[label],
                            "goal": "≥ 50% of the GEMM limit at that batch",
                            "share_of_gemm_limit": rates["smalldecode"] / limit,
                            "share_of_limit_at_batch": rates["smalldecode"] / at_batch})
        return out

    supported = rollouts.smalldecode.supported
    greedy = run("evaluate (48 questions, greedy)", prompts, SamplingSettings(max_new_tokens=96, temperature=0.0), 0)
    print(f"greedy tokens identical: {len({tuple(map(tuple, rows)) for rows in greedy.values()}) == 1}", flush=True)
    group = SamplingSettings(max_new_tokens=96, temperature=0.7, top_p=0.95, n=6)
    sampled = run("sample (8 questions x 6)", prompts[:8], group, 1)["smalldecode"]

    policy, _ = load_policy("smollm2", device="cpu", lora=lora_config(), seed=0, verbose=False)
    batch = [Rollout(prompts[i // 6], c, [], 0.0, 0.0, False) for i, c in enumerate(sampled) if c][:24]
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
