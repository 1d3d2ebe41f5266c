"""Checkpoints survive Ctrl-C, crashes, full disks, flipped bytes and crafted pickles; a resume refuses a
checkpoint written for another config or another set of trained weights, naming what differs.

Every interrupt test runs a real GRPO run (a two-layer random Llama and a small BPE tokenizer, so
it takes seconds), stops it at one point, resumes from what is on disk and compares with an
uninterrupted run: weights bit-identical, every log row written exactly once and equal.
"""

import errno
import json
import os
import pickle
import random
import signal

import pytest
import torch

from kimina_edu import checkpoints
from kimina_edu.checkpoints import latest_checkpoint, load_state, save_state
from kimina_edu.errors import CheckpointError
from kimina_edu.pocket import train_tokenizer
from kimina_edu.rewards import RewardBreakdown
from kimina_edu.runtime import file_sha256
from kimina_edu.sft import rule_based_teacher
from kimina_edu.tasks import SEEDS, make_entries
from kimina_edu.tiny import tiny_random_llama
from kimina_edu.train_config import TrainConfig
from kimina_edu.trainer import GRPOTrainer, read_log

ENTRIES = make_entries("syllogism", 32, SEEDS["rl"])
STEPS = 4
TIMING = ("per_s", "seconds")


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer([e["question"] + rule_based_teacher(e) for e in ENTRIES], 600)


def brevity(text, entry):
    score = 1.0 - min(len(text), 40) / 40
    return RewardBreakdown(None, 0.0, score, score)


def _trainer(out, tok, reward=brevity, **kw):
    # two optimizer steps per learning phase (8 rollouts / minibatches of 4): interrupts can land between them
    cfg = TrainConfig(**{"steps": STEPS, "questions_per_batch": 2, "group_size": 4, "max_new_tokens": 8,
                         "buffer_size": 8, "minibatch_size": 4, "grad_accum": 1, "lr": 1e-2, "loss_type": "dr_grpo",
                         "log_rollouts": 2, "seed": 3, "checkpoint_every": 1, **kw})
    model = tiny_random_llama(vocab_size=len(tok), seed=0, max_position_embeddings=1024)
    return GRPOTrainer(model, tok, cfg, train_entries=ENTRIES, output_dir=out, reward_fn=reward, progress=False)


def _rows(path):
    return [{k: v for k, v in row.items() if not any(t in k for t in TIMING)} for row in read_log(path)]


def _weights(trainer):
    return {n: p.detach().clone() for n, p in trainer.model.named_parameters()}


@pytest.fixture(scope="module")
def straight(tok, tmp_path_factory):
    """The uninterrupted run every interrupted one must reproduce."""
    out = tmp_path_factory.mktemp("straight")
    tr = _trainer(out, tok)
    tr.train()
    return _weights(tr), _rows(out / "log.jsonl"), _rows(out / "rollouts.jsonl")


def _assert_same_as_straight(out, trainer, straight):
    weights, log, rollouts = straight
    for name, value in _weights(trainer).items():
        assert torch.equal(value, weights[name]), f"{name} differs from the uninterrupted run"
    got = _rows(out / "log.jsonl")
    assert [r["step"] for r in got] == list(range(1, STEPS + 1)), "each step logged exactly once"
    assert got == log
    assert _rows(out / "rollouts.jsonl") == rollouts


def _resume_and_finish(out, tok, **kw):
    tr = _trainer(out, tok, **kw)
    tr.resume_from(latest_checkpoint(out))
    tr.train()
    return tr


def _interrupt_at(call: int, *, how: str):
    """A reward function that interrupts at its ``call``-th use: by SIGINT (a real Ctrl-C) or by
    raising KeyboardInterrupt (what a second Ctrl-C does)."""
    calls = {"n": 0}

    def reward(text, entry):
        calls["n"] += 1
        if calls["n"] == call:
            if how == "signal":
                os.kill(os.getpid(), signal.SIGINT)
            else:
                raise KeyboardInterrupt
        return brevity(text, entry)

    return reward


# 8 reward calls per step: calls 1, 12 and 27 land in steps 1, 2 and 4, at different rollouts
@pytest.mark.parametrize("call", [1, 12, 27])
def test_ctrl_c_finishes_the_step_saves_it_and_resumes_bit_identically(tok, tmp_path, straight, call):
    tr = _trainer(tmp_path, tok, reward=_interrupt_at(call, how="signal"))
    with pytest.raises(KeyboardInterrupt):
        tr.train()
    finished = (call - 1) // 8 + 1
    assert tr.step == finished and latest_checkpoint(tmp_path).name == f"step_{finished:05d}"
    _assert_same_as_straight(tmp_path, _resume_and_finish(tmp_path, tok), straight)


@pytest.mark.parametrize("call,every", [(12, 1), (27, 2), (27, 0)])
def test_a_hard_interrupt_mid_step_keeps_the_last_clean_checkpoint(tok, tmp_path, straight, call, every):
    tr = _trainer(tmp_path, tok, reward=_interrupt_at(call, how="raise"), checkpoint_every=every)
    with pytest.raises(KeyboardInterrupt):
        tr.train()
    with pytest.raises(RuntimeError, match="middle of step"):
        tr.train()  # its weights may be half-updated: it refuses to go on
    done = (call - 1) // 8
    clean = done - done % every if every else 0
    if clean == 0:
        assert latest_checkpoint(tmp_path) is None
        return
    assert latest_checkpoint(tmp_path).name == f"step_{clean:05d}"
    assert len(read_log(tmp_path / "log.jsonl")) == done  # steps after the checkpoint: rewound on resume
    _assert_same_as_straight(tmp_path, _resume_and_finish(tmp_path, tok, checkpoint_every=every), straight)


# and at points drawn at random (seeded, so a failure reproduces): any reward call of the 32, either kind
@pytest.mark.parametrize("call,how", [(c, ("signal", "raise")[i % 2])
                                      for i, c in enumerate(random.Random(17).sample(range(1, 8 * STEPS + 1), 4))])
def test_interrupts_at_random_points_resume_bit_identically(tok, tmp_path, straight, call, how):
    tr = _trainer(tmp_path, tok, reward=_interrupt_at(call, how=how))
    with pytest.raises(KeyboardInterrupt):
        tr.train()
    if latest_checkpoint(tmp_path) is None:  # a hard stop inside step 1: nothing to resume, start again
        tr = _trainer(tmp_path, tok)
        tr.train()
        _assert_same_as_straight(tmp_path, tr, straight)
    else:
        _assert_same_as_straight(tmp_path, _resume_and_finish(tmp_path, tok), straight)


@pytest.mark.parametrize("how", ["signal", "raise"])
def test_interrupts_between_optimizer_steps(tok, tmp_path, straight, how):
    tr = _trainer(tmp_path, tok)
    real_step, calls = tr.optimizer.step, {"n": 0}

    def step(*a, **k):
        out = real_step(*a, **k)
        calls["n"] += 1
        if calls["n"] == 5:  # step 3's first of two optimizer steps: the weights have already moved
            if how == "signal":
                os.kill(os.getpid(), signal.SIGINT)
            else:
                raise KeyboardInterrupt
        return out

    tr.optimizer.step = step
    with pytest.raises(KeyboardInterrupt):
        tr.train()
    assert latest_checkpoint(tmp_path).name == ("step_00003" if how == "signal" else "step_00002")
    _assert_same_as_straight(tmp_path, _resume_and_finish(tmp_path, tok), straight)


def test_a_new_run_in_an_old_runs_folder_does_not_duplicate_its_rows(tok, tmp_path, straight):
    _trainer(tmp_path, tok, steps=2).train()
    tr = _trainer(tmp_path, tok)  # the notebook cell run again: a fresh trainer, same folder
    tr.train()
    _assert_same_as_straight(tmp_path, tr, straight)


def test_an_interrupt_while_saving_leaves_the_previous_checkpoint(tok, tmp_path, monkeypatch):
    tr = _trainer(tmp_path, tok, steps=1)
    tr.train()
    before = {p.name: p.read_bytes() for p in (tmp_path / "checkpoints" / "step_00001").iterdir()}
    real_replace, calls = os.replace, {"n": 0}

    def replace(src, dst):
        calls["n"] += 1
        if calls["n"] == 2:  # the old folder is moved aside; the new one is not in place yet
            raise KeyboardInterrupt
        return real_replace(src, dst)

    monkeypatch.setattr(checkpoints.os, "replace", replace)
    with torch.no_grad():
        next(tr.model.parameters()).add_(1.0)
    with pytest.raises(KeyboardInterrupt):
        tr.save_checkpoint()
    monkeypatch.undo()
    after = {p.name: p.read_bytes() for p in (tmp_path / "checkpoints" / "step_00001").iterdir()}
    assert after == before
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step_00001"], "no temp folder left"


# ---- what is on disk: checked, and never executed


def _state():
    return {"w": torch.arange(6, dtype=torch.float32).view(2, 3), "step": 7, "rng": (3, (1, 2), None),
            "opt": {0: {"step": torch.tensor(5.0)}}, "lr": 1e-3}


def test_round_trip_keeps_types_and_values(tmp_path):
    got = load_state(save_state(tmp_path / "c", _state()))
    assert torch.equal(got["w"], _state()["w"]) and got["rng"] == (3, (1, 2), None)
    assert list(got["opt"]) == [0] and torch.equal(got["opt"][0]["step"], torch.tensor(5.0))
    with pytest.raises(TypeError, match="cannot checkpoint a set"):
        save_state(tmp_path / "d", {"x": {1, 2}})


def test_a_flipped_byte_or_a_truncated_file_is_named(tmp_path):
    path = save_state(tmp_path / "c", _state())
    blob = bytearray((path / "tensors.safetensors").read_bytes())
    blob[-3] ^= 0x01
    (path / "tensors.safetensors").write_bytes(bytes(blob))
    with pytest.raises(CheckpointError, match=r"tensors\.safetensors is corrupt.*SHA-256"):
        load_state(path)
    path = save_state(tmp_path / "t", _state())
    (path / "state.json").write_bytes((path / "state.json").read_bytes()[:10])
    with pytest.raises(CheckpointError, match=r"state\.json is truncated.*disk full"):
        load_state(path)
    assert latest_checkpoint(tmp_path) is None


def test_a_full_disk_names_the_cause_and_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    import safetensors.torch

    path = save_state(tmp_path / "step_00001", _state())

    def full(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(safetensors.torch, "save_file", full)
    with pytest.raises(CheckpointError, match="No space left on device.*untouched"):
        save_state(path, {"w": torch.zeros(3)})
    monkeypatch.undo()
    assert torch.equal(load_state(path)["w"], _state()["w"])
    assert [p.name for p in tmp_path.iterdir()] == ["step_00001"]


class _Exploit:
    """A pickle that runs code when loaded — what a crafted state.pt did to ``torch.load(weights_only=False)``."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_crafted_pickle_never_runs(tok, tmp_path):
    marker = tmp_path / "pwned"
    payload = pickle.dumps({"trainable": _Exploit(marker)})
    old_format = tmp_path / "run" / "checkpoints" / "step_00001"
    old_format.mkdir(parents=True)
    (old_format / "state.pt").write_bytes(payload)
    tr = _trainer(tmp_path / "run", tok)
    with pytest.raises(CheckpointError, match="pickle"):
        tr.resume_from(old_format)
    # the pickle dressed as the new format, with a manifest that matches it
    disguised = save_state(tmp_path / "disguised", _state())
    for name in ("tensors.safetensors", "state.json"):
        (disguised / name).write_bytes(payload)
    files = {n: {"bytes": len(payload), "sha256": file_sha256(disguised / n)}
             for n in ("tensors.safetensors", "state.json")}
    (disguised / "manifest.json").write_text(json.dumps({"format": checkpoints.FORMAT, "files": files}))
    with pytest.raises(CheckpointError, match="cannot be read"):
        tr.resume_from(disguised)
    assert not marker.exists(), "the pickle ran"


def test_resume_refuses_another_config_naming_the_fields(tok, tmp_path):
    tr = _trainer(tmp_path, tok, steps=1)
    tr.train()
    other = _trainer(tmp_path / "o", tok, lr=5e-3, group_size=2)
    with pytest.raises(ValueError, match="group_size.*lr"):
        other.resume_from(latest_checkpoint(tmp_path))


def test_an_infinite_reward_stops_training_with_a_clear_error(tok, tmp_path):
    def broken(text, entry):
        return RewardBreakdown(None, 0.0, float("inf"), float("inf"))

    with pytest.raises(ValueError, match="non-finite.*reward function"):
        _trainer(tmp_path, tok, reward=broken).train()
    assert read_log(tmp_path / "log.jsonl") == [] and latest_checkpoint(tmp_path) is None


def _lora_trainer(out, tok, r, targets=("q_proj", "v_proj")):
    from peft import LoraConfig, get_peft_model

    tr = _trainer(out, tok, steps=1)
    torch.manual_seed(0)
    tr.model = get_peft_model(tr.model, LoraConfig(r=r, lora_alpha=2 * r, target_modules=list(targets)))
    tr.optimizer = torch.optim.AdamW([p for p in tr.model.parameters() if p.requires_grad], lr=1e-2)
    return tr


@pytest.mark.parametrize("saved_r, now_r", [(1, 8), (8, 32)])
def test_resume_refuses_a_lora_of_another_rank_naming_the_shapes(tok, tmp_path, saved_r, now_r):
    saved = _lora_trainer(tmp_path / "a", tok, saved_r)
    path = saved.save_checkpoint()
    other = _lora_trainer(tmp_path / "b", tok, now_r)
    before = _weights(other)
    with pytest.raises(CheckpointError, match=rf"shape.*\({saved_r}, .*\({now_r}, ") as err:
        other.resume_from(path)
    assert "\n" not in str(err.value)
    assert all(torch.equal(before[n], p) for n, p in other.model.named_parameters()), "weights changed before refusing"


def test_resume_refuses_other_lora_targets(tok, tmp_path):
    path = _lora_trainer(tmp_path / "a", tok, 4, targets=("q_proj",)).save_checkpoint()
    other = _lora_trainer(tmp_path / "b", tok, 4, targets=("q_proj", "v_proj"))
    with pytest.raises(CheckpointError, match="lacks weights this model trains"):
        other.resume_from(path)


@pytest.mark.parametrize("manifest", [
    '{"format": "kimina-edu-checkpoint/1", "files": {"tensors.safetensors": 5, "state.json": 6}}',
    '{"format": "kimina-edu-checkpoint/1", "files": ["tensors.safetensors", "state.json"]}',
    "[" * 100_000 + "]" * 100_000,
    '{"format": "kimina-edu-checkpoint/1", "files": {"tensors.safetensors": {"bytes": "x"}, "state.json": {}}}',
    "\x00\xff not json",
], ids=["info-not-object", "files-a-list", "deep", "bytes-not-int", "binary"])
def test_a_damaged_newest_checkpoint_gives_way_to_the_newest_good_one(tmp_path, manifest, capsys):
    good = save_state(tmp_path / "checkpoints" / "step_00001", _state())
    bad = save_state(tmp_path / "checkpoints" / "step_00002", _state())
    (bad / "manifest.json").write_bytes(manifest.encode("utf-8", "surrogateescape"))
    with pytest.raises(CheckpointError):
        load_state(bad)
    assert latest_checkpoint(tmp_path) == good
    said = capsys.readouterr()
    assert "step_00002" in said.out + said.err and "step_00001" in said.out + said.err
