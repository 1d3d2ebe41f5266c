"""The cases each notebook's grader cell checks a learner's stub on, and the references with the stub's
signature — in one place, so the notebooks and tests/test_stubs.py grade on the same inputs.

Chapter by chapter: ``extract_answer_cases`` and ``format_reward_cases`` (01), ``group_advantages_cases``,
``policy_loss_cases`` and ``kl_k3_cases`` (02), ``completion_logprobs_cases`` and ``grpo_loss_cases`` (04),
``feedback_cases`` (07), ``pass_at_k_cases`` (09). Grading itself is :func:`kimina_edu.graders.grade`.
This module sits downstream of every chapter's module and nothing in the package imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kimina_edu.graders import Case

# ---- chapter 1: text → reward


def extract_answer_cases() -> dict[str, str]:
    """Ordinary, adversarial and empty completions; the last one is long enough that a quadratic scan shows."""
    return {
        "one answer": "<think>hmm</think><answer> Yes </answer>",
        "changed its mind": "<answer>No</answer> wait <answer>Yes</answer>",
        "never closed": "<answer>Yes",
        "never opened": "Yes</answer>",
        "empty string": "",
        "no tags at all": "no tags at all",
        "close before open": "</answer><answer>",
        "unicode": "<answer>∀ x, ¬P x</answer>",
        "nested open": "<answer><answer>Yes</answer>",
        "1000 opens": "<answer>" * 1000 + "x</answer>",
    }


def format_reward_cases() -> dict[str, str]:
    """Each thing that breaks the format on its own: text before ``<think>``, between the blocks or after
    them (a stub that looks outside the blocks in only one place passes the others), a second block, a
    nested or swapped one; and whitespace around the tags, which is allowed."""
    return {
        "well formed": "<think>All A are B…</think>\n<answer>Yes</answer>",
        "whitespace around": "  \n<think>x</think>\n\n<answer>Yes</answer>\n ",
        "text before think": "Sure! <think>x</think><answer>Yes</answer>",
        "text between blocks": "<think>x</think> So: <answer>Yes</answer>",
        "empty blocks": "<think></think><answer></answer>",
        "no think": "<answer>Yes</answer>",
        "text after": "<think>x</think><answer>Yes</answer> I hope",
        "two answers": "<think>x</think><answer>No</answer><answer>Yes</answer>",
        "answer inside think": "<think><answer>Yes</answer></think>",
        "order swapped": "<answer>Yes</answer><think>x</think>",
        "unicode inside": "<think>∀ x ∈ ℝ, x² ≥ 0</think><answer>Да</answer>",
        "empty string": "",
        "huge": "<think>" + "a" * 200_000 + "</think><answer>Yes</answer>",
    }


# ---- chapter 2: tensors → advantages, losses


def group_advantages_cases(seed: int = 0) -> dict[str, Case]:
    """Random rewards, 0/1 rewards, an all-equal group (the float32 trap), G = 2; both std conventions."""
    import torch

    g = torch.Generator().manual_seed(seed)
    trials = {"random [5, 6]": torch.rand(5, 6, generator=g),
              "0/1 rewards [8, 4]": torch.randint(0, 2, (8, 4), generator=g).float(),
              "all equal 0.85": torch.full((3, 3), 0.85), "G = 2": torch.tensor([[1.0, -1.0]])}
    return {f"{name}, unbiased={u}": Case((r,), {"unbiased": u}) for name, r in trials.items() for u in (True, False)}


def _ragged_logps(g, n: int, t: int, spread: float):
    """``(new, old, mask)``: old log-probs in (−3, 0], new = old + ``spread``·noise (trainable), lengths 2…t."""
    import torch

    mask = (torch.arange(t)[None, :] < torch.randint(2, t + 1, (n, 1), generator=g)).float()
    old = -torch.rand(n, t, generator=g) * 3
    return (old + spread * torch.randn(n, t, generator=g)).requires_grad_(), old, mask


def policy_loss_cases(seed: int = 0, n: int = 6, t: int = 10, max_len: int = 64) -> dict[str, Case]:
    """One ragged batch (padding masked), ratios well outside the clip range too, under each loss type;
    arguments ``(logp, old_logp, advantages, mask, loss_type, max_len)``, gradients compared on ``logp``.
    ``dr_grpo`` twice: once with ``max_len`` = the batch's padded width ``t``, once with ``max_len`` = 64 >
    ``t`` (a batch whose longest completion stopped early), where dividing by the padded width is wrong."""
    import torch

    from kimina_edu.grpo import LOSS_TYPES, group_advantages

    g = torch.Generator().manual_seed(seed)
    new, old, mask = _ragged_logps(g, n, t, spread=0.4)
    adv = group_advantages(torch.rand(1, n, generator=g))[0]
    cases = {lt: Case((new, old, adv, mask, lt, t), grad_wrt=[new]) for lt in LOSS_TYPES}
    cases[f"dr_grpo, max_len {max_len}"] = Case((new, old, adv, mask, "dr_grpo", max_len), grad_wrt=[new])
    return cases


def per_token_loss_reference(logp, old_logp, advantages, eps_low: float = 0.2, eps_high: float = 0.2):
    """The package's per-token clipped loss, as ``policy_loss`` computes it before aggregating."""
    import torch

    ratio = torch.exp(logp - old_logp)
    a = advantages[:, None]
    return -torch.min(ratio * a, torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * a)


def policy_loss_reference(eps_low: float, eps_high: float) -> Callable:
    """``policy_loss``'s value with the arguments of a per-token loss + aggregate pair."""
    from kimina_edu.grpo import policy_loss

    def policy_loss_value(logp, old_logp, advantages, mask, loss_type, max_len):
        return policy_loss(logp, old_logp, advantages, mask, loss_type=loss_type, eps_low=eps_low,
                           eps_high=eps_high, max_len=max_len)[0]

    return policy_loss_value


def compose_loss(per_token_loss: Callable, aggregate: Callable, eps_low: float, eps_high: float) -> Callable:
    """The learner's two pieces as one function with :func:`policy_loss_reference`'s arguments."""

    def composed(logp, old_logp, advantages, mask, loss_type, max_len):
        return aggregate(per_token_loss(logp, old_logp, advantages, eps_low, eps_high), mask, loss_type, max_len)

    return composed


def kl_k3_cases(seed: int = 0) -> dict[str, tuple]:
    """``(logp, ref_logp)``: close policies, far ones, equal ones (k3 = 0 exactly)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(6, 10, generator=g) * 3
    return {"close": (logp, logp + 0.3 * torch.randn(6, 10, generator=g)),
            "far": (logp, logp + 3.0 * torch.randn(6, 10, generator=g)),
            "equal": (logp, logp.clone()), "one token": (torch.tensor([[-0.5]]), torch.tensor([[-2.0]]))}


# ---- chapter 4: a model's log-probs and the GRPO loss


def model_atol(model, fp32: float = 1e-4, low_precision: float = 1e-1) -> float:
    """The tolerance for comparing two log-prob computations on ``model``: ``fp32`` when its weights are float32
    (every CPU run, the tests), ``low_precision`` in bf16/fp16 (CUDA, :func:`kimina_edu.models.policy_dtype`).
    Two correct functions that take different kernel paths (every position's logits or ``logits_to_keep``, a
    mask or none) can differ there by one bf16 rounding of a logit, ~0.03 at |logit| ≈ 8 (an estimate, not
    measured on a GPU here); a wrong position or a missing log-softmax is off by whole units."""
    import torch

    dtype = model.get_input_embeddings().weight.dtype if hasattr(model, "get_input_embeddings") else torch.float32
    return fp32 if dtype == torch.float32 else low_precision


def completion_logprobs_one(model, prompt: list[int], completion: list[int]):
    """The package's ``completion_logprobs`` on a batch of one: the completion's ``[T]`` log-probs."""
    from kimina_edu.logprobs import Rollout, completion_logprobs

    logp, _ = completion_logprobs(model, [Rollout(list(prompt), list(completion), [], 0.0, 0.0, False)], pad_id=0)
    return logp[0]


def completion_logprobs_cases(model, rollouts: list) -> dict[str, tuple]:
    """The shortest and the longest completion of the batch, and the first two."""
    by_length = sorted(range(len(rollouts)), key=lambda i: len(rollouts[i].completion_ids))
    picks = dict.fromkeys([0, 1, by_length[0], by_length[-1]])
    return {f"rollout {i} ({len(rollouts[i].completion_ids)} tokens)":
            (model, rollouts[i].prompt_ids, rollouts[i].completion_ids) for i in picks}


def grpo_loss_reference(cfg: Any, pad_id: int) -> Callable:
    """The package trainer's loss for one update per batch (``π_old`` = the current policy, detached)."""
    import torch

    from kimina_edu.grpo import policy_loss
    from kimina_edu.logprobs import completion_logprobs

    def grpo_loss(model, batch):
        logp, mask = completion_logprobs(model, batch, pad_id)
        adv = torch.tensor([r.advantage for r in batch], device=logp.device)
        return policy_loss(logp, logp.detach(), adv, mask, loss_type=cfg.loss_type, eps_low=cfg.eps_low,
                           eps_high=cfg.eps_high, max_len=cfg.max_new_tokens)[0]

    return grpo_loss


def grpo_loss_cases(model, rollouts: list, group_size: int) -> dict[str, Case]:
    """The batch's first two groups (two questions: what is averaged across sequences) and its first
    group; value and gradient on every trainable (LoRA) weight. Not the whole batch: on a real model
    each case is a forward and backward pass per function, and 48 rollouts of SmolLM2 took 2 minutes."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    two = rollouts[: 2 * group_size]
    return {f"two groups ({len(two)} rollouts)": Case((model, two), grad_wrt=trainable),
            "the first group": Case((model, rollouts[:group_size]), grad_wrt=trainable)}


# ---- chapter 5: TRL 1.x's loss variants, one line each


def surrogate_cases(seed: int = 0, n: int = 6, t: int = 10) -> dict[str, Case]:
    """One ragged batch, ratios well off 1, advantages of both signs, for each variant's per-token term;
    and a far off-policy batch (ratios up to e³ ≈ 20) where CISPO's cap at 5 binds. Arguments
    ``(logp, old_logp, advantages, mask, kind)``, gradients compared on ``logp``."""
    import torch

    g = torch.Generator().manual_seed(seed)
    new, old, mask = _ragged_logps(g, n, t, spread=0.6)
    adv = torch.tensor([1.2, -0.4, 0.7, -1.1, 0.0, 0.3])[:n]
    cases = {kind: Case((new, old, adv, mask, kind), grad_wrt=[new]) for kind in ("cispo", "sapo")}
    far_new, far_old, far_mask = _ragged_logps(g, n, t, spread=1.5)
    cases["cispo, ratios past the cap"] = Case((far_new, far_old, adv, far_mask, "cispo"), grad_wrt=[far_new])
    return cases


CISPO_CAP = 5.0  # CISPO's cap on the ratio (ε_high), as TRL's docs use it; SAPO keeps policy_loss's τ (TRL's)


def surrogate_reference(logp, old_logp, advantages, mask, kind):
    """``policy_loss`` with ``surrogate=kind`` (each sequence's mean, then the mean: TRL's ``grpo`` reduction)."""
    from kimina_edu.grpo import policy_loss

    return policy_loss(logp, old_logp, advantages, mask, loss_type="grpo", eps_high=CISPO_CAP, surrogate=kind)[0]


def compose_surrogate(per_token: Callable) -> Callable:
    """The learner's per-token term, reduced as :func:`surrogate_reference` reduces the package's."""
    from kimina_edu.grpo import aggregate

    def composed(logp, old_logp, advantages, mask, kind):
        return aggregate(per_token(logp, old_logp, advantages, kind), mask, "grpo")

    return composed


# ---- chapter 7: Lean's answer → feedback text


def feedback_reference(code: str, result: dict, max_errors: int = 3) -> str:
    """``build_feedback`` for a server that numbers lines from after the header (kimina-lean-server 2.0.0)."""
    from kimina_edu.lean.feedback import build_feedback

    return build_feedback(code, result, max_errors=max_errors, line_scheme="relative")


def feedback_cases(code: str, this_verdict: dict | None = None) -> dict[str, tuple]:
    """The shapes a server answers with: several errors (three are kept), warnings only, an error without a
    position, one on the first line, a system error, nothing; plus this notebook's own verdict."""

    def err(line: int, text: str) -> dict:
        return {"severity": "error", "pos": {"line": line, "column": 0}, "data": text}

    results = {} if this_verdict is None else {"this verdict": this_verdict}
    results.update({
        "five errors": {"response": {"messages": [err(n, f"error {n}") for n in range(1, 6)]}},
        "warning only": {"response": {"messages": [{"severity": "warning", "pos": {"line": 2}, "data": "unused"}]}},
        "no position": {"response": {"messages": [{"severity": "error", "data": "unknown constant"}]}},
        "first line": {"response": {"messages": [err(1, "at the top")]}},
        "system error": {"error": "Lean REPL timed out after 60 s"},
        "empty": {},
    })
    return {name: (code, result) for name, result in results.items()}


# ---- chapter 9: pass@k


def pass_at_k_cases(ns: tuple[int, ...] = (1, 8, 32, 100), big: int = 1000) -> dict[str, tuple[int, int, int]]:
    """Every (c, k) for several n: none right, all right, k = n; and a few with n = ``big``, whose factorials
    do not fit in a float (1000! ≈ 4e2567) while the answer does."""
    cases = {f"n={n}, c={c}, k={k}": (n, c, k) for n in ns for c in range(n + 1) for k in range(1, n + 1)}
    for c, k in ((1, 1), (1, big // 2), (10, 100), (big // 2, big // 2), (0, big), (big - 1, 2)):
        cases[f"n={big}, c={c}, k={k}"] = (big, c, k)
    return cases
