"""The lab's slider over a run's measured updates (widgets.token_shift_stepper): one update's per-token
Δlog-prob per position, drawn from token_shift.jsonl rows; and, once the kernel is gone, every update
as a static figure rather than the position the slider was left on. tests/test_browser.py drives it in
JupyterLab."""

import base64
import io

import matplotlib

matplotlib.use("Agg")
import nbformat
from ipywidgets import Widget
from PIL import Image

from kimina_edu.token_dynamics import token_shift_record
from kimina_edu.widgets import (
    SHIFT_PX,
    WIDGET_STATE,
    freeze_widgets,
    static_html_from_state,
    token_shift_stepper,
)

REWARDED = ["<think>", " A", "</think>", "<answer>", " does", " follow", "</answer>"]
PENALISED = ["<think>", "<b>", "</think>", "<answer>", " does", " not", " follow", "</answer>"]


def _records(n: int = 4) -> list[dict]:
    """n updates: the verdict token ' does' of the rewarded completion falls further each update, the
    penalised completion's '<b>' and ' not' rise — the opposite of what GRPO asks, as in a real run."""
    out = []
    for k in range(n):
        before = [[-1.0] * 7, [-1.0] * 8]
        after = [[-1.0, -1.0, -1.0, -1.0, -1.0 - 0.1 * (k + 1), -1.0, -1.0],
                 [-1.0, -0.99, -1.0, -1.0, -1.0, -1.0 + 0.05 * (k + 1), -1.0, -1.0]]
        out.append(token_shift_record(1 + 10 * k, [0.9, -0.9], before, after, [REWARDED, PENALISED], k=3))
    return out


def _png_size(data) -> tuple[int, int]:
    return Image.open(io.BytesIO(bytes(data))).size


def test_the_slider_steps_through_the_measured_updates_and_opens_on_the_last():
    box = token_shift_stepper(_records(4))
    slider, image, readout = box.children
    assert (slider.min, slider.max, slider.value) == (0, 3, 3)
    assert "update</b> 4 of 4" in readout.value and "<b>step</b> 31" in readout.value
    assert ">·does -0.400▲</span>" in readout.value  # the largest mover: its text, its Δ, its advantage's sign
    assert "&lt;b&gt; +0.010▼" in readout.value  # a token's text is escaped, never markup
    last_png = bytes(image.value)
    slider.value = 0
    assert "update</b> 1 of 4" in readout.value and "<b>step</b> 1" in readout.value and "-0.100" in readout.value
    assert bytes(image.value) != last_png, "moving the slider redraws the update's figure"
    assert _png_size(image.value) == SHIFT_PX  # drawn at the size it is shown


def test_the_readout_sums_the_answer_tokens_moves_up_to_the_update_shown():
    box = token_shift_stepper(_records(4))
    slider, _, readout = box.children
    # rewarded completion: its answer tokens (' does', ' follow') move -0.1·(k+1)/2 per token at update k
    slider.value = 1
    assert "updates 1–2</b>: -0.15 (A &gt; 0)" in readout.value, readout.value
    slider.value = 3
    assert "updates 1–4</b>: -0.5 (A &gt; 0)" in readout.value


def test_the_export_shows_every_update_not_the_slider_position():
    recs = _records(5)
    box = token_shift_stepper(recs)
    box.children[0].value = 2  # a learner left the slider on update 3
    bundle = box._repr_mimebundle_()
    static = bundle["text/html"]
    assert "kimina-static-wins" in static and "every measured update (5)" in static
    png = base64.b64decode(static.split("base64,")[1].split("'")[0])
    assert Image.open(io.BytesIO(png)).size[0] > SHIFT_PX[0], "the small multiples of all five, wider than one"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("token_shift_stepper(recs)",
                                          outputs=[nbformat.v4.new_output("display_data", data=bundle)])]
    state = Widget.get_manager_state(drop_defaults=False)["state"]
    assert "update</b> 3 of 5" in static_html_from_state(box.model_id, state)  # what the saved state alone shows
    nb.metadata["widgets"] = {WIDGET_STATE: {"state": state, "version_major": 2, "version_minor": 0}}
    assert freeze_widgets(nb) == 1
    frozen = nb.cells[0].outputs[0]["data"]["text/html"]
    assert frozen == static and "update</b> 3 of 5" not in frozen


def test_the_export_of_a_long_run_says_how_many_of_its_updates_it_shows():
    recs = _records(14)
    static = token_shift_stepper(recs)._repr_mimebundle_()["text/html"]
    assert "12 of the 14 measured updates, spread over the run" in static and "every measured update" not in static


def test_a_run_without_a_measured_update_says_so():
    assert "no update was measured" in token_shift_stepper([]).value
