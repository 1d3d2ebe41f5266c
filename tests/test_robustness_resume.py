"""benchmarks/robustness.py keeps each seed's row as it lands and resumes from them (SmolLM2's runs take hours)."""

import json

from benchmarks.robustness import _kept_rows, _write


def test_rows_are_kept_as_they_land_and_resumed_only_for_the_same_model_recipe_and_stage(tmp_path, capsys):
    out = tmp_path / "robustness-smollm2.json"
    sets = {"sft": {"epochs": 3}, "grpo": {}}
    rows = [{"seed": 1, "threads": 1, "model": "smollm2", "sft_accuracy": 0.7},
            {"seed": 0, "threads": 1, "model": "smollm2", "sft_accuracy": 0.8}]
    _write(out, rows[:1], sets, "sft", 10.0)
    assert [r["seed"] for r in json.loads(out.read_text())["runs"]] == [1]
    _write(out, rows, sets, "sft", 20.0)
    assert [r["seed"] for r in json.loads(out.read_text())["runs"]] == [0, 1] and not out.with_suffix(".tmp").exists()
    assert [r["seed"] for r in _kept_rows(out, "smollm2", sets, "sft")] == [0, 1]
    assert _kept_rows(out, "pocket", sets, "sft") == []
    assert _kept_rows(out, "smollm2", sets, "grpo") == [], "rows that stopped after SFT cannot stand for GRPO runs"
    assert _kept_rows(out, "smollm2", {"sft": {}, "grpo": {}}, "sft") == []
    assert "other recipe changes" in capsys.readouterr().out
    out.write_text("{torn")
    assert _kept_rows(out, "smollm2", sets, "sft") == []


def _smollm2_row(**figures) -> dict:
    row = {"seed": 0, "threads": 1, "model": "smollm2", "sft_accuracy": 0.66, "sft_format_rate": 1.0,
           "grpo_before": 0.66, "grpo_after": 0.80, "grpo_gain_paired": [14.0, 9.5, 18.5], "grpo_seconds": 900,
           "grpo_format_rate": 1.0, "fresh_before": 0.67, "fresh_after": 0.79, "fresh_gain_paired": [12.0, 7.0, 17.0]}
    return {**row, **figures}


def test_smollm2_runs_are_judged_on_the_held_out_questions_and_again_on_the_fresh_draw():
    from benchmarks.robustness import goals_missed

    assert goals_missed(_smollm2_row()) == []
    missed = goals_missed(_smollm2_row(fresh_after=0.74, fresh_gain_paired=[7.0, 2.0, 12.0]))
    assert len(missed) == 2 and all(m.endswith("(fresh draw)") for m in missed)
    assert any("interval" in m for m in goals_missed(_smollm2_row(grpo_gain_paired=[14.0, -0.5, 28.5])))
    pocket = _smollm2_row(model="pocket", grpo_seconds=500, fresh_after=0.60, shift_pos_mean=-0.1, shift_neg_mean=0.1)
    assert [m.endswith("(fresh draw)") for m in goals_missed(pocket)] == [False, True], "a goal not on accuracy is judged once"
    row = _smollm2_row()
    del row["grpo_gain_paired"]  # a row from before intervals were kept: the goal is missed, not skipped
    assert any("interval" in m for m in goals_missed(row))


def test_the_table_shows_each_runs_gain_with_its_interval():
    from benchmarks.robustness import table

    rows = [_smollm2_row(), _smollm2_row(seed=1, grpo_gain_paired=[9.0, 3.0, 15.0]),
            _smollm2_row(seed=2, grpo_gain_paired=[20.0, 15.0, 25.0])]
    line = next(x for x in table(rows).splitlines() if x.startswith("| 04 GRPO gain, paired"))
    assert line == "| 04 GRPO gain, paired 95% interval (points) | +9.0 [+3.0, +15.0] | +14.0 | +20.0 [+15.0, +25.0] | 3 |"
    assert "every goal met in every run" in table(rows)


def test_a_run_that_failed_is_named_and_no_goal_is_called_met_for_it():
    from benchmarks.robustness import table

    text = table([], failed=["seed 2 (1 thr.)"])
    assert "every goal met" not in text
    assert "failed: seed 2 (1 thr.)" in text
    text = table([_smollm2_row()], failed=["seed 3 (1 thr.)"])
    assert "every goal met in every run" not in text and "seed 3 (1 thr.)" in text


def test_the_runs_caches_reach_the_learners_converted_smollm2(tmp_path):
    from benchmarks.robustness import _share_model

    source = tmp_path / "learner" / "smollm2"
    (source / "b179c9523d0e").mkdir(parents=True)
    cache = tmp_path / "runs-cache"
    _share_model(cache, source)
    assert (cache / "smollm2" / "b179c9523d0e").is_dir()
    _share_model(cache, source)  # a second call (a resumed run) leaves the link as it is
    assert (cache / "smollm2").resolve() == source.resolve()
    own = tmp_path / "own-cache"
    (own / "smollm2").mkdir(parents=True)
    _share_model(own, source)  # a cache with its own copy keeps it
    assert not (own / "smollm2").is_symlink()
