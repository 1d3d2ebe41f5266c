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


def test_update_shift_draws_each_measured_step_and_says_when_none_was():
    from kimina_edu.plots import plot_update_shift

    log = [{"step": 1, "shift_pos": 0.2, "shift_neg": -0.1}, {"step": 2}, {"step": 10, "shift_pos": 0.1, "shift_neg": 0.3}]
    ax = plot_update_shift(log)
    pos, neg = ax.lines[0], ax.lines[1]
    assert list(pos.get_xdata()) == [1, 10] and list(neg.get_ydata()) == [-0.1, 0.3]
    empty = plot_update_shift([{"step": 1}])
    assert not empty.lines and "no update was measured" in empty.texts[0].get_text()


def test_update_shift_gap_panel_colours_each_update_by_its_sign():
    import matplotlib.pyplot as plt

    from kimina_edu.plots import plot_update_shift

    log = [{"step": 1, "shift_pos": 0.2, "shift_neg": -0.1}, {"step": 10, "shift_pos": 0.1, "shift_neg": 0.3}]
    _, (ax, gap_ax) = plt.subplots(1, 2)
    plot_update_shift(log, ax=ax, gap_ax=gap_ax)
    bars = gap_ax.patches
    assert [round(b.get_height(), 6) for b in bars] == [0.3, -0.2]
    assert "1 of 2" in gap_ax.get_title()
    _, (ax, gap_ax) = plt.subplots(1, 2)
    plot_update_shift([{"step": 1}], ax=ax, gap_ax=gap_ax)
    assert not gap_ax.axison and not gap_ax.patches, "no empty panel when nothing was measured"


def test_a_control_character_in_a_token_is_shown_by_its_code_not_as_a_missing_glyph():
    from kimina_edu.plots import token_label

    assert token_label("\x06a\n") == "\\x06a⏎"
    assert token_label("") == "∅"


def test_a_short_run_is_drawn_step_by_step_and_a_long_one_smoothed():
    from kimina_edu.plots import smoothing_window

    assert smoothing_window(6) == smoothing_window(24) == 1  # SmolLM2's compared steps and its whole run
    assert smoothing_window(30) == smoothing_window(300) == 5  # the pocket model's runs
