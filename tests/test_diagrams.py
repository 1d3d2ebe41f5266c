"""The course's drawn diagrams: every label written inside a box stays inside it."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
from matplotlib.patches import FancyBboxPatch

from kimina_edu import diagrams

DIAGRAMS = [diagrams.rl_loop, diagrams.course_map, diagrams.grpo_loop, diagrams.two_turn_flow, diagrams.verl_roles,
            diagrams.clip_region]


def labels_outside_their_box(fig) -> list[str]:
    """The texts anchored inside a box whose rendered extent crosses that box's edge, with the overflow in pixels."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    spilled = []
    for ax in fig.axes:
        boxes = [p for p in ax.patches if isinstance(p, FancyBboxPatch)]
        for text in ax.texts:
            x, y = text.get_position()
            hosts = [p for p in boxes if p.get_x() <= x <= p.get_x() + p.get_width()
                     and p.get_y() <= y <= p.get_y() + p.get_height()]
            if not hosts:
                continue
            t, b = text.get_window_extent(renderer), hosts[0].get_window_extent(renderer)
            over = max(b.x0 - t.x0, t.x1 - b.x1, b.y0 - t.y0, t.y1 - b.y1)
            if over > 0:
                spilled.append(f"{text.get_text()!r} crosses its box by {over:.1f} px")
    return spilled


@pytest.mark.parametrize("draw", DIAGRAMS, ids=lambda f: f.__name__)
def test_every_boxed_label_fits_its_box(draw):
    fig = draw()
    try:
        assert not labels_outside_their_box(fig)
    finally:
        plt.close(fig)


def test_the_fit_check_can_fail():
    fig, ax = diagrams._canvas(4, 2, "a label too long for its box")
    diagrams._box(ax, 2, 1, "a label far wider than the box it sits in", w=0.8, h=0.4)
    try:
        assert labels_outside_their_box(fig)
    finally:
        plt.close(fig)
