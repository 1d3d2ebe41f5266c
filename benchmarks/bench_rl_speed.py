"""Chapter 4 on SmolLM2 on this CPU: rollouts per minute of the course's path against the fp32 path, in one run.

    python benchmarks/bench_rl_speed.py [--steps 2] [--questions 200]

- **Rollouts per minute** (sampled, scored and learned from): ``GRPOTrainer.train_step`` on chapter 3's
  SFT'd SmolLM2 with a fresh LoRA, a warm-up step then ``--steps`` timed steps each.
  *fp32 path*: ``KIMINA_EDU_PRECISION=fp32``, the preset's shape as it was before the bf16 path existed
  (8 questions × 6, minibatches of 8 shuffled rollouts). *Course path*: the preset as chapter 4 runs it
  (``TrainConfig.cpu_smollm2``; bf16 matrix multiplies where the CPU has bf16 units). Both at the same
  completion cap; the mean completion length and the sampler's and learner's tokens/s are reported so a
  gain from shorter answers is told apart from a faster engine.
- **The limit**: a 1,024-row GEMM of SmolLM2's shapes in fp32 and in bf16, timed here; the sampler's
  tokens/s against what that rate allows (2 × 134.5 M FLOP a token).
- **Equal quality**: the bf16 sampler's per-token KL to the fp32 model over the whole vocabulary (mean,
  99th percentile) on greedy answers, and greedy held-out accuracy bf16 vs fp32 on the same questions
  with the paired 95% interval of the difference (the course evaluates in fp32 whatever this shows).

Prints one JSON line like every bench script; the full record goes to runs/bench_rl_speed.json.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import torch

from kimina_edu import precision, smalldecode
from kimina_edu.lora import lora_config
from kimina_edu.models import load_policy
from kimina_edu.record import paired_gain
from kimina_edu.rewards import correctness_reward, extract_answer
from kimina_edu.rollouts import SamplingSettings, chat_prompt, encode_prompts, generate
from kimina_edu.runtime import cpu_calibration
from kimina_edu.sft import SFTRecipe, ensure_sft_adapter
from kimina_edu.tasks import SEEDS, held_out, make_entries
from kimina_edu.train_config import TrainConfig
from kimina_edu.trainer import GRPOTrainer

PARAMS = 134.5e6  # SmolLM2-135M: every parameter is multiplied once a token (the tied head included)
SHAPES = [(576, 960), (576, 576), (576, 3072), (1536, 576)]  # q/k/v fused, o, gate/up fused, down: ×30 layers
HEAD = (576, 49152)


def gemm_rate(dtype, rows: int = 1024, seconds: float = 1.0) -> float:
    """GFLOP/s of SmolLM2's matmuls at ``rows`` rows in ``dtype``, one layer's shapes and the head in turn."""
    mats = [(torch.randn(rows, k).to(dtype), torch.randn(k, n).to(dtype)) for k, n in [*SHAPES, HEAD]]
    flops = sum(2 * rows * k * n for k, n in [*SHAPES, HEAD])
    for a, b in mats:
        a @ b
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for a, b in mats:
            a @ b
        n += 1
    return flops * n / (time.perf_counter() - start) / 1e9


def timed_steps(base, adapter, cfg: TrainConfig, entries, steps: int, path: str) -> dict:
    os.environ[precision.ENV] = path
    model, tok = load_policy(base, adapter=adapter, lora=lora_config(), seed=0, verbose=False)
    trainer = GRPOTrainer(model, tok, cfg, train_entries=entries, output_dir=tempfile.mkdtemp(), progress=False)
    trainer.train_step()  # warm-up: first-call costs (oneDNN kernels, allocations)
    rows, start = [], time.perf_counter()
    for _ in range(steps):
        rows.append(trainer.train_step())
    seconds = time.perf_counter() - start
    rollouts = steps * cfg.questions_per_batch * cfg.group_size
    mean = lambda key: sum(r.get(key, 0.0) for r in rows) / len(rows)
    return {"path": path, "bf16": trainer.bf16, "rollouts": rollouts, "seconds": round(seconds, 1),
            "rollouts_per_min": round(60 * rollouts / seconds, 1), "completion_length": round(mean("completion_length"), 1),
            "gen_tokens_per_s": round(mean("gen_tokens_per_s"), 1),
            "train_tokens_per_s": round(mean("train_tokens_per_s"), 1),
            "mismatch_kl": mean("mismatch_kl") if "mismatch_kl" in rows[-1] else None,
            "is_weight_p01": rows[-1].get("is_weight_p01"), "is_weight_p99": rows[-1].get("is_weight_p99"),
            "shape": f"{cfg.questions_per_batch}×{cfg.group_size}, minibatch {cfg.minibatch_size}"}


def sampler_kl(model, tok, n_prompts: int = 8, new: int = 48) -> dict:
    """The bf16 decoder's next-token distributions against the fp32 model's at the same positions (greedy
    answers of ``n_prompts`` held-out questions): KL(bf16 ‖ fp32) per token over the whole vocabulary."""
    entries = held_out("syllogism", n_prompts)
    prompts = encode_prompts(tok, [chat_prompt(tok, e["question"]) for e in entries])
    width = max(map(len, prompts))
    ids = torch.tensor([[tok.pad_token_id] * (width - len(p)) + p for p in prompts])
    attn = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    seen: list[torch.Tensor] = []
    draw = smalldecode.draw_next

    def spy(logits, settings):
        seen.append(logits.float().log_softmax(-1))
        return draw(logits, settings)

    smalldecode.draw_next = spy
    try:
        rows = smalldecode.SmallLlama.from_model(model, torch.bfloat16).decode(
            ids, attn, SamplingSettings(max_new_tokens=new, temperature=0.0), None)
    finally:
        smalldecode.draw_next = draw
    sampler = torch.stack(seen, dim=1)  # [rows, new, vocab]
    kls = []
    with torch.no_grad():
        for i, (p, row) in enumerate(zip(prompts, rows)):
            logits = model(input_ids=torch.tensor([p + row[:-1]])).logits[0, len(p) - 1:].float().log_softmax(-1)
            kls.append((sampler[i].exp() * (sampler[i] - logits)).sum(-1))
    kl = torch.cat(kls).double()
    return {"tokens": kl.numel(), "kl_mean": float(kl.mean()), "kl_p99": float(torch.quantile(kl, 0.99)),
            "kl_max": float(kl.max())}


def greedy_pair(model, tok, n: int) -> dict:
    """Greedy held-out accuracy with bf16 and with fp32 matrices, per question, paired (the evaluation the
    course runs is fp32: ``kimina_edu.eval.EVAL_MATMUL``; this measures what bf16 would change)."""
    entries = held_out("syllogism", n)
    prompts = [chat_prompt(tok, e["question"]) for e in entries]
    scores, texts, seconds = {}, {}, {}
    for name, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
        start = time.perf_counter()
        completions = []
        for k in range(0, n, 100):
            completions += generate(model, tok, prompts[k : k + 100], max_new_tokens=96, matmul_dtype=dtype)[1]
        seconds[name] = round(time.perf_counter() - start, 1)
        texts[name] = tok.batch_decode(completions, skip_special_tokens=True)
        scores[name] = [correctness_reward(extract_answer(t), e) for t, e in zip(texts[name], entries)]
    gain, low, high = paired_gain(scores["fp32"], scores["bf16"])
    return {"questions": n, "accuracy_bf16": sum(scores["bf16"]) / n, "accuracy_fp32": sum(scores["fp32"]) / n,
            "bf16_minus_fp32_points": [round(gain, 2), round(low, 2), round(high, 2)], "seconds": seconds,
            "answers_that_differ": sum(a != b for a, b in zip(scores["bf16"], scores["fp32"])),
            "texts_that_differ": sum(a != b for a, b in zip(texts["bf16"], texts["fp32"]))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--sft-epochs", type=int, default=None, help="the warm-up's epochs (default: chapter 3's)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    calibration = cpu_calibration()
    unit = precision.bf16_units()
    rates = {"fp32": round(gemm_rate(torch.float32), 1)}
    if unit:
        rates["bf16"] = round(gemm_rate(torch.bfloat16), 1)
    recipe = SFTRecipe.preset("smollm2", epochs=args.sft_epochs)
    base, adapter = ensure_sft_adapter("smollm2", recipe=recipe)
    entries = make_entries("syllogism", 2000, SEEDS["rl"])
    course = TrainConfig.preset("smollm2", guard_window=0, shift_every=0)
    fp32_shape = dict(questions_per_batch=8, group_size=6, minibatch_size=8, grad_accum=6, buffer_size=48)
    old = TrainConfig.preset("smollm2", guard_window=0, shift_every=0, **fp32_shape)
    runs = [timed_steps(base, adapter, old, entries, args.steps, "fp32")]
    if unit:
        runs.append(timed_steps(base, adapter, course, entries, args.steps, "auto"))
    record = {"calibration": calibration, "bf16_unit": unit, "gemm_gflops_1024_rows": rates, "runs": runs,
              "warm_up_epochs": recipe.epochs}
    fast = runs[-1]
    rate = rates["bf16" if fast["bf16"] else "fp32"] * 1e9
    limit = rate / (2 * PARAMS)
    record["sampler_share_of_gemm_limit"] = round(fast["gen_tokens_per_s"] / limit, 3)
    # the most rollouts a minute this box's big-GEMM rate allows at this completion length, counting only the
    # weights' matmuls: sampling runs each completion token once; the learner runs each completion token and its
    # share of the prompt (run once per group) forward, and backward again through the frozen weights (the
    # input gradient; LoRA's own are small)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base)
    prompt = sum(len(p) for p in encode_prompts(tok, [chat_prompt(tok, e["question"]) for e in entries[:50]])) / 50
    per_rollout = 2 * PARAMS * (fast["completion_length"] + 2 * (fast["completion_length"] + prompt / course.group_size))
    record["rollouts_per_min_gemm_limit"] = round(60 * rate / per_rollout, 1)
    record["prompt_tokens"] = round(prompt, 1)
    if unit:
        os.environ[precision.ENV] = "auto"
        model, tok = load_policy(base, adapter=adapter, verbose=False)
        record["sampler_kl"] = sampler_kl(model.eval(), tok)
        record["greedy"] = greedy_pair(model, tok, args.questions)
    out = Path(__file__).resolve().parent.parent / "runs" / "bench_rl_speed.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(record, indent=1))
    ratio = fast["rollouts_per_min"] / runs[0]["rollouts_per_min"]
    figures = [{"figure": "SmolLM2 rollouts/min, chapter 4", "value": fast["rollouts_per_min"], "unit": "rollouts/min",
                "baseline": "fp32 path, 8×6, shuffled minibatches", "baseline_value": runs[0]["rollouts_per_min"],
                "ratio": round(ratio, 2), "goal": "≥ 10×"},
               {"figure": "sampler tokens/s ÷ 1,024-row GEMM limit", "value": fast["gen_tokens_per_s"],
                "unit": "tokens/s", "baseline": "GEMM limit", "baseline_value": round(limit, 1),
                "ratio": record["sampler_share_of_gemm_limit"], "goal": "≥ 0.5"}]
    print(json.dumps({"benchmark": "rl_speed", "figures": figures}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
