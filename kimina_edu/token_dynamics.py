"""What each GRPO update does to each token (chapter 4): measured, explained, drawn.

The trainer measures an update every ``cfg.shift_every`` steps by scoring the buffer it learned from
just before and just after its optimizer step (:func:`kimina_edu.probes.update_shift`). Averaged per
completion, that hides where the move sits: in this course's tasks most of it sits on a few tokens
(the verdict inside ``<answer>…</answer>``), whatever the completion's advantage. So each measured
update also gets one compact row in ``token_shift.jsonl`` beside ``log.jsonl``
(:func:`token_shift_record`): the quantiles of the per-token change Δ = log π_after − log π_before for
tokens of completions with A > 0 and with A < 0, the means of the answer tokens and of the rest, and
the top movers with their text. :func:`plot_token_shift` and :func:`plot_token_shift_cumulative` draw
those rows; :func:`explain` and :func:`explain_probes` turn a run's own numbers into ``  why:`` lines
printed under a failed check (:mod:`kimina_edu.checks`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kimina_edu.checks import WHY

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
TOP_K = 8  # top movers kept per update: enough to see which tokens, few enough to label
ANSWER_TEXTS = 6  # distinct answer-token texts kept per update (the verdict's vocabulary is small)
MOVER_TEXTS = 4  # texts kept per update by their share of the buffer's Σ|Δ|: where the move sat, answer or not
MAX_PANELS = 12  # the small multiples of a run: a readable page, spread over the run
TEXT_COLOURS = ("tab:blue", "tab:purple", "tab:orange", "tab:brown")  # per text: never the sides' green and red
TOKEN_SHIFT_FILE = "token_shift.jsonl"

# ------------------------------------------------------------------ measuring


def answer_token_mask(token_texts: Sequence[str]) -> list[bool]:
    """True for each token whose text lies inside the last ``<answer>…</answer>`` block (the graded
    one, as :func:`kimina_edu.rewards.extract_answer` reads it), tags and blank tokens excluded; an
    answer cut off before its closing tag runs to the end."""
    text = "".join(token_texts)
    start = text.rfind("<answer>")
    if start < 0:
        return [False] * len(token_texts)
    start += len("<answer>")
    end = text.find("</answer>", start)
    end = len(text) if end < 0 else end
    mask, pos = [], 0
    for t in token_texts:
        lo, hi = pos, pos + len(t)
        mask.append(lo < end and hi > start and bool(t.strip()) and "<answer>" not in t and "</answer>" not in t)
        pos = hi
    return mask


def _side(deltas: np.ndarray) -> dict:
    """Count, mean and quantiles of one side's per-token changes (empty: count 0, no numbers)."""
    if deltas.size == 0:
        return {"n": 0, "mean": None, "q": None}
    return {"n": int(deltas.size), "mean": float(deltas.mean()), "q": np.quantile(deltas, QUANTILES).tolist()}


def _mean(deltas: np.ndarray) -> dict:
    return {"n": int(deltas.size), "mean": float(deltas.mean()) if deltas.size else None}


def token_shift_record(step: int, advantages: Sequence[float], before: Sequence[Sequence[float]],
                       after: Sequence[Sequence[float]], token_texts: Sequence[Sequence[str]], *,
                       k: int = TOP_K) -> dict:
    """One measured update as one JSON row: per-token Δlog-prob (after − before, nats) of every
    completion token of the buffer, summarised by the sign of its completion's advantage.

    ``pos`` / ``neg``: count, mean and :data:`QUANTILES` of Δ over tokens with A > 0 / A < 0.
    ``answer`` / ``other``: the mean Δ of the tokens inside ``<answer>…</answer>`` and of the rest,
    per sign. ``answer_texts``: the most frequent answer-token texts with their mean Δ.
    ``top``: the ``k`` largest |Δ| with text, Δ, advantage, completion index, position and whether
    they sit in the answer; ``top_in_answer`` counts those that do.
    """
    n = len(advantages)
    if not n == len(before) == len(after) == len(token_texts):
        raise ValueError(f"token_shift_record: {n} advantages, {len(before)} before, {len(after)} after, "
                         f"{len(token_texts)} token lists: pass one of each per completion")
    deltas, masks = [], []
    for i, (b, a, t) in enumerate(zip(before, after, token_texts)):
        for name, v in (("before", b), ("after", a)):
            if len(v) != len(t):
                raise ValueError(f"token_shift_record: completion {i} has {len(t)} tokens but {len(v)} log-probs "
                                 f"{name}: score the same completions before and after")
        deltas.append(np.asarray(a, dtype=float) - np.asarray(b, dtype=float))
        masks.append(np.asarray(answer_token_mask(t), dtype=bool))
    pick = {"pos": [i for i in range(n) if advantages[i] > 0], "neg": [i for i in range(n) if advantages[i] < 0]}

    def cat(idx, which=None):
        parts = [deltas[i] if which is None else deltas[i][masks[i] == which] for i in idx]
        return np.concatenate(parts) if parts else np.zeros(0)

    record = {"step": int(step), "quantiles": list(QUANTILES),
              **{s: _side(cat(idx)) for s, idx in pick.items()},
              "answer": {s: _mean(cat(idx, True)) for s, idx in pick.items()},
              "other": {s: _mean(cat(idx, False)) for s, idx in pick.items()}}
    record["answer_texts"] = _answer_texts(deltas, masks, token_texts, advantages)
    record["mover_texts"] = _mover_texts(deltas, token_texts)
    flat = sorted(((abs(d), i, j) for i, row in enumerate(deltas) for j, d in enumerate(row)),
                  key=lambda x: (-x[0], x[1], x[2]))[:k]
    record["top"] = [{"text": token_texts[i][j], "delta": float(deltas[i][j]), "advantage": float(advantages[i]),
                      "completion": i, "position": j, "in_answer": bool(masks[i][j])} for _, i, j in flat]
    record["top_in_answer"] = sum(t["in_answer"] for t in record["top"])
    return record


def _answer_texts(deltas, masks, token_texts, advantages) -> list[dict]:
    """The most frequent texts among answer tokens, each with its count and mean Δ (all, A > 0, A < 0)."""
    by: dict[str, list[tuple[float, float]]] = {}
    for d, m, t, a in zip(deltas, masks, token_texts, advantages):
        for j in np.flatnonzero(m):
            by.setdefault(t[j], []).append((float(d[j]), float(a)))
    out = []
    for text, vals in sorted(by.items(), key=lambda kv: -len(kv[1]))[:ANSWER_TEXTS]:
        entry = {"text": text, "n": len(vals), "mean": sum(v for v, _ in vals) / len(vals)}
        for side, keep in (("pos", lambda a: a > 0), ("neg", lambda a: a < 0)):
            sel = [v for v, a in vals if keep(a)]
            entry[f"n_{side}"], entry[f"mean_{side}"] = len(sel), (sum(sel) / len(sel) if sel else None)
        out.append(entry)
    return out


def _mover_texts(deltas, token_texts) -> list[dict]:
    """The texts that carried most of the update's move, over every token of the buffer: each text's count,
    mean Δ and share of the buffer's Σ|Δ|, largest share first."""
    by: dict[str, list[float]] = {}
    for d, t in zip(deltas, token_texts):
        for j, x in enumerate(d):
            by.setdefault(t[j], []).append(float(x))
    total = sum(abs(x) for v in by.values() for x in v)
    if total == 0:
        return []
    ranked = sorted(by.items(), key=lambda kv: -sum(abs(x) for x in kv[1]))[:MOVER_TEXTS]
    return [{"text": t, "n": len(v), "mean": sum(v) / len(v), "share": sum(abs(x) for x in v) / total}
            for t, v in ranked]


def read_token_shift(path: str | Path) -> list[dict]:
    """The rows of a run's ``token_shift.jsonl`` (a run folder or the file itself), by step."""
    path = Path(path)
    path = path / TOKEN_SHIFT_FILE if path.is_dir() else path
    if not path.exists() and (path.parent / "log.jsonl").exists():
        return []  # a run that measured no update (every measured step skipped: no group with signal)
    if not path.exists():
        raise FileNotFoundError(f"no {TOKEN_SHIFT_FILE} at {path}: the trainer writes it when it measures updates "
                                "(TrainConfig.shift_every > 0); pass the run's output_dir")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return sorted(rows, key=lambda r: r["step"])


# ------------------------------------------------------------------ explaining


def _f(x: float | None) -> str:
    """Two significant digits, whatever the scale: a pocket-model update moves a token by thousandths of
    a nat, a verdict token over a whole run by nats, and a fixed ``.2f`` prints the first as ±0.00."""
    return "—" if x is None else f"{x:+.2g}"


def _avg(records: list[dict], part: str, side: str) -> float | None:
    vals = [r[part][side]["mean"] for r in records if r[part][side]["mean"] is not None]
    return sum(vals) / len(vals) if vals else None


def _texts_over_run(records: list[dict]) -> list[tuple[str, int, float]]:
    """Answer-token texts over all records: (text, count, mean Δ per update), most frequent first."""
    acc: dict[str, list[float]] = {}
    for r in records:
        for e in r.get("answer_texts", []):
            acc.setdefault(e["text"], []).extend([e["mean"]] * e["n"])
    return sorted(((t, len(v), sum(v) / len(v)) for t, v in acc.items()), key=lambda x: -x[1])


def _movers_over_run(records: list[dict]) -> list[tuple[str, float, float]]:
    """The recorded mover texts over all records: (text, mean share of an update's Σ|Δ|, mean Δ per token
    per update), largest share first; a text absent from an update's list counts 0 share there."""
    acc: dict[str, list[tuple[float, float]]] = {}
    for r in records:
        for e in r.get("mover_texts", []):
            acc.setdefault(e["text"], []).append((e["share"], e["mean"]))
    n = len(records)
    return sorted(((t, sum(s for s, _ in v) / n, sum(m for _, m in v) / len(v)) for t, v in acc.items()),
                  key=lambda x: -x[1])


def explain(records: list[dict]) -> list[str]:
    """``  why:`` lines computed from a run's ``token_shift.jsonl`` rows: where the measured updates put
    their move — the answer tokens against the rest, per advantage sign — which answer texts moved and
    how far, and how many of the top movers sat in the answer. Printed under a dynamics ✗ line."""
    if not records:
        return [f"{WHY} no update was measured (shift_every = 0, or no measured step had a group with signal): nothing to explain from"]
    n = len(records)
    ans = {s: _avg(records, "answer", s) for s in ("pos", "neg")}
    oth = {s: _avg(records, "other", s) for s in ("pos", "neg")}
    if ans["pos"] is None and ans["neg"] is None:
        lines = [(f"{WHY} over {n} measured updates no completion had an answer inside <answer>…</answer>; its "
                  f"tokens moved {_f(oth['pos'])} nats per update in rewarded completions, {_f(oth['neg'])} in "
                  "penalised ones")]
    else:
        lines = [(f"{WHY} over {n} measured updates the answer tokens moved {_f(ans['pos'])} nats per update in "
                  f"rewarded completions and {_f(ans['neg'])} in penalised ones; every other token "
                  f"{_f(oth['pos'])} / {_f(oth['neg'])}")]
    texts = _texts_over_run(records)[:3]
    if texts:
        lines.append(f"{WHY} answer tokens by text (mean Δ per update, all advantages): "
                     + ", ".join(f"{token_label(t)!r} {_f(m)} ({c} tokens)" for t, c, m in texts))
        up = [t for t, _, m in texts if m > 0]
        down = [t for t, _, m in texts if m < 0]
        if up and down:
            lines.append(f"{WHY} over all completions the updates moved the answer itself toward "
                         f"{' and '.join(repr(token_label(t)) for t in up)} and away from "
                         f"{' and '.join(repr(token_label(t)) for t in down)}: a drift of the verdict, whatever each "
                         "completion's advantage")
    movers = _movers_over_run(records)[:MOVER_TEXTS]
    if movers:
        lines.append(f"{WHY} the texts that carried the move (their mean share of an update's Σ|Δ| over every token; "
                     "their mean Δ per token in the updates that list them, all advantages): "
                     + ", ".join(f"{token_label(t)!r} {share:.0%}, {_f(m)}" for t, share, m in movers))
    top = [t for r in records for t in r["top"]]
    if top:
        lines.append(f"{WHY} {sum(t['in_answer'] for t in top)} of {len(top)} largest single-token moves sat inside "
                     f"<answer>…</answer>; the largest, {token_label(max(top, key=lambda t: abs(t['delta']))['text'])!r}, "
                     f"moved {_f(max(top, key=lambda t: abs(t['delta']))['delta'])}")
    med = [abs(r[s]["q"][QUANTILES.index(0.5)]) for r in records for s in ("pos", "neg") if r[s]["q"]]
    if med and top:
        big = sum(abs(t["delta"]) for t in top) / len(top)
        verdict = ("a completion's summed change is carried by its few large movers, not by its typical token"
                   if big >= 10 * max(med) else "the typical token moved more than a tenth as far as the largest movers: "
                   "the updates moved the completions broadly, not a few tokens")
        typical = (f"the median token moved at most {max(med):.2g} nats in any measured update" if max(med) > 0 else
                   "the median token's change was exactly 0 in every measured update (a token the policy is already "
                   "sure of has log-prob 0 to fp32 precision, before and after)")
        lines.append(f"{WHY} {typical}, the top movers {big:.2g} on average: {verdict}")
    return lines


def explain_probes(probe_rows: list[dict], probe_tokens: Sequence[Sequence[str]],
                   fork_spans: Sequence[tuple[int, int] | None] | None = None) -> list[str]:
    """``  why:`` lines from ``probes.jsonl`` rows and each probe's token texts: the first → last change
    of the rewarded ("high") and penalised ("low") probes, and which tokens carried it — what the probe
    checks' ✗ lines summed over. With ``fork_spans`` (each probe's tokens from where it parts from its
    partner: the part the checks read), the change is split at the fork, and the tokens that moved most
    from the fork on are named, in rewarded and penalised probes apart; without, between the answer
    tokens and the rest."""
    steps = sorted({r["step"] for r in probe_rows})
    if len(steps) < 2:
        return [(f"{WHY} the probes were scored at {len(steps)} checkpoint(s) "
                f"({', '.join(f'step {s}' for s in steps) or 'none'}): nothing to compare a change with")]
    first = {r["probe"]: r for r in probe_rows if r["step"] == steps[0]}
    last = {r["probe"]: r for r in probe_rows if r["step"] == steps[-1]}
    spans = list(fork_spans or [])
    forked = any(spans)
    parts: dict[str, list[tuple[float, float, float]]] = {"high": [], "low": []}
    by_text: dict[str, dict[str, list[float]]] = {}  # token text → role → its changes (the part the checks read)
    for p, r in first.items():
        if r["role"] not in parts or p not in last or p >= len(probe_tokens):
            continue
        span = spans[p] if p < len(spans) else None
        if forked and not span:
            continue
        d = np.asarray(last[p]["token_logp"]) - np.asarray(r["token_logp"])
        m = np.asarray(answer_token_mask(probe_tokens[p]), dtype=bool)
        lo, hi = span if span else (0, len(d))
        read = np.zeros(len(d), dtype=bool)
        read[lo:hi] = True
        parts[r["role"]].append((float(d[~read].sum()), float(d[read & ~m].sum()), float(d[read & m].sum())))
        for j in (np.flatnonzero(read) if forked else np.flatnonzero(m)):
            by_text.setdefault(probe_tokens[p][j], {}).setdefault(r["role"], []).append(float(d[j]))
    lines = []
    for role, name in (("high", "rewarded"), ("low", "penalised")):
        if parts[role]:
            before, other, answer = (sum(x[k] for x in parts[role]) / len(parts[role]) for k in range(3))
            head = f"{WHY} the {name} probes (step {steps[0]} → {steps[-1]}, mean of {len(parts[role])}): "
            lines.append(head + (f"before the fork {before:+.2f} nats, from the fork on {other + answer:+.2f} "
                                 f"(its answer tokens {answer:+.2f})" if forked else
                                 f"answer tokens {answer:+.2f} nats, all other tokens {other:+.2f}"))

    def mean_all(v: dict[str, list[float]]) -> float:
        flat = [x for xs in v.values() for x in xs]
        return sum(flat) / len(flat)

    ranked = sorted(by_text.items(), key=lambda kv: -abs(mean_all(kv[1])))[:3]
    if ranked:
        def where(v: dict[str, list[float]]) -> str:
            return ", ".join(f"{name} {sum(v[role]) / len(v[role]):+.2f} in {len(v[role])}"
                             for role, name in (("high", "rewarded"), ("low", "penalised")) if v.get(role))

        lines.append(f"{WHY} " + ("from the fork on, the tokens that moved most: " if forked else
                                  "the answer tokens that moved most, whatever the probe's advantage: ")
                     + "; ".join(f"{token_label(t)!r} ({where(v)})" for t, v in ranked))
        in_both = [v for _, v in ranked if v.get("high") and v.get("low")]
        alike = [v for v in in_both if np.sign(np.mean(v["high"])) == np.sign(np.mean(v["low"])) != 0]
        if alike and 2 * len(alike) >= len(in_both):
            lines.append(f"{WHY} {len(alike)} of the {len(in_both)} top movers found in both kinds of probe moved the "
                         "same way in rewarded and penalised ones: the run moved these words whatever a probe's "
                         "advantage, so a probe's change follows which of them it holds more than its reward")
    return lines or [(f"{WHY} none of the {len(first)} probes scored at step {steps[0]} and {steps[-1]} is rewarded or "
                     "penalised: the probe batch had no question with signal")]


# ------------------------------------------------------------------ drawing


def token_label(text: str, width: int = 14) -> str:
    """A token as a figure label: :func:`kimina_edu.plots.token_label`'s visible newline (⏎), tab and <eos>,
    and a leading space as · (' does' is not 'does'), cut to ``width`` characters."""
    from kimina_edu.plots import token_label as readable  # lazily: the records are written without matplotlib

    shown = readable(text)
    shown = "·" + shown[1:] if shown.startswith(" ") else shown
    return shown if len(shown) <= width else shown[: width - 1] + "…"


def _spread(records: list[dict], max_panels: int) -> list[dict]:
    """At most ``max_panels`` records, evenly over the run, the first and last kept, and the update with
    the run's largest single-token move in place of its nearest pick (the one the printed lines name)."""
    if len(records) <= max_panels:
        return list(records)
    idx = [int(i) for i in np.unique(np.round(np.linspace(0, len(records) - 1, max_panels)).astype(int))]
    largest = max(range(len(records)), key=lambda i: max((abs(t["delta"]) for t in records[i]["top"]), default=0.0))
    if largest not in idx:
        inner = idx[1:-1] or idx
        idx[idx.index(min(inner, key=lambda i: abs(i - largest)))] = largest
    return [records[i] for i in sorted(idx)]


def _count(n: int) -> str:
    """A token count short enough to sit under a box: 940, 1.9k, 12k."""
    return str(n) if n < 1000 else f"{n / 1000:.1f}k" if n < 10_000 else f"{n // 1000}k"


def _box(ax, rec: dict) -> None:
    """The recorded quantiles as two boxes (A > 0, A < 0): box 25–75%, whiskers 5–95%, median line."""
    stats, colours = [], []
    for side, colour in (("pos", "tab:green"), ("neg", "tab:red")):
        q = rec[side]["q"]
        if q:
            stats.append({"whislo": q[0], "q1": q[1], "med": q[2], "q3": q[3], "whishi": q[4],
                          "mean": rec[side]["mean"], "label": f"A{'>' if side == 'pos' else '<'}0\n{_count(rec[side]['n'])}",
                          "fliers": []})
            colours.append(colour)
    if stats:
        parts = ax.bxp(stats, showmeans=True, patch_artist=True, widths=0.6)
        for patch, mean, c in zip(parts["boxes"], parts["means"], colours):
            patch.set_facecolor(c)
            patch.set_alpha(0.35)
            mean.set(markerfacecolor=c, markeredgecolor="black", markeredgewidth=0.5)  # ▲ in its side's colour
        span = max(st["whishi"] for st in stats) - min(st["whislo"] for st in stats)
        iqr = max(max(abs(st["q1"]), abs(st["q3"])) for st in stats)
        if span > 0 and iqr < 0.02 * span:  # a box under 2% of the panel draws as a line: say how thin it is
            ax.set_xlabel(f"25–75% within ±{iqr:.0e}", fontsize=7, color="0.3")
    ax.axhline(0, color="grey", lw=0.6)
    ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 2))
    ax.tick_params(labelsize=8)


def _same_moves(top: list[dict]) -> list[tuple[dict, int]]:
    """The top movers with identical moves merged — the same text, side and place, Δ equal to 3 decimals
    (one word at one position of a group's identical completions) — each with how many it stands for,
    lowest Δ first."""
    merged: dict[tuple, list] = {}
    for t in top:
        key = (t["text"], round(t["delta"], 3), t["advantage"] > 0, t["advantage"] < 0, t["in_answer"])
        merged.setdefault(key, [t, 0])[1] += 1
    return sorted(((t, k) for t, k in merged.values()), key=lambda tk: tk[0]["delta"])


def _movers(ax, rec: dict) -> None:
    """The top movers as points (x: 0 for A > 0, 1 for A < 0), labelled in a column at the right,
    evenly spaced so no two labels overlap, each joined to its point."""
    top = _same_moves(rec["top"])
    if not top:
        ax.set_axis_off()
        return
    ys = [t["delta"] for t, _ in top]
    lo, hi = min(ys + [0.0]), max(ys + [0.0])
    pad = 0.08 * (hi - lo or 1.0)
    slots = np.linspace(lo, hi, len(top)) if len(top) > 1 else [ys[0]]
    for (t, times), slot in zip(top, slots):
        x = 0 if t["advantage"] > 0 else 1
        colour = "tab:green" if t["advantage"] > 0 else "tab:red" if t["advantage"] < 0 else "grey"
        ax.plot(x, t["delta"], "o", color=colour, ms=5, mfc=colour if t["in_answer"] else "white")
        label = f"{token_label(t['text'])!r} {t['delta']:+.3f}" + (f" ×{times}" if times > 1 else "")
        ax.annotate(label, (x, t["delta"]), (1.45, slot),
                    fontsize=8, va="center", arrowprops={"arrowstyle": "-", "color": "0.6", "lw": 0.5},
                    fontweight="bold" if t["in_answer"] else "normal")
    ax.axhline(0, color="grey", lw=0.6)
    ax.set_xlim(-0.5, 5.8)  # the label column sits inside the panel
    ax.set_ylim(lo - pad, hi + pad)
    ax.set_xticks([0, 1], ["A>0", "A<0"], fontsize=8)
    ax.tick_params(labelsize=8)
    ax.set_title("top movers", fontsize=9)


def plot_token_shift(records: list[dict], *, max_panels: int = MAX_PANELS, cols: int = 4):
    """Small multiples, one per measured update (at most ``max_panels``, spread over the run): on the
    left the distribution of per-token Δlog-prob for tokens of rewarded (green) and penalised (red)
    completions, from the recorded quantiles; on the right the update's top movers with their text.
    Both on linear axes, each with its own range: the bulk is thousandths of a nat, a verdict token can
    move a hundred times more, and one shared axis would flatten the boxes to a line."""
    import matplotlib.pyplot as plt

    if not records:
        raise ValueError("plot_token_shift: no measured update to draw (shift_every = 0, or every step skipped)")
    chosen = _spread(records, max_panels)
    rows = -(-len(chosen) // cols)
    fig = plt.figure(figsize=(5.2 * min(cols, len(chosen)), 3.4 * rows))
    grid = fig.add_gridspec(rows, 2 * min(cols, len(chosen)), width_ratios=[1, 2.2] * min(cols, len(chosen)),
                            wspace=0.35, hspace=0.6, top=1 - 0.9 / (3.4 * rows))  # room for the two-line title
    for k, rec in enumerate(chosen):
        r, c = divmod(k, cols)
        box = fig.add_subplot(grid[r, 2 * c], label="token_shift_box")
        top = fig.add_subplot(grid[r, 2 * c + 1], label="token_shift_top")
        _box(box, rec)
        _movers(top, rec)
        box.set_title(f"step {rec['step']}", fontsize=9)
        if c == 0:
            box.set_ylabel("Δlog-prob per token (nats)", fontsize=8)
            top.set_ylabel("Δlog-prob (nats)", fontsize=8)
    fig.suptitle(f"What each measured update did to each token ({len(chosen)} of {len(records)} measured updates; "
                 "box 25–75%, whiskers 5–95%, ▲ mean, its tokens counted under it;\n"
                 "top movers: green A > 0, red A < 0, bold and filled inside <answer>…</answer>, ×k the same move in k "
                 "completions; · a leading space, ⏎ a newline)", fontsize=10)
    return fig


def plot_token_shift_update(rec: dict, *, figsize: tuple[float, float] = (7.5, 3.0)):
    """One measured update as one figure, the panel pair of :func:`plot_token_shift`: the per-token
    Δlog-prob distribution by advantage sign (left) and the update's top movers with their text (right).
    The lab's update slider draws one of these per position."""
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=figsize)
    grid = fig.add_gridspec(1, 2, width_ratios=[1, 2.2], wspace=0.35)
    box, top = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])
    _box(box, rec)
    _movers(top, rec)
    box.set_title(f"step {rec['step']}", fontsize=9)
    box.set_ylabel("Δlog-prob per token (nats)", fontsize=8)
    top.set_ylabel("Δlog-prob (nats)", fontsize=8)
    fig.subplots_adjust(left=0.12, right=0.98, bottom=0.16, top=0.88)
    return fig


def plot_token_shift_cumulative(records: list[dict], *, texts: int = MOVER_TEXTS):
    """How the measured moves add up over the run: the running sum, over measured updates, of the
    mean Δ per token of the answer tokens and of the rest, per advantage sign (left), and of the texts
    that carried most of the move, answer or not (right; the answer texts for records written before
    ``mover_texts``). Each point is one measured update (one in ``shift_every`` steps), so the sums
    sample the run's moves; they are not the run's total change. Each panel has its own scale."""
    import matplotlib.pyplot as plt

    if not records:
        raise ValueError("plot_token_shift_cumulative: no measured update to draw (shift_every = 0)")
    fig, (ax, ax_text) = plt.subplots(1, 2, figsize=(13, 4))
    steps = [r["step"] for r in records]
    for part, ls in (("answer", "-"), ("other", "--")):
        for side, colour, sign in (("pos", "tab:green", ">"), ("neg", "tab:red", "<")):
            vals = [r[part][side]["mean"] for r in records]
            if all(v is None for v in vals):
                continue  # no such token in any measured buffer: no line, rather than a flat 0
            vals = [v or 0.0 for v in vals]  # an update without such a token added nothing
            ax.plot(steps, np.cumsum(vals), ls, marker="o", ms=3, color=colour,
                    label=f"{part} tokens, A {sign} 0")
    ax.axhline(0, color="grey", lw=0.6)
    ax.set_xlabel("step (measured updates only)")
    ax.set_ylabel("Σ over measured updates of mean Δ (nats)")
    ax.set_title("answer tokens vs the rest, by advantage sign", fontsize=10)
    ax.legend(fontsize=8)
    movers = any(r.get("mover_texts") for r in records)
    if movers:
        chosen = [t for t, _, _ in _movers_over_run(records)[:texts]]
        field, title = "mover_texts", (f"the {len(chosen)} texts that carried most of the move, all advantages\n"
                                       f"(an update adds its mean Δ where the text is among its {MOVER_TEXTS} largest)")
    else:
        chosen = [t for t, _, _ in _texts_over_run(records)[:texts]]
        field, title = "answer_texts", "answer tokens by text, all advantages"
    for text, colour in zip(chosen, TEXT_COLOURS):
        vals = [next((e["mean"] for e in r.get(field, []) if e["text"] == text), 0.0) for r in records]
        ax_text.plot(steps, np.cumsum(vals), marker="o", ms=3, color=colour, label=f"{token_label(text)!r}")
    ax_text.axhline(0, color="grey", lw=0.6)
    ax_text.set_xlabel("step (measured updates only)")
    ax_text.set_ylabel("Σ of mean Δ per token (nats)")
    ax_text.set_title(title, fontsize=10)
    if ax_text.get_lines()[1:]:
        ax_text.legend(fontsize=8)
    else:
        ax_text.text(0.5, 0.5, "no completion had tokens inside <answer>…</answer>", ha="center", fontsize=9,
                     transform=ax_text.transAxes)
    for a in (ax, ax_text):
        a.xaxis.get_major_locator().set_params(integer=True)
    fig.tight_layout()
    return fig


__all__ = ["QUANTILES", "TOKEN_SHIFT_FILE", "TOP_K", "answer_token_mask", "explain", "explain_probes",
           "plot_token_shift", "plot_token_shift_cumulative", "plot_token_shift_update", "read_token_shift",
           "token_label", "token_shift_record"]
