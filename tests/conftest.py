"""Fixtures several test modules share: no test leaves localhost, and every model artifact a test
builds lands in a temporary cache, never the learner's ``~/.cache/kimina-edu``."""

import os
from pathlib import Path

import pytest
from real_models import share_real_smollm2


@pytest.fixture
def offline_shared_cache(monkeypatch, tmp_path_factory):
    """Offline, with one cache for the whole session: artifacts (the SMOKE adapter…) are built once."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("KIMINA_EDU_CACHE", str(tmp_path_factory.getbasetemp() / "model-cache"))
    share_real_smollm2(tmp_path_factory.getbasetemp() / "model-cache")


@pytest.fixture
def offline_private_cache(monkeypatch, tmp_path):
    """Offline, with a cache of this test's own: for tests that damage or race on cached artifacts."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("KIMINA_EDU_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="session")
def smollm_shaped(tmp_path_factory):
    """A folder shaped like HuggingFaceTB/SmolLM-135M-Instruct (tests/smollm_shaped.py): the hub path,
    offline. Built once per session, in a few seconds."""
    from smollm_shaped import build_smollm_shaped

    return build_smollm_shaped(tmp_path_factory.mktemp("smollm-shaped"))


@pytest.fixture(scope="session")
def smoke_env(tmp_path_factory):
    """For notebook runs: one cache for the session, so chapter artifacts (pocket model, adapter) are built
    once (the same folder the unit tests build the SMOKE pocket model in), with the learner's real SmolLM2
    linked in; offline, no test leaves localhost."""
    cache = os.environ.get("KIMINA_EDU_TEST_CACHE") or str(tmp_path_factory.getbasetemp() / "model-cache")
    os.environ["KIMINA_EDU_CACHE"] = cache
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    share_real_smollm2(cache)
    return Path(cache)


@pytest.fixture
def recorded_runs(monkeypatch, tmp_path):
    """The course runner with every notebook recorded instead of executed and no CPU calibration: only the
    runner's own parsing and checks run. Returns (the two-digit prefixes run, in order; this test's folder)."""
    from kimina_edu import course, runtime

    ran = []

    def record(path, output_dir, **kwargs):
        ran.append(path.name[:2])
        return course.NotebookResult(path.stem, True, 0.0, output_dir)

    monkeypatch.setattr(course, "run_notebook", record)
    monkeypatch.setattr(course, "export_html", lambda executed: None)
    monkeypatch.setattr(runtime, "calibration_line", lambda: "CPU calibration: (skipped in this test)")
    for name in course.ENV_OVERRIDES:
        monkeypatch.delenv(name, raising=False)
    return ran, tmp_path
