"""Evaluation: a policy's held-out greedy accuracy (chapters 3–5), and for provers pass@k
(unbiased) and verl's bootstrap best@k (chapter 9).

pass@k (Chen et al. 2021, "Evaluating Large Language Models Trained on Code"): with n samples
of which c are correct, the probability that k samples drawn *without* replacement contain a
correct one — ``1 - C(n-c, k) / C(n, k)``, computed as a stable product.

best@k (verl ``metric_utils.py::bootstrap_metric``): draw k of the n samples *with* replacement,
take the best, average over 1000 bootstrap draws (seed 42). Sampling with replacement can pick
the same failure twice, so best@k ≤ pass@k in expectation; at k = n the gap is largest.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one problem with ``c`` correct out of ``n`` samples."""
    if not all(isinstance(x, int | np.integer) and not isinstance(x, bool) for x in (n, c, k)):
        raise ValueError(f"pass_at_k counts must be whole numbers; got n={n!r}, c={c!r}, k={k!r}")
    if not 0 <= c <= n or k < 1 or k > n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def best_at_k(correct: list[float] | np.ndarray, k: int, n_bootstrap: int = 1000, seed: int = 42) -> float:
    """verl's bootstrap best@k for one problem: mean over draws of the max of k samples with replacement."""
    values = np.asarray(correct, dtype=float)
    if values.size == 0 or k < 1:
        raise ValueError("need at least one sample and k >= 1")
    rng = np.random.default_rng(seed)
    draws = rng.choice(values, size=(n_bootstrap, k), replace=True)
    return float(draws.max(axis=1).mean())


def mean_pass_at_k(results: list[list[float]], k: int) -> float:
    """pass@k averaged over problems; ``results[i]`` = the 0/1 outcomes of problem i's samples.
    pass@k counts successes, so a reward that is not exactly 0 or 1 (a partial score, NaN, text) is
    refused rather than summed into a count."""
    counts = []
    for i, r in enumerate(results):
        r = list(r)
        bad = next((x for x in r if isinstance(x, str) or not (x == 0 or x == 1)), None) if r else "no samples"
        if bad is not None:
            raise ValueError(f"pass@k needs 0/1 outcomes; problem {i} has {bad!r} (binarize rewards first, e.g. r == 1.0)")
        counts.append(pass_at_k(len(r), int(sum(int(x) for x in r)), k))
    return float(np.mean(counts))


def mean_best_at_k(results: list[list[float]], k: int, seed: int = 42) -> float:
    return float(np.mean([best_at_k(r, k, seed=seed) for r in results]))


def eval_questions(model_id: str) -> int:
    """How many held-out questions chapters 3–5 evaluate on ``model_id`` (the notebooks' ``N_EVAL=None``):
    400 for the pocket model; 200 for a real model (SmolLM2, hub ids, folders), whose greedy answers cost
    ~1,000× the pocket model's arithmetic per token — 400 took 5.5 minutes per evaluation on 2 cores,
    and chapter 3 evaluates twice. 200 questions still resolve a 7-point difference (two standard
    errors of a 70% accuracy). SMOKE uses 40 on every model."""
    return 400 if model_id == "pocket" else 200


# Chapter 4 measures held-out accuracy during its run (every ``eval_every`` steps) on the first IN_RUN_EVAL
# held-out questions — half a full evaluation's cost at each of its 12 checks — and chapter 5 compares
# TRL with chapter 4 there, at the same step, on the same questions (``in_run_questions``).
IN_RUN_EVAL = 200


def in_run_questions(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The held-out questions chapter 4 evaluates during its run: the first :data:`IN_RUN_EVAL`."""
    return entries[:IN_RUN_EVAL]


def evaluate_policy(model, tok, entries: list[dict[str, Any]], *, max_new_tokens: int = 128, batch_size: int = 100,
                    progress: bool = True, keep_completions: bool = False) -> dict[str, Any]:
    """Greedy accuracy, format rate and mean completion length (tokens) over ``entries``.

    ``keep_completions``: also return every completion's text (``"completions"``, in the order
    of ``entries``), for a look at *what* the policy wrote, not only whether it scored."""
    from tqdm.auto import tqdm

    from kimina_edu.rewards import correctness_reward, extract_answer, format_reward
    from kimina_edu.rollouts import chat_prompt, generate

    correct = fmt = n_tokens = 0
    samples, texts = [], []
    for i in tqdm(range(0, len(entries), batch_size), desc="evaluate", disable=not progress):
        chunk = entries[i : i + batch_size]
        _, completions = generate(model, tok, [chat_prompt(tok, e["question"]) for e in chunk], max_new_tokens=max_new_tokens)
        for entry, ids in zip(chunk, completions):
            text = tok.decode(ids, skip_special_tokens=True)
            correct += correctness_reward(extract_answer(text), entry)
            fmt += format_reward(text)
            n_tokens += len(ids)
            if keep_completions:
                texts.append(text)
            if len(samples) < 8:
                samples.append({"question": entry["question"], "completion": text})
    n = max(len(entries), 1)
    out = {"accuracy": correct / n, "format_rate": fmt / n, "mean_length": n_tokens / n, "n": len(entries),
           "samples": samples}
    if keep_completions:
        out["completions"] = texts
    return out
