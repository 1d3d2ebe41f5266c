"""Figures say what they show: every plotted axis is labelled, a narrow series is not magnified into
a trend, curves that coincide stay visible and are said to coincide, scripted figures say so, and
decoded text is drawn readable (⏎, <eos>) rather than as raw control tokens."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest

from kimina_edu import plots


def _styles(ax):
    return [(line.get_linestyle(), line.get_marker()) for line in ax.lines if not line.get_label().startswith("_")]


def test_logged_curves_get_a_y_label_with_their_unit():
    log = [{"step": s, "completion_length": 37.0 + 0.1 * s, "correct": 0.5, "format": 1.0} for s in range(1, 11)]
    length = plots.plot_curves(log, ["completion_length"])
    assert "tokens" in length.get_ylabel()
    rates = plots.plot_curves(log, ["correct", "format"])
    assert rates.get_ylabel(), "a rate panel needs a y label"


def test_length_axis_spans_at_least_a_few_tokens_so_noise_is_not_drawn_as_a_trend():
    log = [{"step": s, "completion_length": 36.6 + (s % 3) * 0.5} for s in range(1, 21)]
    ax = plots.plot_curves(log, ["completion_length"])
    low, high = ax.get_ylim()
    assert high - low >= plots.MIN_SPAN["completion_length"] >= 4
    assert low <= 36.6 and high >= 37.6


def test_a_constant_series_is_named_constant_in_the_legend():
    log = [{"step": s, "format": 1.0, "correct": 0.4 + 0.01 * s} for s in range(1, 11)]
    ax = plots.plot_curves(log, ["correct", "format"])
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("format" in t and "constant 1.00" in t for t in labels), labels
    assert not any("correct" in t and "constant" in t for t in labels), labels


def test_coinciding_token_weight_lines_are_both_visible_and_said_to_coincide():
    lengths = [4, 12, 24, 40]
    weights = {"grpo": [1 / 4 / 4, 1 / 12 / 4, 1 / 24 / 4, 1 / 40 / 4], "bnpo": [1 / 80] * 4, "dapo": [1 / 80] * 4,
               "dr_grpo": [1 / 192] * 4}
    ax = plots.plot_token_weights(lengths, weights)
    styles = _styles(ax)
    assert len(styles) == 4 and len(set(styles)) == 4, styles
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("bnpo" in t and "dapo" in t and "same" in t for t in labels), labels
    assert ax.get_xlabel() and ax.get_ylabel()


def test_identical_variant_length_curves_are_all_drawn_and_the_title_says_identical():
    rows = [{"step": s, "completion_length": 40.0 + s % 2} for s in range(1, 6)]
    ax = plots.plot_variant_lengths({"grpo": rows, "dapo": list(rows), "dr_grpo": list(rows)})
    styles = _styles(ax)
    assert len(styles) == 3 and len(set(styles)) == 3, styles
    assert "identical" in ax.get_title()
    assert ax.get_ylabel() and ax.get_xlabel()
    differ = plots.plot_variant_lengths({"grpo": rows, "dapo": [dict(r, completion_length=30.0) for r in rows]})
    assert "identical" not in differ.get_title()


def test_pass_vs_best_has_only_the_k_tick_labels_and_says_scripted():
    ks = [1, 2, 4, 8]
    ax = plots.plot_pass_vs_best(ks, {k: 0.3 + 0.05 * k for k in ks}, {k: 0.3 + 0.04 * k for k in ks}, scripted=True)
    ax.figure.canvas.draw()
    minor = [t.get_text() for t in ax.xaxis.get_minorticklabels() if t.get_text()]
    assert minor == [], minor
    assert [t.get_text() for t in ax.xaxis.get_majorticklabels()] == ["1", "2", "4", "8"]
    assert "scripted" in ax.get_title()


def test_pretraining_loss_x_axis_counts_optimizer_steps():
    curve = list(np.linspace(5.0, 1.0, 100))
    ax = plots.plot_pretraining_loss(curve, pretrain_steps=2400)
    xs = ax.lines[0].get_xdata()
    assert xs[0] == 1 and xs[1] - xs[0] == 24 and xs[-1] <= 2400
    assert "step" in ax.get_xlabel() and "sample" not in ax.get_xlabel()


def test_format_counts_chart_labels_its_count_axis():
    ax = plots.plot_format_counts({"NONE": 30, "UNKNOWN": 2}, ["NONE", "UNKNOWN", "GENERATION_REPEATS"], n_draws=32)
    assert "draws" in ax.get_xlabel()
    assert [t.get_text() for t in ax.get_yticklabels()] == ["NONE", "UNKNOWN", "GENERATION_REPEATS"]


@pytest.mark.parametrize("raw, readable", [("Yes\n<|im_end|>", "Yes⏎<eos>"), ("</answer><|endoftext|>", "</answer><eos>"),
                                           ("\t", "⇥"), ("", "∅")])
def test_decoded_text_is_drawn_readable(raw, readable):
    assert plots.token_label(raw) == readable


def test_probe_legends_and_strip_titles_show_no_raw_control_tokens():
    label = "Q1 high: …does follow\n<|im_end|>"
    ax = plots.plot_probe_logprobs([0, 1], [[0.0, 0.1]], [label], ["high"], [0])
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert texts == ["Q1 high: …does follow⏎<eos>"], texts
    fig = plots.plot_probe_heatmap([["does", "\n", "<|im_end|>"]], [[0.1, -0.1, 0.0]], [0], [label])
    strip = fig.axes[0]
    assert "<|im_end|>" not in strip.get_title() and "\n" not in strip.get_title()
    assert [t.get_text() for t in strip.get_xticklabels()] == ["does", "⏎", "<eos>"]
    plt.close("all")


def test_two_rates_a_rounding_error_apart_are_drawn_as_equal():
    ours = [{"step": s, "correct": 0.0277777777} for s in range(1, 4)]
    theirs = [{"step": s, "correct": 0.0277777786} for s in range(1, 4)]
    ax = plots.plot_curves(ours, ["correct"], label_prefix="ours ")
    plots.plot_curves(theirs, ["correct"], ax=ax, label_prefix="TRL ")
    low, high = ax.get_ylim()
    assert high - low >= 0.05
