"""The playground widgets work without a browser: values in, rendered state out."""

from kimina_edu.widgets import clip_explorer, reward_playground, rollout_browser

PNG_MAGIC = b"\x89PNG"


def test_clip_explorer_redraws_when_a_slider_moves():
    box = clip_explorer(eps_low=0.2, eps_high=0.28)
    image = box.children[-1]
    first = bytes(image.value)  # ipywidgets stores the bytes as a memoryview
    assert first.startswith(PNG_MAGIC)
    slider = box.children[0].children[0]  # advantage
    slider.value = -1.0
    assert bytes(image.value).startswith(PNG_MAGIC)
    assert bytes(image.value) != first


def test_reward_playground_scores_what_is_typed():
    entry = {"question": "All A are B. Does it follow?", "answer": "Yes", "metadata": {"source_dataset": "syllogism"}}
    box = reward_playground(entry)
    text, out = box.children[1], box.children[2]
    assert "<b>format</b>: 1.0" in out.value
    text.value = "no tags at all"
    assert "<b>format</b>: 0.0" in out.value


def test_rollout_browser_pages_and_escapes_html():
    rows = [{"step": 1, "reward": 1.0, "advantage": 0.5, "question": "q1", "completion": "<answer>Yes</answer>"},
            {"step": 2, "reward": 0.0, "advantage": -0.5, "question": "q2", "completion": "plain"}]
    box = rollout_browser(rows)
    slider, out = box.children[0], box.children[1]
    assert "&lt;answer&gt;Yes&lt;/answer&gt;" in out.value
    slider.value = 1
    assert "q2" in out.value and "-0.50" in out.value
    assert "no rollouts" in rollout_browser([]).value
