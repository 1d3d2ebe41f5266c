"""Figures used by several notebooks. Each function draws on a matplotlib Axes it is given
(or makes one) and returns it, so notebooks can compose figures and save them."""

from __future__ import annotations

from collections.abc import Iterable

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

# What each logged key measures, for its panel's y label.
KEY_UNITS: dict[str, str] = {
    "reward_mean": "reward", "reward_std": "reward", "correct": "fraction of completions",
    "format": "fraction of completions", "frac_zero_std_groups": "fraction of groups",
    "completion_length": "tokens per completion", "grad_norm": "gradient norm", "entropy": "nats per token",
    "approx_kl": "nats per token", "clip_frac_low": "fraction of tokens", "clip_frac_high": "fraction of tokens",
    "adv_std": "advantage", "adv_mean": "advantage", "truncation_rate": "fraction of completions",
}

# The smallest y range a key's panel shows: a completion's length moves in whole tokens, so a run whose mean
# length wanders by half a token must not fill the panel with that wander (it would read as a trend).
# Rates get 5 points: two runs 1e-10 apart must not fill a panel (matplotlib would add an offset and draw them apart).
MIN_SPAN: dict[str, float] = {"completion_length": 4.0, "correct": 0.05, "format": 0.05, "reward_mean": 0.05,
                              "frac_zero_std_groups": 0.05, "truncation_rate": 0.05}
# Any other key's panel spans at least this share of its mean magnitude: an entropy of 1.2 nats that wanders
# by a thousandth is drawn flat, not as a climb filling the panel.
REL_SPAN = 0.1

# A diverging map whose middle is white: a token that did not move is drawn blank, whatever the sign convention
# (matplotlib's RdYlGn puts a yellow there, which reads as a move); red and green as the probe stepper's.
RED_WHITE_GREEN = matplotlib.colors.LinearSegmentedColormap.from_list("red_white_green", ["#d7301f", "white", "#1a9850"])
LABEL_CHARS = 12  # a heatmap's token label is cut here: the strips' height follows the longest label
# Special tokens as a reader should see them: every chat template's end-of-turn or end-of-text marker is <eos>.
READABLE_TOKENS = {"<|im_end|>": "<eos>", "<|endoftext|>": "<eos>", "</s>": "<eos>", "<|eot_id|>": "<eos>"}


def _ax(ax=None, figsize=(6, 3.5)):
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def clipped_surrogate(ratio: np.ndarray, advantage: float, eps_low: float, eps_high: float) -> np.ndarray:
    """The per-token PPO/GRPO objective ``min(r·A, clip(r)·A)`` (to be maximized)."""
    return np.minimum(ratio * advantage, np.clip(ratio, 1 - eps_low, 1 + eps_high) * advantage)


def plot_clipped_surrogate(advantage: float, eps_low: float, eps_high: float, ratio: float | None = None, ax=None):
    """Objective and its gradient d/dr over the ratio, the flat (zero-gradient) zone shaded."""
    ax = _ax(ax)
    r = np.linspace(0.0, 2.5, 501)
    obj = clipped_surrogate(r, advantage, eps_low, eps_high)
    grad = np.gradient(obj, r)
    ax.plot(r, obj, label="objective min(r·A, clip(r)·A)", lw=2)
    ax.plot(r, grad, "--", label="gradient d/dr", lw=1.5)
    flat = np.isclose(grad, 0.0, atol=1e-9)
    ax.fill_between(r, obj.min() - 0.1, obj.max() + 0.1, where=flat, color="grey", alpha=0.2,
                    label="clipped: no gradient")
    ax.axvline(1 - eps_low, color="k", lw=0.5)
    ax.axvline(1 + eps_high, color="k", lw=0.5)
    if ratio is not None:
        ax.plot([ratio], clipped_surrogate(np.array([ratio]), advantage, eps_low, eps_high), "ro")
    ax.set_xlabel("ratio r = π_new / π_old")
    ax.set_ylabel("objective per token, and its slope d/dr")
    ax.set_title(f"A = {advantage:+.2f}, ε_low = {eps_low}, ε_high = {eps_high}")
    ax.legend(fontsize=8, loc="best")
    return ax


def smoothing_window(steps: int) -> int:
    """How many steps a run's curves are averaged over: 5 on a run of 30 steps or more, where step-to-step
    sampling noise hides the trend; none on a shorter one (SmolLM2's 24 steps), where 5 of a handful of
    points would blur what each step did."""
    return 5 if steps >= 30 else 1


def legends_below(axes) -> None:
    """Each panel's legend moved under its x axis, where it covers no line (a dense run fills a panel
    from edge to edge); call before ``tight_layout``, which makes room for them."""
    for ax in np.ravel(axes):
        legend = ax.get_legend()
        if legend is not None:
            handles, labels = ax.get_legend_handles_labels()
            ax.legend(handles, labels, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), frameon=False)


def plot_curves(logs: list[dict], keys: Iterable[str], ax=None, label_prefix: str = "", window: int = 1,
                band: dict[str, str] | None = None):
    """Plot logged metrics over steps (one line per key), optionally smoothed.

    ``band`` maps a key to the key of its per-step standard error (e.g. ``{"reward_mean": "reward_se"}``):
    the raw steps are drawn as faint dots and the (smoothed) line gets a ±2 standard-error band — the
    error of a mean over the window's steps, √(Σ se²)/n, so a rise is readable against the noise."""
    import pandas as pd

    ax = _ax(ax)
    steps = [row["step"] for row in logs]
    band = band or {}
    for key in keys:
        raw = np.array([row.get(key, np.nan) for row in logs], dtype=float)
        values = raw
        if window > 1:  # centred moving average; the window shrinks at the edges instead of padding with 0
            values = pd.Series(raw).rolling(window, min_periods=1, center=True).mean().to_numpy()
        finite = raw[np.isfinite(raw)]
        constant = len(finite) > 1 and np.ptp(finite) == 0
        note = f" (constant {finite[0]:.2f} over the run)" if constant else ""
        smoothed = f", mean of {window} steps (centred)" if window > 1 else ""
        (line,) = ax.plot(steps, values, label=f"{label_prefix}{key}{smoothed}{note}")
        if key in band:
            se = np.array([row.get(band[key], np.nan) for row in logs], dtype=float)
            roll = pd.Series(se**2).rolling(max(window, 1), min_periods=1, center=True)
            half = 2 * np.sqrt(roll.sum().to_numpy()) / roll.count().to_numpy()
            ax.fill_between(steps, values - half, values + half, color=line.get_color(), alpha=0.2,
                            label=f"{label_prefix}{key} ± 2 s.e.")
            ax.plot(steps, raw, ".", color=line.get_color(), alpha=0.4, ms=4)
    ax.set_xlabel("step")
    _label_y(ax, keys)
    _widen_to(ax, max((_min_span(k, logs) for k in keys), default=0.0))
    ax.legend(fontsize=8)
    return ax


def _min_span(key: str, logs: list[dict]) -> float:
    """The smallest y range a key's panel shows: :data:`MIN_SPAN`, else :data:`REL_SPAN` of its mean size."""
    if key in MIN_SPAN:
        return MIN_SPAN[key]
    values = np.array([row.get(key, np.nan) for row in logs], dtype=float)
    values = values[np.isfinite(values)]
    return REL_SPAN * float(np.abs(values).mean()) if len(values) else 0.0


def _label_y(ax, keys: Iterable[str]) -> None:
    """The y label names the units of every key drawn on the axes (panels are drawn key by key)."""
    units = [KEY_UNITS.get(k, k) for k in keys]
    known = [u for u in ax.get_ylabel().split(" / ") if u]
    ax.set_ylabel(" / ".join(dict.fromkeys(known + units)))


def _widen_to(ax, span: float) -> None:
    """Show at least ``span`` on the y axis, centred on the data, so a narrow wander stays narrow. Called again
    after another run is drawn on the same panel: the axis and its note then cover every line."""
    for text in [t for t in ax.texts if t.get_gid() == "min-span"]:
        text.remove()
    ys = np.concatenate([np.asarray(line.get_ydata(), dtype=float) for line in ax.lines] or [np.zeros(0)])
    ys = ys[np.isfinite(ys)]
    if not span or not len(ys):
        return
    spread = float(np.ptp(ys))
    if spread >= span:  # the data fill the span themselves: matplotlib's own limits, over every line
        ax.set_autoscaley_on(True)
        ax.relim()
        ax.autoscale_view(scalex=False)
        return
    middle = (float(ys.min()) + float(ys.max())) / 2
    ax.set_ylim(middle - span / 2, middle + span / 2)
    ax.text(0.99, 0.02, f"axis spans {span:.2g}; the data spread {spread:.2g}", fontsize=8, ha="right",
            va="bottom", transform=ax.transAxes, color="grey", gid="min-span")


def token_label(text: str) -> str:
    """Decoded text as a label: newlines and tabs made visible (⏎, ⇥), end-of-turn markers as <eos>,
    never an empty string — a raw ``\n<|im_end|>`` in a legend reads as noise."""
    for raw, shown in READABLE_TOKENS.items():
        text = text.replace(raw, shown)
    text = text.replace("\n", "⏎").replace("\t", "⇥")
    # other control characters (a byte-level token of the pocket model) have no glyph: show their code
    return "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" for ch in text) or "∅"


def plot_probe_logprobs(steps: list[int], sums: list[list[float]], labels: list[str], roles: list[str],
                        groups: list[int], ax=None, what: str = "completion"):
    """Each probe completion's summed log-prob, minus its value at the first checkpoint, over the run's
    steps: rewarded ("high", solid) against penalised ("low", dashed), one colour per question.
    The reference article's figure, on a fixed set of sampled completions. ``what``: which tokens were
    summed (the axis label), e.g. "completion from its fork on"."""
    ax = _ax(ax, figsize=(9, 4))
    colours = plt.get_cmap("tab10")
    for s, label, role, g in zip(sums, labels, roles, groups):
        delta = np.asarray(s, dtype=float) - s[0]
        style = {"high": "-", "low": "--"}.get(role, ":")
        ax.plot(steps, delta, style, color=colours(g % 10), lw=2 if role == "high" else 1.5, label=token_label(label))
    ax.axhline(0.0, color="k", lw=0.5)
    ax.set(xlabel="GRPO step", ylabel=f"Δ log π({what})  [nats, vs step 0]",
           title=(f"each fixed probe's log π, summed over the {'whole completion' if what == 'completion' else what}, "
                  "under the training policy\n(solid: advantage > 0, dashed: < 0)"))
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the axes: it hides no line
    return ax


def plot_probe_heatmap(tokens: list[list[str]], values: list[list[float]], groups: list[int], labels: list[str],
                       title: str = "advantage × Δlog-prob per token"):
    """One strip per probe completion, its own decoded tokens on its x axis, coloured by ``values``
    (e.g. A × Δlog-prob, green = moved the way the advantage asked); a heavier rule between questions.
    Returns the figure. Completions have different tokens, so each strip gets its own axis.

    The colours are centred on 0 (white) and symmetric, ±the largest |value| (:data:`RED_WHITE_GREEN`), so
    a token's colour says which way it moved and how far against the largest move; tokens are labelled at 8 pt, each strip
    tall enough for its rotated labels."""
    flat = np.concatenate([np.asarray(v, dtype=float) for v in values if len(v)] or [np.zeros(1)])
    lim = float(np.nanmax(np.abs(flat))) or 1.0
    width = max(len(t) for t in tokens) if tokens else 1
    shown = [[token_label(t)[:LABEL_CHARS] for t in toks] for toks in tokens]
    longest = max((len(t) for toks in shown for t in toks), default=1)
    strip = 0.45 + 0.085 * longest  # inches: the colour strip and its rotated 8-pt labels
    fig, axes = plt.subplots(len(tokens), 1, figsize=(max(8.0, 0.17 * width + 2), strip * len(tokens) + 0.8),
                             squeeze=False)
    im = None
    for i, (ax, toks, v) in enumerate(zip(axes[:, 0], shown, values)):
        row = np.full((1, width), np.nan)
        row[0, : len(v)] = v
        im = ax.imshow(row, aspect="auto", cmap=RED_WHITE_GREEN, vmin=-lim, vmax=lim)
        ax.set_xticks(range(len(toks)), toks, rotation=90, fontsize=8)
        ax.set_yticks([])
        ax.set_xlim(-0.5, width - 0.5)
        ax.set_title(token_label(labels[i]), fontsize=8, loc="left", pad=2)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    if im is not None:
        bar = fig.colorbar(im, ax=axes[:, 0].tolist(), fraction=0.02, pad=0.01)
        bar.set_label("A × Δlog-prob  [nats]  (0: white)", fontsize=8)
    # between questions, a rule under the last strip's token labels and above the next one's title (on the
    # strip's own edge it would sit between a strip and its labels, and the labels would read as the next one's)
    renderer = fig.canvas.get_renderer()
    to_fig = fig.transFigure.inverted()
    for i in range(len(tokens) - 1):
        if groups[i + 1] != groups[i]:
            below = to_fig.transform(axes[i, 0].get_tightbbox(renderer).p0)[1]
            above = to_fig.transform(axes[i + 1, 0].get_tightbbox(renderer).p1)[1]
            y = (below + above) / 2
            box = axes[i, 0].get_position()
            fig.add_artist(matplotlib.lines.Line2D([box.x0 - 0.03, box.x1], [y, y], color="black", lw=2,
                                                   transform=fig.transFigure, gid="question-rule"))
    return fig


def plot_update_shift(logs: list[dict], ax=None, gap_ax=None):
    """What each measured update did to the completions it learned from (log keys ``shift_pos``,
    ``shift_neg``): the mean change of their per-token log-prob, rewarded (A > 0) against penalised
    (A < 0), one marker per measured step joined by a vertical segment — no line runs from one measured
    step to the next, since they are unevenly spaced and nothing was measured between them; the gap
    between the two is what GRPO asks for. ``gap_ax``: also the gap itself (rewarded − penalised), one
    bar per update, green where it is positive. Both axes are linear, in the values' own units (a
    pocket-model update moves a token by thousandths of a nat: the tick labels carry the ×10⁻³)."""
    ax = _ax(ax, figsize=(9, 3.5))
    rows = [r for r in logs if "shift_pos" in r and "shift_neg" in r]
    if not rows:
        ax.text(0.5, 0.5, "no update was measured (shift_every = 0, or every step skipped)", ha="center",
                transform=ax.transAxes)
        ax.set_axis_off()
        if gap_ax is not None:  # no empty panel beside the message
            gap_ax.set_axis_off()
        return ax
    steps = [r["step"] for r in rows]
    pos, neg = np.array([r["shift_pos"] for r in rows]), np.array([r["shift_neg"] for r in rows])
    ax.plot(steps, pos, "o", color="tab:green", ls="none", label="rewarded completions (A > 0)")
    ax.plot(steps, neg, "s", color="tab:red", ls="none", mfc="white", label="penalised completions (A < 0)")
    right = pos > neg
    ax.vlines(steps, neg, pos, colors=np.where(right, "tab:green", "tab:red"), lw=1.5, alpha=0.6,
              label=f"the gap: right way round (green) in {int(right.sum())} of {len(steps)}")
    ax.axhline(0.0, color="k", lw=0.5)
    ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 2))
    ax.set(xlabel="GRPO step (measured updates only)", ylabel="Δ mean log π per token  [nats]",
           title="each measured update, on the completions it learned from: after − before the optimizer step")
    ax.legend(fontsize=8, loc="best")
    if len(steps) <= 12:  # a tick at each measured step: a wide bar centred on step 1 must not read as step 0
        ax.set_xticks(steps)
    if gap_ax is not None:
        gap = pos - neg
        width = 0.8 * (min(np.diff(steps)) if len(steps) > 1 else 1)
        gap_ax.bar(steps, gap, width=width, color=np.where(gap > 0, "tab:green", "tab:red"))
        gap_ax.axhline(0.0, color="k", lw=0.5)
        gap_ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 2))
        gap_ax.set(xlabel="GRPO step (measured updates only)", ylabel="rewarded − penalised  [nats per token]",
                   title=f"the gap, update by update: right way round in {int((gap > 0).sum())} of {len(gap)}")
        if len(steps) <= 12:
            gap_ax.set_xticks(steps)
    return ax


STYLES = [("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"), ((0, (5, 1, 1, 1)), "v")]


def _coinciding(series: dict[str, list[float]]) -> dict[str, list[str]]:
    """For each name, the other names whose values equal its own everywhere (to float rounding)."""
    same: dict[str, list[str]] = {}
    for name, values in series.items():
        same[name] = [other for other, v in series.items()
                      if other != name and len(v) == len(values) and np.allclose(v, values, rtol=1e-9, atol=0.0)]
    return same


def plot_token_weights(lengths: list[int], weights: dict[str, list[float]], ax=None, why_same: str = ""):
    """The gradient weight of one token by its completion's length, one line per loss type, each with its
    own line style and marker so lines that coincide stay visible; the legend names the coinciders.
    ``why_same``: one phrase for the legend saying why the coinciding ones coincide."""
    ax = _ax(ax)
    same = _coinciding(weights)
    for i, (name, w) in enumerate(weights.items()):
        style, marker = STYLES[i % len(STYLES)]
        label = name + (f" (same as {', '.join(same[name])}{': ' + why_same if why_same else ''})" if same[name] else "")
        ax.plot(lengths, w, linestyle=style, marker=marker, markersize=9 - 2.5 * i, lw=2.5 - 0.5 * i, label=label,
                alpha=0.9)
    ax.set(xlabel="completion length (tokens)", ylabel="gradient weight per token", yscale="log")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the axes: it covers no line
    return ax


def plot_variant_lengths(variants: dict[str, list[dict]], ax=None, window: int = 3):
    """Mean completion length by step for several loss types. Each curve gets its own style and marker;
    when the curves are identical step for step the title says so, since they would otherwise draw as one."""
    import pandas as pd

    ax = _ax(ax)
    curves = {name: [r.get("completion_length", np.nan) for r in rows] for name, rows in variants.items()}
    for i, (name, rows) in enumerate(variants.items()):
        raw = pd.Series(curves[name], dtype=float)
        smooth = raw.rolling(window, min_periods=1, center=True).mean() if window > 1 else raw
        style, marker = STYLES[i % len(STYLES)]
        ax.plot([r["step"] for r in rows], smooth, linestyle=style, marker=marker, markersize=9 - 2.5 * i,
                lw=2.5 - 0.5 * i, alpha=0.9, label=name)
    identical = len(curves) > 1 and len({tuple(v) for v in curves.values()}) == 1
    smoothed = f"; each a centred mean of {window} steps" if window > 1 else ""
    ax.set(xlabel="step", ylabel=KEY_UNITS["completion_length"],
           title=("identical step for step: the lines lie on top of each other" if identical
                  else "completion length by loss type") + smoothed)
    _widen_to(ax, MIN_SPAN["completion_length"])
    ax.legend(fontsize=8)
    return ax


def plot_pass_vs_best(ks: list[int], pass_k: dict[int, float], best_k: dict[int, float], ax=None,
                      scripted: bool = False):
    """pass@k (unbiased) against verl's bootstrap best@k on the same samples, k on a log axis labelled
    only at the ks measured (no minor tick labels). ``scripted``: the verdicts came from a script, and
    the title says so."""
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    ax = _ax(ax)
    ax.plot(ks, [pass_k[k] for k in ks], "o-", label="pass@k (unbiased, without replacement)")
    ax.plot(ks, [best_k[k] for k in ks], "s--", label="best@k (the course's restatement of verl's bootstrap, with replacement)")
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator(ks))
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())
    where = "scripted verdicts, " if scripted else ""
    ax.set(xlabel="k", ylabel="accuracy", title=f"same {max(ks)} samples per problem ({where}not a model's)"
           if scripted else f"same {max(ks)} samples per problem")
    ax.legend(fontsize=8)
    return ax


def plot_pretraining_loss(loss_curve: list[float], pretrain_steps: int, ax=None):
    """The pocket model's pretraining loss against optimizer steps. ``loss_curve`` keeps every
    ``pretrain_steps // 100``-th step's loss (``pocket.py``), so point i is step ``1 + i · stride``."""
    ax = _ax(ax, figsize=(6, 3))
    stride = max(1, pretrain_steps // 100)
    steps = [1 + i * stride for i in range(len(loss_curve))]
    ax.plot(steps, loss_curve)
    ax.set(title="pocket model pretraining", xlabel=f"optimizer step (every {stride}th shown)",
           ylabel="next-token loss [nats]")
    return ax


def plot_format_counts(counts: dict[str, int], names: list[str], n_draws: int, ax=None, title: str = ""):
    """How many of ``n_draws`` responses got each format verdict, one bar per verdict in ``names``' order."""
    ax = _ax(ax, figsize=(7, 4))
    ax.barh(names, [counts.get(n, 0) for n in names])
    ax.invert_yaxis()
    ax.set(xlabel=f"number of the {n_draws} draws", ylabel="format verdict", title=title)
    return ax
