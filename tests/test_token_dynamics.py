"""Per-token, per-update changes of log-prob: the record of one update, its reader, its figures, the
lines that explain a run from its own numbers, and the finder of ✗ lines printed without one."""

import json

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from kimina_edu.token_dynamics import (
    QUANTILES,
    answer_token_mask,
    explain,
    explain_probes,
    plot_token_shift,
    plot_token_shift_cumulative,
    read_token_shift,
    token_label,
    token_shift_record,
)

VERDICT = ["<think>", " All", " A", " are", " B", ".", " ", "</think>", " ", "<answer>", " does", " not", " follow",
           " ", "</answer>", "<|im_end|>"]


def test_answer_token_mask_marks_the_tokens_inside_the_last_answer_tags():
    mask = answer_token_mask(VERDICT)
    assert [t for t, m in zip(VERDICT, mask) if m] == [" does", " not", " follow"]
    # the last answer block is the graded one; the tags themselves and blank tokens are not the verdict
    twice = ["<answer>", " yes", "</answer>", "<answer>", " no", "</answer>"]
    assert answer_token_mask(twice) == [False, False, False, False, True, False]
    # an answer cut off before its closing tag: everything after the opening tag
    assert answer_token_mask(["<ans", "wer>", " foll", "ows"]) == [False, False, True, True]
    assert answer_token_mask([" no", " tags"]) == [False, False]


def _toy_update():
    """Three completions (two rewarded, one penalised) with known before/after log-probs."""
    advantages = [1.0, 0.5, -1.0]
    texts = [VERDICT[8:15], [" x", " y", "<answer>", " follows", "</answer>"], [" z", "<answer>", " does", "</answer>"]]
    rng = np.random.default_rng(0)
    before = [list(rng.normal(-2, 0.5, len(t))) for t in texts]
    after = [[b + d for b, d in zip(row, rng.normal(0, 0.01, len(row)))] for row in before]
    after[1][3] = before[1][3] + 0.9  # " follows" rises a lot
    after[2][2] = before[2][2] - 1.2  # " does" falls a lot
    return advantages, before, after, texts


def test_record_quantiles_and_top_movers_match_a_direct_computation():
    advantages, before, after, texts = _toy_update()
    rec = token_shift_record(7, advantages, before, after, texts, k=4)
    deltas = [np.array(a) - np.array(b) for a, b in zip(after, before)]
    pos = np.concatenate([d for d, a in zip(deltas, advantages) if a > 0])
    neg = np.concatenate([d for d, a in zip(deltas, advantages) if a < 0])
    assert rec["step"] == 7 and rec["quantiles"] == list(QUANTILES)
    assert rec["pos"]["n"] == len(pos) and rec["neg"]["n"] == len(neg)
    assert rec["pos"]["q"] == pytest.approx(np.quantile(pos, QUANTILES).tolist(), abs=1e-9)
    assert rec["neg"]["q"] == pytest.approx(np.quantile(neg, QUANTILES).tolist(), abs=1e-9)
    assert rec["pos"]["mean"] == pytest.approx(pos.mean()) and rec["neg"]["mean"] == pytest.approx(neg.mean())
    flat = [(abs(d), i, j) for i, row in enumerate(deltas) for j, d in enumerate(row)]
    want = sorted(flat, reverse=True)[:4]
    assert [(t["completion"], t["position"]) for t in rec["top"]] == [(i, j) for _, i, j in want]
    top = rec["top"][0]
    assert top["text"] == " does" and top["delta"] == pytest.approx(-1.2) and top["advantage"] == -1.0
    assert top["in_answer"] and rec["top"][1]["text"] == " follows" and rec["top"][1]["in_answer"]
    assert rec["top_in_answer"] == sum(t["in_answer"] for t in rec["top"])
    # answer tokens vs the rest, by advantage sign: the verdict carried the move
    assert rec["answer"]["neg"]["mean"] == pytest.approx(-1.2)
    assert abs(rec["other"]["pos"]["mean"]) < 0.05
    texts_seen = {e["text"]: e for e in rec["answer_texts"]}
    assert texts_seen[" follows"]["mean"] == pytest.approx(0.9)
    does = texts_seen[" does"]  # in a rewarded completion (barely moved) and a penalised one (fell 1.2)
    assert does["n"] == 2 and does["n_neg"] == 1 and does["mean_neg"] == pytest.approx(-1.2)
    json.dumps(rec)  # one JSON line


def test_record_refuses_mismatched_lengths_in_one_line():
    advantages, before, after, texts = _toy_update()
    with pytest.raises(ValueError, match="token_shift_record: completion 1 has 5 tokens but 4 log-probs after"):
        token_shift_record(1, advantages, before, [after[0], after[1][:4], after[2]], texts)


def _records(n=5):
    out = []
    for s in range(n):
        advantages, before, after, texts = _toy_update()
        out.append(token_shift_record(1 + 10 * s, advantages, before, after, texts))
    return out


def test_reader_reads_a_run_folder_and_refuses_a_missing_one_in_one_line(tmp_path):
    recs = _records(3)
    (tmp_path / "token_shift.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert [r["step"] for r in read_token_shift(tmp_path)] == [1, 11, 21]
    assert read_token_shift(tmp_path / "token_shift.jsonl") == read_token_shift(tmp_path)
    with pytest.raises(FileNotFoundError, match="shift_every"):
        read_token_shift(tmp_path / "nowhere")
    (tmp_path / "quiet").mkdir()
    (tmp_path / "quiet" / "log.jsonl").write_text('{"step": 1, "skipped": 1.0}\n')
    assert read_token_shift(tmp_path / "quiet") == []  # a run whose steps had no update to measure


def test_small_multiples_draw_one_panel_per_update_on_linear_axes_with_labels():
    recs = _records(14)
    fig = plot_token_shift(recs, max_panels=12)
    boxes = [ax for ax in fig.axes if ax.get_label() == "token_shift_box"]
    movers = [ax for ax in fig.axes if ax.get_label() == "token_shift_top"]
    assert len(boxes) == len(movers) == 12  # at most 12 updates: spread over the run, first and last kept
    assert boxes[0].get_title().startswith("step 1") and boxes[-1].get_title().startswith("step 131")
    for ax in boxes + movers:
        assert ax.get_yscale() == "linear"
    assert all(ax.get_ylabel() for ax in boxes[::4])  # each row's first panel names its axis
    labels = [t for ax in movers for t in ax.texts]
    assert any("does" in t.get_text() for t in labels) and min(t.get_fontsize() for t in labels) >= 8
    assert fig.axes[0].figure is fig
    for ax in boxes:  # each side's mean marker in its side's colour (A > 0 green, A < 0 red)
        means = [ln for ln in ax.get_lines() if ln.get_marker() == "^"]
        assert [m.get_markerfacecolor() for m in means] == ["tab:green", "tab:red"]


def test_a_box_too_thin_to_draw_says_how_thin_it_is():
    rec = _records(1)[0]
    for side in ("pos", "neg"):
        rec[side]["q"] = [-0.1, -1e-6, 0.0, 2e-6, 0.1]  # whiskers ±0.1 nats, the middle half within ±2e-6
    fig = plot_token_shift([rec])
    box = next(ax for ax in fig.axes if ax.get_label() == "token_shift_box")
    assert "within ±2e-06" in box.get_xlabel()


def test_box_labels_of_thousands_of_tokens_stay_apart_and_the_title_explains_the_token_marks():
    recs = _records(4)
    for rec in recs:  # a real model's buffer: thousands of tokens a side
        rec["pos"]["n"], rec["neg"]["n"] = 1940, 1448
    fig = plot_token_shift(recs)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in (a for a in fig.axes if a.get_label() == "token_shift_box"):
        left, right = (t.get_window_extent(renderer) for t in ax.get_xticklabels())
        assert left.x1 < right.x0, [t.get_text() for t in ax.get_xticklabels()]
    title = fig._suptitle.get_text()
    assert "· a leading space" in title and "⏎ a newline" in title, "the figure says what · and ⏎ stand for"


def test_record_names_the_texts_that_carried_the_move_answer_or_not():
    advantages, before, after, texts = _toy_update()
    rec = token_shift_record(7, advantages, before, after, texts, k=4)
    deltas = [np.array(a) - np.array(b) for a, b in zip(after, before)]
    total = sum(np.abs(d).sum() for d in deltas)
    movers = rec["mover_texts"]
    assert [e["text"] for e in movers[:2]] == [" does", " follows"]  # the two large moves, largest share first
    does = [d[j] for d, t in zip(deltas, texts) for j, x in enumerate(t) if x == " does"]
    assert movers[0]["n"] == len(does) and movers[0]["mean"] == pytest.approx(np.mean(does))
    assert movers[0]["share"] == pytest.approx(np.abs(does).sum() / total)
    assert sum(e["share"] for e in movers) <= 1 + 1e-9
    still = token_shift_record(7, advantages, before, before, texts)
    assert still["mover_texts"] == []  # nothing moved: no share to give


def test_the_small_multiples_keep_the_update_with_the_largest_move():
    recs = _records(25)
    # update 19 (step 191) is not among 12 evenly spread picks of 25; give it the run's largest move
    assert 19 not in np.unique(np.round(np.linspace(0, 24, 12)).astype(int))
    recs[19]["top"][0] = dict(recs[19]["top"][0], delta=-5.0)
    fig = plot_token_shift(recs, max_panels=12)
    titles = [ax.get_title() for ax in fig.axes if ax.get_label() == "token_shift_box"]
    assert len(titles) == 12 and "step 191" in titles
    assert titles[0] == "step 1" and titles[-1] == "step 241"  # first and last still kept
    steps = [int(t.split()[1]) for t in titles]
    assert steps == sorted(steps)


def test_identical_moves_are_labelled_once_with_their_count():
    recs = _records(1)
    rec = dict(recs[0])
    same = {"text": " does", "delta": -0.2022877, "advantage": -0.6, "completion": 1, "position": 5, "in_answer": False}
    rec["top"] = [dict(same, completion=k) for k in range(4)] + [
        {"text": " follow", "delta": 0.163, "advantage": 0.6, "completion": 9, "position": 5, "in_answer": False}]
    fig = plot_token_shift([rec])
    labels = [t.get_text() for ax in fig.axes if ax.get_label() == "token_shift_top" for t in ax.texts]
    assert labels == ["'·does' -0.202 ×4", "'·follow' +0.163"]


def test_cumulative_view_adds_up_the_moves_across_updates():
    recs = _records(4)
    fig = plot_token_shift_cumulative(recs)
    ax = fig.axes[0]
    assert ax.get_yscale() == "linear" and ax.get_xlabel() and ax.get_ylabel()
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    answer_neg = lines["answer tokens, A < 0"]
    want = np.cumsum([r["answer"]["neg"]["mean"] for r in recs])
    assert np.allclose(answer_neg.get_ydata(), want) and list(answer_neg.get_xdata()) == [1, 11, 21, 31]
    by_text = {ln.get_label(): ln for ln in fig.axes[1].get_lines()}
    assert any("does" in name for name in by_text)
    # the right panel follows the texts that carried the move, answer or not, on its own scale
    does = next(ln for name, ln in by_text.items() if "does" in name)
    want = np.cumsum([next(e["mean"] for e in r["mover_texts"] if e["text"] == " does") for r in recs])
    assert np.allclose(does.get_ydata(), want)
    assert "carried most of the move" in fig.axes[1].get_title()
    assert fig.axes[1].get_ylim() != ax.get_ylim()  # a shared scale drew these lines flat at 0


def test_the_cumulative_view_reads_records_written_before_mover_texts():
    recs = _records(3)
    for r in recs:
        del r["mover_texts"]
    fig = plot_token_shift_cumulative(recs)
    assert fig.axes[1].get_title() == "answer tokens by text, all advantages"


def test_explain_cites_numbers_from_the_records():
    recs = _records(4)
    lines = explain(recs)
    assert lines and all(line.startswith("  why:") for line in lines)
    text = "\n".join(lines)
    mean_answer_neg = np.mean([r["answer"]["neg"]["mean"] for r in recs])
    assert f"{mean_answer_neg:+.2g}" in text  # the verdict's own move, from these records (two significant digits)
    assert "4 measured updates" in text and "'·does'" in text  # the token as labelled: · for its space
    moved = [t for r in recs for t in r["top"]]
    assert f"{sum(t['in_answer'] for t in moved)} of {len(moved)}" in text
    movers = [e["text"] for r in recs for e in r["mover_texts"]]
    assert movers and "the texts that carried the move" in text
    assert explain([]) == ["  why: no update was measured (shift_every = 0, or no measured step had a group with signal): nothing to explain from"]


def test_explain_probes_splits_the_probe_change_between_answer_and_other_tokens():
    tokens = [VERDICT[8:15], [" x", "<answer>", " follows", "</answer>"]]
    rows = [{"step": s, "probe": p, "group": 0, "role": role, "token_logp": lp}
            for s, lps in ((0, [[-1.0] * 7, [-1.0] * 4]), (30, [[-1.0, -1.0, -2.5, -1.0, -1.0, -1.0, -1.0],
                                                               [-1.1, -1.0, 0.0, -1.0]]))
            for p, (role, lp) in enumerate(zip(("high", "low"), lps))]
    lines = explain_probes(rows, tokens)
    text = "\n".join(lines)
    assert all(line.startswith("  why:") for line in lines)
    assert "-1.50" in text and "+1.00" in text  # rewarded: the verdict fell 1.5; penalised: it rose 1.0
    assert "'·does'" in text and "'·follows'" in text


def test_explain_probes_splits_at_the_fork_what_the_checks_read():
    # a pair that shares two tokens, then parts: the shared opening fell 2 nats in both, the fork barely moved
    tokens = [[" a", " b", " does", " not"], [" a", " b", " follows", "."]]
    before = [[-1.0] * 4, [-1.0] * 4]
    after = [[-2.0, -2.0, -1.1, -1.0], [-2.0, -2.0, -0.7, -1.0]]
    rows = [{"step": s, "probe": p, "group": 0, "role": role, "token_logp": lps[p]}
            for s, lps in ((0, before), (30, after)) for p, role in enumerate(("high", "low"))]
    lines = explain_probes(rows, tokens, fork_spans=[(2, 4), (2, 4)])
    text = "\n".join(lines)
    assert "before the fork -2.00 nats, from the fork on -0.10" in text  # rewarded: the fork fell 0.1
    assert "before the fork -2.00 nats, from the fork on +0.30" in text  # penalised: its fork rose 0.3
    assert "'·follows' (penalised +0.30 in 1)" in text and "'·does' (rewarded -0.10 in 1)" in text
    assert "all other tokens" not in text  # the whole-completion split is not what these checks read


def test_token_labels_show_whitespace_and_markup_visibly():
    assert token_label("\n<|im_end|>") == "⏎<eos>"  # as the probe figures show it (plots.token_label)
    assert token_label(" does") == "·does"
    assert token_label("x" * 40).endswith("…") and len(token_label("x" * 40)) <= 16


def test_explain_keeps_two_significant_digits_of_a_thousandth_of_a_nat():
    recs = _records(2)
    for r in recs:
        for side in ("pos", "neg"):
            r["answer"][side]["mean"] = 7e-4 if side == "pos" else -9e-4
    text = "\n".join(explain(recs))
    assert "+0.0007" in text and "-0.0009" in text and "±0.00 " not in text


def test_explain_probes_says_when_the_top_movers_moved_alike_whatever_the_advantage():
    # both probes hold " no" after the fork; it rose 0.4 in the rewarded one and in the penalised one alike
    tokens = [[" a", " no", " does"], [" a", " no", " follows"]]
    before = [[-1.0] * 3, [-1.0] * 3]
    after = [[-1.0, -0.6, -1.0], [-1.0, -0.6, -1.2]]
    rows = [{"step": s, "probe": p, "group": 0, "role": role, "token_logp": lps[p]}
            for s, lps in ((0, before), (30, after)) for p, role in enumerate(("high", "low"))]
    text = "\n".join(explain_probes(rows, tokens, fork_spans=[(1, 3), (1, 3)]))
    assert "'·no' (rewarded +0.40 in 1, penalised +0.40 in 1)" in text
    assert "1 of the 1 top movers found in both kinds of probe moved the same way" in text
    after[1][1] = -1.4  # the penalised probe's " no" now falls, as GRPO asks: no such line
    rows = [{"step": s, "probe": p, "group": 0, "role": role, "token_logp": lps[p]}
            for s, lps in ((0, before), (30, after)) for p, role in enumerate(("high", "low"))]
    assert "moved the same way" not in "\n".join(explain_probes(rows, tokens, fork_spans=[(1, 3), (1, 3)]))


def test_explain_says_a_median_change_of_exactly_zero_in_words():
    recs = _records(2)
    for r in recs:
        for side in ("pos", "neg"):
            r[side]["q"] = [0.0] * len(QUANTILES)
    text = "\n".join(explain(recs))
    assert "moved at most 0 nats" not in text and "change was exactly 0" in text



def test_explain_names_a_drift_of_the_verdict_when_the_answer_texts_moved_apart():
    recs = _records(2)
    for r in recs:
        r["answer_texts"] = [{"text": "No", "n": 5, "mean": 4e-4}, {"text": "Yes", "n": 4, "mean": -1e-3}]
    text = "\n".join(explain(recs))
    assert "moved the answer itself toward 'No' and away from 'Yes'" in text
    for r in recs:
        r["answer_texts"] = [{"text": "No", "n": 5, "mean": 4e-4}, {"text": "Yes", "n": 4, "mean": 1e-3}]
    assert "moved the answer itself" not in "\n".join(explain(recs))  # both rose: no drift between them
