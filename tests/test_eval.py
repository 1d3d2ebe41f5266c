import math

import numpy as np
import pytest

from kimina_edu.eval import best_at_k, mean_best_at_k, mean_pass_at_k, pass_at_k


def test_pass_at_k_matches_the_combinatorial_formula():
    for n, c, k in [(8, 0, 1), (8, 1, 1), (8, 3, 2), (10, 5, 8), (32, 4, 16), (8, 8, 8)]:
        exact = 1 - math.comb(n - c, k) / math.comb(n, k)
        assert pass_at_k(n, c, k) == pytest.approx(exact)


def test_pass_at_1_is_the_success_rate_and_bounds():
    assert pass_at_k(8, 3, 1) == pytest.approx(3 / 8)
    assert pass_at_k(8, 0, 8) == 0.0 and pass_at_k(8, 1, 8) == 1.0
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)


def test_best_at_k_is_below_pass_at_k_with_one_success_in_eight():
    samples = [1.0] + [0.0] * 7
    assert best_at_k(samples, 8) == pytest.approx(1 - (7 / 8) ** 8, abs=0.03)  # with replacement
    assert pass_at_k(8, 1, 8) == 1.0  # without replacement the success is always drawn
    assert best_at_k(samples, 8) == best_at_k(samples, 8)  # seeded


def test_means_over_problems():
    results = [[1, 0, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]]
    assert mean_pass_at_k(results, 1) == pytest.approx(np.mean([0.25, 1.0, 0.0]))
    assert 0.0 <= mean_best_at_k(results, 4) <= mean_pass_at_k(results, 4)


@pytest.mark.parametrize("results", [[[1, 0.5, 0]], [[2, 0]], [[float("nan"), 1]], [[1, "1"]], [[]], [[-1, 1]]])
def test_pass_at_k_refuses_rewards_that_are_not_0_or_1(results):
    with pytest.raises(ValueError) as err:
        mean_pass_at_k(results, 1)
    assert "0/1" in str(err.value) and "\n" not in str(err.value)


def test_pass_at_k_accepts_bools_and_whole_floats():
    assert mean_pass_at_k([[True, False], [1.0, 0.0]], 1) == 0.5


@pytest.mark.parametrize("n, c, k", [(4, 2.5, 1), (4.0, 2, 1), (4, 2, True)])
def test_pass_at_k_counts_must_be_whole(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_a_greedy_evaluation_is_read_back_only_for_the_same_weights_questions_and_settings(
        offline_private_cache, monkeypatch, capsys):
    import torch

    from kimina_edu import eval as ev
    from kimina_edu.lora import lora_config
    from kimina_edu.models import load_policy
    from kimina_edu.pocket import PocketRecipe
    from kimina_edu.tasks import held_out

    model, tok = load_policy("pocket", recipe=PocketRecipe.smoke(), lora=lora_config(), seed=0, verbose=False)
    questions = held_out("syllogism", 6)
    first = ev.evaluate_policy(model, tok, questions, max_new_tokens=8, progress=False, keep_completions=True)
    assert len(first["completions"]) == 6

    def must_not_run(*args, **kwargs):
        raise AssertionError("evaluated again: the cached result should have been read back")

    with monkeypatch.context() as m:
        m.setattr(ev, "_evaluate", must_not_run)
        again = ev.evaluate_policy(model, tok, questions, max_new_tokens=8, progress=False, keep_completions=True)
        assert again == first and "read back" in capsys.readouterr().out
        assert "completions" not in ev.evaluate_policy(model, tok, questions, max_new_tokens=8, progress=False)

    counted = []
    real = ev._evaluate
    monkeypatch.setattr(ev, "_evaluate", lambda *a, **k: counted.append(1) or real(*a, **k))
    ev.evaluate_policy(model, tok, questions, max_new_tokens=9, progress=False)  # another length
    ev.evaluate_policy(model, tok, questions[:5], max_new_tokens=8, progress=False)  # other questions
    with torch.no_grad():  # other weights: one LoRA matrix moved (B starts at zero; A alone changes nothing)
        next(p for n, p in model.named_parameters() if "lora_B" in n).add_(0.01)
    ev.evaluate_policy(model, tok, questions, max_new_tokens=8, progress=False)
    assert len(counted) == 3

    key = ev.evaluation_key(model, tok, questions, 8, 100)
    from kimina_edu.runtime import cache_dir

    stored = cache_dir() / "eval" / f"{key}.json"
    stored.write_text("{not json")
    capsys.readouterr()
    ev.evaluate_policy(model, tok, questions, max_new_tokens=8, progress=False)
    assert "unreadable; evaluating again" in capsys.readouterr().out and len(counted) == 4


def test_sampled_outcomes_are_each_questions_answers_scored(offline_private_cache):
    from kimina_edu import eval as ev
    from kimina_edu.models import load_policy
    from kimina_edu.pocket import PocketRecipe
    from kimina_edu.tasks import held_out

    model, tok = load_policy("pocket", recipe=PocketRecipe.smoke(), seed=0, verbose=False)
    questions = held_out("syllogism", 6)
    sampled = ev.sampled_outcomes(model, tok, questions, n=4, max_new_tokens=24, temperature=1.0, seed=3,
                                  batch_questions=4)  # two batches: 4 questions, then 2
    assert [len(o) for o in sampled] == [4] * 6 and {x for o in sampled for x in o} <= {0, 1}
    assert sampled == ev.sampled_outcomes(model, tok, questions, n=4, max_new_tokens=24, temperature=1.0, seed=3,
                                          batch_questions=4)  # seeded
    assert ev.mean_pass_at_k(sampled, 4) >= ev.mean_pass_at_k(sampled, 1)
    # greedy, one answer each: the same verdicts the greedy evaluation scores
    greedy = ev.sampled_outcomes(model, tok, questions, n=1, max_new_tokens=24, temperature=0.0)
    scored = ev.evaluate_policy(model, tok, questions, max_new_tokens=24, progress=False)
    assert sum(o[0] for o in greedy) / len(questions) == scored["accuracy"]
