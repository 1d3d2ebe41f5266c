"""The pocket model: its corpus, the shipped copy and its record, and the build cache."""

import json
import multiprocessing as mp
import shutil
from dataclasses import replace

import pytest

from kimina_edu import pocket
from kimina_edu.pocket import (
    PocketModelError,
    PocketRecipe,
    build_pocket_model,
    is_shipped,
    pocket_corpus,
    pocket_dir,
    pocket_path,
    shipped_dir,
    verify_shipped,
)

SMOKE = PocketRecipe.smoke()
TINY = replace(SMOKE, pretrain_steps=3, questions_per_eval_task=40, restatements_per_eval_task=20,
               docs_per_format_task=5)


pytestmark = pytest.mark.usefixtures("offline_private_cache")


def test_corpus_never_contains_an_evaluated_answer():
    docs = pocket_corpus(SMOKE)
    task_docs = [d for d in docs if "Does it logically follow" in d or "propositional logic" in d]
    assert len(task_docs) >= SMOKE.questions_per_eval_task  # the questions are there…
    for doc in task_docs:  # …but no assistant turn ever gives an answer or a verdict
        reply = doc.split("<|im_start|>assistant", 1)[1] if "<|im_start|>assistant" in doc else ""
        assert "<answer>" not in reply and "follows" not in reply and "entail is" not in reply
    assert any("<|im_start|>assistant" in d for d in task_docs)  # restatements are there


@pytest.mark.parametrize("recipe", [PocketRecipe(), PocketRecipe.smoke()], ids=["course", "smoke"])
def test_shipped_models_load_and_match_their_record(recipe):
    """Both recipes the course uses are shipped; every file matches its sha256 in record.json,
    the record names its recipe and the machine that built it, and the folder loads."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    assert is_shipped(recipe), "the course's pocket model must be shipped under data/pocket/"
    path = verify_shipped(recipe)
    record = json.loads((path / "record.json").read_text())
    assert record["recipe"]["hidden_size"] == recipe.hidden_size
    assert {"cpu", "torch_threads", "versions"} <= set(record["built_on"])
    assert {"model.safetensors", "tokenizer.json", "config.json", "build.json"} <= set(record["files"])
    model = AutoModelForCausalLM.from_pretrained(path)
    tok = AutoTokenizer.from_pretrained(path)
    assert model.config.vocab_size == len(tok)
    assert pocket_path(recipe) == path  # the shipped copy is what load_policy uses: nothing is built


def test_load_policy_builds_nothing_for_the_shipped_model(monkeypatch):
    from kimina_edu.models import load_policy

    def refuse(*a, **k):
        raise AssertionError("the shipped recipe must not be rebuilt")

    monkeypatch.setattr(pocket, "_build_into", refuse)
    _, tok = load_policy("pocket", recipe=SMOKE, verbose=False)
    assert tok.eos_token == "<|im_end|>"


@pytest.mark.parametrize("damage", ["flip_byte", "delete", "record"])
def test_a_damaged_shipped_file_is_one_clear_line(damage, tmp_path, monkeypatch):
    copy = tmp_path / "data" / "pocket"
    shutil.copytree(shipped_dir(SMOKE), copy / shipped_dir(SMOKE).name)
    monkeypatch.setattr(pocket, "SHIPPED_DIR", copy)
    target = copy / shipped_dir(SMOKE).name
    if damage == "flip_byte":
        blob = bytearray((target / "model.safetensors").read_bytes())
        blob[-5] ^= 0x01
        (target / "model.safetensors").write_bytes(bytes(blob))
    elif damage == "delete":
        (target / "tokenizer.json").unlink()
    else:
        (target / "record.json").write_text("{")
    with pytest.raises(PocketModelError) as err:
        pocket_path(SMOKE)
    msg = str(err.value)
    assert "\n" not in msg and "make pocket" in msg and "git checkout" in msg


def test_a_built_model_is_cached_and_rebuilt_when_damaged(capsys):
    path = build_pocket_model(TINY, progress=False)
    assert build_pocket_model(TINY, progress=False) == path  # cached
    assert "rebuilding" not in capsys.readouterr().out
    damages = [lambda p: (p / "build.json").write_text("{not json"),
               lambda p: (p / "model.safetensors").write_bytes((p / "model.safetensors").read_bytes()[:100]),
               lambda p: (p / "tokenizer.json").unlink(),
               lambda p: (p / "config.json").write_text("")]
    for damage in damages:
        damage(path)
        assert build_pocket_model(TINY, progress=False) == path
        assert "rebuilding" in capsys.readouterr().out
        assert pocket._built_problem(path, TINY) is None
    assert pocket_dir(replace(TINY, seed=5)) != path  # another recipe, another folder


def _build_in_child(cache: str, queue) -> None:
    import os

    os.environ["KIMINA_EDU_CACHE"] = cache
    try:
        queue.put(str(build_pocket_model(TINY, progress=False)))
    except Exception as exc:  # noqa: BLE001 — reported to the parent
        queue.put(f"ERROR {exc!r}")


def test_concurrent_builds_of_one_recipe_all_succeed(tmp_path):
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_build_in_child, args=(str(tmp_path / "shared"), queue)) for _ in range(3)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert len(set(results)) == 1 and not results[0].startswith("ERROR"), results
