"""The dev check (``TrainConfig.dev_every``): greedy accuracy on the dev split before step 1 and every few
steps, and a run that ends with the weights of its best check — the warm-up's own among them.

The selection is tested with a scripted dev accuracy per step (the evaluator replaced), so each test
knows which weights must come back; one test runs the real greedy evaluator on a few dev questions.
"""

import pytest
import torch
from toy_task import toy_config

import kimina_edu.eval as eval_mod
from kimina_edu.checkpoints import latest_checkpoint
from kimina_edu.models import load_policy
from kimina_edu.pocket import PocketRecipe
from kimina_edu.rewards import RewardBreakdown
from kimina_edu.tasks import SEEDS, dev_split, make_entries
from kimina_edu.train_config import TrainConfig
from kimina_edu.trainer import GRPOTrainer

SMOKE = PocketRecipe.smoke()
ENTRIES = make_entries("syllogism", 64, SEEDS["rl"])
pytestmark = pytest.mark.usefixtures("offline_shared_cache")


def _varied(text, entry):
    """Rewards that differ within every group (by length), so every step moves the weights."""
    return RewardBreakdown(None, 1.0, 0.0, 1.0 - min(len(text), 60) / 60)


def _trainer(out, **kw) -> GRPOTrainer:
    model, tok = load_policy("pocket", recipe=SMOKE, verbose=False)
    cfg = toy_config(**{"steps": 4, "dev_every": 2, **kw})
    return GRPOTrainer(model, tok, cfg, train_entries=ENTRIES, output_dir=out, reward_fn=_varied, progress=False,
                       dev_entries=ENTRIES[:4])


def _scripted(monkeypatch, trainer_box: dict, by_step: dict[int, float]) -> list[int]:
    """Replace the greedy evaluator: the dev accuracy is ``by_step[trainer.step]``; returns the steps checked."""
    checked: list[int] = []

    def fake(model, tok, entries, **kw):
        step = trainer_box["t"].step
        checked.append(step)
        return {"accuracy": by_step[step], "format_rate": 1.0}

    monkeypatch.setattr(eval_mod, "evaluate_policy", fake)
    return checked


def _weights(trainer) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in trainer.trainable().items()}


def _same(a: dict, b: dict) -> bool:
    return all(torch.equal(a[n], b[n]) for n in a)


def test_the_run_ends_with_the_best_checks_weights(tmp_path, monkeypatch, capsys):
    box: dict = {}
    box["t"] = tr = _trainer(tmp_path)
    checked = _scripted(monkeypatch, box, {0: 0.50, 2: 0.70, 4: 0.60})
    after: dict[int, dict] = {}
    log = tr.train(on_step=lambda row: after.setdefault(row["step"], _weights(tr)))
    assert checked == [0, 2, 4], "before step 1, then every 2 steps"
    assert [r.get("dev_accuracy") for r in log] == [None, 0.70, None, 0.60]
    assert not _same(after[4], after[2]), "steps 3–4 moved the weights"
    assert _same(_weights(tr), after[2]) and tr.dev_kept == 2
    assert "the weights after step 2 (dev accuracy 70.0% on 4 questions), not those after step 4 (60.0%)" in \
        capsys.readouterr().out


def test_a_run_that_never_beats_its_start_ends_where_it_started(tmp_path, monkeypatch):
    box: dict = {}
    box["t"] = tr = _trainer(tmp_path)
    _scripted(monkeypatch, box, {0: 0.80, 2: 0.70, 4: 0.80})  # a tie with the start keeps the last weights
    start = _weights(tr)
    tr.train()
    assert tr.dev_kept is None and not _same(_weights(tr), start)

    box["t"] = tr = _trainer(tmp_path / "fell")
    _scripted(monkeypatch, box, {0: 0.80, 2: 0.70, 4: 0.75})
    start = _weights(tr)
    tr.train()
    assert tr.dev_kept == 0 and _same(_weights(tr), start)


def test_without_dev_checks_the_run_keeps_its_last_weights(tmp_path, monkeypatch):
    box: dict = {}
    box["t"] = tr = _trainer(tmp_path, dev_every=0)
    checked = _scripted(monkeypatch, box, {})
    after: dict[int, dict] = {}
    log = tr.train(on_step=lambda row: after.setdefault(row["step"], _weights(tr)))
    assert checked == [] and all("dev_accuracy" not in r for r in log)
    assert _same(_weights(tr), after[4]) and tr.dev_kept is None


def test_an_interrupted_run_resumes_to_the_same_kept_weights(tmp_path, monkeypatch):
    """The best check's weights travel with the checkpoint: stopped after step 3 — when the best (step 2)
    exists only in the interrupted trainer — and resumed, the run ends on the same weights."""
    scores = {0: 0.50, 2: 0.70, 4: 0.60}
    box: dict = {}
    box["t"] = straight = _trainer(tmp_path / "straight")
    _scripted(monkeypatch, box, scores)
    straight.train()

    box["t"] = first = _trainer(tmp_path / "stopped", checkpoint_every=1)

    def stop(row):
        if row["step"] == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        first.train(on_step=stop)
    box["t"] = resumed = _trainer(tmp_path / "stopped", checkpoint_every=1)
    resumed.resume_from(latest_checkpoint(tmp_path / "stopped"))
    assert [c["step"] for c in resumed.dev_checks] == [0, 2]
    resumed.train()
    assert resumed.dev_kept == 2 and _same(_weights(resumed), _weights(straight))


def test_the_real_evaluator_on_the_dev_split(tmp_path):
    """Wired to the greedy evaluator and, by default, to the dev split (never the held-out questions)."""
    model, tok = load_policy("pocket", recipe=SMOKE, verbose=False)
    tr = GRPOTrainer(model, tok, toy_config(steps=1, dev_every=1), train_entries=ENTRIES, output_dir=tmp_path,
                     reward_fn=_varied, progress=False)
    assert [e["question"] for e in tr.dev_entries] == [e["question"] for e in dev_split("syllogism")]
    tr.dev_entries = tr.dev_entries[:3]
    log = tr.train()
    assert [c["step"] for c in tr.dev_checks] == [0, 1]
    assert 0.0 <= log[-1]["dev_accuracy"] <= 1.0


def test_a_checkpoint_without_the_field_reads_as_off():
    assert TrainConfig.VALUE_WHEN_MISSING["dev_every"] == 0 and TrainConfig().dev_every == 0
