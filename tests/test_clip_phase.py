"""Chapter 4's phase that learns one buffer in several minibatch steps: the first step's ratios are 1, later
steps see a moved policy, so the ratio spreads, approx-KL grows and the clip binds; π_old is read from the
buffer, never from the current weights; a buffer without signal is refused in one line. And the loss grader's
cases hold stored old log-probs that differ from the current ones, so a loss that ignores them fails."""

from __future__ import annotations

import pytest
import torch

from kimina_edu import exercises as ex
from kimina_edu.logprobs import Rollout
from kimina_edu.tiny import tiny_random_llama
from kimina_edu.train_config import TrainConfig


def _buffer(model, n: int = 12, seed: int = 0) -> list[Rollout]:
    """``n`` rollouts of 3–6 tokens in groups of 4, advantages of both signs, old log-probs stored now."""
    g = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(1, 64, (5,), generator=g).tolist() for _ in range(n // 4)]
    rollouts = [Rollout(prompts[i // 4], torch.randint(1, 64, (3 + i % 4,), generator=g).tolist(), [],
                        (1.0, -1.0, 0.5, -0.5)[i % 4], 0.0, False) for i in range(n)]
    return ex.with_old_logprobs(model, rollouts)


def test_one_buffer_in_several_steps_moves_the_ratio_and_the_clip_binds():
    model = tiny_random_llama(vocab_size=64, seed=0)
    cfg = TrainConfig(lr=1e-2, eps_high=0.28, max_new_tokens=8)
    rows = ex.learn_one_buffer(model, _buffer(model), ex.grpo_loss_reference(cfg, 0), cfg, 0, epochs=3,
                               minibatch_size=4, seed=0)
    assert len(rows) == 9 and [r["epoch"] for r in rows] == [1] * 3 + [2] * 3 + [3] * 3
    first = rows[0]
    assert first["clip_frac"] == 0.0 and first["ratio_std"] < 1e-5 and first["approx_kl"] < 1e-6, first
    assert max(r["clip_frac"] for r in rows) > 0.0, rows
    assert rows[-1]["ratio_std"] > 0.01 and rows[-1]["approx_kl"] > 1e-4, rows[-1]


def test_a_loss_with_old_equal_to_new_never_clips_and_learns_otherwise():
    """π_old taken from the current weights: every measured ratio still leaves 1 (the phase measures against the
    buffer), but the loss never sees it, so the two runs part after the first step."""
    cfg = TrainConfig(lr=1e-2, eps_high=0.28, max_new_tokens=8)

    def old_is_new(model, batch):
        from kimina_edu.grpo import policy_loss
        from kimina_edu.logprobs import completion_logprobs

        logp, mask = completion_logprobs(model, batch, 0)
        adv = torch.tensor([r.advantage for r in batch])
        return policy_loss(logp, logp.detach(), adv, mask, eps_low=cfg.eps_low, eps_high=cfg.eps_high)[0]

    runs = {}
    for name, loss in (("stored", ex.grpo_loss_reference(cfg, 0)), ("old = new", old_is_new)):
        model = tiny_random_llama(vocab_size=64, seed=0)
        runs[name] = ex.learn_one_buffer(model, _buffer(model), loss, cfg, 0, epochs=3, minibatch_size=4, seed=0)
    assert runs["stored"][0] == runs["old = new"][0]
    assert any(abs(a["approx_kl"] - b["approx_kl"]) > 1e-6 for a, b in zip(runs["stored"], runs["old = new"]))


def test_a_buffer_without_signal_is_refused_in_one_line():
    model = tiny_random_llama(vocab_size=64, seed=0)
    flat = [Rollout(r.prompt_ids, r.completion_ids, r.old_logp, 0.0, 0.0, False) for r in _buffer(model)]
    with pytest.raises(ValueError, match="every advantage in this buffer is 0") as err:
        ex.learn_one_buffer(model, flat, ex.grpo_loss_reference(TrainConfig(), 0), TrainConfig(), 0, epochs=2,
                            minibatch_size=4)
    assert "\n" not in str(err.value)


def test_the_loss_grader_holds_stored_old_logprobs_that_differ_from_the_current_ones():
    from kimina_edu.logprobs import completion_logprobs

    model = tiny_random_llama(vocab_size=64, seed=0)
    cases = ex.grpo_loss_cases(model, _buffer(model), group_size=4)
    gaps = []
    for case in cases.values():
        batch = case.args[1]
        with torch.no_grad():
            now, _ = completion_logprobs(model, batch, 0)
        gaps.append(max(abs(a - b) for r, row in zip(batch, now) for a, b in zip(r.old_logp, row.tolist())))
    assert min(gaps) < 1e-5 and sum(g > 0.2 for g in gaps) >= 2, gaps
