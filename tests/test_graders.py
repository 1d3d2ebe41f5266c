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
    verdict, why = capsys.readouterr().out.strip().splitlines()
    assert verdict == "✗ my_double: not written yet (NotImplementedError) — using the package's version"
    assert why.startswith("  why: my_double raised NotImplementedError on case 1 of 2")


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


# ---- a function that changes its inputs


def _grpo_like_rollouts():
    """Four rollouts, two groups, each group sharing one prompt list (as chapter 4 builds them)."""
    from kimina_edu.logprobs import Rollout

    prompts = [[5, 6, 7, 8], [9, 10, 11]]
    return [Rollout(prompts[i // 2], [12 + i, 13, 14][: 1 + i % 3], [], 0.5, 1.0, False) for i in range(4)]


def _logprobs_mutating_prompt(model, prompt, completion):
    """Right values, but ``ids = prompt; ids += completion`` lengthens the caller's prompt list."""
    ids = prompt
    ids += completion
    t = torch.tensor([ids])
    logp = torch.log_softmax(model(input_ids=t).logits[0, :-1].float(), -1)
    return logp.gather(-1, t[0, 1:][:, None])[:, 0][len(ids) - len(completion) - 1:]


def test_a_stub_that_lengthens_its_prompt_fails_and_the_rollouts_stay_as_they_were():
    import copy

    from kimina_edu.exercises import completion_logprobs_cases, completion_logprobs_one
    from kimina_edu.tiny import tiny_random_llama

    model = tiny_random_llama(vocab_size=64, seed=0)
    rollouts = _grpo_like_rollouts()
    before = copy.deepcopy(rollouts)
    cases = completion_logprobs_cases(model, rollouts)
    with torch.no_grad():
        result = grade("my_completion_logprobs", _logprobs_mutating_prompt, completion_logprobs_one, cases, atol=1e-4,
                       quiet=True)
    assert not result.passed and result.function is completion_logprobs_one
    first = next(iter(cases))
    assert _one_line(result).startswith(f"✗ my_completion_logprobs: case {first!r} — changed its argument prompt"), \
        result.line
    assert "a list of 4 items became" in result.line
    assert rollouts == before
    assert rollouts[0].prompt_ids is rollouts[1].prompt_ids  # the group still shares one prompt list


def test_each_function_gets_fresh_inputs_and_the_cases_stay_as_they_were():
    rewards = torch.tensor([[1.0, 0.0, 1.0]])
    seen = []

    def in_place(r):
        seen.append(r)
        r -= r.mean()
        return r

    cases = {"a": (rewards,), "b": Case((rewards,))}
    result = grade("my_center", in_place, lambda r: r - r.mean(), cases, quiet=True)
    assert not result.passed and "case 'a'" in _one_line(result) and "changed its argument r" in result.line
    assert torch.equal(rewards, torch.tensor([[1.0, 0.0, 1.0]]))
    assert seen and all(s is not rewards for s in seen)


def test_a_reference_that_changes_its_input_cannot_change_what_the_stub_gets():
    x = torch.ones(3)

    def reference(t):
        out = t * 2
        t.zero_()
        return out

    assert grade("my_double", lambda t: t * 2, reference, {"ones": (x,)}, quiet=True).passed
    assert torch.equal(x, torch.ones(3))


def test_gradients_are_taken_on_the_fresh_copies():
    x = torch.randn(5, requires_grad=True)
    cases = {"random": Case((x,), grad_wrt=[x]), "again": Case((x,), grad_wrt=[x])}
    result = grade("my_loss", lambda t: (t * t).sum(), lambda t: (t ** 2).sum(), cases, quiet=True)
    assert result.passed, result.line
    assert x.grad is None


def test_dicts_and_nested_lists_are_copied_and_checked():
    def drops_a_key(d):
        d.pop("b")
        return 1

    data = {"a": [1, 2], "b": [3]}
    result = grade("my_f", drops_a_key, lambda d: 1, {"dict": (data,)}, quiet=True)
    assert not result.passed and "changed its argument d" in _one_line(result) and data == {"a": [1, 2], "b": [3]}

    def appends_inside(d):
        d["a"].append(9)
        return 1

    result = grade("my_f", appends_inside, lambda d: 1, {"dict": (data,)}, quiet=True)
    assert not result.passed and "d['a']" in _one_line(result) and data == {"a": [1, 2], "b": [3]}


def test_a_stub_that_reorders_a_batch_fails():
    rollouts = _grpo_like_rollouts()

    def sorts(batch):
        batch.sort(key=lambda r: len(r.completion_ids), reverse=True)
        return len(batch)

    result = grade("my_count", sorts, len, {"batch": (rollouts,)}, quiet=True)
    assert not result.passed and "changed its argument batch in place (its items were reordered" in _one_line(result)
    assert [len(r.completion_ids) for r in rollouts] == [1, 2, 3, 1]


def test_a_stub_that_changes_its_models_weights_fails():
    from kimina_edu.tiny import tiny_random_llama

    model = tiny_random_llama(vocab_size=64, seed=0)
    before = {k: v.clone() for k, v in model.state_dict().items()}

    def nudges(m, ids):
        with torch.no_grad():
            next(m.parameters()).add_(1.0)
        return len(ids)

    result = grade("my_f", nudges, lambda m, ids: len(ids), {"model": (model, [1, 2])}, quiet=True)
    assert not result.passed and "changed its model" in _one_line(result), result.line

    def backward_inside(m, ids):
        m(input_ids=torch.tensor([ids])).logits.sum().backward()
        return len(ids)

    model.load_state_dict(before)
    result = grade("my_f", backward_inside, lambda m, ids: len(ids), {"model": (model, [1, 2])}, quiet=True)
    assert not result.passed and "backward" in _one_line(result), result.line


# ---- a stub that exits or raises a BaseException


class _Custom(BaseException):
    pass


def _exits(x):
    import sys

    sys.exit(3)


def _generator_exit(x):
    raise GeneratorExit


def _custom(x):
    raise _Custom("stop here")


@pytest.mark.parametrize(("stub", "named"), [(_exits, "SystemExit"), (_generator_exit, "GeneratorExit"),
                                             (_custom, "_Custom: stop here")],
                         ids=["sys.exit", "GeneratorExit", "custom BaseException"])
def test_a_stub_raising_a_base_exception_is_one_line_and_falls_back(stub, named, capsys):
    result = grade("my_double", stub, ref_double, TENSOR_CASES)
    assert not result.passed and result.function is ref_double
    out, why = capsys.readouterr().out.strip().splitlines()  # the verdict, and under it its why
    assert out == result.line and out.startswith(f"✗ my_double raised {named}") and "case 'ones'" in out, out
    assert why.startswith("  why: my_double matched 0 of 2 cases before 'ones'"), why
    assert out.endswith("using the package's version")


def test_keyboard_interrupt_still_stops_the_cell():
    def interrupted(x):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        grade("my_double", interrupted, ref_double, TENSOR_CASES, quiet=True)


def test_a_base_exception_while_comparing_is_one_line():
    class ExitsOnEq:
        def __eq__(self, other):
            raise SystemExit(1)

    result = grade("my_f", lambda x: ExitsOnEq(), lambda x: ExitsOnEq(), {"a": 1}, quiet=True)
    assert not result.passed and "SystemExit" in _one_line(result)


# ---- values that lie about themselves


class _LyingStr(str):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = str.__hash__


class _LyingFloat(float):
    def __sub__(self, other):
        return 0.0

    def __rsub__(self, other):
        return 0.0

    def __eq__(self, other):
        return True

    __hash__ = float.__hash__


class _LyingList(list):
    def __len__(self):
        return 2

    def __iter__(self):
        return iter([2.0, 4.0])


class _LyingDict(dict):
    def __iter__(self):
        return iter(["a"])

    def __getitem__(self, key):
        return 1


class _BadMessage(Exception):
    def __str__(self):
        raise SystemExit("no")


@pytest.mark.parametrize(("got", "expected"), [
    (_LyingStr("No"), "Yes"), (_LyingFloat(0.0), 1.0), (_LyingList([0.0]), [2.0, 4.0]),
    (_LyingDict(b=2), {"a": 1})], ids=["str whose == lies", "float whose - lies", "list whose len lies",
                                        "dict whose keys lie"])
def test_a_subclass_whose_comparison_lies_fails(got, expected):
    result = grade("my_f", lambda x: got, lambda x: expected, {"a": 0}, quiet=True)
    assert not result.passed and "case 'a'" in _one_line(result), result.line


def test_an_exception_whose_message_raises_is_one_line():
    def raises(x):
        raise _BadMessage

    result = grade("my_double", raises, ref_double, TENSOR_CASES, quiet=True)
    assert not result.passed and "_BadMessage" in _one_line(result) and "case 'ones'" in result.line


def test_a_generator_is_not_a_list():
    result = grade("my_f", lambda x: (v for v in [1.0, 2.0]), lambda x: [1.0, 2.0], {"a": 0}, quiet=True)
    assert not result.passed and "returned a generator" in _one_line(result)


def test_infinity_equals_infinity():
    assert grade("my_f", lambda x: math.inf, lambda x: math.inf, {"a": 0}, quiet=True).passed
    assert not grade("my_f", lambda x: -math.inf, lambda x: math.inf, {"a": 0}, quiet=True).passed


def test_not_implemented_on_a_later_case_names_the_case():
    def half_written(x):
        if x.sum() > 12:
            raise NotImplementedError("the big case is next")
        return x * 2

    result = grade("my_double", half_written, ref_double, TENSOR_CASES, quiet=True)
    assert not result.passed and "not written yet" not in _one_line(result)
    assert result.line.startswith("✗ my_double raised NotImplementedError: the big case is next on case 'range'")


def test_a_stub_that_draws_random_numbers_leaves_later_draws_as_they_were():
    import random

    import numpy as np

    def reseeds(x):
        torch.manual_seed(123)
        random.seed(123)
        np.random.seed(123)
        return x * 2 + 0 * torch.rand(1)

    torch.manual_seed(0)
    random.seed(0)
    np.random.seed(0)
    expected = (torch.rand(3), random.random(), np.random.rand())
    torch.manual_seed(0)
    random.seed(0)
    np.random.seed(0)
    assert grade("my_double", reseeds, ref_double, TENSOR_CASES, quiet=True).passed
    got = (torch.rand(3), random.random(), np.random.rand())
    assert torch.equal(got[0], expected[0]) and got[1:] == expected[1:]


def test_a_tensor_cut_from_the_graph_fails_where_the_package_keeps_the_gradient():
    import torch

    from kimina_edu.graders import Case, grade

    cases = {"a": Case(args=(torch.ones(3, requires_grad=True),))}
    cut = grade("my_f", lambda t: (t * 2).detach(), lambda t: t * 2, cases, quiet=True)
    assert not cut.passed and "no gradient" in cut.line and "'a'" in cut.line
    assert grade("my_f", lambda t: t * 2, lambda t: t * 2, cases, quiet=True).passed
    with torch.no_grad():  # graded where nothing has a gradient: the package's output has none either
        assert grade("my_f", lambda t: (t * 2).detach(), lambda t: t * 2, cases, quiet=True).passed
