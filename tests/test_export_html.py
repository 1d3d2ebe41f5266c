"""The HTML export of an executed notebook reads like the live notebook (kimina_edu/course.py::export_html)."""

import nbformat

from kimina_edu.course import export_html
from kimina_edu.widgets import WIDGET_STATE, WIDGET_VIEW, clip_explorer


def _export(tmp_path, cells, metadata=None):
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    nb.metadata.update(metadata or {})
    path = tmp_path / "run.ipynb"
    nbformat.write(nb, path)
    html = export_html(path)
    assert html is not None
    body = html.read_text()
    return body[body.find("<body"):]


def test_print_output_arriving_in_pieces_reads_as_one_text(tmp_path):
    """A loop that prints with ``end=" "`` (or a slow print) reaches the notebook as one stream output per
    write; JupyterLab joins them, nbconvert by default draws each in its own <pre> — one word per line."""
    words = ["step", "1", "reward", "0.50", "step", "2", "reward", "0.75"]
    streams = [nbformat.v4.new_output("stream", name="stdout", text=w + " ") for w in words]
    streams.append(nbformat.v4.new_output("stream", name="stderr", text="a warning\n"))
    body = _export(tmp_path, [nbformat.v4.new_code_cell("loop", outputs=streams)])
    assert "step 1 reward 0.50 step 2 reward 0.75" in body
    assert body.count('class="jp-OutputArea-child"') == 2  # one for stdout, one for stderr


def test_widgets_export_as_their_last_state_with_nothing_to_fetch(tmp_path):
    from ipywidgets import Widget

    clip = clip_explorer()
    clip.children[1].children[1].value = 1.5
    state = Widget.get_manager_state(drop_defaults=False)
    out = nbformat.v4.new_output("display_data", data=clip._repr_mimebundle_())
    body = _export(tmp_path, [nbformat.v4.new_code_cell("clip_explorer()", outputs=[out])],
                   {"widgets": {WIDGET_STATE: state}})
    assert "ratio: <b>1.5</b>" in body and "0 (clipped)" in body
    assert WIDGET_VIEW not in body
    assert "unpkg.com" not in body and "cdn.jsdelivr" not in body and "embed-amd.js" not in body
