"""The course as a learner uses it: JupyterLab in a real browser (Debian's Chromium, driven headless by
Playwright), on a temporary copy of the notebooks made the way ``make lab`` makes them.

For 01, 02 and 04 in SMOKE mode: run every cell, use every widget (type, drag, arrow keys) and time how
long the displayed output takes to change, save, shut the kernel down, reopen, and check what the reopened
notebook shows (saved widget state, no "Error displaying widget"). Every request the page makes to a host
other than this machine is blocked and counted; the count must be 0. Screenshots and the measured
response times land in ``runs/browser/`` (look at them: they are what a learner sees).

Chromium comes from Debian (``make browser``, run by ``make test``); browser downloads are blocked on
the course's machines, so ``playwright install`` is never used. Without Chromium this test fails with
one line saying how to install it: a browser test that silently skips proves nothing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import nbformat
import pytest
from deadlines import CELL_DEADLINE_S, WAIT_DEADLINE_S
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from kimina_edu.lab import lab_command, prepare_workspace, write_lab_settings
from kimina_edu.widgets import WIDGET_STATE

REPO = Path(__file__).resolve().parent.parent
SHOTS = REPO / "runs" / "browser"
CHROMIUM = os.environ.get("KIMINA_CHROMIUM", "/usr/bin/chromium")
TOKEN = "kimina-edu-browser-test"
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}
# one notebook's "Run All", SMOKE sizes: a deadline that only catches hangs (240 s failed on a busy 2-core machine)
RUN_TIMEOUT_S = int(os.environ.get("KIMINA_BROWSER_RUN_TIMEOUT", str(CELL_DEADLINE_S)))
NOTEBOOKS = ("01_rlvr_reasoning_gym", "02_grpo_anatomy", "04_grpo_from_scratch")
# Settings for this test's JupyterLab only: every cell stays in the page (JupyterLab 4 otherwise
# drops cells scrolled out of view, so a finished run could not be read off the page), and no news.
TEST_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none",
                                                                   "autoStartDefaultKernel": True},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                        "checkForUpdates": False},
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on 127.0.0.1, started by kimina_edu.lab's command line (so ``--allow-root`` is
    exercised when the tests run as root), serving a copy of the course set to SMOKE."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: run `make browser` (as root it runs "
                    "`apt-get install chromium`), or set KIMINA_CHROMIUM to a Chromium binary", pytrace=False)
    try:
        import jupyterlab  # noqa: F401
    except ImportError as exc:
        pytest.fail(f"{exc.name} is missing: `make test` installs requirements-lab.lock", pytrace=False)
    tmp = tmp_path_factory.mktemp("lab")
    root = tmp / "notebooks"
    prepare_workspace(dest=root)
    for name in NOTEBOOKS:  # the learner's first edit: SMOKE = True in the parameters cell
        path = root / f"{name}.ipynb"
        nb = nbformat.read(path, as_version=4)
        params = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
        params.source = re.sub(r"^SMOKE\s*=\s*False", "SMOKE = True", params.source, flags=re.MULTILINE)
        nbformat.write(nb, path)
    write_lab_settings()
    settings = tmp / "settings"
    for rel, values in TEST_SETTINGS.items():
        (settings / rel).parent.mkdir(parents=True, exist_ok=True)
        (settings / rel).write_text(json.dumps(values))
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(settings), "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "ws"),
           "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"), "MPLBACKEND": "module://matplotlib_inline.backend_inline"}
    port = _free_port()
    cmd = lab_command(root, extra=["--no-browser", f"--ServerApp.port={port}", f"--IdentityProvider.token={TOKEN}",
                                   "--ServerApp.port_retries=0", "--LabApp.news_url=", "--ServerApp.open_browser=False"])
    log = (tmp / "lab.log").open("w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + WAIT_DEADLINE_S
    while True:
        try:
            with urllib.request.urlopen(f"{base}/api/status?token={TOKEN}", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"JupyterLab did not start (`{' '.join(cmd)}`):\n{(tmp / 'lab.log').read_text()[-2000:]}",
                        pytrace=False)
        time.sleep(0.5)
    yield {"base": base, "root": root, "proc": proc, "log": tmp / "lab.log"}
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="module")
def browser_page(lab):
    from playwright.sync_api import sync_playwright

    blocked: list[str] = []

    def gate(route):
        host = urlparse(route.request.url).hostname or ""
        if route.request.url.startswith(("data:", "blob:")) or host in LOCAL_HOSTS:
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            # --no-sandbox: Chromium's sandbox refuses to run as root; the resolver rule is a second lock
            # behind the route gate: no name but this machine's resolves.
            args=["--no-sandbox", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost"],
        )
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.route("**/*", gate)
        page = context.new_page()
        yield page, blocked
        context.close()
        browser.close()


def _shut_down_kernels(lab) -> None:
    """Every running session's kernel shut down through the server's API (as closing the laptop would)."""
    headers = {"Authorization": f"token {TOKEN}"}
    with urllib.request.urlopen(urllib.request.Request(f"{lab['base']}/api/sessions", headers=headers)) as r:
        sessions = json.load(r)
    for s in sessions:
        req = urllib.request.Request(f"{lab['base']}/api/sessions/{s['id']}", method="DELETE", headers=headers)
        urllib.request.urlopen(req).close()


def _open(page, lab, name: str):
    # one notebook at a time, from a clean workspace: with the previous chapter's tab and kernel still open,
    # chapter 2's Run All ran nothing (every prompt stayed "[ ]", its kernel idle) — alone it passes
    _shut_down_kernels(lab)
    page.goto(f"{lab['base']}/lab/tree/{name}.ipynb?token={TOKEN}&reset")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=WAIT_DEADLINE_S * 1000)
    dialog = page.locator(".jp-Dialog:has-text('Select Kernel')")
    try:  # JupyterLab may ask which kernel, though the notebook names one; a learner clicks "Select"
        dialog.wait_for(timeout=3000)
    except PlaywrightTimeout:
        pass  # no dialog: the kernel started by itself
    else:
        dialog.get_by_role("button", name="Select", exact=True).click()
    # the kernel is up when the toolbar's kernel indicator says idle
    page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator[data-status='idle']",
                           timeout=WAIT_DEADLINE_S * 1000)


def _menu(page, top: str, item: str):
    page.get_by_role("menuitem", name=top, exact=True).click()
    page.get_by_role("menuitem", name=re.compile(rf"^{re.escape(item)}")).first.click()


def _run_all(page, name: str) -> float:
    start = time.monotonic()
    _menu(page, "Run", "Run All Cells")
    started = """() => [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt')]
                       .some(e => /\\[(\\*|\\d+)\\]/.test(e.textContent))"""
    try:  # a command given while JupyterLab was still settling the new kernel can be dropped (seen on a busy
        page.wait_for_function(started, timeout=60_000, polling=250)  # machine: every prompt stayed "[ ]")
    except PlaywrightTimeout:
        _menu(page, "Run", "Run All Cells")  # as a learner would: nothing happened, so ask again
    try:
        page.wait_for_function(
            """() => { const p = [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt')];
                       return p.length > 0 && p.every(e => /\\[\\d+\\]/.test(e.textContent)); }""",
            timeout=RUN_TIMEOUT_S * 1000, polling=250)
    except PlaywrightTimeout:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{name}_run_all_failed.png"), full_page=True)
        prompts = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt").all_inner_texts()
        raise AssertionError(f"{name}: Run All did not finish in {RUN_TIMEOUT_S} s; prompts {prompts}; "
                             f"see {SHOTS / (name + '_run_all_failed.png')}") from None
    errors = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) [data-mime-type='application/vnd.jupyter.error']")
    assert errors.count() == 0, f"{name}: a cell raised: {errors.first.inner_text()[:1500]}"
    return time.monotonic() - start


def _changed(page, locator, before: str, attr: str | None = None, timeout_s: float = WAIT_DEADLINE_S) -> float:
    """Seconds until ``locator``'s text (or ``attr``) differs from ``before``, polled every frame."""
    start = time.monotonic()
    handle = locator.element_handle()
    page.wait_for_function(
        "([el, before, attr]) => (attr ? el.getAttribute(attr) : el.innerHTML) !== before",
        arg=[handle, before, attr], timeout=timeout_s * 1000, polling="raf")
    return time.monotonic() - start


def _drag(page, slider, fraction: float) -> float:
    """Drag ``slider``'s handle with the mouse to ``fraction`` of its track; returns when it was released."""
    hb, track = slider.locator(".noUi-handle").bounding_box(), slider.locator(".noUi-target").bounding_box()
    page.mouse.move(hb["x"] + hb["width"] / 2, hb["y"] + hb["height"] / 2)
    page.mouse.down()
    page.mouse.move(track["x"] + track["width"] * fraction, hb["y"] + hb["height"] / 2, steps=8)
    released = time.monotonic()
    page.mouse.up()
    return released


def _wait_for_html(page, locator, want: str) -> None:
    """Wait (checked every frame, up to the hang deadline) until ``locator``'s HTML contains ``want``."""
    page.wait_for_function("([el, want]) => el.innerHTML.includes(want)", arg=[locator.element_handle(), want],
                           timeout=WAIT_DEADLINE_S * 1000, polling="raf")


def _value(locator, attr: str | None = None) -> str:
    return locator.get_attribute(attr) if attr else locator.inner_html()


def _save_and_shut_down(page, lab, name: str) -> nbformat.NotebookNode:
    # focus the notebook first: Ctrl+S typed inside a widget never reaches JupyterLab (ipywidgets keeps its keys)
    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-InputPrompt").first.click()
    page.keyboard.press("Control+s")
    path = lab["root"] / f"{name}.ipynb"
    for attempt in range(60):
        nb = nbformat.read(path, as_version=4)
        if nb.metadata.get("widgets", {}).get(WIDGET_STATE) and any(c.get("outputs") for c in nb.cells
                                                                     if c.cell_type == "code"):
            break
        if attempt % 20 == 19:  # a key press JupyterLab did not take: press again, as a learner would
            page.keyboard.press("Control+s")
        time.sleep(0.5)
    else:
        raise AssertionError(f"{name}: saving wrote no outputs or no widget state into {path}")
    # shut the kernel down (as closing the laptop would): the reopened page has only what was saved
    _shut_down_kernels(lab)
    return nbformat.read(path, as_version=4)


def _reopen(page, lab, name: str):
    page.goto(f"{lab['base']}/lab/tree/{name}.ipynb?token={TOKEN}&reset")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=WAIT_DEADLINE_S * 1000)
    page.wait_for_timeout(3000)  # widget models restore from the saved state; give the renderers a moment
    body = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)").inner_text()
    assert "Error displaying widget" not in body, f"{name} reopened: a widget shows an error"
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")


def _shot(page, locator, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    locator.scroll_into_view_if_needed()
    locator.screenshot(path=str(SHOTS / f"{name}.png"))


# One learner session, a notebook per test (``-k 04`` runs chapter 4 alone); the module-scoped JupyterLab
# and browser are shared, and each test adds its response times to runs/browser/timings.json.
TIMINGS: dict[str, object] = {}


def _session(lab, browser_page, name: str, part) -> None:
    page, blocked = browser_page
    t0 = time.monotonic()
    try:
        part(page, lab, TIMINGS)
    except Exception:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{name}_failed.png"), full_page=False)
        shutil.copy(lab["log"], SHOTS / "lab.log")
        raise
    TIMINGS[f"{name}_total_s"] = time.monotonic() - t0
    TIMINGS["blocked_requests"] = blocked
    SHOTS.mkdir(parents=True, exist_ok=True)
    (SHOTS / "timings.json").write_text(json.dumps(TIMINGS, indent=2))
    print(json.dumps({k: v if not isinstance(v, list) or not v or isinstance(v[0], str)
                      else {"median": statistics.median(v), "max": max(v)} for k, v in TIMINGS.items()}, indent=1))
    assert not blocked, f"the page asked {len(blocked)} non-local hosts: {blocked[:5]}"
    shutil.copy(lab["log"], SHOTS / "lab.log")


def test_01_reward_playground(lab, browser_page):
    _session(lab, browser_page, "01", _reward_playground)


def test_02_clip_explorer(lab, browser_page):
    _session(lab, browser_page, "02", _clip_explorer)


def test_04_rollout_browser_and_probe_stepper(lab, browser_page):
    _session(lab, browser_page, "04", _rollout_browser_and_probe_stepper)


def _reward_playground(page, lab, timings: dict) -> None:
    """01: the reward playground — type, one keystroke at a time, then a whole answer."""
    _open(page, lab, NOTEBOOKS[0])
    timings["01_run_all_s"] = _run_all(page, NOTEBOOKS[0])
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    text = panel.locator(".widget-textarea textarea").first
    widget = text.locator("xpath=ancestor::div[contains(@class,'widget-vbox')][1]")
    readout = widget.locator(".widget-html-content").last
    text.click()
    page.keyboard.press("Control+a")
    page.keyboard.type("<think>premises</think>\n<answer>N</answer>")
    for _ in range(len("</answer>")):
        page.keyboard.press("ArrowLeft")  # the caret right after "N": each key below changes the answer
    page.wait_for_timeout(500)
    keystrokes = []
    for key in ("o", "Backspace", "o", "Backspace"):  # ends on "N": the typing below changes it
        before = _value(readout)
        page.keyboard.press(key)
        keystrokes.append(_changed(page, readout, before))
    page.keyboard.press("Control+a")
    before = _value(readout)
    page.keyboard.type("<think>premises</think>\n<answer>No</answer>", delay=40)  # a learner's typing speed
    typed_at = time.monotonic()
    page.wait_for_function("([el]) => el.innerHTML.includes(\"'No'\") && el.innerHTML.includes('format</b>: 1.0')",
                           arg=[readout.element_handle()], timeout=WAIT_DEADLINE_S * 1000, polling="raf")
    timings["01_playground_keystroke_s"] = keystrokes
    timings["01_playground_settle_after_typing_s"] = time.monotonic() - typed_at
    assert _value(readout) != before
    _shot(page, widget, "01_reward_playground_live")
    saved = _save_and_shut_down(page, lab, NOTEBOOKS[0])
    state = saved.metadata["widgets"][WIDGET_STATE]["state"]
    assert any("<answer>No</answer>" in str(m.get("state", {}).get("value", "")) for m in state.values()), \
        "01 saved: the typed completion is not in the saved widget state"
    panel = _reopen(page, lab, NOTEBOOKS[0])
    text = panel.locator(".widget-textarea textarea").first
    assert "<answer>No</answer>" in text.input_value()
    reopened = text.locator("xpath=ancestor::div[contains(@class,'widget-vbox')][1]")
    assert "'No'" in reopened.locator(".widget-html-content").last.inner_html()
    _shot(page, reopened, "01_reward_playground_reopened")


def _clip_explorer(page, lab, timings: dict) -> None:
    """02: the clip explorer — drag the ratio slider, then arrow keys on the advantage slider."""
    _open(page, lab, NOTEBOOKS[1])
    timings["02_run_all_s"] = _run_all(page, NOTEBOOKS[1])
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    image = panel.locator("img.widget-image").first
    widget = image.locator("xpath=ancestor::div[contains(@class,'widget-vbox')][1]")
    readout = widget.locator(".widget-html-content").last
    sliders = widget.locator(".widget-slider")
    assert sliders.count() == 4
    image.scroll_into_view_if_needed()
    box = image.bounding_box()
    natural = image.evaluate("i => [i.naturalWidth, i.naturalHeight]")
    assert (round(box["width"]), round(box["height"])) == tuple(natural), \
        f"02: the plot is drawn {natural} but shown {box['width']:.0f}x{box['height']:.0f}: stretched"
    redraws = []
    before_src, before_text = image.get_attribute("src"), _value(readout)
    released = _drag(page, sliders.nth(3), 0.9)  # the ratio slider
    target = float(sliders.nth(3).locator(".widget-readout").inner_text())
    _wait_for_html(page, readout, f"ratio</b> {target:.2f}")
    redraws.append(time.monotonic() - released)
    assert image.get_attribute("src") != before_src and _value(readout) != before_text
    assert target > 1.28 and "0 (clipped)" in _value(readout)  # dragged past 1 + ε_high with A > 0
    adv = sliders.nth(0).locator(".noUi-handle")
    adv.focus()
    for key in ("ArrowLeft", "ArrowLeft", "ArrowRight"):
        before_src = image.get_attribute("src")
        page.keyboard.press(key)
        redraws.append(_changed(page, image, before_src, attr="src"))
    timings["02_clip_redraw_s"] = redraws
    want = f"<b>A</b> {float(sliders.nth(0).locator('.widget-readout').inner_text()):+.2f}"
    _wait_for_html(page, readout, want)  # the readout follows the picture
    last_readout = _value(readout)
    _shot(page, widget, "02_clip_explorer_live")
    _save_and_shut_down(page, lab, NOTEBOOKS[1])
    panel = _reopen(page, lab, NOTEBOOKS[1])
    image = panel.locator("img.widget-image").first
    reopened = image.locator("xpath=ancestor::div[contains(@class,'widget-vbox')][1]")
    assert reopened.locator(".widget-html-content").last.inner_html() == last_readout
    assert image.evaluate("i => i.naturalWidth") == natural[0]
    _shot(page, reopened, "02_clip_explorer_reopened")


def _rollout_browser_and_probe_stepper(page, lab, timings: dict) -> None:
    """04: the rollout browser and the probe stepper — arrow keys and a drag on each slider; the update
    stepper — an arrow key."""
    _open(page, lab, NOTEBOOKS[2])
    timings["04_run_all_s"] = _run_all(page, NOTEBOOKS[2])
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    out = panel.locator(".widget-html-content:has-text('rollout')").last
    widget = out.locator("xpath=ancestor::div[contains(@class,'widget-vbox')][1]")
    slider = widget.locator(".widget-slider").first
    handle = slider.locator(".noUi-handle")
    handle.focus()
    pages = []
    for key in ("ArrowRight", "ArrowRight", "ArrowLeft"):
        before = _value(out)
        page.keyboard.press(key)
        pages.append(_changed(page, out, before))
    before = _value(out)
    released = _drag(page, slider, 0.6)
    target = int(slider.locator(".widget-readout").inner_text()) + 1  # the drag's last value, shown 1-based
    _wait_for_html(page, out, f"rollout</b> {target} of")
    pages.append(time.monotonic() - released)
    assert _value(out) != before
    timings["04_rollout_page_s"] = pages
    shown = re.search(r"rollout</b> (\d+) of (\d+)", _value(out))
    assert shown and int(shown.group(1)) > 2, f"04: the drag did not page on ({_value(out)[:200]})"
    last = _value(out)
    _shot(page, widget, "04_rollout_browser_live")

    # the probe stepper opens on the run's last checkpoint; arrow keys step back, a drag goes to step 0
    probe = panel.locator(".widget-html-content:has-text('probe checkpoint')").last
    probe_widget = probe.locator("xpath=ancestor::div[contains(@class,'widget-vbox')][1]")
    probe_slider = probe_widget.locator(".widget-slider").first
    shown = re.search(r"checkpoint</b> (\d+) of (\d+)", _value(probe))
    assert shown and shown.group(1) == shown.group(2), f"04: the probe stepper should open on the last checkpoint ({_value(probe)[:200]})"
    n_checkpoints = int(shown.group(2))
    assert n_checkpoints >= 3, f"04: SMOKE records the start and every step: {n_checkpoints} checkpoints"
    probe_slider.locator(".noUi-handle").focus()
    steps = []
    for key in ("ArrowLeft", "ArrowLeft", "ArrowRight"):
        before = _value(probe)
        page.keyboard.press(key)
        steps.append(_changed(page, probe, before))
    _wait_for_html(page, probe, f"checkpoint</b> {n_checkpoints - 1} of {n_checkpoints}")
    before = _value(probe)
    released = _drag(page, probe_slider, 0.0)
    _wait_for_html(page, probe, f"checkpoint</b> 1 of {n_checkpoints}")
    steps.append(time.monotonic() - released)
    at_start = _value(probe)
    assert at_start != before and "<b>step</b> 0" in at_start
    # at step 0 nothing has moved yet: every probe's summed change reads +0.00
    assert at_start.count("<b>Δ +0.00</b>") == at_start.count("log π"), "04: step 0 must show no change"
    assert before.count("<b>Δ +0.00</b>") < before.count("log π"), "04: a later checkpoint must show the run's changes"
    timings["04_probe_step_s"] = steps
    _shot(page, probe_widget, "04_probe_stepper_live")

    # the token-shift stepper opens on the last measured update; an arrow key steps back and redraws its figure
    shift = panel.locator(".widget-html-content:has-text('measured update')").last
    shift_widget = shift.locator("xpath=ancestor::div[contains(@class,'widget-vbox')][1]")
    shown = re.search(r"measured update</b> (\d+) of (\d+)", _value(shift))
    assert shown and shown.group(1) == shown.group(2), f"04: the update stepper should open on the last update ({_value(shift)[:200]})"
    n_updates = int(shown.group(2))
    if n_updates > 1:  # SMOKE measures every step that had signal
        shift_image = shift_widget.locator("img.widget-image").first
        shift_widget.locator(".widget-slider .noUi-handle").first.focus()
        before_src = shift_image.get_attribute("src")
        page.keyboard.press("ArrowLeft")
        timings["04_token_shift_step_s"] = [_changed(page, shift_image, before_src, attr="src")]
        _wait_for_html(page, shift, f"measured update</b> {n_updates - 1} of {n_updates}")
    shift_last = _value(shift)
    _shot(page, shift_widget, "04_token_shift_stepper_live")

    _save_and_shut_down(page, lab, NOTEBOOKS[2])
    panel = _reopen(page, lab, NOTEBOOKS[2])
    out = panel.locator(".widget-html-content:has-text('rollout')").last
    assert out.inner_html() == last
    _shot(page, out.locator("xpath=ancestor::div[contains(@class,'widget-vbox')][1]"), "04_rollout_browser_reopened")
    probe = panel.locator(".widget-html-content:has-text('probe checkpoint')").last
    assert probe.inner_html() == at_start, "04 reopened: the probe stepper lost the checkpoint the learner left"
    _shot(page, probe.locator("xpath=ancestor::div[contains(@class,'widget-vbox')][1]"), "04_probe_stepper_reopened")
    shift = panel.locator(".widget-html-content:has-text('measured update')").last
    assert shift.inner_html() == shift_last, "04 reopened: the update stepper lost the update the learner left"
    _shot(page, shift.locator("xpath=ancestor::div[contains(@class,'widget-vbox')][1]"), "04_token_shift_stepper_reopened")

    # --- what a learner session leaves behind ---
    assert (lab["root"] / "figures").is_dir() and (lab["root"] / "grpo_run").is_dir(), \
        "the notebooks' outputs belong beside the learner's copies"
    assert (lab["root"] / "grpo_run" / "probes.jsonl").is_file(), "the run's probe checkpoints are beside its log"
