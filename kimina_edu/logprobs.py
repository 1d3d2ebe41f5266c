"""Per-token log-probabilities of completions under a model: what the GRPO loss differentiates (chapter 4).

A :class:`Rollout` is one sampled completion, unpadded. :func:`completion_logprobs` re-pads a batch of
them and scores only the completion positions, a GRPO group's shared prompt run once;
:func:`token_logprobs` takes the log-softmax of the chosen token a block of positions at a time, so
the full-vocabulary log-softmax never sits in memory. :func:`reference_completion_logprobs` is the
plain version they are tested against, and :func:`truncated_importance_weights` corrects for samples
drawn by another engine (vLLM).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kimina_edu.rollouts import cache_keyword


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
    """The plain way — a full fp32 log-softmax over every position, then the completion slice — without
    :func:`completion_logprobs`' savings (the prompt's positions skipped, the softmax taken a block at
    a time). Kept as the readable witness the fast version is tested (and benchmarked) against."""
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
