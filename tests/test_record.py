"""A notebook's closing "measured" cell: this run's figures beside the record's ranges over seeds."""

import json

from kimina_edu import record
from kimina_edu.record import beside, measured_range, print_measured


def test_every_chapter_figure_names_a_row_of_the_record():
    for model, rows in record.ROWS.items():
        for key, label in rows.items():
            found = measured_range(model, label)
            assert found is not None and found.low <= found.high, (model, key, label)


def test_a_value_is_placed_inside_below_or_above_the_measured_range(tmp_path):
    (tmp_path / "pocket_seeds.json").write_text(json.dumps({
        "date": "2026-01-02", "columns": ["figure", "min", "median", "max", "runs"],
        "rows": [["04 GRPO gain (points)", "+9.5", "+12.2", "+18.0", "6"], ["04 GRPO seconds", "97", "134", "1,500", "6"]]}))
    gain = measured_range("pocket", "04 GRPO gain", folder=tmp_path)
    assert (gain.low, gain.high) == (9.5, 18.0) and "2026-01-02" in gain.source
    assert measured_range("pocket", "04 GRPO seconds", folder=tmp_path).high == 1500.0
    assert measured_range("pocket", "no such row", folder=tmp_path) is None
    assert gain.holds(12.0) and not gain.holds(9.4) and not gain.holds(18.1)


def test_per_seed_cells_with_a_gain_in_brackets_read_their_first_number():
    found = measured_range("smollm2", "CPU: GRPO gain")
    assert found.low < 0 < found.high  # the record's SmolLM2 gains sit on both sides of zero


def test_the_printed_lines_carry_this_runs_value_its_range_and_the_noise(capsys):
    lines = print_measured("pocket", {"grpo_gain": 30.0, "sft_accuracy": 70.0}, accuracy=0.8, n_questions=400, seed=3)
    out = capsys.readouterr().out
    assert "seed 3, 400 held-out questions" in out and "±2.0 points" in out and "SMOKE" not in out
    assert any("this run 30.0" in line and line.endswith("above") for line in lines)
    assert any("this run 70.0" in line and "✓ inside" in line for line in lines)


def test_a_gain_with_its_paired_interval_is_printed_with_it_on_the_row_that_names_one():
    found = measured_range("smollm2", "CPU: GRPO gain")
    assert "[95% interval]" in found.label  # the row says an interval follows the point
    (line,) = beside("smollm2", {"CPU: GRPO gain": (8.5, 4.2, 12.8)})
    assert "this run +8.5 [+4.2, +12.8];" in line and line.endswith("✓ inside")
    assert beside("smollm2", {"CPU: GRPO gain": [8.5, 4.2, 12.8]}) == [line]  # as metrics.json keeps it
    (line,) = beside("smollm2", {"CPU: GRPO gain": (2.0, -1.5, 5.5)})
    assert "this run +2.0 [-1.5, +5.5], not clearly above zero;" in line


def test_a_model_without_a_record_says_so_in_one_line():
    lines = print_measured("HuggingFaceTB/SmolLM-135M-Instruct", {"grpo_gain": 1.0}, accuracy=0.5, n_questions=200, seed=0)
    assert len(lines) == 2 and "No measured ranges" in lines[1]
    assert "no measured range" in beside("nope", {"x": 1.0})[0]


def test_a_smoke_run_is_said_to_be_no_comparison_and_zero_accuracy_still_has_an_error():
    lines = print_measured("pocket", {"grpo_gain": 0.0}, accuracy=0.0, n_questions=40, seed=0, smoke=True)
    assert "SMOKE" in lines[1] and "±0.0" not in lines[0] and "Agresti–Coull" in lines[0]


def test_the_noise_line_uses_the_standard_error_the_chapters_print_beside_an_accuracy():
    from kimina_edu.record import accuracy_with_se

    lines = print_measured("smollm2", {}, accuracy=0.8375, n_questions=400, seed=0)
    assert "±1.8 points" in lines[0] and "± 1.8 points" in accuracy_with_se(0.8375, 400)
    assert "Agresti" not in lines[0]


def test_a_paired_gain_is_the_mean_difference_with_its_interval():
    from kimina_edu.record import paired_gain

    before = [1, 0, 0, 1, 0, 1, 0, 0] * 50
    after = [1, 1, 0, 1, 0, 1, 1, 0] * 50  # two more right in every eight, none lost
    gain, lo, hi = paired_gain(before, after)
    assert abs(gain - 25.0) < 1e-9 and lo < 25.0 < hi and hi - lo < 10  # 400 paired questions: ±4.3 points
    same = paired_gain(before, before)
    assert same == (0.0, 0.0, 0.0)
    import pytest

    with pytest.raises(ValueError, match="equal"):
        paired_gain([1, 0], [1])


def test_an_accuracy_is_printed_with_its_standard_error_in_points():
    import pytest

    from kimina_edu.record import accuracy_with_se, points, standard_error

    assert standard_error(0.8, 400) == pytest.approx(2.0)  # CONVENTIONS.md: 400 questions, ±2 points at 80%
    assert standard_error(0.5, 40) == pytest.approx(100 * (0.25 / 40) ** 0.5)
    assert accuracy_with_se(0.725, 400) == "72.5% ± 2.2 points"
    # the share of 400 questions to its quarter point: one decimal printed 71.25 → 85.75 as 71.2 → 85.8
    assert accuracy_with_se(0.7125, 400).startswith("71.25% ") and accuracy_with_se(0.8575, 400).startswith("85.75% ")
    assert points(14.5, sign=True) == "+14.5" and points(76.0) == "76.0" and points(-6.75, sign=True) == "-6.75"
    assert "± 0.0" not in accuracy_with_se(1.0, 40) and "40 of 40" in accuracy_with_se(1.0, 40)
    assert "0 of 40" in accuracy_with_se(0.0, 40)
    for p, n in ((0.5, 0), (1.5, 10)):
        with pytest.raises(ValueError):
            standard_error(p, n)


def test_a_figure_the_record_does_not_hold_is_printed_and_said_to_be_unmeasured(capsys):
    lines = print_measured("smollm2", {"trl_accuracy": 76.5, "trl_minus_ours": 3.5, "grpo_gain": 8.5},
                           accuracy=0.765, n_questions=200, seed=0)
    unmeasured = [x for x in lines if "not measured over seeds" in x]
    assert len(unmeasured) == 2, lines
    assert any("trl minus ours" in x and "3.5" in x for x in unmeasured)
    assert any("CPU: GRPO gain" in x for x in lines), "a figure the record holds keeps its range"
