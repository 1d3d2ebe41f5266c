import math

import numpy as np
import pytest

from kimina_edu.eval import best_at_k, mean_best_at_k, mean_pass_at_k, pass_at_k


def test_pass_at_k_matches_the_combinatorial_formula():
    for n, c, k in [(8, 0, 1), (8, 1, 1), (8, 3, 2), (10, 5, 8), (32, 4, 16), (8, 8, 8)]:
        exact = 1 - math.comb(n - c, k) / math.comb(n, k)
        assert pass_at_k(n, c, k) == pytest.approx(exact)


def test_pass_at_1_is_the_success_rate_and_bounds():
    assert pass_at_k(8, 3, 1) == pytest.approx(3 / 8)
    assert pass_at_k(8, 0, 8) == 0.0 and pass_at_k(8, 1, 8) == 1.0
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)


def test_best_at_k_is_below_pass_at_k_with_one_success_in_eight():
    samples = [1.0] + [0.0] * 7
    assert best_at_k(samples, 8) == pytest.approx(1 - (7 / 8) ** 8, abs=0.03)  # with replacement
    assert pass_at_k(8, 1, 8) == 1.0  # without replacement the success is always drawn
    assert best_at_k(samples, 8) == best_at_k(samples, 8)  # seeded


def test_means_over_problems():
    results = [[1, 0, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]]
    assert mean_pass_at_k(results, 1) == pytest.approx(np.mean([0.25, 1.0, 0.0]))
    assert 0.0 <= mean_best_at_k(results, 4) <= mean_pass_at_k(results, 4)


@pytest.mark.parametrize("results", [[[1, 0.5, 0]], [[2, 0]], [[float("nan"), 1]], [[1, "1"]], [[]], [[-1, 1]]])
def test_pass_at_k_refuses_rewards_that_are_not_0_or_1(results):
    with pytest.raises(ValueError) as err:
        mean_pass_at_k(results, 1)
    assert "0/1" in str(err.value) and "\n" not in str(err.value)


def test_pass_at_k_accepts_bools_and_whole_floats():
    assert mean_pass_at_k([[True, False], [1.0, 0.0]], 1) == 0.5


@pytest.mark.parametrize("n, c, k", [(4, 2.5, 1), (4.0, 2, 1), (4, 2, True)])
def test_pass_at_k_counts_must_be_whole(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)
