import math

import pytest
import torch

from kimina_edu.grpo import (
    LOSS_TYPES,
    aggregate,
    group_advantages,
    kl_k3,
    per_sequence_token_weight,
    policy_loss,
)


def test_worked_example_two_sequences_is_plus_minus_0707():
    adv = group_advantages(torch.tensor([[1.0, -1.0]]), eps=0.0)
    assert torch.allclose(adv, torch.tensor([[0.7071, -0.7071]]), atol=1e-4)


def test_all_equal_group_has_zero_advantage():
    adv = group_advantages(torch.tensor([[0.85, 0.85, 0.85], [0.0, 1.0, 0.0]]))
    assert torch.all(adv[0] == 0)
    assert adv[1, 1] > 0 > adv[1, 0]


def test_scales():
    r = torch.tensor([[0.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
    none = group_advantages(r, scale="none")
    assert torch.allclose(none, r - r.mean(1, keepdim=True))
    batch = group_advantages(r, scale="batch", eps=0.0, unbiased=False)
    assert torch.allclose(batch, none / r.std(correction=0))
    pop = group_advantages(r, eps=0.0, unbiased=False)
    assert torch.allclose(pop, none / r.std(1, keepdim=True, correction=0))


@pytest.mark.parametrize("bad", [torch.tensor([[1.0], [0.0]]), torch.tensor([[1.0, float("nan")]]), torch.ones(3)])
def test_bad_rewards_raise(bad):
    with pytest.raises(ValueError):
        group_advantages(bad)


def _batch(seed=0, n=6, t=9):
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(n, t, generator=g) * 3
    old = logp + torch.randn(n, t, generator=g) * 0.3
    adv = torch.randn(n, generator=g)
    lengths = torch.randint(1, t + 1, (n,), generator=g)
    mask = (torch.arange(t)[None, :] < lengths[:, None]).float()
    return logp, old, adv, mask


def _trl_formula(logp, old, adv, mask, loss_type, eps_low, eps_high, max_len):
    """TRL 1.16 grpo_trainer.py::_compute_loss, one process, GA=1, steps_per_generation=1."""
    coef_1 = torch.exp(logp - old)
    coef_2 = torch.clamp(coef_1, 1 - eps_low, 1 + eps_high)
    per_token_loss = -torch.min(coef_1 * adv.unsqueeze(1), coef_2 * adv.unsqueeze(1))
    if loss_type == "grpo":
        return ((per_token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    if loss_type == "bnpo":
        return (per_token_loss * mask).sum() / mask.sum().clamp(min=1.0)
    if loss_type == "dr_grpo":
        return (per_token_loss * mask).sum() / (per_token_loss.size(0) * max_len)
    num_items_in_batch = mask.sum()  # dapo: active tokens of the whole generation batch
    return (per_token_loss * mask).sum() / num_items_in_batch


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
@pytest.mark.parametrize("seed", range(5))
def test_matches_trl_formulas(loss_type, seed):
    logp, old, adv, mask = _batch(seed)
    ours, _ = policy_loss(logp, old, adv, mask, loss_type=loss_type, eps_low=0.2, eps_high=0.28, max_len=9)
    theirs = _trl_formula(logp, old, adv, mask, loss_type, 0.2, 0.28, 9)
    assert abs(float(ours) - float(theirs)) < 1e-6


def test_loss_zero_but_gradient_nonzero_on_policy():
    logp, _, adv, mask = _batch(1)
    logp = logp.clone().requires_grad_(True)
    adv = adv - adv.mean()  # group-centred advantages
    loss, stats = policy_loss(logp, logp.detach(), adv, mask, loss_type="dr_grpo", max_len=9)
    loss.backward()
    assert stats["ratio_mean"] == pytest.approx(1.0)
    assert logp.grad.abs().sum() > 0


def test_clip_fractions():
    logp = torch.zeros(2, 1)
    old = torch.log(torch.tensor([[1 / 1.5], [1 / 0.5]]))  # ratios 1.5 and 0.5
    adv = torch.tensor([1.0, -1.0])
    _, stats = policy_loss(logp, old, adv, torch.ones(2, 1))
    assert stats["clip_frac_high"] == 0.5 and stats["clip_frac_low"] == 0.5


def test_sequence_level_ratio_uses_mean_log_ratio():
    logp, old, adv, mask = _batch(2)
    loss, _ = policy_loss(logp, old, adv, mask, ratio_level="sequence", eps_low=10.0)
    seq = ((logp - old) * mask).sum(1) / mask.sum(1)
    expected = -(torch.exp(seq) * adv).mean()  # no clipping at eps=10, grpo aggregation
    assert float(loss) == pytest.approx(float(expected), abs=1e-5)


def test_bad_inputs_raise_clear_errors():
    logp, old, adv, mask = _batch(3)
    with pytest.raises(ValueError, match="all zero"):
        policy_loss(logp, old, adv, torch.zeros_like(mask))
    with pytest.raises(ValueError, match="NaN"):
        policy_loss(logp, old, torch.full_like(adv, float("nan")), mask)
    with pytest.raises(ValueError, match="max_len"):
        policy_loss(logp, old, adv, mask, loss_type="dr_grpo")
    with pytest.raises(ValueError, match="loss_type"):
        aggregate(logp, mask, "ppo")


def test_kl_k3_nonnegative_and_zero_at_equality():
    a = torch.randn(4, 5)
    assert torch.all(kl_k3(a, a) == 0)
    assert torch.all(kl_k3(a, a + torch.randn(4, 5)) >= 0)


def test_length_bias_weights():
    mask = torch.tensor([[1, 1, 0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1, 1, 1]]).float()
    grpo = per_sequence_token_weight(mask, "grpo")
    dr = per_sequence_token_weight(mask, "dr_grpo", max_len=8)
    # floats, not 0-d tensors: pytest.approx's handling of tensors differs between pytest versions
    assert float(grpo[0]) == pytest.approx(4 * float(grpo[1]))  # a short sequence's token counts 4× more
    assert float(dr[0]) == pytest.approx(float(dr[1])) == pytest.approx(1 / 16)
    assert not math.isnan(float(per_sequence_token_weight(mask, "dapo")[0]))
