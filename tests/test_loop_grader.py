"""Chapter 4's loop grader: the learner's ``my_grpo_iteration`` runs a few iterations on a toy task (a tiny
model that must learn a one-token preference) and is compared with the package's loop on what it learned
and what it logged. The right loop (and the worked solution) passes; each named wrong loop fails, naming a
case; the package's loop itself learns the preference on every case.
"""

from __future__ import annotations

import re
import types

import pytest
import torch

from kimina_edu import exercises as ex
from kimina_edu.graders import grade
from kimina_edu.grpo import group_advantages, policy_loss
from kimina_edu.logprobs import Rollout, completion_logprobs, pad_batch
from kimina_edu.stubs import load_solutions
from kimina_edu.tiny import tiny_random_llama


def _loop(model, optimizer, task, questions, cfg, rng, *, sign=1.0, scale=None, old_is_current=False,
          loss_type=None, mean_over_accumulated=True, keep_zero_advantage=False):
    """One GRPO iteration written out, with one slip switched on by a keyword (none: the right loop)."""
    G = cfg.group_size
    prompt_ids, completions = task.sample(model, questions)
    rewards = torch.tensor([task.reward(questions[i // G], c) for i, c in enumerate(completions)])
    adv = sign * group_advantages(rewards.view(len(questions), G), scale=scale or cfg.scale).flatten()
    buffer = [Rollout(prompt_ids[i // G], c, [], float(a), float(r), False)
              for i, (c, a, r) in enumerate(zip(completions, adv, rewards))]
    with torch.no_grad():
        old, _ = completion_logprobs(model, buffer, task.pad_id)
    for r, lp in zip(buffer, old):
        r.old_logp = lp[: len(r.completion_ids)].tolist()
    log = {"reward_mean": rewards.mean().item(), "updates": 0, "clip_frac": 0.0}
    buffer = buffer if keep_zero_advantage else [r for r in buffer if r.advantage != 0.0]
    if not buffer:
        return log
    clipped = []
    for _ in range(cfg.epochs):
        order = list(range(len(buffer)))
        rng.shuffle(order)
        mbs = [[buffer[i] for i in order[k: k + cfg.minibatch_size]] for k in range(0, len(order), cfg.minibatch_size)]
        for s in range(0, len(mbs), cfg.grad_accum):
            group = mbs[s: s + cfg.grad_accum]
            optimizer.zero_grad()
            for mb in group:
                logp, mask = completion_logprobs(model, mb, task.pad_id)
                old = logp.detach() if old_is_current else pad_batch(mb, task.pad_id)[3]
                loss, stats = policy_loss(logp, old, torch.tensor([r.advantage for r in mb]), mask,
                                          loss_type=loss_type or cfg.loss_type, eps_low=cfg.eps_low,
                                          eps_high=cfg.eps_high, max_len=cfg.max_new_tokens)
                (loss / (len(group) if mean_over_accumulated else 1)).backward()
                clipped.append(stats["clip_frac_low"] + stats["clip_frac_high"])
            torch.nn.utils.clip_grad_norm_(list(model.parameters()), cfg.max_grad_norm)
            optimizer.step()
            log["updates"] += 1
    log["clip_frac"] = sum(clipped) / len(clipped)
    return log


def _variant(**slip):
    def my_grpo_iteration(model, optimizer, task, questions, cfg, rng):
        return _loop(model, optimizer, task, questions, cfg, rng, **slip)

    return my_grpo_iteration


WRONG_LOOPS = {
    "advantage sign flipped": {"sign": -1.0},
    "no group normalisation": {"scale": "none"},
    "old = new across minibatch steps": {"old_is_current": True},
    "loss always averaged per sequence (grpo)": {"loss_type": "grpo"},
    "loss always one token mean (dapo)": {"loss_type": "dapo"},
    "accumulated minibatches summed, not averaged": {"mean_over_accumulated": False},
}


def _grade(fn):
    cases = ex.grpo_iteration_cases()
    return grade("my_grpo_iteration", ex.toy_loop(fn), ex.toy_loop(ex.grpo_iteration), cases, atol=1e-3,
                 quiet=True), cases


@pytest.mark.parametrize("slip", sorted(WRONG_LOOPS))
def test_a_wrong_loop_fails_naming_its_case(slip):
    result, cases = _grade(_variant(**WRONG_LOOPS[slip]))
    assert not result.passed, f"the wrong loop {slip!r} passed: {result.line}"
    named = re.search(r"case '(.+?)' —", result.line)
    assert named and named.group(1) in cases, result.line
    assert "\n" not in result.line and result.line.startswith("✗")


def test_the_right_loop_written_another_way_passes():
    result, _ = _grade(_variant())
    assert result.passed, result.line


def test_the_worked_solution_passes():
    ns: dict = {"torch": torch}
    exec(compile(load_solutions()["my_grpo_iteration"], "<solution>", "exec"), ns)  # noqa: S102 — the course's own code
    result, _ = _grade(ns["my_grpo_iteration"])
    assert result.passed, result.line


def test_the_package_loop_learns_the_preference_and_the_clip_binds():
    for name, case in ex.grpo_iteration_cases().items():
        spec = case.args[0]
        task = ex.OneTokenTask(types.SimpleNamespace(**spec["config"]))
        start = task.preferred_probability(tiny_random_llama(vocab_size=ex.OneTokenTask.vocab_size, seed=spec["seed"]))
        out = ex.toy_loop_run(ex.grpo_iteration, spec)
        after = out["P(preferred first token) after the run"]
        assert after > start + 0.2, f"{name}: P(preferred) {start:.3f} → {after:.3f}"
        if spec["config"]["epochs"] > 1:
            assert max(out["clip_frac per iteration"]) > 0.01, f"{name}: the clip never bound: {out}"


def test_a_loop_that_returns_no_log_fails_in_one_line():
    def my_grpo_iteration(model, optimizer, task, questions, cfg, rng):
        return None

    result, _ = _grade(my_grpo_iteration)
    assert not result.passed and "reward_mean" in result.line and "\n" not in result.line, result.line
