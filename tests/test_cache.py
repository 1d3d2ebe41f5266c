"""Cached artifacts heal: a damaged SFT adapter is retrained with one line; builds are serialised."""

import threading
import time

import pytest

from kimina_edu.cache import build_once
from kimina_edu.pocket import PocketRecipe
from kimina_edu.sft import SFTRecipe, ensure_sft_adapter, sft_adapter_dir

TINY_SFT = SFTRecipe(n_examples=8, epochs=1, batch_size=8)


pytestmark = pytest.mark.usefixtures("offline_private_cache")


def test_a_damaged_sft_adapter_is_retrained_with_one_line(capsys):
    base, adapter = ensure_sft_adapter("pocket", recipe=TINY_SFT, pocket=PocketRecipe.smoke())
    assert adapter == sft_adapter_dir(base, TINY_SFT)
    capsys.readouterr()
    assert ensure_sft_adapter("pocket", recipe=TINY_SFT, pocket=PocketRecipe.smoke())[1] == adapter
    assert "training one now" not in capsys.readouterr().out  # cached: nothing retrained
    damages = [lambda p: (p / "adapter_config.json").write_text("{"),
               lambda p: (p / "adapter_model.safetensors").write_bytes(b"\0" * 64),
               lambda p: (p / "adapter_model.safetensors").unlink()]
    for damage in damages:
        damage(adapter)
        from kimina_edu.models import load_policy

        assert ensure_sft_adapter("pocket", recipe=TINY_SFT, pocket=PocketRecipe.smoke())[1] == adapter
        out = capsys.readouterr().out
        assert "SFT adapter cache" in out and "rebuilding it" in out
        load_policy(base, adapter=adapter, verbose=False)  # and it loads again


def test_the_seed_reaches_the_adapter():
    """SEED changes the SFT run (data order and LoRA init): another recipe hash, other weights."""
    from safetensors.torch import load_file

    a = ensure_sft_adapter("pocket", recipe=TINY_SFT, pocket=PocketRecipe.smoke())[1]
    b = ensure_sft_adapter("pocket", recipe=SFTRecipe(n_examples=8, epochs=1, batch_size=8, seed=1),
                           pocket=PocketRecipe.smoke())[1]
    assert a != b
    wa, wb = load_file(str(a / "adapter_model.safetensors")), load_file(str(b / "adapter_model.safetensors"))
    assert any(not (wa[k] == wb[k]).all() for k in wa)


def test_concurrent_builders_wait_for_one_build(tmp_path):
    builds, results = [], []

    def build(out):
        builds.append(1)
        time.sleep(0.3)
        (out / "done").write_text("ok")

    def problem(path):
        return None if (path / "done").exists() else "is not done"

    threads = [threading.Thread(target=lambda: results.append(build_once(tmp_path / "a", build, problem)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(builds) == 1 and len(set(results)) == 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".a.") and p.is_dir()]  # no temp folder left


def test_a_failed_build_leaves_nothing_behind(tmp_path):
    def build(out):
        (out / "half").write_text("x")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_once(tmp_path / "a", build, lambda p: None)
    assert not (tmp_path / "a").exists()
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == []


def test_a_plain_file_where_the_cache_folder_belongs_is_refused_before_building(tmp_path):
    target = tmp_path / "artifact"
    target.write_text("not a folder")
    built = []
    with pytest.raises(RuntimeError, match="is a file") as err:
        build_once(target, lambda tmp: built.append(tmp), lambda p: None, what="test artifact")
    assert built == [], "the build ran and was thrown away"
    assert target.read_text() == "not a folder" and "\n" not in str(err.value)


def test_a_cache_root_that_is_a_file_is_one_line(tmp_path, monkeypatch):
    from kimina_edu.params import LearnerError
    from kimina_edu.runtime import cache_dir

    blocked = tmp_path / "cache-file"
    blocked.write_text("x")
    monkeypatch.setenv("KIMINA_EDU_CACHE", str(blocked))
    with pytest.raises(LearnerError, match="KIMINA_EDU_CACHE") as err:
        cache_dir()
    assert "\n" not in str(err.value)
