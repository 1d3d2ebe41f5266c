"""The playground widgets work without a browser: values in, rendered state out; and what a notebook
shows of them once the kernel is gone (saved state → static HTML). tests/test_browser.py drives them
in JupyterLab."""

import base64
import io
import math
import time

import nbformat
import pytest
from ipywidgets import Widget
from PIL import Image

from kimina_edu.params import ParameterError
from kimina_edu.widgets import (
    CLIP_PX,
    WIDGET_STATE,
    WIDGET_VIEW,
    clip_explorer,
    freeze_widgets,
    reward_playground,
    rollout_browser,
    static_html_from_state,
)

PNG_MAGIC = b"\x89PNG"
ENTRY = {"question": "All A are B. Does it follow?", "answer": "Yes", "metadata": {"source_dataset": "syllogism"}}


def _png_size(data) -> tuple[int, int]:
    return Image.open(io.BytesIO(bytes(data))).size


def test_clip_explorer_redraws_when_a_slider_moves():
    box = clip_explorer(eps_low=0.2, eps_high=0.28)
    image = box.children[2]
    first = bytes(image.value)  # ipywidgets stores the bytes as a memoryview
    assert first.startswith(PNG_MAGIC)
    slider = box.children[0].children[0]  # advantage
    slider.value = -1.0
    assert bytes(image.value).startswith(PNG_MAGIC)
    assert bytes(image.value) != first


def test_clip_explorer_image_is_shown_at_the_size_it_is_drawn():
    """A stretched PNG is a blurred one: the picture keeps one pixel size whatever the sliders say, and
    the widget is pinned to exactly that size."""
    box = clip_explorer()
    image = box.children[2]
    sizes = set()
    for a, ratio in ((1.0, 1.1), (-2.0, 0.0), (0.1, 2.5)):
        box.children[0].children[0].value = a
        box.children[1].children[1].value = ratio
        sizes.add(_png_size(image.value))
    assert sizes == {CLIP_PX}
    assert (int(image.width), int(image.height)) == CLIP_PX
    assert (image.layout.width, image.layout.height) == (f"{CLIP_PX[0]}px", f"{CLIP_PX[1]}px")


def test_clip_explorer_reads_out_the_numbers_at_the_dot():
    box = clip_explorer(advantage=1.0, eps_low=0.2, eps_high=0.2, ratio=1.1)
    readout = box.children[3]
    assert "<b>objective</b> +1.100" in readout.value and "not clipped" in readout.value
    box.children[1].children[1].value = 1.5  # ratio past 1 + ε_high with A > 0: clipped, objective 1.2
    assert "<b>objective</b> +1.200" in readout.value and "0 (clipped)" in readout.value


def test_reward_playground_scores_what_is_typed():
    box = reward_playground(ENTRY)
    text, out = box.children[1], box.children[2]
    assert "<b>format</b>: 1.0" in out.value
    text.value = "no tags at all"
    assert "<b>format</b>: 0.0" in out.value


def test_reward_playground_follows_each_keystroke():
    """The readout follows every keystroke (continuous_update); scoring one must stay far below a
    frame so the kernel is never the reason the playground lags (the browser test measures the rest)."""
    box = reward_playground(ENTRY)
    text, out = box.children[1], box.children[2]
    assert text.continuous_update
    typed = "<think>x</think><answer>"
    seen = set()
    for ch in "No</answer>":
        typed += ch
        text.value = typed
        seen.add(out.value)
    assert len(seen) > 1 and "'No'" in out.value


def test_snapshot_travels_with_the_widget_display():
    """The display bundle carries static HTML of the *current* state beside the live view, for any
    frontend that cannot draw the widget (an HTML export, a notebook viewer)."""
    box = reward_playground(ENTRY)
    box.children[1].value = "<answer>No & <b>bold</b></answer>"
    bundle = box._repr_mimebundle_()
    assert WIDGET_VIEW in bundle
    assert "No &amp; &lt;b&gt;bold&lt;/b&gt;" in bundle["text/html"]
    assert "<b>correct</b>" in bundle["text/html"]
    clip = clip_explorer()
    html_ = clip._repr_mimebundle_()["text/html"]
    assert f"width={CLIP_PX[0]} height={CLIP_PX[1]}" in html_ and "data:image/png;base64," in html_


def test_rollout_browser_pages_and_escapes_html():
    rows = [{"step": 1, "reward": 1.0, "advantage": 0.5, "question": "q1", "completion": "<answer>Yes</answer>"},
            {"step": 2, "reward": 0.0, "advantage": -0.5, "question": "q2", "completion": "plain"}]
    box = rollout_browser(rows)
    slider, out = box.children[0], box.children[1]
    assert "&lt;answer&gt;Yes&lt;/answer&gt;" in out.value
    slider.value = 1
    assert "q2" in out.value and "-0.50" in out.value and "rollout</b> 2 of 2" in out.value
    assert "no rollouts" in rollout_browser([]).value
    odd = rollout_browser([{"step": "<s>", "reward": None, "advantage": "n/a"}])
    assert "&lt;s&gt;" in odd.children[1].value and "None" in odd.children[1].value


def _saved_state():
    return Widget.get_manager_state(drop_defaults=False)["state"]


def test_saved_state_renders_the_last_values_statically():
    """What ipywidgets saves (the same routine JupyterLab and nbclient use) is drawn back as HTML:
    the moved slider's value, the current picture, the current readout."""
    clip = clip_explorer()
    clip.children[1].children[1].value = 1.5
    png = base64.b64encode(bytes(clip.children[2].value)).decode()
    html_ = static_html_from_state(clip.model_id, _saved_state())
    assert "ratio: <b>1.5</b>" in html_
    assert png in html_ and f"width='{CLIP_PX[0]}'" in html_
    assert "0 (clipped)" in html_
    play = reward_playground(ENTRY)
    play.children[1].value = "<answer>No</answer>"
    html_ = static_html_from_state(play.model_id, _saved_state())
    assert "&lt;answer&gt;No&lt;/answer&gt;" in html_ and "'No'" in html_
    assert static_html_from_state("not-a-model", _saved_state()) is None


def test_hostile_state_gets_a_verdict_fast():
    cyclic = {"a": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_b"]}},
              "b": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_a", 7, None]}}}
    assert static_html_from_state("a", cyclic).count("<div") >= 2
    assert static_html_from_state("x", {"x": "junk"}) == ""
    assert static_html_from_state("x", None) is None
    weird = {"x": {"model_name": "GizmoModel", "state": {}}, "i": {"model_name": "ImageModel", "state": {}}}
    assert "run the cell" in static_html_from_state("x", weird)
    assert "image not saved" in static_html_from_state("i", weird)
    wide = {str(i): {"model_name": "VBoxModel", "state": {"children": [f"IPY_MODEL_{i + 1}"]}} for i in range(20000)}
    start = time.perf_counter()
    static_html_from_state("0", wide)  # depth-capped: returns, does not recurse 20 000 deep
    assert time.perf_counter() - start < 30  # a hang catcher


def test_freeze_widgets_leaves_an_export_nothing_to_fetch():
    clip = clip_explorer()
    play = reward_playground(ENTRY)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("clip", outputs=[nbformat.v4.new_output("display_data", data=clip._repr_mimebundle_())]),
                nbformat.v4.new_code_cell("play", outputs=[nbformat.v4.new_output("display_data", data=play._repr_mimebundle_())]),
                nbformat.v4.new_code_cell("lost", outputs=[nbformat.v4.new_output(
                    "display_data", data={WIDGET_VIEW: {"model_id": "gone", "version_major": 2, "version_minor": 0},
                                          "text/plain": "VBox()"})])]
    state = _saved_state()
    state.pop(play.model_id)  # a state that lacks a model: the snapshot shown at display time stands in
    nb.metadata["widgets"] = {WIDGET_STATE: {"state": state, "version_major": 2, "version_minor": 0}}
    assert freeze_widgets(nb) == 3
    assert "widgets" not in nb.metadata
    datas = [c.outputs[0]["data"] for c in nb.cells]
    assert all(WIDGET_VIEW not in d for d in datas)
    assert "data:image/png;base64," in datas[0]["text/html"] and "ratio: <b>" in datas[0]["text/html"]
    assert "kimina-widget-snapshot" in datas[1]["text/html"]
    assert "run the notebook in JupyterLab" in datas[2]["text/html"]


def test_probe_stepper_steps_through_checkpoints():
    from kimina_edu.widgets import probe_stepper

    steps = [0, 25, 50]
    table = [[[-1.0, -2.0], [-3.0]], [[-0.5, -2.0], [-3.5]], [[-0.2, -1.0], [-4.0]]]
    box = probe_stepper(steps, table, [["<answer>", "Yes"], ["\n"]], ["high A=+1.0 <b>", "low A=-1.0"])
    slider, out = box.children[0], box.children[1]
    assert slider.value == 2 and "<b>step</b> 50" in out.value  # opens on the run's end
    assert "Δ +1.80" in out.value and "Δ -1.00" in out.value  # summed change since step 0
    assert "&lt;answer&gt;" in out.value and "high A=+1.0 &lt;b&gt;" in out.value and "⏎" in out.value
    assert "rgba(26,152,80" in out.value and "rgba(215,48,39" in out.value  # rose: green, fell: red
    slider.value = 0
    assert "<b>step</b> 0" in out.value and "Δ +0.00" in out.value and "checkpoint</b> 1 of 3" in out.value
    exported = box._repr_mimebundle_()["text/html"]
    assert exported.count("<b>Δ +0.00</b>") == 2
    assert "the figures above draw all 3" in exported  # an export says it shows one checkpoint of the run
    assert "no probe checkpoints" in probe_stepper([], [], [], []).value


# ---- values outside the clip explorer's sliders: refused when meaningless, shown (never clamped) otherwise


def _knobs(box) -> dict:
    sliders = [*box.children[0].children, *box.children[1].children]
    return dict(zip(("advantage", "eps_low", "eps_high", "ratio"), sliders, strict=True))


@pytest.mark.parametrize("name,value", [("advantage", math.nan), ("ratio", math.inf), ("eps_low", -math.inf),
                                        ("eps_high", math.nan), ("ratio", -0.5), ("eps_low", -0.1),
                                        ("advantage", "1")])
def test_clip_explorer_refuses_a_value_it_cannot_draw_in_one_line(name, value):
    with pytest.raises(ParameterError) as info:
        clip_explorer(**{name: value})
    text = str(info.value)
    assert "\n" not in text and name in text and repr(value) in text


@pytest.mark.parametrize("name,value", [("advantage", 5.0), ("advantage", -3.5), ("ratio", 4.0),
                                        ("eps_low", 0.8), ("eps_high", 1.0)])
def test_clip_explorer_shows_a_value_beyond_its_usual_range_instead_of_clamping_it(name, value):
    """EPS_LOW = 0.8 passes chapter 2's parameter check: the slider must hold 0.8, not its old bound 0.5,
    and the readout says the range was widened."""
    box = clip_explorer(**{name: value})
    slider = _knobs(box)[name]
    assert slider.value == value and slider.min <= value <= slider.max
    readout = box.children[3].value
    assert "outside" in readout and "widened" in readout
    defaults = clip_explorer()
    assert "widened" not in defaults.children[3].value, "no note when every value is in range"


def test_clip_explorer_reads_out_an_advantage_beyond_the_slider_as_given():
    readout = clip_explorer(advantage=5.0, ratio=1.1, eps_low=0.2, eps_high=0.2).children[3].value
    assert "<b>A</b> +5.00" in readout and "<b>objective</b> +5.500" in readout
