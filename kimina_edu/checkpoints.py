"""Training checkpoints you can trust: atomic, verified on load, and free of pickles.

A checkpoint is a folder ``checkpoints/step_NNNNN/`` with three files:

    tensors.safetensors   every tensor (weights, optimizer moments, torch's RNG state)
    state.json            everything else (step, config, optimizer settings, the data RNG)
    manifest.json         format tag, and each file's size and SHA-256 — written last

Why each rule:
- **Atomic**: the folder is written under a temporary name, every file is fsync'ed, then the
  folder is renamed into place (POSIX ``rename`` is atomic). A crash, a full disk or Ctrl-C while
  saving leaves the previous checkpoint as it was and no half-written one under a real name.
- **Verified**: sizes and SHA-256 are checked before anything is parsed, so a truncated file
  (full disk) or one flipped byte is named as such — with its path — instead of loading silently
  or failing with a parser's message.
- **No pickles**: ``torch.load(weights_only=False)`` unpickles, and a crafted pickle runs code
  (PyTorch's own warning, `torch.load` docs). safetensors holds only tensors and JSON only data.

:class:`DeferredInterrupt` is the other half: the first Ctrl-C lets the running step finish and
be saved, so what is on disk is always a state *between* steps — the only kind a run can resume
from exactly.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any, Self

from kimina_edu.errors import CheckpointError
from kimina_edu.runtime import file_sha256

FORMAT = "kimina-edu-checkpoint/1"
MANIFEST = "manifest.json"
TENSORS = "tensors.safetensors"
STATE = "state.json"


# ------------------------------------------------------------------ plain data ⇄ JSON + tensors


def _encode(obj: Any, tensors: dict[str, Any]) -> Any:
    """``obj`` as JSON-able data; each tensor moves to ``tensors`` and leaves a reference behind.

    Tuples and dicts with non-string keys (the optimizer's ``{param_index: state}``) are tagged so
    they come back as they went in. Any other type is refused rather than saved lossily.
    """
    import torch

    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    if isinstance(obj, torch.Tensor):
        key = f"t{len(tensors)}"
        tensors[key] = obj.detach().to("cpu").contiguous().clone()
        return {"__tensor__": key}
    if isinstance(obj, tuple):
        return {"__tuple__": [_encode(v, tensors) for v in obj]}
    if isinstance(obj, list):
        return [_encode(v, tensors) for v in obj]
    if isinstance(obj, dict):
        return {"__dict__": [[_encode(k, tensors), _encode(v, tensors)] for k, v in obj.items()]}
    raise TypeError(f"cannot checkpoint a {type(obj).__name__} ({obj!r:.80}): only tensors and plain data are saved")


def _decode(obj: Any, tensors: dict[str, Any]) -> Any:
    if isinstance(obj, list):
        return [_decode(v, tensors) for v in obj]
    if isinstance(obj, dict):
        if set(obj) == {"__tensor__"}:
            return tensors[obj["__tensor__"]]
        if set(obj) == {"__tuple__"}:
            return tuple(_decode(v, tensors) for v in obj["__tuple__"])
        if set(obj) == {"__dict__"}:
            return {_decode(k, tensors): _decode(v, tensors) for k, v in obj["__dict__"]}
        raise CheckpointError(f"unrecognised entry in {STATE}: keys {sorted(obj)[:5]}")
    return obj


# ------------------------------------------------------------------ files


def _fsync_file(path: Path) -> None:
    with path.open("rb") as fh:
        os.fsync(fh.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_state(path: str | os.PathLike, state: dict[str, Any]) -> Path:
    """Write ``state`` (tensors and plain data, nested) as a checkpoint folder at ``path``, atomically.

    An existing checkpoint at ``path`` is replaced only once the new one is complete; if the save
    fails or is interrupted, the old one is put back. Raises :class:`CheckpointError` (with the
    cause, e.g. a full disk) when the folder cannot be written.
    """
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, Any] = {}
    data = json.dumps({"format": FORMAT, "state": _encode(state, tensors)}).encode()
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.writing-", dir=path.parent))
    old = path.parent / f".{path.name}.replaced-{os.getpid()}"
    moved_old = False
    try:
        save_file(tensors, str(tmp / TENSORS))
        (tmp / STATE).write_bytes(data)
        files = {name: {"bytes": (tmp / name).stat().st_size, "sha256": file_sha256(tmp / name)} for name in (TENSORS, STATE)}
        (tmp / MANIFEST).write_text(json.dumps({"format": FORMAT, "files": files}, indent=1))
        for name in (TENSORS, STATE, MANIFEST):
            _fsync_file(tmp / name)
        _fsync_dir(tmp)
        if path.exists():
            os.replace(path, old)
            moved_old = True
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException as exc:
        if moved_old and not path.exists():
            os.replace(old, path)  # put the previous checkpoint back
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError):
            raise CheckpointError(f"could not write checkpoint {path}: {exc.strerror or exc} — free some disk space "
                                  "or choose another output_dir; the previous checkpoint is untouched") from exc
        raise
    if moved_old:
        shutil.rmtree(old, ignore_errors=True)
    return path


def load_state(path: str | os.PathLike) -> dict[str, Any]:
    """The state saved by :func:`save_state` at ``path``, after checking every file against the manifest.

    Nothing read here can run code: tensors come from safetensors, the rest from JSON. A folder
    with only the old pickle format (``state.pt``) is refused, not unpickled.
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"no checkpoint folder at {path}; pass a checkpoints/step_NNNNN folder "
                              "(latest_checkpoint(output_dir) finds the newest)")
    if not (path / MANIFEST).exists():
        if (path / "state.pt").exists():
            raise CheckpointError(f"{path} holds an old-format checkpoint (state.pt, a pickle): it is not loaded, "
                                  "because unpickling a file can run any code in it. Re-run training to write "
                                  "a new checkpoint (safetensors + JSON)")
        raise CheckpointError(f"{path} has no {MANIFEST}: the checkpoint was never completed (interrupted or out "
                              "of disk while saving); resume from an earlier one")
    try:
        manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
        files = manifest["files"]
        if manifest.get("format") != FORMAT or not isinstance(files, dict) or set(files) != {TENSORS, STATE} or not all(
                isinstance(info, dict) and _is_count(info.get("bytes")) and isinstance(info.get("sha256"), str)
                for info in files.values()):
            raise KeyError("format")
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise CheckpointError(f"{path / MANIFEST} is not a {FORMAT} manifest; the checkpoint cannot be trusted") from exc
    for name, info in files.items():
        file = path / name
        if not file.exists():
            raise CheckpointError(f"{file} is missing; the checkpoint is incomplete — resume from an earlier one")
        size = file.stat().st_size
        if size != info.get("bytes"):
            raise CheckpointError(f"{file} is truncated or padded: {size} bytes, the manifest says {info.get('bytes')} "
                                  "(was the disk full when it was written?); resume from an earlier checkpoint")
        if file_sha256(file) != info.get("sha256"):
            raise CheckpointError(f"{file} is corrupt: its SHA-256 differs from the manifest (the file changed after "
                                  "it was written: a disk error or an edit); resume from an earlier checkpoint")
    try:
        tensors = load_file(str(path / TENSORS))
        blob = json.loads((path / STATE).read_text())
        if blob.get("format") != FORMAT:
            raise CheckpointError(f"{path / STATE} has format {blob.get('format')!r}, expected {FORMAT!r}")
        return _decode(blob["state"], tensors)
    except (SafetensorError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(f"{path} passed its checksums but cannot be read ({type(exc).__name__}: {exc}); "
                              "it was not written by this version of kimina-edu") from exc


def _is_count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def checkpoint_problem(path: str | os.PathLike) -> str | None:
    """Why the checkpoint at ``path`` cannot be used, or ``None`` when it verifies."""
    try:
        load_state(path)
    except CheckpointError as exc:
        return str(exc)
    return None


def latest_checkpoint(output_dir: str | os.PathLike) -> Path | None:
    """The newest checkpoint under ``output_dir/checkpoints`` that verifies; each newer damaged one
    is skipped with one line saying why and which one is used instead."""
    root = Path(output_dir) / "checkpoints"
    if not root.is_dir():
        return None
    skipped = []
    for path in sorted(root.glob("step_[0-9]*"), reverse=True):
        if not path.is_dir():
            continue
        problem = checkpoint_problem(path)
        if problem is None:
            for bad, why in skipped:
                print(f"checkpoint {bad.name} skipped ({why}); using {path.name}", file=sys.stderr)
            return path
        skipped.append((path, " ".join(problem.split())[:200]))
    for bad, why in skipped:
        print(f"checkpoint {bad.name} skipped ({why}); no good checkpoint is left", file=sys.stderr)
    return None


# ------------------------------------------------------------------ logs that match the checkpoint


def append_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> None:
    """Append rows in one write, flushed to disk: a step's rows land together or not at all
    (a crash mid-write leaves at most one torn last line, which :func:`rewind_jsonl` drops)."""
    text = "".join(json.dumps(row) + "\n" for row in rows)
    if not text:
        return
    with Path(path).open("a") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def rewind_jsonl(path: str | os.PathLike, keep: Callable[[dict], bool]) -> int:
    """Drop the rows of ``path`` for which ``keep`` is false (and any torn line); returns how many.

    On resume, rows written after the checkpoint's step are about to be written again: dropping
    them first is what keeps ``log.jsonl`` free of duplicates. Rewritten atomically.
    """
    path = Path(path)
    if not path.exists():
        return 0
    kept, dropped = [], 0
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
            ok = isinstance(row, dict) and keep(row)
        except ValueError:
            ok = False
        if ok:
            kept.append(line + "\n")
        else:
            dropped += 1
    if dropped:
        tmp = path.with_name(f".{path.name}.rewind-{os.getpid()}")
        tmp.write_text("".join(kept))
        _fsync_file(tmp)
        os.replace(tmp, path)
    return dropped


# ------------------------------------------------------------------ Ctrl-C between steps


class DeferredInterrupt:
    """First Ctrl-C: finish the running step, save, stop. Second Ctrl-C: stop at once.

    Installed only in the main thread (Python delivers signals there; elsewhere it is a no-op and
    Ctrl-C behaves as usual). ``requested`` tells the loop to save and stop after this step.
    """

    def __init__(self, message: str = "Ctrl-C: finishing this step, then saving a checkpoint and stopping "
                                      "(press Ctrl-C again to stop at once; the last clean checkpoint is kept)"):
        self.message, self.requested, self._previous = message, False, None

    def _handler(self, signum, frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print(self.message, file=sys.stderr, flush=True)

    def __enter__(self) -> Self:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.getsignal(signal.SIGINT)
            signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None


# ------------------------------------------------------------------ the GRPO trainer's state


def trainer_state(trainer) -> dict[str, Any]:
    """Everything a :class:`~kimina_edu.trainer.GRPOTrainer` needs to continue exactly."""
    import torch

    state = {
        "step": trainer.step,
        "config": asdict(trainer.cfg),
        "trainable": trainer.trainable(),
        "optimizer": trainer.optimizer.state_dict(),
        "data_rng": trainer.data_rng.getstate(),
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }
    if hasattr(trainer.backend, "state_dict"):  # a sampler with its own random stream
        state["backend"] = trainer.backend.state_dict()
    guard = getattr(trainer, "_guard_best", None)
    if guard is not None:  # the collapse guard's best window: put back if a resumed run collapses
        state["guard_best"] = {"step": guard[0], "weights": guard[1]}
    dev = getattr(trainer, "_dev_best", None)
    if dev is not None:  # the dev check's best weights so far (TrainConfig.dev_every), and every check's result
        state["dev_best"] = {"step": dev[0], "accuracy": dev[1], "weights": dev[2]}
        state["dev_checks"] = trainer.dev_checks
    return state


def save_trainer(trainer) -> Path:
    """``<output_dir>/checkpoints/step_NNNNN``, written atomically from the trainer's current state."""
    return save_state(trainer.output_dir / "checkpoints" / f"step_{trainer.step:05d}", trainer_state(trainer))


def restore_trainer(trainer, path: str | os.PathLike) -> None:
    """Load the checkpoint at ``path`` into ``trainer`` and rewind its logs to that step.

    Refuses, before anything is copied, a checkpoint written by another config (:func:`check_config`)
    or for other weights (:func:`check_fits`). The collapse guard's best window and the dev check's best
    step come back with the rest, so a resumed run puts back the same weights as the run that never stopped.
    """
    import torch

    state = load_state(path)
    check_config(state["config"], trainer.cfg, path)
    trainable = trainer.trainable()
    check_fits(state["trainable"], trainable, path)
    guard, dev = state.get("guard_best"), state.get("dev_best")
    for kept in (guard, dev):
        if kept is not None:
            check_fits(kept["weights"], trainable, path)
    trainer.put_back(state["trainable"])

    def on_device(weights: dict) -> dict:
        return {n: v.to(trainable[n].device) for n, v in weights.items()}

    trainer._guard_best = None if guard is None else (guard["step"], on_device(guard["weights"]))
    if dev is not None:
        trainer._dev_best = (dev["step"], dev["accuracy"], on_device(dev["weights"]))
        trainer.dev_checks = list(state.get("dev_checks", []))
    trainer.optimizer.load_state_dict(state["optimizer"])
    trainer.step = state["step"]
    trainer.data_rng.setstate(state["data_rng"])
    torch.set_rng_state(state["torch_rng"])
    if state["cuda_rng"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    if "backend" in state and hasattr(trainer.backend, "load_state_dict"):
        trainer.backend.load_state_dict(state["backend"])
    rewind_logs(trainer)
    trainer._torn = False


def check_config(saved: dict[str, Any], cfg, path: str | os.PathLike) -> None:
    """Refuse a checkpoint written by a config that differs in a field that changes what is trained
    (all but ``RESUMABLE``), naming every such field. A field the checkpoint lacks (it was written
    before the field existed) is read as ``VALUE_WHEN_MISSING`` says, the value that trains as runs
    did before it; a lacking field without one is refused, saying so, and so is a field this version
    does not know (the checkpoint was written by a version with a setting this one lacks)."""
    now = asdict(cfg)
    resumable = getattr(type(cfg), "RESUMABLE", ())
    before_field = getattr(type(cfg), "VALUE_WHEN_MISSING", {})
    problems, unknown = [], False
    for k in sorted(now):
        if k in resumable:
            continue
        if k in saved:
            if saved[k] != now[k]:
                problems.append(f"{k}: checkpoint {saved[k]!r} vs now {now[k]!r}")
        elif k in before_field:
            if before_field[k] != now[k]:
                problems.append(f"{k}: not in the checkpoint, which predates the field and trained as "
                                f"{before_field[k]!r} does, vs now {now[k]!r}")
        else:
            unknown = True
            problems.append(f"{k}: not in the checkpoint (it predates the field), and no value of it is known to "
                            "reproduce how that run trained")
    for k in sorted(set(saved) - set(now)):  # a setting of the version that wrote it, unknown here
        unknown = True
        problems.append(f"{k}: in the checkpoint ({saved[k]!r}) but not a setting of this version, which cannot "
                        "train as that run did")
    if problems:
        advice = ("start a new run, or resume with the kimina-edu version that wrote it" if unknown else
                  "resume with the settings that wrote it (its state.json lists them)")
        raise CheckpointError(f"checkpoint {path} was written by another config — mismatched fields: "
                              f"{'; '.join(problems)} — {advice}")


def check_fits(saved: dict[str, Any], trainable: dict[str, Any], path: str | os.PathLike) -> None:
    """Refuse, before anything is copied, a checkpoint whose trained weights differ from the model's
    in names (other LoRA targets, another model) or shapes (another LoRA rank): ``copy_`` would
    broadcast a rank-1 adapter into rank 8 without a word."""
    extra, lacking = sorted(set(saved) - set(trainable)), sorted(set(trainable) - set(saved))
    if extra or lacking:
        parts = ([f"has weights this model does not train ({len(extra)}, e.g. {extra[0]})"] if extra else []) + \
                ([f"lacks weights this model trains ({len(lacking)}, e.g. {lacking[0]})"] if lacking else [])
        raise CheckpointError(f"checkpoint {path} does not fit this model: it {' and '.join(parts)} — another model or "
                              "other LoRA target modules; resume with the settings that wrote it")
    wrong = [(n, tuple(saved[n].shape), tuple(p.shape)) for n, p in trainable.items() if tuple(saved[n].shape) != tuple(p.shape)]
    if wrong:
        name, was, now = wrong[0]
        raise CheckpointError(f"checkpoint {path} does not fit this model: {len(wrong)} weight(s) differ in shape, e.g. "
                              f"{name}: checkpoint {was} vs model {now} — another LoRA rank or model size; resume with "
                              "the settings that wrote it")


def rewind_logs(trainer) -> int:
    """Drop the rows of the trainer's ``log.jsonl`` and ``rollouts.jsonl`` from steps after its
    current one — they are about to be written again. A run starting at step 0 in a folder that
    holds an older run's logs therefore starts them afresh instead of appending a second copy."""
    step = trainer.step
    # log rows carry the step they finished; rollout rows the step they were sampled in (0-based)
    return (rewind_jsonl(trainer.log_path, lambda row: row.get("step", step + 1) <= step)
            + rewind_jsonl(trainer.rollout_path, lambda row: row.get("step", step) < step))


__all__ = [
    "CheckpointError",
    "DeferredInterrupt",
    "append_jsonl",
    "check_config",
    "check_fits",
    "checkpoint_problem",
    "latest_checkpoint",
    "load_state",
    "restore_trainer",
    "rewind_jsonl",
    "rewind_logs",
    "save_state",
    "save_trainer",
    "trainer_state",
]
