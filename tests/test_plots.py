"""The shared figures' helpers (kimina_edu/plots.py)."""

import matplotlib

matplotlib.use("Agg")
import numpy as np

from kimina_edu.plots import plot_curves


def _band_halfwidth(ax):
    (band,) = ax.collections
    ys = np.concatenate([p.vertices[:, 1] for p in band.get_paths()])
    return (ys.max() - ys.min()) / 2


def test_reward_band_is_two_standard_errors_of_the_window_mean():
    log = [{"step": s, "reward_mean": 0.5, "reward_se": 0.1} for s in range(1, 11)]
    one = plot_curves(log, ["reward_mean"], band={"reward_mean": "reward_se"})
    assert np.isclose(_band_halfwidth(one), 0.2)  # one step: ±2 × 0.1
    five = plot_curves(log, ["reward_mean"], window=5, band={"reward_mean": "reward_se"})
    assert np.isclose(_band_halfwidth(five), 2 * 0.1 / np.sqrt(3))  # the edges average 3 steps: the widest
    assert len(five.lines) == 2  # the smoothed line and the raw steps' dots
    plain = plot_curves(log, ["reward_mean"], window=5)
    assert not plain.collections and len(plain.lines) == 1
