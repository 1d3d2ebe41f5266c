"""ipywidgets playgrounds. Each returns the widget so a headless run can still build it
(papermill executes the cell; nothing waits for input)."""

from __future__ import annotations

from typing import Any


def reward_playground(entry: dict[str, Any]):
    """Type a completion, see the extracted answer and every reward for ``entry``."""
    import ipywidgets as w

    from kimina_edu.rewards import raw_score, score_completion

    box = w.Textarea(
        value=f"<think>I compare the premises.</think>\n<answer>{entry.get('answer') or ''}</answer>",
        layout=w.Layout(width="100%", height="90px"),
    )
    out = w.HTML()

    def update(_=None):
        b = score_completion(box.value, entry)
        out.value = (
            f"<b>answer</b>: {b.answer!r} &nbsp; <b>raw score</b>: {raw_score(b.answer, entry):.3f} &nbsp; "
            f"<b>format</b>: {b.format} &nbsp; <b>correct</b>: {b.correct} &nbsp; <b>total</b>: {b.total:.2f}"
        )

    box.observe(update, names="value")
    update()
    return w.VBox([w.HTML(f"<pre>{entry['question']}</pre>"), box, out])


def clip_explorer(advantage: float = 1.0, eps_low: float = 0.2, eps_high: float = 0.2, ratio: float = 1.1):
    """Sliders for ratio, advantage and the two epsilons over the clipped-surrogate plot.

    Drawn as PNG bytes into an ``Image`` widget, never an ``Output`` widget, which can stall a
    headless run for the whole cell timeout (see ``tests/test_conventions.py``).
    """
    import io

    import ipywidgets as w
    import matplotlib.pyplot as plt

    from kimina_edu.plots import plot_clipped_surrogate

    image = w.Image(format="png")
    sliders = {
        "advantage": w.FloatSlider(value=advantage, min=-2, max=2, step=0.1, description="A"),
        "eps_low": w.FloatSlider(value=eps_low, min=0.0, max=0.5, step=0.01, description="ε low"),
        "eps_high": w.FloatSlider(value=eps_high, min=0.0, max=0.5, step=0.01, description="ε high"),
        "ratio": w.FloatSlider(value=ratio, min=0.0, max=2.5, step=0.05, description="ratio"),
    }

    def redraw(_=None):
        fig, ax = plt.subplots(figsize=(6, 3.5))
        plot_clipped_surrogate(**{k: s.value for k, s in sliders.items()}, ax=ax)
        png = io.BytesIO()
        fig.savefig(png, format="png", dpi=80, bbox_inches="tight")
        plt.close(fig)  # closed, so the inline backend does not print it a second time under the cell
        image.value = png.getvalue()

    for s in sliders.values():
        s.observe(redraw, names="value")
    redraw()
    return w.VBox([w.HBox(list(sliders.values())[:2]), w.HBox(list(sliders.values())[2:]), image])


def rollout_browser(rows: list[dict[str, Any]]):
    """Page through logged rollouts: question, completion, reward, advantage."""
    import html

    import ipywidgets as w

    if not rows:
        return w.HTML("<i>no rollouts logged</i>")
    idx = w.IntSlider(value=0, min=0, max=len(rows) - 1, description="rollout")
    out = w.HTML()

    def show(_=None):
        r = rows[idx.value]
        out.value = (
            f"<b>step</b> {r.get('step')} &nbsp; <b>reward</b> {r.get('reward', 0):.2f} &nbsp; "
            f"<b>advantage</b> {r.get('advantage', 0):+.2f}<br><pre>{html.escape(r.get('question', ''))}</pre>"
            f"<pre style='background:#f4f4f4'>{html.escape(r.get('completion', ''))}</pre>"
        )

    idx.observe(show, names="value")
    show()
    return w.VBox([idx, out])
