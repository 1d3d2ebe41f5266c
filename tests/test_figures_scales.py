"""Scales that do not mislead: the per-token heatmap's colours centred on 0 with readable token labels, the
per-update shift on linear axes with a marker per measured step (no line across unevenly spaced steps),
smoothed curves that say their window, and a panel that does not stretch a wander into a trend."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest

from kimina_edu import plots

MIN_FONT = 8  # points: a token label smaller than this cannot be read in the executed HTML at 100 dpi


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_heatmap_colours_are_symmetric_around_zero_whatever_the_values():
    fig = plots.plot_probe_heatmap([["a", "b", "c"], ["d", "e"]], [[0.02, -0.9, 0.1], [0.3, 0.05]], [0, 0],
                                   ["Q1 high", "Q1 low"])
    images = [im for ax in fig.axes for im in ax.get_images()]
    assert images and all(im.get_clim() == pytest.approx((-0.9, 0.9)) for im in images)
    cmap = images[0].get_cmap()
    low, mid, high = cmap(0.0), cmap(0.5), cmap(1.0)
    assert low != high and np.allclose(mid[:3], mid[:3][0], atol=0.1), "0 sits on the colour map's neutral middle"


def test_heatmap_token_labels_and_strip_titles_are_readable():
    tokens = [[f"t{i}" for i in range(40)], [f"u{i}" for i in range(12)]]
    fig = plots.plot_probe_heatmap(tokens, [list(np.linspace(-1, 1, 40)), [0.1] * 12], [0, 1], ["Q1 high", "Q2 low"])
    strips = [ax for ax in fig.axes if ax.get_images()]
    sizes = [t.get_fontsize() for ax in strips for t in ax.get_xticklabels()]
    assert sizes and min(sizes) >= MIN_FONT, min(sizes)
    assert min(ax.title.get_fontsize() for ax in strips) >= MIN_FONT
    colourbar = [ax for ax in fig.axes if not ax.get_images()]
    assert colourbar and colourbar[0].get_ylabel(), "the colour bar says what its colours measure"
    # room for each label: a figure at least MIN_FONT points (1/9 inch) per token across
    assert fig.get_size_inches()[0] >= 40 * MIN_FONT / 72


def test_the_rule_between_questions_sits_under_a_strips_labels_not_on_its_edge():
    tokens = [["a", "b"], ["c", "d"], ["e", "f"]]
    fig = plots.plot_probe_heatmap(tokens, [[0.1, -0.1]] * 3, [0, 0, 1], ["Q1 high", "Q1 low", "Q2 high"])
    rules = [a for a in fig.artists if a.get_gid() == "question-rule"]
    assert len(rules) == 1, "one rule: the second and third strips answer different questions"
    strips = [ax for ax in fig.axes if ax.get_images()]
    renderer = fig.canvas.get_renderer()
    to_fig = fig.transFigure.inverted()
    labels_bottom = to_fig.transform(strips[1].get_tightbbox(renderer).p0)[1]
    next_top = to_fig.transform(strips[2].get_tightbbox(renderer).p1)[1]
    y = rules[0].get_ydata()[0]
    assert next_top < y < labels_bottom  # below strip 2's token labels, above strip 3's title
    assert all(ax.spines["bottom"].get_linewidth() < 2 for ax in strips)


def _update_log():
    return [{"step": 1, "shift_pos": 0.0004, "shift_neg": -0.0002}, {"step": 2},
            {"step": 10, "shift_pos": 0.0021, "shift_neg": -0.0009}, {"step": 40, "shift_pos": 0.0003, "shift_neg": 0.0005}]


def test_update_shift_is_drawn_on_linear_axes():
    _, (ax, gap_ax) = plt.subplots(1, 2)
    plots.plot_update_shift(_update_log(), ax=ax, gap_ax=gap_ax)
    assert ax.get_yscale() == "linear" and gap_ax.get_yscale() == "linear"
    assert "symlog" not in gap_ax.get_ylabel()
    low, high = gap_ax.get_ylim()  # the values' own scale: thousandths of a nat, not a decade per tick
    assert high - low < 0.01


def test_update_shift_marks_each_measured_step_and_draws_no_line_between_steps():
    _, (ax, gap_ax) = plt.subplots(1, 2)
    plots.plot_update_shift(_update_log(), ax=ax, gap_ax=gap_ax)
    for a in (ax, gap_ax):
        for line in a.lines:
            xs, ys = np.asarray(line.get_xdata(), dtype=float), np.asarray(line.get_ydata(), dtype=float)
            if xs.tolist() == [0.0, 1.0] and len(set(ys)) == 1:
                continue  # the zero rule (axhline), in axes coordinates: no data
            if len(set(xs)) > 1:  # a line across steps
                assert line.get_linestyle() in ("None", ""), f"a line joins steps {xs.tolist()}"
                assert line.get_marker() not in (None, "None", ""), "each measured step gets a marker"
    xs = sorted({x for line in ax.lines for x in np.asarray(line.get_xdata(), dtype=float) if line.get_marker() != "None"})
    assert xs == [1, 10, 40]
    assert not [c for c in ax.collections if type(c).__name__ in ("PolyCollection", "FillBetweenPolyCollection")], \
        "no area filled between unevenly spaced steps"


def test_a_smoothed_curve_says_its_window():
    log = [{"step": s, "reward_mean": 0.1 * s} for s in range(1, 11)]
    ax = plots.plot_curves(log, ["reward_mean"], window=5)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("5" in t and "step" in t for t in labels), labels
    raw = plots.plot_curves(log, ["reward_mean"])
    assert not any("mean of" in t.get_text() for t in raw.get_legend().get_texts())


def test_a_key_without_its_own_minimum_span_does_not_stretch_a_wander_into_a_trend():
    log = [{"step": s, "entropy": 1.20 + 0.001 * (s % 3)} for s in range(1, 30)]
    ax = plots.plot_curves(log, ["entropy"])
    low, high = ax.get_ylim()
    assert high - low >= 0.1 * 1.2, "a 0.002-nat wander of a 1.2-nat quantity must not fill the panel"


def test_a_second_run_drawn_on_a_widened_panel_is_in_view_and_in_its_spread_note():
    ours = [{"step": s, "completion_length": 56.0 + 0.1 * (s % 3)} for s in range(1, 7)]
    theirs = [{"step": s, "completion_length": 50.0 + 0.1 * (s % 3)} for s in range(1, 7)]
    ax = plots.plot_curves(ours, ["completion_length"], label_prefix="ours ")
    ax = plots.plot_curves(theirs, ["completion_length"], ax=ax, label_prefix="TRL ")
    low, high = ax.get_ylim()
    assert low <= 50.0 and high >= 56.2, (low, high)
    notes = [t.get_text() for t in ax.texts if t.get_gid() == "min-span"]
    assert not notes or "6.2" in notes[0], notes
