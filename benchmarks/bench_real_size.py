"""What the hub path costs at real size on this machine: random-weight models with the exact shapes of
SmolLM-135M-Instruct (the article's model) and Qwen3-0.6B (the Kimina recipe's small model).

No download: the configs are written below with their source. Weights are random, so timings and
memory are real but nothing is learned (and no sample stops early: every completion runs to its
length, which is what chapter 4's 300-token cap costs in the worst case). fp32 on the CPU, the
article's LoRA (r=32, alpha=64, every projection), ``torch`` using the machine's cores.

Each phase runs in a fresh process and reports its peak resident memory above what the process held
once model and data were built (Linux ``VmHWM``, reset just before the phase: :func:`peak_meter`):

- **sft** — one optimizer step of chapter 3's warm-up: 8 chat examples of ~170 tokens, causal-LM loss
  on the LoRA model, AdamW (the compute TRL's ``SFTTrainer`` runs per step, without its bookkeeping);
- **generate** — one batched, KV-cached round through ``TransformersBackend`` (merged-LoRA copy
  included): ``--gen-prompts`` questions × ``--gen-samples`` samples, ``--gen-tokens`` new tokens each;
- **learn** — one GRPO learning minibatch as ``GRPOTrainer._minibatch_backward`` runs it
  (``completion_logprobs`` with entropy, ``policy_loss``, backward): ``--minibatch`` sequences of a
  109-token prompt and a 300-token completion (chapter 4's article preset).

A full chapter-4 step (B=8 × G=6 = 48 completions of 300 tokens, then 48 sequences learned) is
*estimated* from the measured rates: generation tokens / gen rate + training tokens / train rate.
The measured generation batch is smaller than 48 rows (the default run must stay under ~10 minutes
on 2 cores), and a bigger batch decodes more tokens per second, so that estimate leans slow.

    python benchmarks/bench_real_size.py                     # both models, ~10 min on 2 cores
    python benchmarks/bench_real_size.py --models smollm --minibatch 2
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# https://huggingface.co/HuggingFaceTB/SmolLM-135M-Instruct/blob/main/config.json (v0.2)
SMOLLM_135M = dict(
    vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
    num_key_value_heads=3, max_position_embeddings=2048, rms_norm_eps=1e-5, rope_theta=10000.0,
    tie_word_embeddings=True, hidden_act="silu", bos_token_id=1, eos_token_id=2, pad_token_id=2,
)
# https://huggingface.co/Qwen/Qwen3-0.6B/blob/main/config.json — model card: 28 layers, 16 query / 8 KV
# heads, 0.44 B non-embedding parameters (which these sizes give: 28 × 15.7 M)
QWEN3_06B = dict(
    vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
    num_key_value_heads=8, head_dim=128, max_position_embeddings=40960, rms_norm_eps=1e-6, rope_theta=1000000.0,
    tie_word_embeddings=True, hidden_act="silu", attention_bias=False, bos_token_id=151643, eos_token_id=151645,
    pad_token_id=151643,
)
MODELS = {"smollm": ("SmolLM-135M-Instruct", "LlamaConfig", SMOLLM_135M),
          "qwen3": ("Qwen3-0.6B", "Qwen3Config", QWEN3_06B)}
ARTICLE = {"B": 8, "G": 6, "prompt": 109, "completion": 300}  # chapter 4's article preset
SFT = {"batch": 8, "length": 170}  # chapter 3: batch_size 8, a ~109-token prompt + a ~60-token answer


def _status(field: str) -> int:
    return int(re.search(rf"{field}:\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1)) * 1024


def peak_meter():
    """Start measuring: returns a function giving the peak resident memory since now, above now.

    Linux keeps the process's high-water mark (``VmHWM``); writing 5 to ``/proc/self/clear_refs``
    resets it to the current size, so building the model (whose transient peak can exceed what it
    keeps) does not hide the phase's own peak — ``ru_maxrss`` cannot be reset.
    """
    Path("/proc/self/clear_refs").write_text("5")
    base = _status("VmRSS")
    return lambda: _status("VmHWM") - base


def _build(key: str, device: str = "cpu"):
    """The LoRA model at real size: fp32 on the CPU, bf16 on a GPU (the course's dtype on each)."""
    import torch
    import transformers
    from peft import get_peft_model

    from kimina_edu.lora import lora_config

    _, config_cls, cfg = MODELS[key]
    torch.manual_seed(0)
    config = getattr(transformers, config_cls)(**cfg)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype).to(device)
    return get_peft_model(model, lora_config()), cfg


class _Meter:
    """Time and peak memory of one phase: resident memory on the CPU, allocated memory on a GPU."""

    def __init__(self, device: str):
        import torch

        self.device, self.torch = device, torch
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.base = torch.cuda.memory_allocated()
        else:
            self._peak = peak_meter()
        self.start = time.perf_counter()

    def stop(self) -> tuple[float, int]:
        if self.device == "cuda":
            self.torch.cuda.synchronize()
            return time.perf_counter() - self.start, self.torch.cuda.max_memory_allocated() - self.base
        return time.perf_counter() - self.start, self._peak()


def _ids(n: int, length: int, vocab: int, seed: int) -> list[list[int]]:
    import torch

    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab - 3, (n, length), generator=g).tolist()


def phase(key: str, name: str, args) -> dict:
    """Run one phase in this process; return its time, token count and peak memory above the start.

    On a GPU the phase runs once untimed first (kernel selection and caching allocator warm-up
    would otherwise be billed to it); on the CPU once, as a learner's first step runs.
    """
    import torch

    device = args.device
    model, cfg = _build(key, device)
    rss_after_build = _status("VmRSS")
    vocab = cfg["vocab_size"]
    n_params = sum(p.numel() for p in model.parameters())
    runs = 2 if device == "cuda" else 1
    if name == "sft":
        batch = torch.tensor(_ids(SFT["batch"], SFT["length"], vocab, 1), device=device)
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-4)
        model.train()
        for _ in range(runs):
            meter = _Meter(device)
            model(input_ids=batch, labels=batch).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            seconds, peak = meter.stop()
        tokens = batch.numel()
    elif name == "generate":
        from types import SimpleNamespace

        from kimina_edu.rollouts import SamplingSettings, TransformersBackend

        tok = SimpleNamespace(pad_token_id=cfg["pad_token_id"], eos_token_id=None)  # random weights: never stop early
        prompts = _ids(args.gen_prompts, ARTICLE["prompt"], vocab, 2)
        settings = SamplingSettings(max_new_tokens=args.gen_tokens, temperature=0.7, top_p=0.95, n=args.gen_samples)
        backend = TransformersBackend()
        model.eval()
        for _ in range(runs):
            meter = _Meter(device)
            backend.load_policy(model)
            gen = backend.generate(tok, prompts, settings)
            seconds, peak = meter.stop()
        tokens = sum(len(c) for c in gen.completion_ids)
    elif name == "learn":
        from kimina_edu.grpo import policy_loss
        from kimina_edu.logprobs import Rollout, completion_logprobs

        prompts = _ids(args.minibatch, ARTICLE["prompt"], vocab, 3)
        comps = _ids(args.minibatch, ARTICLE["completion"], vocab, 4)
        rollouts = [Rollout(p, c, [], 1.0 if i % 2 else -1.0, 0.0, False) for i, (p, c) in enumerate(zip(prompts, comps))]
        model.train()
        for _ in range(runs):
            model.zero_grad(set_to_none=True)
            meter = _Meter(device)
            logp, mask, _ = completion_logprobs(model, rollouts, cfg["pad_token_id"], with_entropy=True)
            adv = torch.tensor([r.advantage for r in rollouts], device=logp.device)
            loss, _ = policy_loss(logp, logp.detach(), adv, mask, loss_type="grpo", max_len=ARTICLE["completion"])
            loss.backward()
            seconds, peak = meter.stop()
        tokens = sum(len(r.prompt_ids) + len(r.completion_ids) for r in rollouts)
    else:
        raise ValueError(f"unknown phase {name!r}: sft, generate or learn")
    return {"model": key, "phase": name, "seconds": seconds, "tokens": tokens, "peak_bytes": peak,
            "rss_after_build_bytes": rss_after_build, "n_params": n_params, "device": device,
            "gpu": torch.cuda.get_device_name() if device == "cuda" else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="smollm,qwen3", help="comma-separated: smollm, qwen3")
    parser.add_argument("--minibatch", type=int, default=2, help="learning sequences measured (article: 16)")
    parser.add_argument("--gen-prompts", type=int, default=2)
    parser.add_argument("--gen-samples", type=int, default=4)
    parser.add_argument("--gen-tokens", type=int, default=48)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="cuda: bf16 on the GPU, peak = allocated GPU memory (the article's sizes fit easily)")
    parser.add_argument("--phases", default="sft,generate,learn", help="comma-separated subset to run")
    parser.add_argument("--out", help="also write the summary JSON here")
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    args = parser.parse_args()
    keys = [k.strip() for k in args.models.split(",") if k.strip()]
    unknown = [k for k in keys if k not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {unknown}: choose from {sorted(MODELS)}")
    if args.phase:
        print(json.dumps(phase(keys[0], args.phase, args)))
        return 0
    rows, t0 = [], time.perf_counter()
    for key in keys:
        for name in [p.strip() for p in args.phases.split(",") if p.strip()]:
            cmd = [sys.executable, __file__, "--models", key, "--phase", name, "--minibatch", str(args.minibatch),
                   "--gen-prompts", str(args.gen_prompts), "--gen-samples", str(args.gen_samples),
                   "--gen-tokens", str(args.gen_tokens), "--device", args.device]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=HERE.parent)
            if proc.returncode != 0:
                print(f"{key} {name} failed:\n{proc.stderr[-3000:]}", file=sys.stderr)
                return 1
            rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            r = rows[-1]
            print(f"{MODELS[key][0]:<22} {name:<9} {r['seconds']:7.1f} s  {r['tokens'] / r['seconds']:8.1f} tok/s  "
                  f"peak +{r['peak_bytes'] / 2**30:.2f} GiB  ({r['peak_bytes'] / r['tokens'] / 2**20:.2f} MiB/token)",
                  flush=True)
    print(f"total {time.perf_counter() - t0:.0f} s")
    summary = {}
    for key in keys if args.phases == "sft,generate,learn" else []:  # the step estimate needs all three
        got = {r["phase"]: r for r in rows if r["model"] == key}
        gen_rate = got["generate"]["tokens"] / got["generate"]["seconds"]
        train_rate = got["learn"]["tokens"] / got["learn"]["seconds"]
        n = ARTICLE["B"] * ARTICLE["G"]
        step = n * ARTICLE["completion"] / gen_rate + n * (ARTICLE["prompt"] + ARTICLE["completion"]) / train_rate
        summary[MODELS[key][0]] = {
            "params_M": got["sft"]["n_params"] / 1e6, "rss_after_build_GiB": got["sft"]["rss_after_build_bytes"] / 2**30,
            "sft_step_s": got["sft"]["seconds"], "sft_tok_per_s": got["sft"]["tokens"] / got["sft"]["seconds"],
            "gen_tok_per_s": gen_rate, "gen_rows": args.gen_prompts * args.gen_samples,
            "train_tok_per_s": train_rate, "learn_peak_GiB": got["learn"]["peak_bytes"] / 2**30,
            "learn_MiB_per_token": got["learn"]["peak_bytes"] / got["learn"]["tokens"] / 2**20,
            "sft_peak_GiB": got["sft"]["peak_bytes"] / 2**30, "gen_peak_GiB": got["generate"]["peak_bytes"] / 2**30,
            "grpo_step_estimate_s": step,
        }
    result = {"real_size": summary, "settings": vars(args), "rows": rows}
    print(json.dumps({"real_size": summary, "settings": vars(args)}, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
