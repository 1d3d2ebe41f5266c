"""Chapter 4 — GRPO from scratch: the whole loop in one readable file.

    for step in range(steps):
        rollouts = collect_experience(...)   # sample B questions × G completions, score, advantages,
                                             # old log-probs; stored unpadded in a buffer
        learn(rollouts)                      # shuffled minibatches → policy_loss → AdamW

The math (advantages, the clipped loss) is chapter 2's :mod:`kimina_edu.grpo`; the rewards are
chapter 1's :mod:`kimina_edu.rewards`. This file only wires them to a model.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import torch

from kimina_edu.checkpoints import (
    DeferredInterrupt,
    append_jsonl,
    latest_checkpoint,
    restore_trainer,
    rewind_jsonl,
    rewind_logs,
    save_trainer,
)
from kimina_edu.grpo import group_advantages, policy_loss
from kimina_edu.rewards import RewardBreakdown, score_completion
from kimina_edu.rollouts import (
    SamplingSettings,
    TransformersBackend,
    VLLMBackend,
    cache_keyword,
    chat_prompt,
    encode_prompts,
)
from kimina_edu.tasks import SEEDS, make_entries

QUICK_FRACTION = 3  # QUICK runs a third of the preset's GRPO steps (TrainConfig.preset)


@dataclass
class TrainConfig:
    """Defaults are the reference article's hyper-parameters (SmolLM-135M on reasoning-gym).

    ``buffer_size``: rollouts collected before a learning phase (ceil(buffer/(B·G)) rounds).
    ``grad_accum``: minibatches whose gradients are summed per optimizer step.
    """

    task: str = "syllogism"
    steps: int = 100
    questions_per_batch: int = 8  # B
    group_size: int = 6  # G
    max_new_tokens: int = 300
    temperature: float = 0.7
    top_p: float = 0.95
    min_p: float = 0.0  # drop tokens under min_p × the top token's probability (0: off, the article)
    buffer_size: int = 500
    minibatch_size: int = 16
    grad_accum: int = 12
    epochs: int = 1  # passes over the buffer per learning phase
    lr: float = 1e-6
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    loss_type: str = "grpo"
    scale: str = "group"
    eps_low: float = 0.2
    eps_high: float | None = None
    beta: float = 0.0  # k3 KL to the reference (the model with adapters disabled)
    mask_truncated: bool = False
    # vLLM samples only: cap C of the truncated importance weight min(π_learner/π_vLLM, C) that
    # corrects the two engines' numerical gap (TRL's vllm_importance_sampling_clip_max default)
    tis_cap: float = 3.0
    eval_every: int = 0  # held-out accuracy every N steps (0: only when asked)
    log_rollouts: int = 4  # rollouts per step written to rollouts.jsonl for the browser
    checkpoint_every: int = 0
    seed: int = 0
    # stop early once at most a tenth of the last `silent_window` steps learned anything (every
    # group all-right or all-wrong: zero advantage, no gradient); 0 runs every step
    silent_window: int = 0
    # each step's questions split evenly between the task's answers ("Yes"/"No"): with a few
    # questions a step, a step of mostly "No" questions pays "No" itself, whatever the premises say
    balance_answers: bool = False
    # collapse guard: stop once the sampled accuracy of the last `guard_window` steps has fallen
    # `guard_drop` below the best earlier window's, and put back the weights of that best window
    guard_window: int = 0
    guard_drop: float = 0.15
    # every update's effect, measured: at step 1 and every `shift_every` steps, the learned buffer is
    # scored (no gradient) before and after its optimizer step(s) → log keys shift_pos / shift_neg,
    # the mean change of the per-token log-prob of the completions with A > 0 / A < 0 (0: never)
    shift_every: int = 10

    # the learner's log-probs under softmax(logits / temperature) — the distribution the samples were
    # drawn from, as TRL and verl score them — instead of the model's own T = 1 distribution
    score_at_temperature: bool = False

    # fields that may differ on resume without changing what is being trained
    RESUMABLE = ("steps", "eval_every", "checkpoint_every", "log_rollouts", "silent_window", "guard_window",
                 "guard_drop", "shift_every")
    # fields added after the checkpoint format, each with the value that trains as runs did before the
    # field existed: a checkpoint that lacks one is read as holding this value (checkpoints.restore_trainer).
    # A field added later whose default does not train as runs did before it stays out: a checkpoint
    # without such a field is refused, naming it.
    VALUE_WHEN_MISSING: ClassVar[dict[str, object]] = {
        "balance_answers": False,  # questions drawn uniformly at random, as every run drew them before
        "score_at_temperature": False,  # log-probs under the model's own T = 1 softmax, as before
    }

    @classmethod
    def preset(cls, model_id: str = "pocket", *, smoke: bool = False, quick: bool = False, device: str = "cpu",
               **overrides) -> TrainConfig:
        """Chapter 4's (and 5's) settings for ``model_id`` — the one place they live.

        Pocket model: :meth:`cpu_pocket`. Hub models: the article's hyper-parameters, except the
        learning rate — the article's 1e-6 is for full fine-tuning; a LoRA adapter needs ~10×
        more to move (TRL's PEFT examples train GRPO LoRAs at 1e-5 – 1e-4). ``smoke``: sizes
        that run in seconds on a CPU. ``overrides`` (notebook parameters) win over both; an
        override of ``None`` means "not given". A hub model's SMOKE completions are 32 tokens, not
        the pocket model's 48: a hub model that has not learned to stop (the tests' random-weight
        SmolLM-shaped folder, or SmolLM before its warm-up) runs every sample to the cap, and SMOKE
        checks that the path runs, not that it learns. ``quick``: a learner's first pass — a third of
        the preset's steps, everything else unchanged (ignored under ``smoke``); what it shows on
        the pocket model is measured over seeds in benchmarks/README.md ("QUICK mode"). ``device``
        ("cpu", "cuda", "auto"): SmolLM2 on a GPU gets :meth:`gpu_smollm2`, on a CPU :meth:`cpu_smollm2`.
        """
        # the hub models' lr; the pocket model and SmolLM2 have their own presets, which set theirs
        base: dict = {} if model_id in ("pocket", "smollm2") else {"lr": 1e-5}
        if smoke:
            base.update(steps=6, eval_every=3, questions_per_batch=4, buffer_size=24, minibatch_size=12,
                        grad_accum=2, max_new_tokens=48 if model_id == "pocket" else 32,
                        lr=5e-3 if model_id == "pocket" else 1e-4, silent_window=0, shift_every=1)
            if model_id == "smollm2":  # real weights: two questions a step keep `make test` in minutes
                base.update(questions_per_batch=2, buffer_size=12, minibatch_size=12, grad_accum=1)
        base.update({k: v for k, v in overrides.items() if v is not None})
        if model_id == "pocket":
            cfg = cls.cpu_pocket(**base)
        elif model_id == "smollm2" and not smoke:
            from kimina_edu.runtime import resolve_device

            gpu = resolve_device(device).startswith("cuda")
            cfg = cls.gpu_smollm2(**base) if gpu else cls.cpu_smollm2(**base)
        else:
            cfg = cls(**base)
        if quick and not smoke and overrides.get("steps") is None:
            cfg.steps = max(1, cfg.steps // QUICK_FRACTION)
        return cfg

    @classmethod
    def cpu_smollm2(cls, **overrides) -> TrainConfig:
        """The CPU preset for the real SmolLM2-135M-Instruct (chapter 4, ``MODEL_ID=smollm2``).

        Sized for a 2-core CPU, where one step of 48 completions costs most of a minute: a few
        steps, each as large as the time allows (B = 8 questions × G = 6), 96 new tokens (chapter
        3's evaluation length: the warm-up's answers end well before it), one optimizer step per
        batch, ``balance_answers`` (half "Yes" questions, half "No" in every step) and the collapse
        guard. Measurements behind each choice: benchmarks/README.md ("SmolLM2, chapter 4").
        """
        base = dict(steps=12, eval_every=0, questions_per_batch=8, group_size=6, max_new_tokens=96,
                    buffer_size=48, minibatch_size=8, grad_accum=6, epochs=1, lr=2e-5, loss_type="grpo",
                    scale="group", eps_high=0.28, balance_answers=True, guard_window=4, guard_drop=0.15)
        base.update(overrides)
        return cls(**base)

    @classmethod
    def gpu_smollm2(cls, **overrides) -> TrainConfig:
        """The GPU preset for the real SmolLM2 (chapter 4 with ``DEVICE`` a GPU;
        ``benchmarks/gpu_smollm2.py`` runs chapters 3 → 4 with it).

        The article's sampling (T 0.7, top-p 0.95, 300 new tokens, groups of 6 → 8) with far more
        questions a step: on a GPU, ``generate`` is latency-bound at the article's 48 rows (10× the
        rows gave 10× the tokens per second on an H200, benchmarks/README.md), so 32 questions × 8
        cost about what 8 × 6 do and give a reward curve with a quarter of the noise. One optimizer
        step per batch (on-policy, as the CPU preset), balanced answers and the collapse guard as
        on the CPU, held-out accuracy every 10 steps.
        """
        base = dict(steps=40, eval_every=10, questions_per_batch=32, group_size=8, max_new_tokens=300,
                    buffer_size=256, minibatch_size=64, grad_accum=4, epochs=1, lr=1e-5, loss_type="grpo",
                    scale="group", eps_high=0.28, balance_answers=True, guard_window=4, guard_drop=0.15)
        base.update(overrides)
        return cls(**base)

    def sampling(self) -> SamplingSettings:
        """What the rollout backend needs from this config (:mod:`kimina_edu.rollouts`)."""
        return SamplingSettings(max_new_tokens=self.max_new_tokens, temperature=self.temperature, top_p=self.top_p,
                                min_p=self.min_p, n=self.group_size, seed=self.seed)

    @classmethod
    def cpu_pocket(cls, **overrides) -> TrainConfig:
        """The CPU preset for the pocket model (chapter 4, `make course`).

        Changes from the article, and why: the pocket model's completions are well under 64
        tokens (notebook 04 prints their mean length), so 64 new tokens cover them; one collection
        round per learning phase (buffer = B·G = 48 rollouts, 3 minibatches of 16, one optimizer
        step) keeps generation — the expensive part on a CPU — from dominating; ``min_p=0.1``
        because a ~1 M-parameter model's flat tail turns samples into typos at T=0.7, so the reward
        taught spelling, not logic; a LoRA on this model needs lr ~1e-4 rather than 1e-6 to move,
        and 2e-4 collapsed some seeds below their SFT start; and
        ``silent_window=20``: once the policy answers every training question the same way in
        all six samples, steps stop carrying signal but still pay for generation — stop there.
        Measurements behind each choice: benchmarks/README.md.
        """
        base = dict(steps=300, eval_every=25, max_new_tokens=64, min_p=0.1, buffer_size=48, minibatch_size=16,
                    grad_accum=3, epochs=1, lr=1e-4, loss_type="grpo", scale="group", eps_high=0.28,
                    silent_window=20)
        base.update(overrides)
        return cls(**base)


@dataclass
class Rollout:
    """One completion, unpadded: everything the learning phase needs."""

    prompt_ids: list[int]
    completion_ids: list[int]
    old_logp: list[float]
    advantage: float
    reward: float
    truncated: bool
    # the sampler's own log-prob of each completion token when it is not the learner's model
    # (vLLM): the trainer corrects the gap with truncated importance sampling
    sampler_logp: list[float] | None = None


# The generation backends live in kimina_edu/rollouts.py; TransformersBackend and VLLMBackend are
# imported above so that ``from kimina_edu.trainer import TransformersBackend`` keeps working.

# ------------------------------------------------------------------ log-probs


def pad_batch(rollouts: list[Rollout], pad_id: int):
    """Re-pad a minibatch (right padding): input ids, attention mask, completion mask, old log-probs."""
    seqs = [r.prompt_ids + r.completion_ids for r in rollouts]
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(seqs), width), dtype=torch.long)
    comp_width = max(len(r.completion_ids) for r in rollouts)
    comp_mask = torch.zeros((len(seqs), comp_width))
    old = torch.zeros((len(seqs), comp_width))
    for i, (r, s) in enumerate(zip(rollouts, seqs)):
        ids[i, : len(s)] = torch.tensor(s)
        attn[i, : len(s)] = 1
        comp_mask[i, : len(r.completion_ids)] = 1
        old[i, : len(r.old_logp)] = torch.tensor(r.old_logp)
    return ids, attn, comp_mask, old


LOGPROB_CHUNK = 256  # positions per block: one block's fp32 copy of the logits is chunk × vocab × 4 bytes


class _TokenLogProb(torch.autograd.Function):
    """``log softmax(logits)[target]`` = ``logits[target] − logsumexp(logits)``, a block of positions at a time.

    ``torch.log_softmax`` over the whole ``[N, T, vocab]`` writes another full-size tensor (fp32
    after ``.float()``) and keeps it for backward; here only a block is ever upcast, nothing
    full-size is kept but the logits themselves, and backward rebuilds each block's softmax:
    d/dlogits = onehot(target) − softmax. The same idea as TRL's ``selective_log_softmax`` and
    verl's ``logprobs_from_logits`` (written here from the formula, not from their code).
    """

    @staticmethod
    def forward(ctx, logits, targets, chunk):
        flat, tgt = logits.view(-1, logits.shape[-1]), targets.reshape(-1)
        out = torch.empty(tgt.shape, dtype=torch.float32, device=logits.device)
        for s in range(0, flat.shape[0], chunk):
            block = flat[s : s + chunk].float()
            out[s : s + chunk] = block.gather(1, tgt[s : s + chunk, None]).squeeze(1) - torch.logsumexp(block, dim=-1)
        ctx.save_for_backward(logits, targets)
        ctx.chunk = chunk
        return out.view(targets.shape)

    @staticmethod
    def backward(ctx, grad_out):
        logits, targets = ctx.saved_tensors
        flat, tgt, g = logits.view(-1, logits.shape[-1]), targets.reshape(-1), grad_out.reshape(-1).float()
        grad = torch.empty_like(flat)
        for s in range(0, flat.shape[0], ctx.chunk):
            e = min(s + ctx.chunk, flat.shape[0])
            block = torch.softmax(flat[s:e].float(), dim=-1).mul_(-g[s:e, None])
            block.scatter_add_(1, tgt[s:e, None], g[s:e, None])
            grad[s:e] = block
        return grad.view_as(logits), None, None


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, chunk: int = LOGPROB_CHUNK) -> torch.Tensor:
    """fp32 log-probability of ``targets`` under ``logits`` (``[..., vocab]`` → ``[...]``), differentiable,
    without a full-vocabulary log-softmax in memory."""
    if logits.shape[:-1] != targets.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and targets {tuple(targets.shape)} disagree")
    return _TokenLogProb.apply(logits.contiguous(), targets, chunk)


@torch.no_grad()
def token_entropy(logits: torch.Tensor, chunk: int = LOGPROB_CHUNK) -> torch.Tensor:
    """Entropy of each position's distribution (``logsumexp − Σ p·logit``), a block at a time; no gradient."""
    flat = logits.reshape(-1, logits.shape[-1])
    out = torch.empty(flat.shape[0], dtype=torch.float32, device=logits.device)
    for s in range(0, flat.shape[0], chunk):
        block = flat[s : s + chunk].float()
        lse = torch.logsumexp(block, dim=-1)
        out[s : s + chunk] = lse - (torch.softmax(block, dim=-1) * block).sum(-1)
    return out.view(logits.shape[:-1])


def reference_completion_logprobs(model, rollouts: list[Rollout], pad_id: int, *, with_entropy: bool = False):
    """The plain way — a full fp32 log-softmax over every position, then the completion slice — as
    :func:`completion_logprobs` computed it before it learned to skip the prompt and the full
    softmax. Kept as the readable witness the fast version is tested (and benchmarked) against."""
    ids, attn, comp_mask, _ = pad_batch(rollouts, pad_id)
    logits = model(input_ids=ids, attention_mask=attn).logits.float()
    logp_all = torch.log_softmax(logits[:, :-1], dim=-1)
    token_logp = logp_all.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    out, ent = torch.zeros(comp_mask.shape), torch.zeros(comp_mask.shape)
    for i, r in enumerate(rollouts):
        start, n = len(r.prompt_ids) - 1, len(r.completion_ids)
        out[i, :n] = token_logp[i, start : start + n]
        if with_entropy:
            p = logp_all[i, start : start + n].detach()
            ent[i, :n] = -(p.exp() * p).sum(-1)
    return out, comp_mask, ent


def completion_logprobs(model, rollouts: list[Rollout], pad_id: int, *, with_entropy: bool = False,
                        chunk: int = LOGPROB_CHUNK, share_prompts: bool = True, temperature: float = 1.0):
    """Per-token log-probs of each completion under ``model``: ``[N, T_completion]`` (+ entropy).

    Only completion positions are scored: prompts are left-padded and completions right-padded
    (TRL's layout), so every completion starts in the same column and the model is asked for the
    logits of those T columns alone (``logits_to_keep``) — the prompt's positions never reach the
    vocabulary projection. The log-prob of the chosen token is its logit minus a blockwise
    logsumexp (:func:`token_logprobs`). Position ids follow the attention mask, so left padding
    does not shift a sequence's positions. Rollouts that share a prompt (a GRPO group) run it once
    (:func:`_shared_prompt_logprobs`; ``share_prompts=False``: every sequence whole, for the benchmark).
    ``temperature``: score under softmax(logits / T), the distribution a sampler at T drew from.
    """
    if not temperature > 0:
        raise ValueError(f"completion_logprobs: temperature must be > 0, got {temperature!r}")
    if not rollouts or any(not r.prompt_ids or not r.completion_ids for r in rollouts):
        raise ValueError("completion_logprobs needs rollouts with a non-empty prompt and completion each")
    prompts: dict[tuple[int, ...], int] = {}
    owner = [prompts.setdefault(tuple(r.prompt_ids), len(prompts)) for r in rollouts]
    if share_prompts and len(prompts) < len(rollouts):  # a GRPO group: G completions of one prompt
        return _shared_prompt_logprobs(model, rollouts, [list(p) for p in prompts], owner, pad_id,
                                       with_entropy=with_entropy, chunk=chunk, temperature=temperature)
    width_p = max(len(r.prompt_ids) for r in rollouts)
    width_c = max(len(r.completion_ids) for r in rollouts)
    ids = torch.full((len(rollouts), width_p + width_c), pad_id, dtype=torch.long)
    attn = torch.zeros_like(ids)
    comp_mask = torch.zeros((len(rollouts), width_c))
    for i, r in enumerate(rollouts):
        p, c = len(r.prompt_ids), len(r.completion_ids)
        ids[i, width_p - p : width_p + c] = torch.tensor(r.prompt_ids + r.completion_ids)
        attn[i, width_p - p : width_p + c] = 1
        comp_mask[i, :c] = 1
    positions = (attn.cumsum(-1) - 1).clamp(min=0)
    # completion token j sits in column width_p + j and is predicted by the logits of the column before
    keep = torch.arange(width_p - 1, width_p + width_c - 1)
    device = model.device
    logits = model(input_ids=ids.to(device), attention_mask=attn.to(device), position_ids=positions.to(device),
                   logits_to_keep=keep.to(device)).logits
    if logits.shape[1] != width_c:  # a model that ignores logits_to_keep: same numbers, more memory
        logits = logits[:, keep.to(device)]
    if temperature != 1.0:
        logits = logits / temperature
    targets = ids[:, width_p:].to(device)
    logp = token_logprobs(logits, targets, chunk) * comp_mask.to(device)
    if not with_entropy:
        return logp, comp_mask.to(device)
    return logp, comp_mask.to(device), token_entropy(logits.detach(), chunk) * comp_mask.to(device)


def _shared_prompt_logprobs(model, rollouts: list[Rollout], prompts: list[list[int]], owner: list[int], pad_id: int,
                            *, with_entropy: bool, chunk: int, temperature: float = 1.0):
    """:func:`completion_logprobs` when rollouts share prompts: each distinct prompt is run once and its
    keys and values are copied to every completion of it (``index_select``, differentiable, so the
    gradient through the prompt is the sum over its completions — the same as running it G times).

    Why: a GRPO group is G completions of one prompt, and a chat prompt (system message, question) is
    often longer than the completion: SmolLM2's syllogism prompts are ~110 tokens, its completions ~50,
    so a group of 6 costs 6 × 160 = 960 token-passes run whole, 110 + 6 × 50 = 410 this way.
    """
    device = model.device
    width_p = max(len(p) for p in prompts)
    width_c = max(len(r.completion_ids) for r in rollouts)
    p_ids = torch.full((len(prompts), width_p), pad_id, dtype=torch.long)
    p_attn = torch.zeros_like(p_ids)
    for i, p in enumerate(prompts):
        p_ids[i, width_p - len(p):] = torch.tensor(p)
        p_attn[i, width_p - len(p):] = 1
    p_pos = (p_attn.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=p_ids.to(device), attention_mask=p_attn.to(device), position_ids=p_pos.to(device),
                use_cache=True, logits_to_keep=1)
    key = cache_keyword(model)
    cache = out.cache if key == "cache" else out.past_key_values
    first_logits = out.logits[:, -1]  # the last prompt position predicts completion token 0
    index = torch.tensor(owner, device=device)
    cache.reorder_cache(index)  # every layer's keys/values: one row per completion
    c_ids = torch.full((len(rollouts), width_c), pad_id, dtype=torch.long)
    comp_mask = torch.zeros((len(rollouts), width_c))
    for i, r in enumerate(rollouts):
        c_ids[i, : len(r.completion_ids)] = torch.tensor(r.completion_ids)
        comp_mask[i, : len(r.completion_ids)] = 1
    attn = torch.cat([p_attn[index.cpu()], torch.ones((len(rollouts), width_c), dtype=torch.long)], dim=1)
    c_pos = p_attn.sum(-1)[index.cpu()][:, None] + torch.arange(width_c)[None, :]
    logits = first_logits[index][:, None]
    if width_c > 1:  # the completion's last token predicts nothing we score: it is not fed
        rest = model(input_ids=c_ids[:, :-1].to(device), attention_mask=attn[:, :-1].to(device),
                     position_ids=c_pos[:, :-1].to(device), **{key: cache}, use_cache=True).logits
        logits = torch.cat([logits, rest], dim=1)
    if temperature != 1.0:
        logits = logits / temperature
    targets, comp_mask = c_ids.to(device), comp_mask.to(device)
    logp = token_logprobs(logits, targets, chunk) * comp_mask
    if not with_entropy:
        return logp, comp_mask
    return logp, comp_mask, token_entropy(logits.detach(), chunk) * comp_mask


def truncated_importance_weights(learner_logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor,
                                 cap: float) -> torch.Tensor:
    """``min(π_learner / π_sampler, cap)`` per token, detached — truncated importance sampling.

    vLLM samples with its own kernels (bf16, fused attention, another reduction order), so the
    tokens come from a distribution slightly different from the one the learner differentiates;
    weighting each token's loss by this ratio makes the update an estimate under the learner's
    policy again, and the cap keeps a rare token's weight from blowing the step up. Yao et al.
    2025, "Your efficient RL framework secretly brings you off-policy RL training" (TIS); TRL 1.16
    ``vllm_importance_sampling_mode="token_truncate"``. Padding positions get weight 1.
    """
    diff = ((learner_logp - sampler_logp) * mask).detach()
    return torch.exp(diff).clamp(max=cap)


# ------------------------------------------------------------------ probes: a few fixed completions, followed


@dataclass
class ProbeSet:
    """A handful of fixed completions whose log-probs the trainer records as the policy learns.

    One update moves a log-prob by thousandths of a nat; what GRPO does shows over a run: the
    completions it rewarded grow likelier, the ones it penalised less likely. So before training
    we keep, for a few questions, the sampled completion with the highest advantage and the one
    with the lowest, both drawn from the starting policy, and score those *same* token sequences
    again every ``every`` steps (a no-grad forward of a few sequences: cheap next to sampling).
    The figure this feeds is the "log-prob of the good completion rises" plot of the reference
    article. ``roles[i]``: "high" (advantage > 0), "low" (< 0), or "tie" (a group without signal,
    kept so a run whose first batch has none still has something to follow).
    """

    rollouts: list[Rollout]
    roles: list[str]
    groups: list[int]  # which question (0, 1, …) each probe completion answers
    every: int = 1
    # each probe's tokens from the fork on, [start, end): where its completion first differs from the
    # other probe of its question (None for "tie" probes). A rewarded and a penalised completion share
    # their opening (the same template, often the same restatement); what the policy chose differently
    # starts at the fork, and the shared part's drift pulls both probes alike.
    fork_spans: list[tuple[int, int] | None] | None = None

    @classmethod
    def from_rollouts(cls, rollouts: list[Rollout], group_size: int, *, n_questions: int = 3,
                      every: int = 1) -> ProbeSet:
        """The highest- and lowest-advantage completion of up to ``n_questions`` groups of
        ``rollouts`` (consecutive runs of ``group_size``, as the trainer lays them out). Groups
        with differing rewards come first; when fewer than ``n_questions`` have any, groups
        without signal fill in (their two probes are "tie"). Empty completions are never probes.
        Each high/low pair's fork is found too (``fork_spans``)."""
        if group_size < 1 or n_questions < 1 or every < 1:
            raise ValueError(f"group_size, n_questions and every must be ≥ 1; got {group_size}, {n_questions}, {every}")
        groups = [[r for r in rollouts[k : k + group_size] if r.completion_ids]
                  for k in range(0, len(rollouts), group_size)]
        groups = [g for g in groups if g]
        if not groups:
            raise ValueError("ProbeSet.from_rollouts needs at least one rollout with a non-empty completion")
        signal = [g for g in groups if max(r.advantage for r in g) > min(r.advantage for r in g)]
        chosen = (signal + [g for g in groups if g not in signal])[:n_questions]
        picks, roles, owners = [], [], []
        for q, g in enumerate(chosen):
            hi, lo = max(g, key=lambda r: r.advantage), min(g, key=lambda r: r.advantage)
            pair = [(hi, "high"), (lo, "low")] if hi.advantage > lo.advantage else [(hi, "tie"), (g[-1], "tie")]
            for r, role in pair[: 1 if pair[0][0] is pair[1][0] else 2]:  # a group of one: one probe
                picks.append(Rollout(list(r.prompt_ids), list(r.completion_ids), [], r.advantage, r.reward,
                                     r.truncated))
                roles.append(role)
                owners.append(q)
        spans: list[tuple[int, int] | None] = [None] * len(picks)
        for i in range(len(picks) - 1):
            if roles[i] == "high" and roles[i + 1] == "low":  # the pair of one question, laid out high then low
                a, b = picks[i].completion_ids, picks[i + 1].completion_ids
                d = fork_index(a, b)
                spans[i], spans[i + 1] = (min(d, len(a) - 1), len(a)), (min(d, len(b) - 1), len(b))
        return cls(picks, roles, owners, every, spans)

    @classmethod
    def sample(cls, model, tok, cfg: TrainConfig, entries: list[dict], *, n_questions: int = 3, every: int = 1,
               max_batches: int = 10) -> ProbeSet:
        """Chapter 4's probe set, drawn as its section 2 draws it: the first B questions of ``entries``
        sampled G times from ``model`` (seed ``cfg.seed``), the next B (seed + B) while no group's
        rewards differ, up to ``max_batches`` batches; then :meth:`from_rollouts`."""
        from kimina_edu.rollouts import generate

        b = cfg.questions_per_batch
        for k in range(max_batches):
            questions = entries[k * b : (k + 1) * b]
            prompt_ids, comps = generate(model, tok, [chat_prompt(tok, q["question"]) for q in questions],
                                         max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, top_p=cfg.top_p,
                                         min_p=cfg.min_p, num_return_sequences=cfg.group_size, seed=cfg.seed + k * b)
            texts = tok.batch_decode(comps, skip_special_tokens=True)
            scores = [score_completion(t, questions[i // cfg.group_size]) for i, t in enumerate(texts)]
            rewards = torch.tensor([x.total for x in scores]).view(len(questions), cfg.group_size)
            if bool((rewards.max(1).values > rewards.min(1).values).any()) or k == max_batches - 1:
                break
        adv = group_advantages(rewards, scale=cfg.scale).flatten()
        rollouts = [Rollout(prompt_ids[i // cfg.group_size], c, [], float(a), x.total, tok.eos_token_id not in c)
                    for i, (c, a, x) in enumerate(zip(comps, adv, scores))]
        return cls.from_rollouts(rollouts, cfg.group_size, n_questions=n_questions, every=every)

    @torch.no_grad()
    def score(self, model, pad_id: int) -> list[list[float]]:
        """Each probe completion's per-token log-probs under ``model`` (evaluation mode, no gradient)."""
        was_training = model.training
        model.eval()
        try:
            logp, _ = completion_logprobs(model, self.rollouts, pad_id)
        finally:
            model.train(was_training)
        return [logp[i, : len(r.completion_ids)].float().cpu().tolist() for i, r in enumerate(self.rollouts)]

    def rows(self, model, pad_id: int, step: int) -> list[dict]:
        """One ``probes.jsonl`` row per probe completion at ``step``: its summed and per-token log-prob."""
        spans = self.fork_spans or [None] * len(self.rollouts)
        return [{"step": step, "probe": i, "group": self.groups[i], "role": self.roles[i],
                 "advantage": self.rollouts[i].advantage, "reward": self.rollouts[i].reward,
                 "logp": sum(lp), "token_logp": lp, "fork_span": list(spans[i]) if spans[i] else None,
                 "fork_logp": sum(lp[spans[i][0] : spans[i][1]]) if spans[i] else None}
                for i, lp in enumerate(self.score(model, pad_id))]


def fork_index(a: list[int], b: list[int]) -> int:
    """The first position where token lists ``a`` and ``b`` differ (the shorter length if one is the
    other's prefix)."""
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


def probe_table(rows: list[dict]) -> tuple[list[int], list[list[list[float]]]]:
    """``probes.jsonl`` rows → (the recorded steps, ``token_logp[checkpoint][probe]``), one entry per step."""
    steps = sorted({r["step"] for r in rows})
    n = 1 + max((r["probe"] for r in rows), default=-1)
    table = {s: [[] for _ in range(n)] for s in steps}
    for r in rows:
        table[r["step"]][r["probe"]] = list(r["token_logp"])
    return steps, [table[s] for s in steps]


def probe_summary(rows: list[dict]) -> dict[str, float | int | None]:
    """What the probe shows over a run, from ``probes.jsonl`` rows.

    ``probe_high_rise`` / ``probe_low_rise``: last − first summed log-prob (nats), averaged over the
    high- / low-advantage probes. ``probe_noise``: the std of the high probes' change from one
    recorded step to the next (around its mean drift), averaged — how much the log-prob wanders
    between checkpoints. ``probe_drift_z``: the high probes' mean change per checkpoint divided by
    its standard error (noise / √intervals): a walk with no drift would land within ±2 of 0.
    None where the run recorded too little (one checkpoint, or no probe of that role).
    """
    steps, table = probe_table(rows)
    roles = {r["probe"]: r["role"] for r in rows}
    out: dict[str, float | int | None] = {"probe_checkpoints": len(steps)}
    sums = [[sum(table[c][p]) for c in range(len(steps))] for p in range(len(table[0]) if table else 0)]
    out.update(_drift(sums, roles, "probe"))
    # the same figures from each pair's fork on (rows recorded with fork spans)
    spans = {r["probe"]: r.get("fork_span") for r in rows}
    fork = [[sum(table[c][p][spans[p][0] : spans[p][1]]) for c in range(len(steps))] if spans.get(p) else None
            for p in range(len(sums))]
    out.update(_drift(fork, roles, "probe_fork"))
    return out


def _drift(series: list[list[float] | None], roles: dict[int, str], prefix: str) -> dict[str, float | None]:
    """Rise (last − first) of the high and low probes, the high probes' step-to-step noise and drift z."""
    out: dict[str, float | None] = {f"{prefix}_high_rise": None, f"{prefix}_low_rise": None,
                                    f"{prefix}_noise": None, f"{prefix}_drift_z": None}
    if not series or len(next((s for s in series if s), [])) < 2:
        return out
    for role in ("high", "low"):
        rises = [s[-1] - s[0] for p, s in enumerate(series) if s and roles.get(p) == role]
        out[f"{prefix}_{role}_rise"] = sum(rises) / len(rises) if rises else None
    high = [torch.tensor(s).diff() for p, s in enumerate(series) if s and roles.get(p) == "high"]
    if high and len(high[0]) >= 2:
        noise = sum(float(d.std()) for d in high) / len(high)
        out[f"{prefix}_noise"] = noise
        mean_step = sum(float(d.mean()) for d in high) / len(high)
        out[f"{prefix}_drift_z"] = mean_step / (noise / math.sqrt(len(high[0]))) if noise > 0 else None
    return out


# ------------------------------------------------------------------ the trainer


class GRPOTrainer:
    """From-scratch GRPO. ``train()`` runs ``cfg.steps`` steps; every step logs one JSON line."""

    def __init__(self, model, tok, cfg: TrainConfig, *, train_entries: list[dict] | None = None,
                 eval_entries: list[dict] | None = None, output_dir: str | Path = "grpo_run",
                 reward_fn: Callable[[str, dict], RewardBreakdown] = score_completion, backend=None,
                 progress: bool = True, probes: ProbeSet | None = None):
        self.model, self.tok, self.cfg = model, tok, cfg
        self.output_dir = Path(output_dir)
        self.output_dir.mkdir(parents=True, exist_ok=True)
        # the course's RL questions (its task settings, its own seed) unless given
        self.train_entries = train_entries if train_entries is not None else make_entries(cfg.task, 5000, SEEDS["rl"])
        self.eval_entries = eval_entries or []
        self.reward_fn, self.progress = reward_fn, progress
        self.backend = backend or TransformersBackend()
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.step = 0
        self.data_rng = random.Random(cfg.seed)
        torch.manual_seed(cfg.seed)
        self.log_path = self.output_dir / "log.jsonl"
        self.rollout_path = self.output_dir / "rollouts.jsonl"
        # fixed completions scored at the start, every probes.every steps and at the end (ProbeSet)
        self.probes, self.probe_path = probes, self.output_dir / "probes.jsonl"

    # ---- experience collection
    @torch.no_grad()
    def collect_experience(self) -> tuple[list[Rollout], dict[str, float]]:
        cfg, tok = self.cfg, self.tok
        rounds = max(1, math.ceil(cfg.buffer_size / (cfg.questions_per_batch * cfg.group_size)))
        buffer, rewards_all, parts, lengths, truncated, gen_tokens, gen_seconds = [], [], [], [], [], 0, 0.0
        logged = []
        self.model.eval()
        settings = cfg.sampling()
        t0 = time.perf_counter()
        self.backend.load_policy(self.model)  # once per step: the weights have moved since the last collection
        gen_seconds += time.perf_counter() - t0
        for _ in range(rounds):
            entries = self.draw_questions()
            prompt_ids = encode_prompts(tok, [chat_prompt(tok, e["question"]) for e in entries])
            t0 = time.perf_counter()
            gen = self.backend.generate(tok, prompt_ids, settings)
            prompt_ids, completions = gen.prompt_ids, gen.completion_ids
            gen_seconds += time.perf_counter() - t0
            gen_tokens += sum(len(c) for c in completions)
            texts = tok.batch_decode(completions, skip_special_tokens=True)
            scores = [self.reward_fn(t, entries[i // cfg.group_size]) for i, t in enumerate(texts)]
            rewards = torch.tensor([s.total for s in scores]).view(cfg.questions_per_batch, cfg.group_size)
            adv = group_advantages(rewards, scale=cfg.scale).flatten()
            rows = [Rollout(prompt_ids[i // cfg.group_size], c, [], float(adv[i]), scores[i].total,
                            tok.eos_token_id not in c, None if gen.sampler_logp is None else gen.sampler_logp[i])
                    for i, c in enumerate(completions)]
            if not self.on_policy_update():
                old_logp, _ = completion_logprobs(self.model, rows, tok.pad_token_id, temperature=self.score_temperature)
                for r, lp in zip(rows, old_logp):
                    r.old_logp = lp[: len(r.completion_ids)].tolist()
            buffer.extend(rows)
            rewards_all.append(rewards)
            parts.extend(scores)
            lengths.extend(len(c) for c in completions)
            truncated.extend(r.truncated for r in rows)
            for i in range(min(cfg.log_rollouts, len(rows))):
                j = i * cfg.group_size % len(rows)  # the first completion of the first few questions
                logged.append({"step": self.step, "question": entries[j // cfg.group_size]["question"],
                               "completion": texts[j], "reward": rows[j].reward, "advantage": rows[j].advantage})
        self.backend.release()  # the sampler's weights are not needed while the policy learns
        rewards = torch.cat(rewards_all)
        zero_std = (rewards.max(1).values == rewards.min(1).values).float().mean().item()
        per_question = rewards.mean(1)  # questions are the independent draws; a group's samples are not
        reward_se = per_question.std().item() / math.sqrt(len(per_question)) if len(per_question) > 1 else 0.0
        advantages = torch.tensor([r.advantage for r in buffer])
        self._pending_rollouts = logged  # written with the step's log row, when the step has finished
        stats = {
            "reward_mean": rewards.mean().item(), "reward_std": rewards.std().item(), "reward_se": reward_se,
            # ≈ 0 and ≈ the share of groups with signal under scale="group": what the gradient is fed
            "adv_mean": advantages.mean().item(), "adv_std": advantages.std().item() if len(advantages) > 1 else 0.0,
            "format": sum(p.format for p in parts) / len(parts), "correct": sum(p.correct for p in parts) / len(parts),
            "frac_zero_std_groups": zero_std, "completion_length": sum(lengths) / len(lengths),
            "truncation_rate": sum(truncated) / len(truncated), "gen_tokens_per_s": gen_tokens / max(gen_seconds, 1e-9),
        }
        return buffer, stats

    def draw_questions(self) -> list[dict]:
        """One round's questions, drawn with replacement; with ``balance_answers`` the i-th question
        is drawn among those whose answer is the (i mod k)-th of the task's k answers."""
        n, pool = self.cfg.questions_per_batch, self.train_entries
        if not self.cfg.balance_answers:
            return [pool[self.data_rng.randrange(len(pool))] for _ in range(n)]
        if not hasattr(self, "_by_answer"):
            by: dict[str, list[dict]] = {}
            for e in pool:
                if e.get("answer") is None:
                    raise ValueError("balance_answers needs a task whose questions each have one answer; "
                                     f"this one is open-ended ({e['question'][:60]!r}…): set balance_answers=False")
                by.setdefault(e["answer"], []).append(e)
            self._by_answer = [by[a] for a in sorted(by)]
        offset = self.data_rng.randrange(len(self._by_answer))  # which answer an odd batch has one more of
        buckets = [self._by_answer[(i + offset) % len(self._by_answer)] for i in range(n)]
        return [b[self.data_rng.randrange(len(b))] for b in buckets]

    @property
    def score_temperature(self) -> float:
        """The temperature the learner scores log-probs at (``cfg.score_at_temperature``; else 1)."""
        return self.cfg.temperature if self.cfg.score_at_temperature and self.cfg.temperature > 0 else 1.0

    def on_policy_update(self) -> bool:
        """True when the learning phase makes exactly one optimizer step over the buffer: the
        policy that sampled is the policy being updated, so the old log-probs equal the new ones
        (detached) and their separate forward pass can be skipped — as TRL does in this case."""
        cfg = self.cfg
        per_round = cfg.questions_per_batch * cfg.group_size
        collected = max(1, math.ceil(cfg.buffer_size / per_round)) * per_round
        return cfg.epochs == 1 and math.ceil(collected / cfg.minibatch_size) <= cfg.grad_accum

    # ---- learning phase
    def learn(self, buffer: list[Rollout]) -> dict[str, float]:
        cfg, _tok = self.cfg, self.tok
        if cfg.mask_truncated:
            buffer = [r for r in buffer if not r.truncated]
        buffer = [r for r in buffer if r.advantage != 0.0 or cfg.beta > 0]
        if not buffer:
            return {"skipped": 1.0}
        step = self.step + 1  # the step this update belongs to (train_step counts it after learning)
        measure = bool(cfg.shift_every) and (step == 1 or step % cfg.shift_every == 0)
        before = self._mean_token_logps(buffer) if measure else None
        self.model.train()
        totals: dict[str, float] = {}
        n_mb, n_tokens, t0 = 0, 0, time.perf_counter()
        for _ in range(cfg.epochs):
            order = list(range(len(buffer)))
            self.data_rng.shuffle(order)
            minibatches = [[buffer[i] for i in order[k : k + cfg.minibatch_size]]
                           for k in range(0, len(order), cfg.minibatch_size)]
            for start in range(0, len(minibatches), cfg.grad_accum):
                group = minibatches[start : start + cfg.grad_accum]
                self.optimizer.zero_grad(set_to_none=True)
                for mb in group:
                    stats = self._minibatch_backward(mb, scale=1.0 / len(group))
                    for k, v in stats.items():
                        totals[k] = totals.get(k, 0.0) + v
                    n_mb += 1
                    n_tokens += sum(len(r.prompt_ids) + len(r.completion_ids) for r in mb)
                grad_norm = torch.nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm)
                totals["grad_norm"] = totals.get("grad_norm", 0.0) + float(grad_norm) * len(group)
                self.optimizer.step()
        self.model.eval()
        out = {k: v / n_mb for k, v in totals.items()}
        out["train_tokens_per_s"] = n_tokens / (time.perf_counter() - t0)
        out["skipped"] = 0.0
        if before is not None:
            out.update(update_shift([r.advantage for r in buffer], before, self._mean_token_logps(buffer)))
        return out

    @torch.no_grad()
    def _mean_token_logps(self, rollouts: list[Rollout]) -> list[float]:
        """Each rollout's mean per-token completion log-prob under the current weights (evaluation
        mode, no gradient), in minibatch-sized chunks."""
        was_training = self.model.training
        self.model.eval()
        out: list[float] = []
        for k in range(0, len(rollouts), self.cfg.minibatch_size):
            logp, mask = completion_logprobs(self.model, rollouts[k : k + self.cfg.minibatch_size], self.tok.pad_token_id,
                                             temperature=self.score_temperature)
            out.extend(((logp * mask).sum(1) / mask.sum(1).clamp(min=1)).tolist())
        self.model.train(was_training)
        return out

    def _minibatch_backward(self, mb: list[Rollout], scale: float) -> dict[str, float]:
        cfg = self.cfg
        logp, mask, entropy = completion_logprobs(self.model, mb, self.tok.pad_token_id, with_entropy=True,
                                                  temperature=self.score_temperature)
        if self.on_policy_update():  # the weights have not moved since sampling: old = new, exactly
            old = logp.detach()
        else:
            old = pad_batch(mb, self.tok.pad_token_id)[3].to(logp.device)
        adv = torch.tensor([r.advantage for r in mb], device=logp.device)
        ref_logp = None
        if cfg.beta > 0:
            ref_logp = self._reference_logprobs(mb)
        weight = self._sampler_weights(mb, old, mask)
        loss, stats = policy_loss(logp, old, adv, mask, loss_type=cfg.loss_type, eps_low=cfg.eps_low,
                                  eps_high=cfg.eps_high, max_len=cfg.max_new_tokens, ref_logp=ref_logp, beta=cfg.beta,
                                  token_weight=weight)
        (loss * scale).backward()
        stats["loss"] = loss.item()
        stats["entropy"] = ((entropy * mask).sum() / mask.sum()).item()
        if weight is not None:
            stats["tis_weight_mean"] = ((weight * mask).sum() / mask.sum()).item()
            stats["tis_capped_frac"] = (((weight >= cfg.tis_cap).float() * mask).sum() / mask.sum()).item()
        return stats

    def _sampler_weights(self, mb: list[Rollout], learner_logp: torch.Tensor, mask: torch.Tensor):
        """Truncated importance weights when another engine sampled (vLLM); ``None`` when the
        learner's own model did (transformers), where the ratio is exactly 1."""
        given = [r.sampler_logp is not None for r in mb]
        if not any(given):
            return None
        if not all(given) or any(len(r.sampler_logp) != len(r.completion_ids) for r in mb):
            raise RuntimeError("sampler log-probs are missing or mis-sized for some rollouts of this minibatch: "
                               "every rollout must come from the same backend, one log-prob per completion token")
        sampler = torch.zeros_like(learner_logp)
        for i, r in enumerate(mb):
            sampler[i, : len(r.sampler_logp)] = torch.tensor(r.sampler_logp, dtype=sampler.dtype)
        return truncated_importance_weights(learner_logp, sampler, mask, self.cfg.tis_cap)

    @torch.no_grad()
    def _reference_logprobs(self, mb: list[Rollout]) -> torch.Tensor:
        """With LoRA the reference is the same model with adapters off: no second copy."""
        if not hasattr(self.model, "disable_adapter"):
            raise ValueError("beta > 0 needs a PEFT (LoRA) model: its reference is the model with adapters disabled")
        with self.model.disable_adapter():
            ref, _ = completion_logprobs(self.model, mb, self.tok.pad_token_id, temperature=self.score_temperature)
        return ref

    # ---- evaluation, checkpoints, the loop
    def evaluate(self) -> dict[str, float]:
        from kimina_edu.eval import evaluate_policy

        r = evaluate_policy(self.model, self.tok, self.eval_entries, max_new_tokens=self.cfg.max_new_tokens,
                            progress=False)
        return {"eval_accuracy": r["accuracy"], "eval_format_rate": r["format_rate"]}

    def train(self, on_step: Callable[[dict], None] | None = None) -> list[dict]:
        from tqdm.auto import tqdm

        if getattr(self, "_torn", False):
            raise RuntimeError(f"this trainer was stopped in the middle of step {self.step + 1}, so its weights are "
                               "half-updated: call resume_from(latest_checkpoint(output_dir)) first, or make a new trainer")
        rewind_logs(self)  # rows past this step (an older run in the same folder) would be duplicated
        self._record_probes(start=True)
        bar = tqdm(total=self.cfg.steps, initial=self.step, desc="GRPO", disable=not self.progress)
        in_step = False
        try:
            with DeferredInterrupt() as ctrl_c:  # first Ctrl-C: the step finishes, is saved, then we stop
                # the guard looks before every step, the first included: a run resumed from a checkpoint
                # written at (or after) the collapse stops there, as the uninterrupted run did
                while not self.collapsed() and self.step < self.cfg.steps:
                    in_step = True
                    row = self.train_step()
                    in_step = False
                    bar.update(1)
                    bar.set_postfix(reward=f"{row['reward_mean']:.2f}", len=f"{row['completion_length']:.0f}")
                    if on_step:
                        on_step(row)
                    if ctrl_c.requested:
                        raise KeyboardInterrupt
                    if self.cfg.checkpoint_every and self.step % self.cfg.checkpoint_every == 0:
                        self.save_checkpoint()
                    if self.out_of_signal():
                        print(f"stopped at step {self.step}: at most a tenth of the last {self.cfg.silent_window} "
                              "steps had a group whose rewards differed — nothing left to learn from these samples")
                        break
            if self.probes is not None and getattr(self, "_probe_step", None) != self.step:
                self._record_probes()  # the run's last step, when it fell between two probe steps
        except BaseException as exc:
            if in_step:  # a half-finished step is no state to resume from: keep the last clean checkpoint
                self._torn = True
                if isinstance(exc, KeyboardInterrupt):
                    print(f"interrupted in the middle of step {self.step + 1}: nothing saved; the last clean "
                          f"checkpoint is {latest_checkpoint(self.output_dir) or 'none (checkpoint_every=0)'}")
            elif isinstance(exc, KeyboardInterrupt):
                print(f"interrupted after step {self.step}: checkpoint saved to {self.save_checkpoint()}")
            raise
        finally:
            bar.close()
        return read_log(self.log_path)

    def collapsed(self) -> bool:
        """The collapse guard (``cfg.guard_window``): True — after restoring the weights of the best
        window and printing one line — once the last window's sampled accuracy fell ``guard_drop``
        below the best earlier window's. Windows are consecutive, non-overlapping blocks of steps.
        The best window's weights are kept by name and saved with every checkpoint, so a resumed run
        puts back the same weights as the run that never stopped."""
        w = self.cfg.guard_window
        if not w or self.step % w:
            return False
        acc = [r["correct"] for r in read_log(self.log_path)]
        windows = [sum(acc[k : k + w]) / w for k in range(0, len(acc) - w + 1, w)]
        if not windows:
            return False
        best = max(range(len(windows) - 1), key=windows.__getitem__, default=None)
        if best is not None and windows[-1] < windows[best] - self.cfg.guard_drop:
            snap = getattr(self, "_guard_best", None)
            put_back = ""
            if snap is not None and snap[0] == (best + 1) * w:
                trainable = self.trainable()
                with torch.no_grad():
                    for name, value in snap[1].items():
                        trainable[name].copy_(value)
                put_back = f"; the weights after step {snap[0]} are back"
            print(f"collapse guard: stopped at step {self.step}: sampled accuracy {windows[-1]:.0%} over the last {w} "
                  f"steps, down from {windows[best]:.0%} in steps {best * w + 1}–{(best + 1) * w}{put_back}")
            self.guard_stopped = self.step
            return True
        if windows[-1] >= max(windows):  # the best window so far: keep its weights (LoRA: a few MB)
            self._guard_best = (self.step, {n: p.detach().clone() for n, p in self.trainable().items()})
        return False

    def trainable(self) -> dict[str, torch.nn.Parameter]:
        """The weights this run trains, by name: what a checkpoint and the collapse guard keep."""
        return {n: p for n, p in self.model.named_parameters() if p.requires_grad}

    def out_of_signal(self) -> bool:
        """True when at most a tenth of the last ``cfg.silent_window`` steps made an update."""
        if not self.cfg.silent_window or self.step < self.cfg.silent_window:
            return False
        return signal_exhausted([bool(r.get("skipped")) for r in read_log(self.log_path)], self.cfg.silent_window)

    def train_step(self) -> dict:
        buffer, stats = self.collect_experience()
        if stats["frac_zero_std_groups"] == 1.0 and self.cfg.beta == 0:
            learn_stats = {"skipped": 1.0, "skip_reason": "every group has zero reward variance: no signal"}
        else:
            learn_stats = self.learn(buffer)
        self.step += 1
        row = {"step": self.step, **stats, **learn_stats}
        if self.cfg.eval_every and self.eval_entries and self.step % self.cfg.eval_every == 0:
            row.update(self.evaluate())
        # the step's rows land together, after the step: an interrupted step leaves no rows behind
        append_jsonl(self.rollout_path, getattr(self, "_pending_rollouts", []))
        self._pending_rollouts = []
        append_jsonl(self.log_path, [row])
        if self.probes is not None and self.step % self.probes.every == 0:
            self._record_probes()
        return row

    def _record_probes(self, start: bool = False) -> None:
        """Score the probe completions under the current weights into ``probes.jsonl``; at the start of
        ``train()``, first drop rows from this step on (an older run's, or a resumed run's future)."""
        if self.probes is None:
            return
        if start:
            rewind_jsonl(self.probe_path, lambda row: row.get("step", self.step) < self.step)
        append_jsonl(self.probe_path, self.probes.rows(self.model, self.tok.pad_token_id, self.step))
        self._probe_step = self.step

    def save_checkpoint(self) -> Path:
        """``checkpoints/step_NNNNN``: weights, optimizer and RNG state, written atomically and
        checksummed, no pickle (:mod:`kimina_edu.checkpoints`)."""
        return save_trainer(self)

    def resume_from(self, path: str | Path) -> None:
        """Continue a run: same weights, optimizer, data order and RNG state as when saved; the
        checkpoint is verified first, and log rows after its step are dropped (they will be rewritten)."""
        restore_trainer(self, path)


def update_shift(advantages: list[float], before: list[float], after: list[float]) -> dict[str, float]:
    """What one update did to the completions it learned from: ``shift_pos`` / ``shift_neg``, the mean
    change (after − before) of the per-token log-prob over completions with advantage > 0 / < 0
    (NaN-free: a side without completions is left out), and ``shift_agree``, the share of completions
    with A ≠ 0 whose log-prob moved the way their advantage's sign asked."""
    if not len(advantages) == len(before) == len(after):
        raise ValueError(f"update_shift: {len(advantages)} advantages, {len(before)} before, {len(after)} after")
    pos = [b - a for adv, a, b in zip(advantages, before, after) if adv > 0]
    neg = [b - a for adv, a, b in zip(advantages, before, after) if adv < 0]
    out: dict[str, float] = {}
    if pos:
        out["shift_pos"] = sum(pos) / len(pos)
    if neg:
        out["shift_neg"] = sum(neg) / len(neg)
    if pos or neg:
        out["shift_agree"] = (sum(d > 0 for d in pos) + sum(d < 0 for d in neg)) / (len(pos) + len(neg))
    return out


def shift_summary(log: list[dict]) -> dict[str, float | int | None]:
    """Every measured update of a run (log rows with both ``shift_pos`` and ``shift_neg``):
    ``shift_updates`` (how many), ``shift_gap_frac`` (the share in which the rewarded completions
    rose above the penalised ones, shift_pos > shift_neg), the means of shift_pos / shift_neg and of
    shift_agree. None where fewer than two updates were measured."""
    rows = [r for r in log if "shift_pos" in r and "shift_neg" in r]
    out: dict[str, float | int | None] = {"shift_updates": len(rows)}
    if len(rows) < 2:
        return {**out, "shift_gap_frac": None, "shift_pos_mean": None, "shift_neg_mean": None, "shift_agree_mean": None}
    n = len(rows)
    return {**out, "shift_gap_frac": sum(r["shift_pos"] > r["shift_neg"] for r in rows) / n,
            "shift_pos_mean": sum(r["shift_pos"] for r in rows) / n,
            "shift_neg_mean": sum(r["shift_neg"] for r in rows) / n,
            "shift_agree_mean": sum(r["shift_agree"] for r in rows) / n}


def signal_exhausted(silent: list[bool], window: int) -> bool:
    """The early-stop rule (``TrainConfig.silent_window``), shared by our trainer and TRL's callback:
    ``silent`` flags each step that had no group with differing rewards; stop once the last
    ``window`` steps are all known and at most a tenth of them learned anything."""
    recent = silent[-window:] if window else []
    return bool(window) and len(recent) == window and sum(not s for s in recent) <= window // 10


def reward_at_ends(log: list[dict]) -> tuple[float, float]:
    """The mean sampled reward over the first and over the last quarter of a run's steps. Each step
    draws new questions, so one step's reward is noisy; a quarter of the run averages that out."""
    if not log:
        raise ValueError("reward_at_ends needs at least one logged step")
    quarter = max(1, len(log) // 4)
    return (sum(r["reward_mean"] for r in log[:quarter]) / quarter,
            sum(r["reward_mean"] for r in log[-quarter:]) / quarter)


def read_log(path: str | Path) -> list[dict]:
    path = Path(path)
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


__all__ = [
    "GRPOTrainer",
    "ProbeSet",
    "Rollout",
    "TrainConfig",
    "TransformersBackend",
    "VLLMBackend",
    "completion_logprobs",
    "pad_batch",
    "probe_summary",
    "probe_table",
    "read_log",
    "reward_at_ends",
    "shift_summary",
    "signal_exhausted",
    "token_entropy",
    "token_logprobs",
    "truncated_importance_weights",
    "update_shift",
]
