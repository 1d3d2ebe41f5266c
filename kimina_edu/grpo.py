"""Chapter 2 — the GRPO math: rewards → advantages → loss. Tensors only, no model code.

Shapes used throughout:
    rewards      [B, G]   B prompts, G completions each
    logp, mask   [N, T]   N = B·G completions, T completion tokens (right-padded)
    advantages   [N]      one scalar per completion, broadcast to its tokens
"""

from __future__ import annotations

from typing import Literal

import torch

Scale = Literal["group", "batch", "none"]
LossType = Literal["grpo", "bnpo", "dapo", "dr_grpo"]
LOSS_TYPES: tuple[str, ...] = ("grpo", "bnpo", "dapo", "dr_grpo")
Surrogate = Literal["clip", "cispo", "sapo"]
SURROGATES: tuple[str, ...] = ("clip", "cispo", "sapo")

# TRL 1.16's ``loss_type`` names a per-token term *and* an aggregation; here they are two knobs.
# TRL name → (surrogate, aggregation, ratio level). GSPO is no loss_type in TRL but
# ``importance_sampling_level="sequence"`` beside ``loss_type="grpo"`` (TRL's GSPO recipe).
TRL_LOSSES: dict[str, tuple[str, str, str]] = {
    "grpo": ("clip", "grpo", "token"), "bnpo": ("clip", "bnpo", "token"), "dr_grpo": ("clip", "dr_grpo", "token"),
    "dapo": ("clip", "dapo", "token"), "cispo": ("cispo", "dapo", "token"), "sapo": ("sapo", "grpo", "token"),
    "gspo": ("clip", "grpo", "sequence"),
}


def group_advantages(
    rewards: torch.Tensor, *, scale: Scale = "group", eps: float = 1e-4, unbiased: bool = True
) -> torch.Tensor:
    """Group-relative advantages ``r - mean_group``, optionally divided by a std.

    DeepSeekMath (arXiv 2402.03300): ``(r - mean) / std`` within each group of G samples.
    Dr.GRPO (arXiv 2503.20783): drop the division (``scale="none"``) — it up-weights groups
    that are almost all right or all wrong. ``scale="batch"`` divides by the std of the whole
    batch (TRL's ``scale_rewards="batch"``). ``eps`` = 1e-4 as in TRL; ``unbiased`` = Bessel.
    """
    rewards = torch.as_tensor(rewards, dtype=torch.float32)
    if rewards.ndim != 2:
        raise ValueError(f"rewards must be [B, G]; got shape {tuple(rewards.shape)}")
    if rewards.shape[1] < 2:
        raise ValueError("each group needs G >= 2 completions: a group of one has no baseline to compare with")
    bad = ~torch.isfinite(rewards)
    if bad.any():
        where = [tuple(i) for i in bad.nonzero().tolist()[:3]]
        raise ValueError(f"rewards contain {int(bad.sum())} non-finite value(s) (NaN or ±inf), first at [question, "
                         f"completion] {where}: an infinite reward makes every advantage in its group NaN. Fix the "
                         "reward function so each completion gets a finite number")
    centered = rewards - rewards.mean(dim=1, keepdim=True)
    # float32 mean of (0.85, 0.85, 0.85) is not exactly 0.85: without this line an all-equal
    # group would get tiny non-zero advantages (±6e-4 after the std division) — pure noise.
    all_equal = (rewards.max(dim=1, keepdim=True).values == rewards.min(dim=1, keepdim=True).values)
    centered = centered.masked_fill(all_equal, 0.0)
    correction = 1 if unbiased else 0
    if scale == "group":
        return centered / (rewards.std(dim=1, keepdim=True, correction=correction) + eps)
    if scale == "batch":
        return centered / (rewards.std(correction=correction) + eps)
    if scale == "none":
        return centered
    raise ValueError(f"scale must be 'group', 'batch' or 'none'; got {scale!r}")


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(π‖π_ref): ``exp(ref-logp) - (ref-logp) - 1`` (always ≥ 0).

    Schulman, "Approximating KL divergence" (2020); used by DeepSeekMath's GRPO and TRL.
    """
    delta = ref_logp - logp
    return torch.exp(delta) - delta - 1


def aggregate(
    per_token: torch.Tensor, mask: torch.Tensor, loss_type: LossType, max_len: int | None = None
) -> torch.Tensor:
    """Reduce a ``[N, T]`` per-token loss to a scalar — the one place the four losses differ.

    - ``grpo``: mean over each sequence's tokens, then over sequences (DeepSeekMath).
      A long sequence's tokens each weigh less: the length bias.
    - ``bnpo``/``dapo``: sum over all tokens / number of tokens in the batch (DAPO, arXiv 2503.14476).
      Every token weighs the same within a batch.
    - ``dr_grpo``: sum over all tokens / (N · max_len), a constant (Dr.GRPO, arXiv 2503.20783).
      Every token weighs the same in every batch: no length bias at all.
    TRL 1.16 ``GRPOTrainer._compute_loss`` writes the same four formulas (for one process and
    one gradient-accumulation step, where its ``dapo`` and ``bnpo`` coincide).
    """
    mask = mask.to(per_token.dtype)
    masked = per_token * mask
    if loss_type == "grpo":
        return (masked.sum(dim=1) / mask.sum(dim=1).clamp(min=1)).mean()
    if loss_type in ("bnpo", "dapo"):
        return masked.sum() / mask.sum().clamp(min=1)
    if loss_type == "dr_grpo":
        if max_len is None or max_len <= 0:
            raise ValueError("loss_type='dr_grpo' needs max_len (the constant L, e.g. max_new_tokens)")
        return masked.sum() / (per_token.shape[0] * max_len)
    raise ValueError(f"loss_type must be one of {LOSS_TYPES}; got {loss_type!r}")


def _check_inputs(logp, old_logp, advantages, mask) -> None:
    if logp.shape != old_logp.shape or logp.shape != mask.shape or logp.ndim != 2:
        raise ValueError(
            f"logp, old_logp and mask must all be [N, T]; got {tuple(logp.shape)}, "
            f"{tuple(old_logp.shape)}, {tuple(mask.shape)}"
        )
    if advantages.shape != (logp.shape[0],):
        raise ValueError(f"advantages must be [N] = [{logp.shape[0]}]; got {tuple(advantages.shape)}")
    if mask.sum() == 0:
        raise ValueError("mask is all zero: there is no completion token to learn from")
    for name, t in (("advantages", advantages), ("old_logp", old_logp), ("logp", logp)):
        if torch.isnan(t).any():
            raise ValueError(f"{name} contains NaN; the loss would be NaN — check rewards and log-probs")


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    loss_type: LossType = "grpo",
    eps_low: float = 0.2,
    eps_high: float | None = None,
    max_len: int | None = None,
    ratio_level: Literal["token", "sequence"] = "token",
    ref_logp: torch.Tensor | None = None,
    beta: float = 0.0,
    token_weight: torch.Tensor | None = None,
    surrogate: Surrogate = "clip",
    sapo_tau_pos: float = 1.0,
    sapo_tau_neg: float = 1.05,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The clipped surrogate ``-min(r·A, clip(r, 1-eps_low, 1+eps_high)·A)``, aggregated.

    PPO's clip (Schulman et al. 2017) applied per token, as in GRPO (DeepSeekMath).
    ``eps_high > eps_low`` is DAPO's "clip-higher". ``ratio_level="sequence"`` uses one
    ratio per completion, the exp of its mean token log-ratio (GSPO, arXiv 2507.18071).
    ``surrogate`` swaps the per-token term, one line each (the formulas TRL 1.16 writes):

    - ``"clip"``: PPO's clipped term above.
    - ``"cispo"`` (MiniMax-M1, arXiv 2506.13585): ``-sg(min(r, eps_high)) · A · log π`` — the
      ratio is capped and *detached*, so no token's gradient is ever zeroed by a clip; only
      its weight is bounded. Here ``eps_high`` is the cap itself (e.g. 5), as in TRL.
    - ``"sapo"`` (Qwen, arXiv 2511.20347): ``-σ(τ(r-1)) · 4/τ · A`` — a smooth gate instead of a
      hard clip (slope 1 at r = 1, fading away from it), ``τ`` = ``sapo_tau_pos`` for A > 0 and
      ``sapo_tau_neg`` for A ≤ 0.

    At r = 1 (one on-policy update) all three give the same gradient, ``-A · ∇log π``.
    With ``ref_logp`` and ``beta > 0`` a k3 KL penalty is added per token before aggregation.
    ``token_weight`` (detached, ``[N, T]``) scales each token's clipped term before the KL, as TRL
    applies its vLLM importance weights.

    Returns the scalar loss and stats: clip fractions, mean ratio, approx KL(old‖new) (k3).
    """
    _check_inputs(logp, old_logp, advantages, mask)
    eps_high = eps_low if eps_high is None else eps_high
    maskf = mask.to(logp.dtype)
    log_ratio = logp - old_logp
    if ratio_level == "sequence":
        seq_log_ratio = (log_ratio * maskf).sum(dim=1) / maskf.sum(dim=1).clamp(min=1)
        # GSPO's trick: the value is the sequence ratio, the gradient still flows per token.
        log_ratio = logp - logp.detach() + seq_log_ratio.detach().unsqueeze(1)
    elif ratio_level != "token":
        raise ValueError(f"ratio_level must be 'token' or 'sequence'; got {ratio_level!r}")
    ratio = torch.exp(log_ratio)
    adv = advantages.unsqueeze(1).to(logp.dtype)
    if surrogate == "clip":
        per_token = -torch.min(ratio * adv, torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * adv)
    elif surrogate == "cispo":
        per_token = -torch.clamp(ratio, max=eps_high).detach() * adv * logp
    elif surrogate == "sapo":
        tau = torch.where(adv > 0, sapo_tau_pos, sapo_tau_neg)
        per_token = -torch.sigmoid(tau * (ratio - 1)) * 4 / tau * adv
    else:
        raise ValueError(f"surrogate must be one of {SURROGATES}; got {surrogate!r}")
    if token_weight is not None:  # e.g. truncated importance weights for another engine's samples (TRL order)
        per_token = per_token * token_weight.detach()
    kl = None
    if ref_logp is not None and beta > 0:
        kl = kl_k3(logp, ref_logp)
        per_token = per_token + beta * kl
    loss = aggregate(per_token, mask, loss_type, max_len)

    with torch.no_grad():
        n_tok = maskf.sum()
        low = ((ratio < 1 - eps_low) & (adv < 0)).to(logp.dtype)
        high = ((ratio > 1 + eps_high) & (adv > 0)).to(logp.dtype)
        stats = {
            "clip_frac_low": float((low * maskf).sum() / n_tok),
            "clip_frac_high": float((high * maskf).sum() / n_tok),
            "ratio_mean": float((ratio * maskf).sum() / n_tok),
            "approx_kl": float((kl_k3(logp, old_logp) * maskf).sum() / n_tok),
        }
        if kl is not None:
            stats["kl_ref"] = float((kl * maskf).sum() / n_tok)
    return loss, stats


def per_sequence_token_weight(mask: torch.Tensor, loss_type: LossType, max_len: int | None = None) -> torch.Tensor:
    """How much one token of each sequence counts in the loss (d loss / d per-token loss).

    This is the length-bias picture: under ``grpo`` it is 1/(N·|o_i|), shrinking with length;
    under ``dr_grpo`` it is 1/(N·L) for every sequence.
    """
    per_token = torch.ones_like(mask, dtype=torch.float32, requires_grad=True)
    aggregate(per_token, mask, loss_type, max_len).backward()
    lengths = mask.sum(dim=1).clamp(min=1)
    return (per_token.grad * mask).sum(dim=1) / lengths
