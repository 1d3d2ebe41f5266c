"""ipywidgets playgrounds, and how they look once the kernel is gone.

Each builder returns the widget, so a headless run can still build it (papermill executes the cell;
nothing waits for input). Each playground is a :class:`Playground`, whose display also carries a static
``text/html`` rendering of its state: frontends without live widgets (an HTML export, a notebook viewer)
show that instead of "Error displaying widget". ``static_html_from_state`` renders the widget state that
JupyterLab (``saveState``, turned on by ``make lab``) and nbclient save into a notebook, so an HTML export
shows the last state a learner left, with no widget JavaScript fetched from a CDN.

Never an ``Output`` widget or ``interact`` (see ``tests/test_conventions.py``): results go into ``HTML``
and ``Image`` widgets.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Callable
from typing import Any

import ipywidgets as w

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
# The clip explorer's figure, in pixels: drawn at exactly this size and shown at exactly this size
# (a fixed canvas, no bbox_inches="tight"), so the browser never rescales it and it stays sharp.
CLIP_FIGSIZE_IN, CLIP_DPI = (6.0, 3.5), 80
CLIP_PX = (int(CLIP_FIGSIZE_IN[0] * CLIP_DPI), int(CLIP_FIGSIZE_IN[1] * CLIP_DPI))


class Playground(w.VBox):
    """A VBox whose display also carries a static HTML rendering of its current state."""

    def __init__(self, children: list[w.Widget], snapshot: Callable[[], str], **kwargs: Any):
        super().__init__(children, **kwargs)
        self._snapshot = snapshot

    def snapshot_html(self) -> str:
        return f"<div class='kimina-widget-snapshot'>{self._snapshot()}</div>"

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        bundle["text/html"] = self.snapshot_html()
        return bundle


def reward_playground(entry: dict[str, Any]) -> Playground:
    """Type a completion, see the extracted answer and every reward for ``entry``.

    Scoring runs on every keystroke (``continuous_update``); it takes microseconds, so the readout
    follows the typing.
    """
    from kimina_edu.rewards import raw_score, score_completion

    question = w.HTML(f"<pre style='white-space:pre-wrap'>{html.escape(str(entry.get('question', '')))}</pre>")
    box = w.Textarea(
        value=f"<think>I compare the premises.</think>\n<answer>{entry.get('answer') or ''}</answer>",
        continuous_update=True,
        layout=w.Layout(width="100%", height="90px"),
    )
    out = w.HTML()

    def update(_=None):
        b = score_completion(box.value, entry)
        out.value = (
            f"<b>answer</b>: {html.escape(repr(b.answer), quote=False)} &nbsp; <b>raw score</b>: {raw_score(b.answer, entry):.3f}"
            f" &nbsp; <b>format</b>: {b.format} &nbsp; <b>correct</b>: {b.correct} &nbsp; <b>total</b>: {b.total:.2f}"
        )

    box.observe(update, names="value")
    update()
    return Playground(
        [question, box, out],
        snapshot=lambda: f"{question.value}<pre style='white-space:pre-wrap'>{html.escape(box.value)}</pre>{out.value}",
    )


def _clip_readout(advantage: float, eps_low: float, eps_high: float, ratio: float) -> str:
    """The numbers at the red dot: objective, whether the clip is active, and so whether the token
    still gets a gradient (PPO's clipped surrogate, Schulman et al. 2017, eq. 7)."""
    import numpy as np

    from kimina_edu.plots import clipped_surrogate

    obj = float(clipped_surrogate(np.array([ratio]), advantage, eps_low, eps_high)[0])
    clipped = (advantage > 0 and ratio > 1 + eps_high) or (advantage < 0 and ratio < 1 - eps_low)
    return (
        f"<b>ratio</b> {ratio:.2f} &nbsp; <b>A</b> {advantage:+.2f} &nbsp; "
        f"<b>clip range</b> [{1 - eps_low:.2f}, {1 + eps_high:.2f}] &nbsp; <b>objective</b> {obj:+.3f} &nbsp; "
        f"<b>gradient</b> {'0 (clipped)' if clipped else f'{advantage:+.2f} (A, not clipped)'}"
    )


# The clip explorer's sliders: their usual range, and the label each shows. A value given outside its range
# widens the slider to include it, and the readout says so: a slider would otherwise clamp it silently
# (advantage=5 shown as +2.00, chapter 2's EPS_LOW = 0.8 as 0.5).
CLIP_RANGES = {"advantage": (-2.0, 2.0), "eps_low": (0.0, 0.5), "eps_high": (0.0, 0.5), "ratio": (0.0, 2.5)}
_CLIP_LABELS = {"advantage": "A", "eps_low": "ε low", "eps_high": "ε high", "ratio": "ratio"}


def _clip_value_problem(name: str, value: Any) -> str | None:
    """Why ``value`` cannot be drawn for slider ``name``: not a finite number (NaN would be drawn as "+nan",
    inf clamped to the bound), or negative where only ≥ 0 means something (a probability ratio, a clip width)."""
    import math

    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return f"{name}={value!r} must be a finite number, e.g. {name}=1.0"
    if name != "advantage" and value < 0:
        what = "a ratio of two probabilities" if name == "ratio" else "a clip width"
        return f"{name}={value!r} must be ≥ 0 ({what})"
    return None


def _clip_sliders(values: dict[str, float]) -> tuple[dict[str, w.FloatSlider], list[str]]:
    """One slider per value, each range widened to hold its value; the notes that say which were widened."""
    steps = {"advantage": 0.1, "eps_low": 0.01, "eps_high": 0.01, "ratio": 0.05}
    sliders, notes = {}, []
    for name, value in values.items():
        low, high = CLIP_RANGES[name]
        if not low <= value <= high:
            notes.append(f"{_CLIP_LABELS[name]} = {value:g} is outside the slider's usual range [{low:g}, {high:g}]: "
                         "the range was widened to include it")
        # continuous_update=False: a drag sends one value, on release. Sent live, every pixel of a drag queued
        # one redraw in the kernel, and the picture kept catching up for seconds after the mouse stopped.
        # Arrow keys still redraw on every press.
        sliders[name] = w.FloatSlider(value=value, min=min(low, value), max=max(high, value), step=steps[name],
                                      description=_CLIP_LABELS[name], continuous_update=False)
    return sliders, notes


def clip_explorer(advantage: float = 1.0, eps_low: float = 0.2, eps_high: float = 0.2, ratio: float = 1.1) -> Playground:
    """Sliders for ratio, advantage and the two epsilons over the clipped-surrogate plot, with the
    numbers at the current ratio below it.

    Drawn as PNG bytes into an ``Image`` widget, never an ``Output`` widget, which can stall a
    headless run for the whole cell timeout (see ``tests/test_conventions.py``). The image is pinned to
    its pixel size: left to the box's layout it was stretched to the cell's width and blurred.
    A value it cannot draw (NaN, inf, a negative ratio or ε) is a one-line ``ParameterError``; one beyond
    a slider's usual range (:data:`CLIP_RANGES`) widens that slider, with a note under the readout.
    """
    import io

    import matplotlib.pyplot as plt

    from kimina_edu.params import ParameterError
    from kimina_edu.plots import plot_clipped_surrogate

    given = {"advantage": advantage, "eps_low": eps_low, "eps_high": eps_high, "ratio": ratio}
    problems = [p for name, value in given.items() if (p := _clip_value_problem(name, value))]
    if problems:
        raise ParameterError("clip_explorer: " + "; ".join(problems))
    width, height = CLIP_PX
    image = w.Image(format="png", width=width, height=height,
                    layout=w.Layout(width=f"{width}px", height=f"{height}px", flex="0 0 auto", object_fit="none"))
    readout = w.HTML()
    sliders, notes = _clip_sliders({k: float(v) for k, v in given.items()})
    note = "".join(f"<br><i>note: {html.escape(n)}</i>" for n in notes)

    def redraw(_=None):
        values = {k: s.value for k, s in sliders.items()}
        fig, ax = plt.subplots(figsize=CLIP_FIGSIZE_IN)
        plot_clipped_surrogate(**values, ax=ax)
        fig.tight_layout()  # inside the fixed canvas: the PNG is always CLIP_PX
        png = io.BytesIO()
        fig.savefig(png, format="png", dpi=CLIP_DPI)
        plt.close(fig)  # closed, so the inline backend does not print it a second time under the cell
        image.value = png.getvalue()
        readout.value = _clip_readout(**values) + note

    for s in sliders.values():
        s.observe(redraw, names="value")
    redraw()

    def snapshot() -> str:
        b64 = base64.b64encode(bytes(image.value)).decode()
        knobs = " &nbsp; ".join(f"{html.escape(s.description)} = {s.value:g}" for s in sliders.values())
        return f"<div>{knobs}</div><img src='data:image/png;base64,{b64}' width={width} height={height}><div>{readout.value}</div>"

    return Playground([w.HBox(list(sliders.values())[:2]), w.HBox(list(sliders.values())[2:]), image, readout],
                      snapshot=snapshot)


def rollout_browser(rows: list[dict[str, Any]]) -> Playground | w.HTML:
    """Page through logged rollouts: question, completion, reward, advantage (slider or arrow keys)."""
    if not rows:
        return w.HTML("<i>no rollouts logged</i>")
    idx = w.IntSlider(value=0, min=0, max=len(rows) - 1, description="rollout")
    out = w.HTML()

    def number(value: Any, fmt: str) -> str:
        try:
            return format(float(value), fmt)
        except (TypeError, ValueError):
            return html.escape(str(value))

    def show(_=None):
        r = rows[idx.value]
        out.value = (
            f"<b>rollout</b> {idx.value + 1} of {len(rows)} &nbsp; <b>step</b> {html.escape(str(r.get('step')))} &nbsp; "
            f"<b>reward</b> {number(r.get('reward', 0), '.2f')} &nbsp; "
            f"<b>advantage</b> {number(r.get('advantage', 0), '+.2f')}"
            f"<br><pre style='white-space:pre-wrap'>{html.escape(str(r.get('question', '')))}</pre>"
            f"<pre style='background:#f4f4f4;white-space:pre-wrap'>{html.escape(str(r.get('completion', '')))}</pre>"
        )

    idx.observe(show, names="value")
    show()
    return Playground([idx, out], snapshot=lambda: out.value)


def _probe_cell(token: str, delta: float, lim: float) -> str:
    """One token as a coloured span: green where its log-prob rose since the first checkpoint, red where it fell."""
    from kimina_edu.plots import token_label

    a = min(1.0, abs(delta) / lim) * 0.85
    rgb = "26,152,80" if delta > 0 else "215,48,39"
    return (f"<span title='Δ {delta:+.3f}' style='background:rgba({rgb},{a:.2f});padding:1px 2px;margin:1px;"
            f"display:inline-block;font-family:monospace'>{html.escape(token_label(token))}</span>")


def probe_stepper(steps: list[int], table: list[list[list[float]]], tokens: list[list[str]],
                  labels: list[str]) -> Playground | w.HTML:
    """Step through a run's probe checkpoints (``probes.probe_table``): each probe completion's tokens,
    coloured by how far their log-prob moved since the first checkpoint, and its summed change.

    ``table[c][p]``: probe ``p``'s per-token log-probs at checkpoint ``c``; ``tokens[p]``: its decoded
    tokens; ``labels[p]``: a line naming it (role, advantage, a snippet). The colour scale is fixed over
    the whole run, so a later checkpoint looks stronger exactly when it moved further.
    """
    if not steps or not table or not table[0]:
        return w.HTML("<i>no probe checkpoints recorded</i>")
    deltas = [[[b - a for a, b in zip(table[0][p], table[c][p])] for p in range(len(table[0]))]
              for c in range(len(steps))]
    lim = max((abs(d) for cp in deltas for row in cp for d in row), default=0.0) or 1.0
    idx = w.IntSlider(value=len(steps) - 1, min=0, max=len(steps) - 1, description="checkpoint",
                      continuous_update=False)
    out = w.HTML()

    def show(_=None):
        c = idx.value
        parts = [(f"<b>probe checkpoint</b> {c + 1} of {len(steps)} &nbsp; <b>step</b> {steps[c]} &nbsp; "
                 f"<span style='color:#666'>colour: Δ log-prob vs step {steps[0]} (scale ±{lim:.2f} nats)</span>")]
        for p, label in enumerate(labels):
            total = sum(table[c][p]) - sum(table[0][p])
            cells = "".join(_probe_cell(t, d, lim) for t, d in zip(tokens[p], deltas[c][p]))
            parts.append(f"<div style='margin-top:6px'><b>{html.escape(label)}</b> &nbsp; "
                         f"log π {sum(table[c][p]):.2f} (<b>Δ {total:+.2f}</b>)<br>{cells}</div>")
        out.value = "".join(parts)

    idx.observe(show, names="value")
    show()

    def snapshot() -> str:  # without a kernel: the slider's position, and where the whole run is drawn
        return (f"<i>without a kernel this shows one checkpoint (where the slider was left); the figures above "
                f"draw all {len(steps)}, and in the lab the slider steps through them</i><br>{out.value}")

    return Playground([idx, out], snapshot=snapshot)


# The update stepper's figure, in pixels (as the clip explorer's: drawn and shown at one size).
SHIFT_FIGSIZE_IN, SHIFT_DPI = (7.5, 3.0), 80
SHIFT_PX = (int(SHIFT_FIGSIZE_IN[0] * SHIFT_DPI), int(SHIFT_FIGSIZE_IN[1] * SHIFT_DPI))
# A snapshot carrying this class is what an export shows, over the widget's saved state: the token-shift
# stepper's saved state is one update (where the slider was left), its snapshot the whole run.
STATIC_WINS = "kimina-static-wins"


def _png(fig, **kwargs: Any) -> bytes:
    import io

    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", **kwargs)
    plt.close(fig)  # closed, so the inline backend does not print it a second time under the cell
    return buf.getvalue()


def _shift_readout(records: list[dict[str, Any]], k: int, lim: float) -> str:
    """Update ``k``'s numbers: tokens and mean Δ per advantage sign, answer tokens against the rest, the
    answer tokens' moves summed over the measured updates so far, and the top movers as coloured tokens."""
    from kimina_edu.token_dynamics import token_label  # a leading space shown as ·: ' does' is not 'does'

    rec = records[k]

    def num(x: Any) -> str:
        return "—" if x is None else f"{x:+.2g}"

    sides = " &nbsp; ".join(
        f"<b>A {sign} 0</b>: {rec[side]['n']} tokens, mean Δ {num(rec[side]['mean'])}"
        for side, sign in (("pos", "&gt;"), ("neg", "&lt;")))
    parts = " &nbsp; ".join(
        f"<b>{name}</b> {num(rec[part]['pos']['mean'])} (A &gt; 0) / {num(rec[part]['neg']['mean'])} (A &lt; 0)"
        for part, name in (("answer", "answer tokens"), ("other", "the rest")))
    summed = {side: sum(r["answer"][side]["mean"] or 0.0 for r in records[: k + 1]) for side in ("pos", "neg")}
    movers = "".join(
        _probe_cell(token_label(t["text"]), t["delta"], lim).replace(
            "</span>", f" {t['delta']:+.3f}{'▲' if t['advantage'] > 0 else '▼'}</span>")
        for t in sorted(rec["top"], key=lambda t: -abs(t["delta"])))
    return (f"<b>measured update</b> {k + 1} of {len(records)} &nbsp; <b>step</b> {rec['step']}<br>{sides}<br>{parts}"
            f"<br><b>answer tokens, Σ of mean Δ over updates 1–{k + 1}</b>: {summed['pos']:+.3g} (A &gt; 0), "
            f"{summed['neg']:+.3g} (A &lt; 0)"
            f"<br><b>top movers</b> <span style='color:#666'>(green rose, red fell; ▲ A &gt; 0, ▼ A &lt; 0; "
            f"scale ±{lim:.2g} nats over the run)</span><br>{movers}")


def token_shift_stepper(records: list[dict[str, Any]]) -> Playground | w.HTML:
    """Step through a run's measured updates (``token_dynamics.read_token_shift``: ``token_shift.jsonl``):
    what each did to each token of the buffer it learned from — the distribution of per-token Δlog-prob
    for tokens of rewarded and penalised completions, the tokens that moved most with their text — with
    the numbers under it and the answer tokens' moves summed up to that update.

    The colour scale of the movers is fixed over the run, so a later update looks stronger exactly when it
    moved further. Its display carries the static small multiples of every update
    (``token_dynamics.plot_token_shift``), marked :data:`STATIC_WINS`: an executed HTML shows the whole
    run there, not the one update the slider was left on.
    """
    if not records:
        return w.HTML("<i>no update was measured (shift_every = 0, or no measured step had a group with signal)</i>")
    from kimina_edu.token_dynamics import MAX_PANELS, plot_token_shift, plot_token_shift_update

    width, height = SHIFT_PX
    idx = w.IntSlider(value=len(records) - 1, min=0, max=len(records) - 1, description="update",
                      continuous_update=False)  # one redraw on release, not one per pixel of a drag
    image = w.Image(format="png", width=width, height=height,
                    layout=w.Layout(width=f"{width}px", height=f"{height}px", flex="0 0 auto", object_fit="none"))
    readout = w.HTML()
    lim = max((abs(t["delta"]) for r in records for t in r["top"]), default=0.0) or 1.0

    def show(_=None):
        image.value = _png(plot_token_shift_update(records[idx.value], figsize=SHIFT_FIGSIZE_IN), dpi=SHIFT_DPI)
        readout.value = _shift_readout(records, idx.value, lim)

    idx.observe(show, names="value")
    show()
    static: list[str] = []

    def snapshot() -> str:
        if not static:  # drawn once, when first displayed
            fig = plot_token_shift(records)
            static.append(base64.b64encode(_png(fig, dpi=70, bbox_inches="tight")).decode())
        shown = min(len(records), MAX_PANELS)
        which = (f"every measured update ({shown})" if shown == len(records) else
                 f"{shown} of the {len(records)} measured updates, spread over the run")
        return (f"<div class='{STATIC_WINS}'><i>{which}; the lab's slider steps through "
                f"{'them' if shown == len(records) else 'all of them'}:</i><br><img src='data:image/png;base64,{static[0]}' style='max-width:100%'></div>")

    return Playground([idx, image, readout], snapshot=snapshot)


# --- what a notebook shows once the kernel is gone ------------------------------------------------------

_MAX_DEPTH = 32


def static_html_from_state(model_id: str, state: dict[str, Any]) -> str | None:
    """Static HTML for the widget ``model_id`` from a notebook's saved widget state (the ``state`` dict
    of ``metadata.widgets["application/vnd.jupyter.widget-state+json"]``); None when the model is not
    there. Boxes, HTML, labels, text, sliders and images are drawn; any other widget becomes one line
    saying to run the cell. Values are escaped except HTML widgets', which are HTML by contract."""
    if not isinstance(state, dict) or model_id not in state:
        return None
    seen: set[str] = set()

    def draw(mid: str, depth: int) -> str:
        entry = state.get(mid)
        if depth > _MAX_DEPTH or mid in seen or not isinstance(entry, dict):
            return ""
        seen.add(mid)
        s = entry.get("state") if isinstance(entry.get("state"), dict) else {}
        name = str(entry.get("model_name") or s.get("_model_name") or "")
        desc = html.escape(str(s.get("description") or ""))
        if name in ("VBoxModel", "HBoxModel", "BoxModel", "GridBoxModel"):
            kids = [c[len("IPY_MODEL_"):] for c in s.get("children") or [] if isinstance(c, str) and c.startswith("IPY_MODEL_")]
            direction = "row" if name == "HBoxModel" else "column"
            inner = "".join(f"<div>{draw(k, depth + 1)}</div>" for k in kids)
            return f"<div style='display:flex;flex-direction:{direction};gap:4px 16px'>{inner}</div>"
        if name in ("HTMLModel", "HTMLMathModel"):
            return str(s.get("value") or "")
        if name in ("LabelModel", "TextModel", "TextareaModel"):
            text = html.escape(str(s.get("value") or ""))
            tag = "pre style='white-space:pre-wrap;border:1px solid #ccc;padding:4px'" if name == "TextareaModel" else "span"
            return f"{desc} <{tag}>{text}</{tag.split()[0]}>"
        if name.endswith("SliderModel") or name in ("FloatTextModel", "IntTextModel", "CheckboxModel", "DropdownModel"):
            return f"{desc or name[:-5]}: <b>{html.escape(str(s.get('value', s.get('index'))))}</b>"
        if name == "ImageModel":
            data = next((b.get("data") for b in entry.get("buffers") or []
                         if isinstance(b, dict) and b.get("path") == ["value"] and b.get("encoding", "base64") == "base64"), None)
            if not isinstance(data, str):
                return "<i>(image not saved: run the cell)</i>"
            fmt = html.escape(str(s.get("format") or "png"))
            size = " ".join(f"{k}='{html.escape(str(s[k]))}'" for k in ("width", "height") if s.get(k))
            return f"<img src='data:image/{fmt};base64,{html.escape(data)}' {size}>"
        if name in ("LayoutModel", "StyleModel") or name.endswith("StyleModel"):
            return ""
        return f"<i>({html.escape(name or 'widget')}: run the cell to use it)</i>"

    return draw(model_id, 0)


def freeze_widgets(nb: Any) -> int:
    """Replace every live-widget output of ``nb`` (an nbformat notebook) with static HTML drawn from
    its saved state, or the ``text/html`` the widget carried when it was displayed, and drop the saved
    state, so an HTML export needs no widget JavaScript (nbconvert would otherwise load it from a CDN,
    which an offline reader cannot reach). A snapshot marked :data:`STATIC_WINS` is kept over the saved
    state. Returns how many outputs were frozen."""
    widgets = nb.get("metadata", {}).get("widgets") or {}
    state = (widgets.get(WIDGET_STATE) or {}).get("state") or {}
    frozen = 0
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            data = out.get("data") if isinstance(out, dict) else None
            if not data or WIDGET_VIEW not in data:
                continue
            view = data.pop(WIDGET_VIEW)
            drawn = static_html_from_state(str((view or {}).get("model_id", "")), state) if isinstance(view, dict) else None
            if STATIC_WINS in "".join(data.get("text/html") or ""):
                pass  # its snapshot shows the whole run; the saved state, one position of its slider
            elif drawn:
                data["text/html"] = drawn
            elif "text/html" not in data:
                data["text/html"] = "<i>(interactive widget: run the notebook in JupyterLab to use it)</i>"
            frozen += 1
    nb.get("metadata", {}).pop("widgets", None)
    return frozen
