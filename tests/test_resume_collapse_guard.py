"""The collapse guard survives a resume: a run stopped and resumed anywhere ends on the same weights
as the run that never stopped — the best window's, put back when the sampled accuracy collapses.

The task: steps 1–2 are paid as right (and their rewards vary, so the weights move), every later step
as wrong, so a guard over windows of 2 steps sees 100% then 0% and stops at step 4, putting back the
weights after step 2.
"""

import pytest
import torch
from toy_task import toy_config

from kimina_edu.checkpoints import latest_checkpoint
from kimina_edu.models import load_policy
from kimina_edu.pocket import PocketRecipe
from kimina_edu.rewards import RewardBreakdown
from kimina_edu.tasks import SEEDS, make_entries
from kimina_edu.trainer import GRPOTrainer

SMOKE = PocketRecipe.smoke()
ENTRIES = make_entries("syllogism", 64, SEEDS["rl"])
pytestmark = pytest.mark.usefixtures("offline_shared_cache")


def _guarded(out, *, hard_stop_in_step: int | None = None, **kw) -> GRPOTrainer:
    """A trainer whose reward pays steps 1–2 as right and later steps as wrong, judged by the
    trainer's own step so that a resumed run is paid exactly as the uninterrupted one.
    ``hard_stop_in_step``: raise KeyboardInterrupt inside that step's scoring (a second Ctrl-C)."""
    model, tok = load_policy("pocket", recipe=SMOKE, verbose=False)
    holder: dict = {}

    def right_then_wrong(text, entry):
        step = holder["trainer"].step + 1  # the step being collected
        if step == hard_stop_in_step:
            raise KeyboardInterrupt
        score = 1.0 - min(len(text), 60) / 60
        return RewardBreakdown(None, 1.0, float(step <= 2), score)

    cfg = toy_config(**{"steps": 8, "guard_window": 2, "guard_drop": 0.15, "checkpoint_every": 0, **kw})
    holder["trainer"] = GRPOTrainer(model, tok, cfg, train_entries=ENTRIES, output_dir=out,
                                    reward_fn=right_then_wrong, progress=False)
    return holder["trainer"]


def _weights(trainer) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in trainer.model.named_parameters()}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    tr = _guarded(tmp_path_factory.mktemp("straight"))
    after: dict[int, dict] = {}
    tr.train(on_step=lambda row: after.setdefault(row["step"], _weights(tr)))
    assert tr.guard_stopped == 4, "the task is built to collapse in steps 3–4"
    assert all(torch.equal(p, after[2][n]) for n, p in tr.model.named_parameters()), "step 2's weights are back"
    assert any(not torch.equal(after[4][n], after[2][n]) for n in after[2]), "steps 3–4 moved the weights"
    return _weights(tr)


def _resume(out) -> GRPOTrainer:
    tr = _guarded(out)
    tr.resume_from(latest_checkpoint(out))
    tr.train()
    return tr


def _ctrl_c_after(step: int):
    """An ``on_step`` callback that interrupts once ``step`` has finished: the trainer saves it, then stops."""

    def stop(row):
        if row["step"] == step:
            raise KeyboardInterrupt

    return stop


def _assert_same_final_weights(resumed, uninterrupted) -> None:
    assert resumed.guard_stopped == 4
    for name, value in _weights(resumed).items():
        assert torch.equal(value, uninterrupted[name]), f"{name} differs from the uninterrupted run's"


@pytest.mark.parametrize("stop_after", [2, 3, 4], ids=["at-the-best-window", "between", "at-the-collapse"])
def test_ctrl_c_then_resume_ends_on_the_best_windows_weights(tmp_path, uninterrupted, stop_after, capsys):
    """Ctrl-C after step 2 (the best window's last), 3 (the snapshot exists only in the interrupted
    run) or 4 (the checkpoint holds the collapsed weights, saved before the guard could look)."""
    first = _guarded(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        first.train(on_step=_ctrl_c_after(stop_after))
    assert latest_checkpoint(tmp_path).name == f"step_{stop_after:05d}"
    _assert_same_final_weights(_resume(tmp_path), uninterrupted)
    assert "collapse guard: stopped at step 4" in capsys.readouterr().out


def test_a_hard_stop_after_a_checkpoint_of_the_best_window_resumes_to_the_same_weights(tmp_path, uninterrupted):
    """Checkpoints every step; a hard stop inside step 3 leaves step 2's, written by the loop itself."""
    first = _guarded(tmp_path, hard_stop_in_step=3, checkpoint_every=1)
    with pytest.raises(KeyboardInterrupt):
        first.train()
    assert latest_checkpoint(tmp_path).name == "step_00002"
    _assert_same_final_weights(_resume(tmp_path), uninterrupted)


def test_a_resume_without_the_guard_on_does_not_put_back_old_weights(tmp_path):
    """The snapshot travels with the checkpoint, but only the guard uses it: with the guard off, a
    resumed run keeps training from the checkpoint's own weights."""
    first = _guarded(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        first.train(on_step=_ctrl_c_after(3))
    saved = _weights(first)
    tr = _guarded(tmp_path, guard_window=0, steps=3)
    tr.resume_from(latest_checkpoint(tmp_path))
    tr.train()
    assert getattr(tr, "guard_stopped", None) is None
    assert all(torch.equal(p, saved[n]) for n, p in tr.model.named_parameters())
