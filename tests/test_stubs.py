"""Stub, grade, import (CONVENTIONS.md): every stub cell fails its grader, every solution passes it.

The stubs are read from the notebooks in git and the solutions from notebooks/solutions/derive.py; both are
exec'd here and graded on the same cases the notebooks' grader cells use (kimina_edu/exercises.py). No
pocket model: chapter 4's log-probs and loss are graded on the tiny random Llama (the SMOKE run of notebook 04
grades them on the pocket model), its loop on the toy task its grader cell uses.
"""

from __future__ import annotations

import inspect
import json
import types

import pytest
import torch

from kimina_edu import exercises as ex
from kimina_edu.course import list_notebooks
from kimina_edu.graders import grade
from kimina_edu.stubs import INJECTED_HEADER, inject_solutions, load_solutions, stub_cells

SOLUTIONS = load_solutions()


def _stubs() -> dict[str, tuple[str, str, list[str]]]:
    """solution name → (notebook, stub source, the code cells after the stub)."""
    found = {}
    for path in list_notebooks():
        nb = json.loads(path.read_text(encoding="utf-8"))
        cells = nb["cells"]
        for i, name in stub_cells(nb):
            assert name not in found, f"two stubs named {name!r}: {found.get(name, ('',))[0]} and {path.name}"
            later = ["".join(c["source"]) for c in cells[i + 1:] if c["cell_type"] == "code"]
            found[name] = (path.name, "".join(cells[i]["source"]), later)
    return found


STUBS = _stubs()
EPS_LOW, EPS_HIGH = 0.2, 0.28  # chapter 2's parameters cell


@pytest.fixture(scope="module")
def tiny():
    """The tiny random Llama and a few rollouts of different lengths, as chapter 4's grader cells get them."""
    from kimina_edu.logprobs import Rollout
    from kimina_edu.tiny import tiny_random_llama

    model = tiny_random_llama(vocab_size=64, seed=0)
    g = torch.Generator().manual_seed(0)
    rollouts = []
    for i, length in enumerate((3, 7, 5, 1, 6, 4)):
        prompt = torch.randint(0, 64, (4 + i % 3,), generator=g).tolist()
        rollouts.append(Rollout(prompt, torch.randint(0, 64, (length,), generator=g).tolist(), [],
                                float((-1) ** i) * 0.5, 0.0, False))
    cfg = types.SimpleNamespace(eps_low=0.2, eps_high=0.28, loss_type="grpo", max_new_tokens=8, group_size=3)
    return model, rollouts, cfg


def _lean_code() -> str:
    """Chapter 7's failing proof, built as the notebook builds it."""
    from kimina_edu.lean.data import load_offline_problems
    from kimina_edu.lean.examples import passing_response
    from kimina_edu.lean.proof import extract_proof

    problem = next(p for p in load_offline_problems() if p["statement_id"] == "algebra_square_nonneg")
    return extract_proof(passing_response({**problem, "illustrative_proof": ["linarith"]}), problem["formal_statement"])


def _grade(name: str, ns: dict, tiny) -> object:
    """The grader call of ``name``'s grader cell, on ``ns`` (the names a stub or a solution defined)."""
    from kimina_edu.eval import pass_at_k
    from kimina_edu.grpo import group_advantages, kl_k3
    from kimina_edu.rewards import extract_answer, format_reward

    model, rollouts, cfg = tiny
    if name == "my_extract_answer":
        return grade(name, ns[name], extract_answer, ex.extract_answer_cases(), quiet=True)
    if name == "my_format_reward":
        return grade(name, ns[name], format_reward, ex.format_reward_cases(), quiet=True)
    if name == "my_group_advantages":
        return grade(name, ns[name], group_advantages, ex.group_advantages_cases(0), quiet=True)
    if name == "my_policy_loss":
        return grade(name, ex.compose_loss(ns["my_per_token_loss"], ns["my_aggregate"], EPS_LOW, EPS_HIGH),
                     ex.policy_loss_reference(EPS_LOW, EPS_HIGH), ex.policy_loss_cases(0), quiet=True)
    if name == "my_kl_k3":
        return grade(name, ns[name], kl_k3, ex.kl_k3_cases(0), quiet=True)
    if name == "my_completion_logprobs":
        with torch.no_grad():
            return grade(name, ns[name], ex.completion_logprobs_one, ex.completion_logprobs_cases(model, rollouts),
                         atol=ex.model_atol(model), quiet=True)
    if name == "my_grpo_loss":
        return grade(name, ns[name], ex.grpo_loss_reference(cfg, 0), ex.grpo_loss_cases(model, rollouts, 3),
                     atol=1e-5, grad_atol=1e-4, quiet=True)
    if name == "my_grpo_iteration":
        return grade(name, ex.toy_loop(ns[name]), ex.toy_loop(ex.grpo_iteration), ex.grpo_iteration_cases(),
                     atol=1e-3, quiet=True)
    if name == "my_surrogate":
        return grade(name, ex.compose_surrogate(ns[name]), ex.surrogate_reference, ex.surrogate_cases(0), quiet=True)
    if name == "my_feedback":
        code = _lean_code()
        verdict = {"response": {"messages": [{"severity": "error", "pos": {"line": 2, "column": 2},
                                              "data": "linarith failed"}]}}
        return grade(name, ns[name], ex.feedback_reference, ex.feedback_cases(code, verdict), quiet=True)
    if name == "my_pass_at_k":
        return grade(name, ns[name], pass_at_k, ex.pass_at_k_cases(), atol=1e-9, quiet=True)
    raise AssertionError(f"tests/test_stubs.py does not know how to grade the stub {name!r}: add it to _grade")


def _namespace(source: str, tiny) -> dict:
    """What a cell's source defines, run with the names the notebooks have by then (torch, cfg, …)."""
    from kimina_edu.lean.feedback import header_line_count

    helper: dict = {"torch": torch}  # chapter 4's loss calls the learner's log-probs: give it the solution's
    exec(compile(SOLUTIONS["my_completion_logprobs"], "<solution>", "exec"), helper)  # noqa: S102 — the course's own code
    ns = {"torch": torch, "cfg": tiny[2], "header_line_count": header_line_count,
          "my_completion_logprobs": helper["my_completion_logprobs"]}
    exec(compile(source, "<cell>", "exec"), ns)  # noqa: S102 — a notebook cell of this repository
    return ns


def test_every_stub_has_a_solution_and_every_solution_a_stub():
    assert STUBS, "no stub cells found in the notebooks"
    assert set(STUBS) == set(SOLUTIONS), (f"stubs without a solution: {sorted(set(STUBS) - set(SOLUTIONS))}; "
                                          f"solutions without a stub: {sorted(set(SOLUTIONS) - set(STUBS))}")


@pytest.mark.parametrize("name", sorted(STUBS))
def test_stub_fails_and_solution_passes(name, tiny):
    notebook, stub_source, _ = STUBS[name]
    assert "raise NotImplementedError" in stub_source, f"{notebook}: the stub {name} must be left for the learner"
    stub = _grade(name, _namespace(stub_source, tiny), tiny)
    assert not stub.passed and "not written yet (NotImplementedError)" in stub.line, stub.line
    solved = _grade(name, _namespace(SOLUTIONS[name], tiny), tiny)
    assert solved.passed and solved.line.startswith("✓"), f"{notebook}, solution {name}: {solved.line}"


@pytest.mark.parametrize("name", sorted(STUBS))
def test_stub_and_solution_have_the_same_signatures(name, tiny):
    stub, solved = _namespace(STUBS[name][1], tiny), _namespace(SOLUTIONS[name], tiny)
    functions = [k for k, v in stub.items() if k.startswith("my_") and inspect.isfunction(v)
                 and v.__code__.co_filename == "<cell>"]
    assert functions, f"the stub {name} defines no my_ function"
    for fn in functions:
        assert inspect.signature(stub[fn]) == inspect.signature(solved[fn]), fn
        assert stub[fn].__doc__, f"the stub {fn} needs a docstring saying what it must do"


@pytest.mark.parametrize("name", sorted(STUBS))
def test_a_grader_cell_follows_each_stub(name):
    notebook, _, later = STUBS[name]
    assert later and "grade(" in later[0] and "derive_checks[" in later[0], \
        f"{notebook}: the code cell after the stub {name} must grade it and record derive_checks"


@pytest.mark.parametrize("path", [p for p in list_notebooks() if p.name[:2] in {s[0][:2] for s in STUBS.values()}],
                         ids=lambda p: p.stem)
def test_injection_fills_every_stub_and_leaves_the_file_alone(path):
    text = path.read_text(encoding="utf-8")
    nb = json.loads(text)
    filled = inject_solutions(nb)
    assert filled and path.read_text(encoding="utf-8") == text
    for i, name in stub_cells(nb):
        source = nb["cells"][i]["source"]
        assert source.startswith(INJECTED_HEADER.format(name=name)), "the executed copy says the solution was injected"
        assert "NotImplementedError" not in source
        compile(source, name, "exec")


def test_injection_names_a_stub_without_a_solution():
    nb = {"cells": [{"cell_type": "code", "source": "def my_x(): raise NotImplementedError",
                     "metadata": {"tags": ["stub"], "kimina": {"solution": "my_x"}}}]}
    with pytest.raises(ValueError, match="my_x"):
        inject_solutions(nb, {})
    nb["cells"][0]["metadata"]["kimina"] = {}
    with pytest.raises(ValueError, match="no kimina.solution"):
        inject_solutions(nb, {})


def test_log_prob_tolerance_follows_the_model_dtype():
    from kimina_edu.tiny import tiny_random_llama

    assert ex.model_atol(tiny_random_llama()) == 1e-4
    assert ex.model_atol(tiny_random_llama().to(torch.bfloat16)) == 1e-1
