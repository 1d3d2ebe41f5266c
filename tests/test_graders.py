"""kimina_edu.graders: every way a learner's function can be wrong is one line naming the case; never a raise."""

from __future__ import annotations

import math
import time

import pytest
import torch

from kimina_edu.graders import Case, grade


def ref_double(x):
    return x * 2


TENSOR_CASES = {"ones": (torch.ones(3, 4),), "range": (torch.arange(12.0).view(3, 4),)}


def _one_line(result) -> str:
    assert "\n" not in result.line
    return result.line


def test_correct_function_passes_and_is_used(capsys):
    def mine(x):
        return x + x

    result = grade("my_double", mine, ref_double, TENSOR_CASES)
    assert result.passed and bool(result) and result.function is mine and result.cases == 2
    assert capsys.readouterr().out.strip() == "✓ my_double matches the package on 2 cases"


def test_not_written_yet_uses_the_package(capsys):
    def mine(x):
        raise NotImplementedError("write it")

    result = grade("my_double", mine, ref_double, TENSOR_CASES)
    assert not result.passed and result.function is ref_double
    assert capsys.readouterr().out.strip() == ("✗ my_double: not written yet (NotImplementedError) — using the "
                                               "package's version")


def test_wrong_shape_names_the_case():
    result = grade("my_double", lambda x: (x * 2)[0], ref_double, TENSOR_CASES, quiet=True)
    assert "case 'ones'" in _one_line(result) and "wrong shape (4,)" in result.line and "expected (3, 4)" in result.line
    assert result.function is ref_double


def test_nan_is_named_with_where():
    def mine(x):
        y = x * 2
        if x[0, 0] == 0:
            y[1, 2] = float("nan")
        return y

    result = grade("my_double", mine, ref_double, TENSOR_CASES, quiet=True)
    assert not result.passed and "case 'range'" in _one_line(result) and "NaN" in result.line and "(1, 2)" in result.line


def test_list_instead_of_tensor():
    result = grade("my_double", lambda x: (x * 2).tolist(), ref_double, TENSOR_CASES, quiet=True)
    assert "returned a list, expected a tensor" in _one_line(result) and "case 'ones'" in result.line


def test_raising_names_the_exception_and_the_case():
    def mine(x):
        if x.sum() > 12:
            raise ValueError("too big\nreally")
        return x * 2

    result = grade("my_double", mine, ref_double, TENSOR_CASES, quiet=True)
    assert _one_line(result).startswith("✗ my_double raised ValueError: too big really on case 'range'")


def test_wrong_value_on_one_case():
    def mine(text):
        return 1.0 if "<answer>" in text else 0.0

    def ref(text):
        return 1.0 if text.count("<answer>") == 1 else 0.0

    cases = {"one answer": "<answer>x</answer>", "two answers": "<answer>a</answer><answer>b</answer>"}
    result = grade("my_format_reward", mine, ref, cases, quiet=True)
    assert _one_line(result) == ("✗ my_format_reward: case 'two answers' — expected 0.0, got 1.0 — using the "
                                 "package's version")


def test_tensors_compare_across_dtypes_within_atol():
    assert grade("my_double", lambda x: (x * 2).double(), ref_double, TENSOR_CASES, quiet=True).passed
    off = grade("my_double", lambda x: x * 2 + 1e-3, ref_double, TENSOR_CASES, quiet=True, atol=1e-4)
    assert not off.passed and "largest difference" in off.line
    assert grade("my_double", lambda x: x * 2 + 1e-5, ref_double, TENSOR_CASES, quiet=True, atol=1e-4).passed


def test_gradients_are_compared():
    x = torch.randn(5, requires_grad=True)

    def ref(t):
        return (t ** 2).sum()

    def same_value_other_gradient(t):
        return (t ** 2).sum().detach() + 0 * t.sum()  # value right, gradient zero

    cases = {"random": Case((x,), grad_wrt=[x])}
    assert grade("my_loss", lambda t: (t * t).sum(), ref, cases, quiet=True).passed
    wrong = grade("my_loss", same_value_other_gradient, ref, cases, quiet=True)
    assert not wrong.passed and "gradient" in _one_line(wrong) and "case 'random'" in wrong.line
    detached = grade("my_loss", lambda t: (t ** 2).sum().detach(), ref, cases, quiet=True)
    assert not detached.passed and "no gradient" in _one_line(detached)


def test_numbers_strings_none():
    assert grade("my_f", lambda x: x / 2, lambda x: x * 0.5, {"a": 3}, quiet=True).passed
    nan = grade("my_f", lambda x: math.nan, lambda x: 1.0, {"a": 3}, quiet=True)
    assert "NaN" in _one_line(nan)
    none = grade("my_extract", lambda t: "", lambda t: None, {"empty": ""}, quiet=True)
    assert _one_line(none) == "✗ my_extract: case 'empty' — expected None, got '' — using the package's version"
    text = grade("my_extract", lambda t: t.upper(), lambda t: t, {"word": "yes"}, quiet=True)
    assert "first difference at character 0" in _one_line(text)
    typed = grade("my_f", lambda x: torch.tensor(0.5), lambda x: 0.5, {"a": 1}, quiet=True)
    assert "returned a tensor" in _one_line(typed) and "expected a number" in typed.line


def test_bad_grader_input_is_one_line_not_a_raise():
    for args in (("my_f", None, ref_double, TENSOR_CASES), ("my_f", ref_double, "not a function", TENSOR_CASES),
                 ("my_f", ref_double, ref_double, {}), ("my_f", ref_double, ref_double, [1, 2]),
                 ("", ref_double, ref_double, TENSOR_CASES)):
        result = grade(*args, quiet=True)
        assert not result.passed and _one_line(result).startswith("✗")
    broken_reference = grade("my_f", ref_double, lambda x: 1 / 0, {"a": 1}, quiet=True)
    assert "grader problem" in _one_line(broken_reference) and "ZeroDivisionError" in broken_reference.line


def test_linear_time_on_huge_strings():
    """A huge case and a huge wrong answer: the verdict is built in time linear in the input (and short)."""
    def timed(n):
        big = "<think>" + "a" * n + "</think>"
        start = time.perf_counter()
        result = grade("my_echo", lambda t: t[:-1] + "b", lambda t: t, {"huge": big}, quiet=True)
        return time.perf_counter() - start, result

    small_s, _ = timed(1_000_000)
    big_s, result = timed(8_000_000)
    assert not result.passed and len(result.line) < 400 and "first difference at character 8,000,014" not in result.line
    assert "first difference at character 8000014" in result.line
    assert big_s < max(0.5, 20 * small_s), f"8x the input took {big_s / max(small_s, 1e-9):.0f}x the time"


@pytest.mark.parametrize("bad", [[1.0, 2.0], {"a": 1}, "x", None, 3])
def test_any_return_type_is_judged_without_raising(bad):
    result = grade("my_double", lambda x: bad, ref_double, TENSOR_CASES, quiet=True)
    assert not result.passed and "expected a tensor" in _one_line(result)
