"""Every grader's case set tells the common wrong answers from the right one.

For each stub a notebook grades (kimina_edu/exercises.py holds the cases), the slips a learner makes —
off by one, the wrong axis, the wrong denominator, a flipped sign, ignoring the mask, changing an input
in place — are written as stubs here and graded exactly as the notebook's grader cell grades them. Each
must fail with a line that names one of the case set's cases; the worked solution
(notebooks/solutions/derive.py) must pass.
"""

from __future__ import annotations

import re
import types
from collections.abc import Callable
from math import comb

import pytest
import torch

from kimina_edu import exercises as ex
from kimina_edu.graders import grade
from kimina_edu.stubs import load_solutions

EPS_LOW, EPS_HIGH = 0.2, 0.28  # chapter 2's parameters cell
CFG = types.SimpleNamespace(eps_low=0.2, eps_high=0.28, loss_type="grpo", max_new_tokens=8, group_size=3)


@pytest.fixture(scope="module")
def tiny():
    """The tiny random Llama and six rollouts of different lengths, a group of three sharing one prompt list
    (as chapter 4 builds them: ``prompt_ids[i // group_size]``)."""
    from kimina_edu.logprobs import Rollout
    from kimina_edu.tiny import tiny_random_llama

    model = tiny_random_llama(vocab_size=64, seed=0)
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, 64, (4 + i,), generator=g).tolist() for i in range(2)]
    rollouts = [Rollout(prompts[i // 3], torch.randint(0, 64, (length,), generator=g).tolist(), [],
                        float((-1) ** i) * 0.5 * (1 + i % 3), 0.0, False)
                for i, length in enumerate((3, 7, 5, 1, 6, 4))]
    return model, rollouts


def _lean_code() -> str:
    """Chapter 7's failing proof, built as the notebook builds it."""
    from kimina_edu.lean.data import load_offline_problems
    from kimina_edu.lean.examples import passing_response
    from kimina_edu.lean.proof import extract_proof

    problem = next(p for p in load_offline_problems() if p["statement_id"] == "algebra_square_nonneg")
    return extract_proof(passing_response({**problem, "illustrative_proof": ["linarith"]}), problem["formal_statement"])


VERDICT = {"response": {"messages": [{"severity": "error", "pos": {"line": 2, "column": 2}, "data": "linarith failed"}]}}


def _grade(grader: str, fn: Callable | tuple, tiny) -> tuple[object, dict]:
    """The notebook's grader call for ``grader`` on the learner's ``fn``; returns the verdict and the cases."""
    from kimina_edu.eval import pass_at_k
    from kimina_edu.grpo import group_advantages, kl_k3
    from kimina_edu.rewards import extract_answer, format_reward

    model, rollouts = tiny or (None, None)
    if grader == "extract_answer":
        cases = ex.extract_answer_cases()
        return grade("my_extract_answer", fn, extract_answer, cases, quiet=True), cases
    if grader == "format_reward":
        cases = ex.format_reward_cases()
        return grade("my_format_reward", fn, format_reward, cases, quiet=True), cases
    if grader == "group_advantages":
        cases = ex.group_advantages_cases(0)
        return grade("my_group_advantages", fn, group_advantages, cases, quiet=True), cases
    if grader == "policy_loss":
        cases = ex.policy_loss_cases(0)
        return grade("my_per_token_loss + my_aggregate", ex.compose_loss(*fn, EPS_LOW, EPS_HIGH),
                     ex.policy_loss_reference(EPS_LOW, EPS_HIGH), cases, quiet=True), cases
    if grader == "kl_k3":
        cases = ex.kl_k3_cases(0)
        return grade("my_kl_k3", fn, kl_k3, cases, quiet=True), cases
    if grader == "completion_logprobs":
        cases = ex.completion_logprobs_cases(model, rollouts)
        with torch.no_grad():
            return grade("my_completion_logprobs", fn, ex.completion_logprobs_one, cases,
                         atol=ex.model_atol(model), quiet=True), cases
    if grader == "grpo_loss":
        cases = ex.grpo_loss_cases(model, rollouts, CFG.group_size)
        return grade("my_grpo_loss", fn, ex.grpo_loss_reference(CFG, 0), cases, atol=1e-5, grad_atol=1e-4,
                     quiet=True), cases
    if grader == "surrogate":
        cases = ex.surrogate_cases(0)
        return grade("my_surrogate", ex.compose_surrogate(fn), ex.surrogate_reference, cases, quiet=True), cases
    if grader == "feedback":
        cases = ex.feedback_cases(_lean_code(), VERDICT)
        return grade("my_feedback", fn, ex.feedback_reference, cases, quiet=True), cases
    if grader == "pass_at_k":
        cases = ex.pass_at_k_cases()
        return grade("my_pass_at_k", fn, pass_at_k, cases, atol=1e-9, quiet=True), cases
    raise AssertionError(grader)


# ---- the worked solutions, run in the names their notebooks give them


def _solution(name: str, *wanted: str) -> Callable | tuple:
    from kimina_edu.lean.feedback import header_line_count

    sources = load_solutions()
    ns: dict = {"torch": torch, "cfg": CFG, "header_line_count": header_line_count}
    exec(compile(sources["my_completion_logprobs"], "<solution>", "exec"), ns)  # noqa: S102 — the course's own code
    exec(compile(sources[name], "<solution>", "exec"), ns)  # noqa: S102
    found = tuple(ns[w] for w in (wanted or (name,)))
    return found if len(found) > 1 else found[0]


RIGHT = {"extract_answer": ("my_extract_answer",), "format_reward": ("my_format_reward",),
         "group_advantages": ("my_group_advantages",),
         "policy_loss": ("my_policy_loss", "my_per_token_loss", "my_aggregate"), "kl_k3": ("my_kl_k3",),
         "completion_logprobs": ("my_completion_logprobs",), "grpo_loss": ("my_grpo_loss",),
         "surrogate": ("my_surrogate",), "feedback": ("my_feedback",), "pass_at_k": ("my_pass_at_k",)}


# ---- chapter 1


def _extract_first_block(text):
    start, close = text.find("<answer>"), text.find("</answer>")
    return None if -1 in (start, close) or close < start else text[start + 8:close].strip()


def _extract_unstripped(text):
    close = text.rfind("</answer>")
    start = text.rfind("<answer>", 0, close) if close != -1 else -1
    return None if start == -1 else text[start + 8:close]


def _extract_empty_not_none(text):
    close = text.rfind("</answer>")
    start = text.rfind("<answer>", 0, close) if close != -1 else -1
    return "" if start == -1 else text[start + 8:close].strip()


def _extract_off_by_one(text):
    close = text.rfind("</answer>")
    start = text.rfind("<answer>", 0, close) if close != -1 else -1
    return None if start == -1 else text[start + 7:close].strip()


def _extract_regex_greedy(text):
    found = re.search(r"<answer>(.*)</answer>", text, re.DOTALL)
    return found.group(1).strip() if found else None


def _format_checks(text):
    """The solution's checks before looking outside the blocks: ``None`` when they fail, else the tag indices."""
    tags = ("<think>", "</think>", "<answer>", "</answer>")
    if any(text.count(t) != 1 for t in tags):
        return None
    a, b, c, d = (text.index(t) for t in tags)
    return (a, b, c, d) if a < b < c < d else None


def _format_only_after_answer(text):
    at = _format_checks(text)
    return 0.0 if at is None else float(text[at[3] + len("</answer>"):].strip() == "")


def _format_ignores_before_think(text):
    at = _format_checks(text)
    if at is None:
        return 0.0
    _, b, c, d = at
    return float((text[b + len("</think>"):c] + text[d + len("</answer>"):]).strip() == "")


def _format_ignores_between(text):
    at = _format_checks(text)
    if at is None:
        return 0.0
    a, _, _, d = at
    return float((text[:a] + text[d + len("</answer>"):]).strip() == "")


def _format_no_order(text):
    tags = ("<think>", "</think>", "<answer>", "</answer>")
    return float(all(text.count(t) == 1 for t in tags))


def _format_at_least_one(text):
    return float(all(t in text for t in ("<think>", "</think>", "<answer>", "</answer>"))
                 and text.index("</think>") < text.rindex("<answer>"))


def _format_no_whitespace(text):
    return float(text.startswith("<think>") and text.endswith("</answer>") and text.count("<answer>") == 1
                 and text.count("<think>") == 1 and "</think><answer>" in text)


# ---- chapter 2


def _adv(rewards, dim=1, correction=None, fix_equal=True, eps=1e-4, unbiased=True):
    centered = rewards - rewards.mean(dim=dim, keepdim=True)
    if fix_equal:
        equal = rewards.max(dim=1, keepdim=True).values == rewards.min(dim=1, keepdim=True).values
        centered = centered.masked_fill(equal, 0.0)
    c = (1 if unbiased else 0) if correction is None else correction
    return centered / (rewards.std(dim=dim, keepdim=True, correction=c) + eps)


def _adv_wrong_axis(rewards, eps=1e-4, unbiased=True):
    return _adv(rewards, dim=0, fix_equal=False, eps=eps, unbiased=unbiased)


def _adv_always_bessel(rewards, eps=1e-4, unbiased=True):
    return _adv(rewards, correction=1, eps=eps)


def _adv_no_equal_fix(rewards, eps=1e-4, unbiased=True):
    return _adv(rewards, fix_equal=False, eps=eps, unbiased=unbiased)


def _adv_batch_std(rewards, eps=1e-4, unbiased=True):
    centered = _adv(rewards, eps=eps, unbiased=unbiased) * 0 + (rewards - rewards.mean(1, keepdim=True))
    return centered / (rewards.std(correction=1 if unbiased else 0) + eps)


def _adv_no_eps(rewards, eps=1e-4, unbiased=True):
    return _adv(rewards, eps=0.0, unbiased=unbiased).nan_to_num(0.0)


def _adv_in_place(rewards, eps=1e-4, unbiased=True):
    """Right values, but centres and scales the caller's tensor in place and returns it."""
    right = _adv(rewards, eps=eps, unbiased=unbiased)
    rewards.copy_(right)
    return rewards


def _ptl(logp, old_logp, advantages, eps_low=0.2, eps_high=0.2):
    ratio = torch.exp(logp - old_logp)
    a = advantages[:, None]
    return -torch.min(ratio * a, torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * a)


def _agg(per_token, mask, loss_type, max_len=None):
    masked = per_token * mask
    if loss_type == "grpo":
        return (masked.sum(1) / mask.sum(1)).mean()
    if loss_type in ("bnpo", "dapo"):
        return masked.sum() / mask.sum()
    return masked.sum() / (per_token.shape[0] * max_len)


def _agg_padded_width(per_token, mask, loss_type, max_len=None):
    if loss_type == "dr_grpo":
        return (per_token * mask).sum() / (per_token.shape[0] * per_token.shape[1])
    return _agg(per_token, mask, loss_type, max_len)


def _agg_dr_grpo_token_count(per_token, mask, loss_type, max_len=None):
    if loss_type == "dr_grpo":
        return (per_token * mask).sum() / mask.sum()
    return _agg(per_token, mask, loss_type, max_len)


def _agg_no_mask(per_token, mask, loss_type, max_len=None):
    return _agg(per_token, torch.ones_like(mask), loss_type, max_len)


def _agg_grpo_token_mean(per_token, mask, loss_type, max_len=None):
    return _agg(per_token, mask, "bnpo" if loss_type == "grpo" else loss_type, max_len)


def _agg_wrong_axis(per_token, mask, loss_type, max_len=None):
    if loss_type == "grpo":
        return ((per_token * mask).sum(0) / mask.sum(0).clamp(min=1)).mean()
    return _agg(per_token, mask, loss_type, max_len)


def _ptl_sign(logp, old_logp, advantages, eps_low=0.2, eps_high=0.2):
    return -_ptl(logp, old_logp, advantages, eps_low, eps_high)


def _ptl_max(logp, old_logp, advantages, eps_low=0.2, eps_high=0.2):
    ratio = torch.exp(logp - old_logp)
    a = advantages[:, None]
    return -torch.max(ratio * a, torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * a)


def _ptl_symmetric(logp, old_logp, advantages, eps_low=0.2, eps_high=0.2):
    return _ptl(logp, old_logp, advantages, eps_low, eps_low)


def _ptl_unclipped(logp, old_logp, advantages, eps_low=0.2, eps_high=0.2):
    return -torch.exp(logp - old_logp) * advantages[:, None]


def _kl_swapped(logp, ref_logp):
    delta = logp - ref_logp
    return torch.exp(delta) - delta - 1


def _kl_k1(logp, ref_logp):
    return logp - ref_logp


def _kl_k2(logp, ref_logp):
    return 0.5 * (ref_logp - logp) ** 2


def _kl_no_minus_one(logp, ref_logp):
    delta = ref_logp - logp
    return torch.exp(delta) - delta


def _kl_mean(logp, ref_logp):
    delta = ref_logp - logp
    return (torch.exp(delta) - delta - 1).mean()


# ---- chapter 4


def _logprobs(model, prompt, completion, shift=0, log_softmax=True, dim=-1):
    ids = torch.tensor([prompt + completion], device=model.device)
    logits = model(input_ids=ids).logits[0, :-1].float()
    logp = torch.log_softmax(logits, dim) if log_softmax else logits
    return logp.gather(-1, ids[0, 1:][:, None])[:, 0][len(prompt) - 1 + shift:]


def _lp_mutates_prompt(model, prompt, completion):
    """Right values; lengthens the caller's prompt list (``+=`` on a list extends it in place)."""
    ids = prompt
    ids += completion
    t = torch.tensor([ids], device=model.device)
    logp = torch.log_softmax(model(input_ids=t).logits[0, :-1].float(), -1)
    return logp.gather(-1, t[0, 1:][:, None])[:, 0][len(ids) - len(completion) - 1:]


def _lp_off_by_one(model, prompt, completion):
    ids = torch.tensor([prompt + completion], device=model.device)
    logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), -1)
    return logp.gather(-1, ids[0, :-1][:, None])[:, 0][len(prompt) - 1:]  # the token at i, not the next one


def _lp_raw_logits(model, prompt, completion):
    return _logprobs(model, prompt, completion, log_softmax=False)


def _lp_wrong_axis(model, prompt, completion):
    return _logprobs(model, prompt, completion, dim=0)


def _lp_one_too_many(model, prompt, completion):
    ids = torch.tensor([prompt + completion], device=model.device)
    logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), -1)
    return logp.gather(-1, ids[0, 1:][:, None])[:, 0][len(prompt) - 2:]


def _grpo_loss(model, batch, *, sign=1.0, mask_padding=True, loss_type=None, detach=False, sort=False,
               old_is_current=False):
    from kimina_edu.grpo import aggregate

    if sort:
        batch.sort(key=lambda r: len(r.completion_ids))  # reorders the caller's list
    logp = [_logprobs(model, r.prompt_ids, r.completion_ids) for r in batch]
    T = max(len(x) for x in logp)
    new = torch.stack([torch.nn.functional.pad(x, (0, T - len(x))) for x in logp])
    mask = torch.stack([torch.arange(T) < len(x) for x in logp]).float()
    mask = mask if mask_padding else torch.ones_like(mask)
    stored = torch.stack([torch.nn.functional.pad(torch.tensor(r.old_logp), (0, T - len(r.old_logp))) for r in batch])
    old = new.detach() if old_is_current else stored
    ratio = torch.exp((new.detach() if detach else new) - old)
    a = torch.tensor([r.advantage for r in batch])[:, None] * sign
    per_token = -torch.min(ratio * a, ratio.clamp(1 - CFG.eps_low, 1 + CFG.eps_high) * a)
    return aggregate(per_token, mask, loss_type or CFG.loss_type, CFG.max_new_tokens)


def _gl_sign(model, batch):
    return _grpo_loss(model, batch, sign=-1.0)


def _gl_padding(model, batch):
    return _grpo_loss(model, batch, mask_padding=False)


def _gl_token_mean(model, batch):
    return _grpo_loss(model, batch, loss_type="bnpo")


def _gl_ratio_detached(model, batch):
    return _grpo_loss(model, batch, detach=True) + 0 * sum(p.sum() for p in model.parameters() if p.requires_grad)


def _gl_sorts_batch(model, batch):
    return _grpo_loss(model, batch, sort=True)


def _gl_old_is_current(model, batch):
    return _grpo_loss(model, batch, old_is_current=True)


# ---- chapter 5


def _surrogate(logp, old_logp, advantages, kind, cap=5.0, tau_pos=1.0, tau_neg=1.05, detach=True, scale=True):
    ratio = torch.exp(logp - old_logp)
    a = advantages[:, None]
    if kind == "cispo":
        w = torch.clamp(ratio, max=cap)
        return -(w.detach() if detach else w) * a * logp
    tau = torch.where(a > 0, tau_pos, tau_neg)
    return -torch.sigmoid(tau * (ratio - 1)) * (4 / tau if scale else 1) * a


def _sur_cispo_attached(logp, old_logp, advantages, kind):
    return _surrogate(logp, old_logp, advantages, kind, detach=False)


def _sur_cispo_uncapped(logp, old_logp, advantages, kind):
    return _surrogate(logp, old_logp, advantages, kind, cap=float("inf"))


def _sur_one_tau(logp, old_logp, advantages, kind):
    return _surrogate(logp, old_logp, advantages, kind, tau_neg=1.0)


def _sur_no_scale(logp, old_logp, advantages, kind):
    return _surrogate(logp, old_logp, advantages, kind, scale=False)


def _sur_sign(logp, old_logp, advantages, kind):
    return -_surrogate(logp, old_logp, advantages, kind)


# ---- chapter 7


def _feedback(code, result, max_errors=3, *, keep=None, severity=("error",), offset=True, shift=0, system=True):
    from kimina_edu.lean.feedback import header_line_count

    lines = code.splitlines()
    messages = (result.get("response") or {}).get("messages") or []
    errors = [m for m in messages if isinstance(m, dict) and m.get("severity") in severity][:keep or max_errors]
    parts = []
    for i, msg in enumerate(errors, 1):
        text = f"# Error {i}:\nError message: \n{str(msg.get('data', 'Unknown error')).strip()}\n\n"
        if isinstance(msg.get("pos"), dict) and isinstance(msg["pos"].get("line"), int):
            at = msg["pos"]["line"] - 1 + (header_line_count(code) if offset else 0) + shift
            window = [f"{n + 1:03d}{' >' if n == at else '  '}| {lines[n].replace('count_heartbeats in', '')}"
                      for n in range(max(0, at - 2), min(len(lines), at + 3))]
            text += "Lean 4 code snippet with error:\n```lean4\n" + "".join(w + "\n" for w in window) + "```\n"
        parts.append(text)
    if parts:
        return "".join(parts)
    error = result.get("error")
    ok = system and isinstance(error, str) and error.strip()
    return f"# System Error:\nError message: \n{error.strip()}\n\n" if ok else ""


def _fb_all_errors(code, result, max_errors=3):
    return _feedback(code, result, max_errors, keep=10**6)


def _fb_warnings_too(code, result, max_errors=3):
    return _feedback(code, result, max_errors, severity=("error", "warning"))


def _fb_absolute_lines(code, result, max_errors=3):
    return _feedback(code, result, max_errors, offset=False)


def _fb_off_by_one(code, result, max_errors=3):
    return _feedback(code, result, max_errors, shift=1)


def _fb_no_system(code, result, max_errors=3):
    return _feedback(code, result, max_errors, system=False)


# ---- chapter 9


def _pak_with_replacement(n, c, k):
    return 1 - (1 - c / n) ** k


def _pak_ignores_k(n, c, k):
    return c / n


def _pak_off_by_one(n, c, k):
    return 1 - comb(n - c, k - 1) / comb(n, k - 1)


def _pak_float_overflow(n, c, k):
    from math import factorial

    def choose(a, b):
        return float(factorial(a)) / (float(factorial(b)) * float(factorial(a - b))) if b <= a else 0.0

    return 1 - choose(n - c, k) / choose(n, k)


def _pak_k_equals_n(n, c, k):
    return 1.0 if k == n and c == 0 else 1 - comb(n - c, k) / comb(n, k)


SLIPS: dict[str, dict[str, Callable | tuple]] = {
    "extract_answer": {"first block, not the last": _extract_first_block, "not stripped": _extract_unstripped,
                       "empty string instead of None": _extract_empty_not_none,
                       "slice off by one": _extract_off_by_one, "greedy regex": _extract_regex_greedy},
    "format_reward": {"only checks after </answer>": _format_only_after_answer,
                      "ignores text before <think>": _format_ignores_before_think,
                      "ignores text between the blocks": _format_ignores_between,
                      "counts tags, ignores order": _format_no_order, "allows two answers": _format_at_least_one,
                      "no whitespace allowed": _format_no_whitespace},
    "group_advantages": {"std over the wrong axis": _adv_wrong_axis, "always Bessel": _adv_always_bessel,
                         "no all-equal fix": _adv_no_equal_fix, "batch std": _adv_batch_std, "no eps": _adv_no_eps,
                         "changes rewards in place": _adv_in_place},
    "policy_loss": {"dr_grpo over the padded width": (_ptl, _agg_padded_width),
                    "dr_grpo over the token count": (_ptl, _agg_dr_grpo_token_count),
                    "padding counted": (_ptl, _agg_no_mask), "grpo as one token mean": (_ptl, _agg_grpo_token_mean),
                    "grpo mean over the wrong axis": (_ptl, _agg_wrong_axis), "sign flipped": (_ptl_sign, _agg),
                    "max instead of min": (_ptl_max, _agg), "eps_high ignored": (_ptl_symmetric, _agg),
                    "no clip": (_ptl_unclipped, _agg)},
    "kl_k3": {"delta's sign swapped": _kl_swapped, "k1": _kl_k1, "k2": _kl_k2, "no minus one": _kl_no_minus_one,
              "mean, not per token": _kl_mean},
    "completion_logprobs": {"changes the prompt list": _lp_mutates_prompt, "next position off by one": _lp_off_by_one,
                            "raw logits": _lp_raw_logits, "log-softmax over positions": _lp_wrong_axis,
                            "one token too many": _lp_one_too_many},
    "grpo_loss": {"sign flipped": _gl_sign, "padding counted": _gl_padding, "token mean under grpo": _gl_token_mean,
                  "ratio detached": _gl_ratio_detached, "sorts the batch in place": _gl_sorts_batch,
                  "old = new, detached (not the buffer's)": _gl_old_is_current},
    "surrogate": {"cispo weight attached": _sur_cispo_attached, "cispo uncapped": _sur_cispo_uncapped,
                  "sapo one tau": _sur_one_tau, "sapo without 4/tau": _sur_no_scale, "sign flipped": _sur_sign},
    "feedback": {"every error kept": _fb_all_errors, "warnings too": _fb_warnings_too,
                 "absolute line numbers": _fb_absolute_lines, "window off by one": _fb_off_by_one,
                 "system error dropped": _fb_no_system},
    "pass_at_k": {"with replacement": _pak_with_replacement, "ignores k": _pak_ignores_k,
                  "binomial off by one": _pak_off_by_one, "float factorials": _pak_float_overflow,
                  "k = n special-cased wrong": _pak_k_equals_n},
}


@pytest.mark.parametrize(("grader", "slip"), [pytest.param(g, s, id=f"{g}: {s}") for g in SLIPS for s in SLIPS[g]])
def test_a_wrong_stub_fails_naming_its_case(grader, slip, tiny):
    result, cases = _grade(grader, SLIPS[grader][slip], tiny)
    assert not result.passed, f"{grader}: the slip {slip!r} passed: {result.line}"
    named = re.search(r"case '(.+?)'(?: —|$| )", result.line)
    assert named and named.group(1) in cases, f"the verdict names no case of the set: {result.line}"
    assert "\n" not in result.line and result.line.startswith("✗")


@pytest.mark.parametrize("grader", sorted(SLIPS))
def test_the_worked_solution_passes(grader, tiny):
    result, _ = _grade(grader, _solution(*RIGHT[grader]), tiny)
    assert result.passed, result.line


@pytest.mark.parametrize("grader", sorted(SLIPS))
def test_every_grader_has_three_slips(grader):
    assert len(SLIPS[grader]) >= 3


def test_format_reward_cases_have_text_before_and_between_the_blocks():
    from kimina_edu.rewards import format_reward

    cases = ex.format_reward_cases()
    outside = {name: text for name, text in cases.items() if format_reward(text) == 0.0
               and _format_only_after_answer(text) == 1.0}
    assert len(outside) >= 2, "no case tells a stub that only checks after </answer> from the package"
    result, _ = _grade("format_reward", _format_only_after_answer, None)
    assert "before" in result.line or "between" in result.line, result.line


def test_dr_grpo_case_has_max_len_other_than_the_padded_width():
    cases = ex.policy_loss_cases(0)
    widths = {name: (c.args[0].shape[1], c.args[5]) for name, c in cases.items() if c.args[4] == "dr_grpo"}
    assert any(t != max_len for t, max_len in widths.values()), widths
    result, _ = _grade("policy_loss", (_ptl, _agg_padded_width), None)
    assert "dr_grpo" in result.line and not result.passed, result.line
