"""A checkpoint whose stored config lacks a field (written before the field existed) resumes when the
field's default reproduces how that run trained, and is refused — naming the field and why — when
no value is known to, or when the learner now asks for another value."""

import pytest
import torch
from toy_task import brevity_reward, toy_config

from kimina_edu.checkpoints import load_state, save_state
from kimina_edu.errors import CheckpointError
from kimina_edu.models import load_policy
from kimina_edu.pocket import PocketRecipe
from kimina_edu.tasks import SEEDS, make_entries
from kimina_edu.trainer import GRPOTrainer

SMOKE = PocketRecipe.smoke()
ENTRIES = make_entries("syllogism", 64, SEEDS["rl"])
pytestmark = pytest.mark.usefixtures("offline_shared_cache")

# fields added to TrainConfig after the checkpoint format, each with a default that is the behaviour
# from before it existed: scoring at T = 1, uniform question draws
ADDED_LATER = ("score_at_temperature", "balance_answers")


def _trainer(out, **kw) -> GRPOTrainer:
    model, tok = load_policy("pocket", recipe=SMOKE, verbose=False)
    return GRPOTrainer(model, tok, toy_config(**{"steps": 2, **kw}), train_entries=ENTRIES, output_dir=out,
                       reward_fn=brevity_reward, progress=False)


def _checkpoint_without(out, field: str):
    """A real one-step checkpoint, then the same checkpoint as a version without ``field`` wrote it."""
    tr = _trainer(out, steps=1)
    tr.train()
    path = tr.save_checkpoint()
    state = load_state(path)
    del state["config"][field]
    return save_state(out / "old" / path.name, state), path


def _weights(trainer) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in trainer.model.named_parameters()}


@pytest.mark.parametrize("field", ADDED_LATER)
def test_a_checkpoint_from_before_a_field_resumes_as_if_it_held_the_default(tmp_path, field):
    old, current = _checkpoint_without(tmp_path / "run", field)
    from_old = _trainer(tmp_path / "a")
    from_old.resume_from(old)
    from_old.train()
    from_current = _trainer(tmp_path / "b")
    from_current.resume_from(current)
    from_current.train()
    assert from_old.step == 2
    for name, value in _weights(from_old).items():
        assert torch.equal(value, _weights(from_current)[name]), name


def test_the_fields_read_as_their_default_are_marked_in_one_place():
    from kimina_edu.train_config import TrainConfig

    assert set(ADDED_LATER) <= set(TrainConfig.VALUE_WHEN_MISSING)
    defaults = TrainConfig()
    for field, value in TrainConfig.VALUE_WHEN_MISSING.items():
        assert type(value) is type(getattr(defaults, field)), f"{field}: {value!r} is no value of the field"
        assert field not in TrainConfig.RESUMABLE, f"{field} may change on resume anyway: no need to mark it"


def test_an_old_checkpoint_refuses_another_value_than_the_behaviour_it_trained_with(tmp_path):
    old, _ = _checkpoint_without(tmp_path / "run", "score_at_temperature")
    tr = _trainer(tmp_path / "a", score_at_temperature=True)
    with pytest.raises(CheckpointError, match=r"score_at_temperature: .*predates the field.*False.* vs now True") as err:
        tr.resume_from(old)
    assert "\n" not in str(err.value)


def test_a_missing_field_without_a_backward_default_is_refused_naming_it_and_why(tmp_path):
    old, _ = _checkpoint_without(tmp_path / "run", "group_size")
    tr = _trainer(tmp_path / "a")
    with pytest.raises(CheckpointError, match=r"group_size: not in the checkpoint.*no value of it is known to "
                                              r"reproduce.*start a new run") as err:
        tr.resume_from(old)
    assert "\n" not in str(err.value) and "None" not in str(err.value)


def test_a_missing_field_that_may_change_on_resume_is_not_asked_about(tmp_path):
    old, _ = _checkpoint_without(tmp_path / "run", "shift_every")
    tr = _trainer(tmp_path / "a", shift_every=3)
    tr.resume_from(old)
    assert tr.step == 1


def test_a_field_this_version_does_not_know_is_refused_naming_it(tmp_path):
    """A checkpoint written by a version with a setting this one lacks trained in a way this version
    cannot reproduce: refused, not silently dropped."""
    tr = _trainer(tmp_path / "run", steps=1)
    tr.train()
    state = load_state(tr.save_checkpoint())
    state["config"]["kl_schedule"] = "cosine"
    newer = save_state(tmp_path / "newer" / "step_00001", state)
    with pytest.raises(CheckpointError, match=r"kl_schedule: in the checkpoint \('cosine'\) but not a setting of "
                                              r"this version.*kimina-edu version that wrote it") as err:
        _trainer(tmp_path / "a").resume_from(newer)
    assert "\n" not in str(err.value)
