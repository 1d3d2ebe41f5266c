"""The probe set: a few fixed completions scored across a GRPO run (chapter 4's "dynamics across the run")."""

import json
import math

import pytest
import torch
from toy_task import brevity_reward, toy_config

from kimina_edu.logprobs import Rollout, completion_logprobs
from kimina_edu.models import load_policy
from kimina_edu.pocket import PocketRecipe
from kimina_edu.probes import ProbeSet, probe_summary, probe_table
from kimina_edu.rewards import RewardBreakdown
from kimina_edu.tasks import SEEDS, make_entries
from kimina_edu.tiny import tiny_random_llama
from kimina_edu.trainer import GRPOTrainer, read_log

SMOKE = PocketRecipe.smoke()
ENTRIES = make_entries("syllogism", 64, SEEDS["rl"])
pytestmark = pytest.mark.usefixtures("offline_shared_cache")


def _group(prompt, advantages, lengths=None):
    lengths = lengths or [3] * len(advantages)
    return [Rollout(list(prompt), [7 + k for k in range(n)], [], float(a), float(a > 0), False)
            for a, n in zip(advantages, lengths)]


def test_picks_the_extremes_of_groups_with_signal_first():
    rows = (_group([1, 2], [0, 0, 0]) + _group([3, 4], [-1, 2, -1]) + _group([5], [0.5, -0.5, 0.0]))
    probes = ProbeSet.from_rollouts(rows, 3, n_questions=2)
    assert probes.roles == ["high", "low", "high", "low"] and probes.groups == [0, 0, 1, 1]
    assert [r.advantage for r in probes.rollouts] == [2.0, -1.0, 0.5, -0.5]
    assert probes.rollouts[0].prompt_ids == [3, 4] and probes.rollouts[2].prompt_ids == [5]
    # the probes are copies: the buffer they came from may change without moving them
    rows[4].completion_ids.append(99)
    assert 99 not in probes.rollouts[0].completion_ids


def test_no_group_with_signal_still_gives_probes_and_no_numbers():
    """A first batch where every group agrees: the probes are 'tie' pairs, and the summary has no
    high/low rise (None, not NaN) because no completion was rewarded over another."""
    probes = ProbeSet.from_rollouts(_group([1], [0, 0, 0]) + _group([2], [0, 0, 0]), 3, n_questions=3)
    assert probes.roles == ["tie"] * 4 and probes.groups == [0, 0, 1, 1]
    rows = [{"step": s, "probe": p, "role": "tie", "token_logp": [-1.0 - s]} for s in (0, 1, 2) for p in range(4)]
    summary = probe_summary(rows)
    assert summary["probe_checkpoints"] == 3
    assert summary["probe_high_rise"] is None and summary["probe_low_rise"] is None and summary["probe_noise"] is None


def test_empty_completions_and_singleton_groups_are_handled():
    rows = [Rollout([1], [], [], 1.0, 1.0, False), Rollout([1], [5], [], -1.0, 0.0, False)]
    probes = ProbeSet.from_rollouts(rows, 2)
    assert len(probes.rollouts) == 1 and probes.roles == ["tie"]  # the empty one is dropped
    with pytest.raises(ValueError, match="non-empty completion"):
        ProbeSet.from_rollouts([Rollout([1], [], [], 0.0, 0.0, False)], 1)
    with pytest.raises(ValueError, match="≥ 1"):
        ProbeSet.from_rollouts(rows, 2, every=0)


def test_scores_equal_the_trainers_logprobs_including_one_token_completions():
    model = tiny_random_llama()
    rows = _group([3, 4, 5], [1, -1], lengths=[1, 4]) + _group([6], [1, -1], lengths=[2, 1])
    probes = ProbeSet.from_rollouts(rows, 2)
    model.train()  # scoring switches to eval mode and back
    scored = probes.score(model, pad_id=0)
    assert model.training
    assert [len(s) for s in scored] == [1, 4, 2, 1]
    model.eval()
    with torch.no_grad():
        for r, s in zip(probes.rollouts, scored):
            alone, _ = completion_logprobs(model, [r], 0)
            assert torch.allclose(torch.tensor(s), alone[0], atol=1e-5)
    row = probes.rows(model, 0, step=7)[1]
    assert row["step"] == 7 and row["role"] == "low" and math.isclose(row["logp"], sum(row["token_logp"]))


def test_summary_measures_rise_noise_and_drift():
    # high probe: +1 per checkpoint with ±0.5 wobble; low probe: −2 overall
    high = [0.0, 1.5, 1.5, 3.5, 3.5]
    low = [0.0, -0.5, -1.0, -1.5, -2.0]
    rows = [{"step": 10 * c, "probe": p, "role": role, "token_logp": [v[c] / 2, v[c] / 2]}
            for c in range(5) for p, (role, v) in enumerate((("high", high), ("low", low)))]
    steps, table = probe_table(rows)
    assert steps == [0, 10, 20, 30, 40] and table[3][0] == [1.75, 1.75]
    s = probe_summary(rows)
    diffs = torch.tensor(high).diff()
    assert math.isclose(s["probe_high_rise"], 3.5) and math.isclose(s["probe_low_rise"], -2.0)
    assert math.isclose(s["probe_noise"], float(diffs.std()), rel_tol=1e-6)
    assert math.isclose(s["probe_drift_z"], float(diffs.mean() / (diffs.std() / 2)), rel_tol=1e-6)
    assert probe_summary(rows[:2])["probe_high_rise"] is None  # one checkpoint: no change to measure


_cfg = toy_config


def _trainer(tmp_path, cfg, reward=brevity_reward, every=1):
    model, tok = load_policy("pocket", recipe=SMOKE, verbose=False)
    first = GRPOTrainer(model, tok, cfg, train_entries=ENTRIES, output_dir=tmp_path / "first", reward_fn=reward,
                        progress=False)
    buffer, _ = first.collect_experience()  # the starting policy's samples, as the notebook takes them
    probes = ProbeSet.from_rollouts(buffer, cfg.group_size, every=every)
    return GRPOTrainer(model, tok, cfg, train_entries=ENTRIES, output_dir=tmp_path / "run", reward_fn=reward,
                       progress=False, probes=probes)


def _rows(tr):
    return [json.loads(line) for line in tr.probe_path.read_text().splitlines()]


def test_a_run_records_probes_at_start_every_k_steps_and_at_the_end(tmp_path):
    tr = _trainer(tmp_path, _cfg(steps=4), every=3)
    start = tr.probes.score(tr.model, tr.tok.pad_token_id)
    tr.train()
    steps, table = probe_table(_rows(tr))
    assert steps == [0, 3, 4]
    assert table[0] == start  # step 0 is the untrained policy
    assert table[-1] == tr.probes.score(tr.model, tr.tok.pad_token_id)
    assert table[-1] != table[0]  # the weights moved, and so did the probes' log-probs
    log = read_log(tr.log_path)
    assert all(math.isfinite(r["adv_mean"]) and r["adv_std"] >= 0 and "reward_std" in r for r in log)


def test_rewarded_probes_rise_against_penalised_ones(tmp_path):
    """On the toy brevity task GRPO learns within ten steps; the short (high-advantage) probes must gain
    log-prob relative to the long (low-advantage) ones — the article's figure, as a test that can fail."""
    tr = _trainer(tmp_path, _cfg(steps=10))
    tr.train()
    s = probe_summary(_rows(tr))
    assert s["probe_checkpoints"] == 11
    assert s["probe_high_rise"] > s["probe_low_rise"], s
    assert s["probe_noise"] > 0 and math.isfinite(s["probe_drift_z"])


def test_a_second_run_in_the_same_folder_does_not_duplicate_rows(tmp_path):
    tr = _trainer(tmp_path, _cfg(steps=2), every=1)
    tr.train()
    again = GRPOTrainer(tr.model, tr.tok, _cfg(steps=2), train_entries=ENTRIES, output_dir=tr.output_dir,
                        reward_fn=brevity_reward, progress=False, probes=tr.probes)
    again.train()
    steps = [r["step"] for r in _rows(again)]
    n = len(tr.probes.rollouts)
    assert sorted(steps) == [0] * n + [1] * n + [2] * n


def test_all_zero_variance_steps_keep_recording(tmp_path):
    constant = lambda text, entry: RewardBreakdown(None, 1.0, 1.0, 1.0)
    tr = _trainer(tmp_path, _cfg(steps=2), reward=constant)
    log = tr.train()
    assert all(r["skipped"] == 1.0 and r["adv_std"] == 0.0 and r["adv_mean"] == 0.0 for r in log)
    s = probe_summary(_rows(tr))
    assert tr.probes.roles == ["tie"] * len(tr.probes.rollouts)
    assert s["probe_checkpoints"] == 3 and s["probe_high_rise"] is None


def test_each_pair_forks_where_its_completions_first_differ():
    from kimina_edu.probes import fork_index

    rows = (_group([1, 2], [1.0, -1.0, 0.0], lengths=[5, 7, 3]) + _group([3], [0.0, 0.0, 0.0]))
    rows[1].completion_ids[:2] = rows[0].completion_ids[:2]  # the pair shares two tokens, then parts
    rows[1].completion_ids[2] = 99
    probes = ProbeSet.from_rollouts(rows, 3, n_questions=2)
    assert probes.roles == ["high", "low", "tie", "tie"]
    assert probes.fork_spans == [(2, 5), (2, 7), None, None]
    assert fork_index([1, 2, 3], [1, 2, 3, 4]) == 3 and fork_index([], [5]) == 0 and fork_index([4], [5]) == 0
    same = _group([1], [1.0, -1.0])
    same[1].completion_ids = list(same[0].completion_ids)  # identical text, different advantages
    assert ProbeSet.from_rollouts(same, 2).fork_spans == [(2, 3), (2, 3)]  # the last token: never an empty span


def test_summary_follows_the_tokens_from_the_fork_when_spans_are_recorded():
    # token 0 is the shared opening (drifts down for both), token 1 is where they part (high up, low down)
    high = [[-1.0 - 0.1 * c, -2.0 + 0.5 * c + (0.1 if c % 2 else 0.0)] for c in range(5)]
    low = [[-1.0 - 0.1 * c, -2.0 - 0.5 * c] for c in range(5)]
    rows = [{"step": c, "probe": p, "role": role, "token_logp": v[c], "fork_span": [1, 2]}
            for c in range(5) for p, (role, v) in enumerate((("high", high), ("low", low)))]
    s = probe_summary(rows)
    assert math.isclose(s["probe_fork_high_rise"], 2.0) and math.isclose(s["probe_fork_low_rise"], -2.0)
    assert math.isclose(s["probe_high_rise"], 1.6) and s["probe_fork_noise"] > 0
    assert probe_summary([dict(r, fork_span=None) for r in rows])["probe_fork_high_rise"] is None


def test_the_default_probe_set_is_large_enough_for_a_share_within_15_points():
    """The share of probes that moved as asked is a proportion over questions: at the default number of
    questions its 95% interval is at most ±15 points whatever the share (the widest case is 50%)."""
    from kimina_edu.probes import PROBE_QUESTIONS, wilson_interval

    assert PROBE_QUESTIONS >= 30
    lo, hi = wilson_interval(0.5, PROBE_QUESTIONS)
    assert (hi - lo) / 2 <= 0.15
    rows = [r for q in range(PROBE_QUESTIONS + 5) for r in _group([q], [1.0, -1.0])]
    probes = ProbeSet.from_rollouts(rows, 2)  # the default: as many questions as the interval needs
    assert len(set(probes.groups)) == PROBE_QUESTIONS


def test_summary_gives_the_share_that_moved_as_asked_with_its_interval():
    """Per question, the share of its rewarded/penalised probes whose log-prob (from the fork on when
    recorded) moved the way the advantage asked — up for "high", down for "low" — averaged over questions,
    with its Wilson 95% interval on the number of questions."""
    from kimina_edu.probes import wilson_interval

    moves = {0: (1.0, -1.0), 1: (1.0, 0.5), 2: (-1.0, 0.5), 3: (2.0, -0.1)}  # high, low change per question
    rows = [{"step": s, "probe": 2 * q + k, "group": q, "role": role,
             "token_logp": [0.0 + (moves[q][k] if s else 0.0)]}
            for s in (0, 5) for q in moves for k, role in enumerate(("high", "low"))]
    rows += [{"step": s, "probe": 8 + k, "group": 4, "role": "tie", "token_logp": [float(s)]} for s in (0, 5)
             for k in range(2)]  # a question without signal asks nothing
    s = probe_summary(rows)
    assert s["probe_asked_questions"] == 4
    assert math.isclose(s["probe_asked_share"], (1 + 0.5 + 0 + 1) / 4)
    lo, hi = wilson_interval(s["probe_asked_share"], 4)
    assert math.isclose(s["probe_asked_lo"], lo) and math.isclose(s["probe_asked_hi"], hi)
    assert 0 <= lo < s["probe_asked_share"] < hi <= 1
    assert probe_summary(rows[:8])["probe_asked_share"] is None  # one checkpoint: nothing moved yet
    with pytest.raises(ValueError, match="at least one question"):
        wilson_interval(0.5, 0)


def test_sample_gathers_questions_with_signal_across_batches(monkeypatch):
    """ProbeSet.sample keeps sampling batches until enough questions had differing rewards (or the
    batch budget is spent), so a large probe set comes from many of the starting policy's batches."""
    import kimina_edu.probes as probes_mod

    monkeypatch.setattr(probes_mod, "score_completion", brevity_reward)
    model, tok = load_policy("pocket", recipe=SMOKE, verbose=False)
    cfg = _cfg(questions_per_batch=4, group_size=4, max_new_tokens=8)
    probes = ProbeSet.sample(model, tok, cfg, ENTRIES, n_questions=6, every=2)
    assert len(set(probes.groups)) == 6 and probes.every == 2
    assert set(probes.roles) <= {"high", "low"}  # enough groups had signal: no tie fills in
    prompts = {tuple(r.prompt_ids) for r in probes.rollouts}
    assert len(prompts) == 6  # six different questions, so more than one batch of four


def test_a_large_probe_set_is_scored_in_chunks_with_the_same_numbers():
    """Forty questions are eighty probes: scored a chunk at a time (the logits of all eighty at once
    would fill a CPU's memory on a real vocabulary), each probe's numbers as if scored alone."""
    from kimina_edu import probes as probes_mod

    model = tiny_random_llama().eval()
    rows = [r for q in range(12) for r in _group([3 + q, 4], [1, -1], lengths=[1 + q % 4, 2 + q % 3])]
    probes = ProbeSet.from_rollouts(rows, 2)
    assert len(probes.rollouts) == 24 > probes_mod.SCORE_CHUNK
    scored = probes.score(model, pad_id=0)
    with torch.no_grad():
        for r, s in zip(probes.rollouts, scored):
            alone, _ = completion_logprobs(model, [r], 0)
            assert torch.allclose(torch.tensor(s), alone[0], atol=1e-5)
