"""Evaluation: a policy's held-out greedy accuracy (chapters 3–5), and for provers pass@k
(unbiased) and the course's restatement of verl's bootstrap best@k (chapter 9).

pass@k (Chen et al. 2021, "Evaluating Large Language Models Trained on Code"): with n samples
of which c are correct, the probability that k samples drawn *without* replacement contain a
correct one — ``1 - C(n-c, k) / C(n, k)``, computed as a stable product.

best@k, restated here from verl's ``metric_utils.py::bootstrap_metric`` (verl itself is not imported):
draw k of the n samples *with* replacement, take the best, average over 1000 bootstrap draws (seed 42).
Sampling with replacement can pick the same failure twice, so best@k ≤ pass@k in expectation; at k = n
the gap is largest.
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
    """The course's restatement of verl's bootstrap best@k for one problem: the mean over draws of the max of
    k samples drawn with replacement."""
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


def sampled_outcomes(model, tok, entries: list[dict[str, Any]], *, n: int, max_new_tokens: int, temperature: float,
                     top_p: float = 1.0, min_p: float = 0.0, seed: int = 0, batch_questions: int = 16,
                     matmul_dtype=None) -> list[list[int]]:
    """Each question answered ``n`` times by sampling (``temperature`` 0: greedy), as 0/1 outcomes — what
    :func:`mean_pass_at_k` takes. With a GRPO run's own sampler settings and ``n`` its group size, pass@n
    is how often a group holds a right answer: what RL can reinforce, before it has learned anything."""
    from kimina_edu.rewards import correctness_reward, extract_answer
    from kimina_edu.rollouts import chat_prompt, generate

    outcomes: list[list[int]] = []
    for start in range(0, len(entries), batch_questions):
        chunk = entries[start:start + batch_questions]
        _, completions = generate(model, tok, [chat_prompt(tok, e["question"]) for e in chunk],
                                  max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, min_p=min_p,
                                  num_return_sequences=n, seed=seed + start, matmul_dtype=matmul_dtype)
        texts = tok.batch_decode(completions, skip_special_tokens=True)
        outcomes += [[int(correctness_reward(extract_answer(t), e) == 1.0) for t in texts[i * n:(i + 1) * n]]
                     for i, e in enumerate(chunk)]
    return outcomes


def scored(completions: list[str], entries: list[dict[str, Any]]) -> list[float]:
    """Each completion's correctness (1.0 or 0.0) against its entry, in order: the per-question scores a paired
    gain (``record.paired_gain``) compares."""
    from kimina_edu.rewards import correctness_reward, extract_answer

    if len(completions) != len(entries):
        raise ValueError(f"scored needs one completion per question, got {len(completions)} for {len(entries)}")
    return [correctness_reward(extract_answer(t), e) for t, e in zip(completions, entries)]


def eval_questions(model_id: str) -> int:
    """How many held-out questions chapters 3–5 evaluate on ``model_id`` (the notebooks' ``N_EVAL=None``):
    400 on every model, so that a gain of 8 points is about four standard errors of one evaluation (±2
    points at 80%) and its paired interval can clear zero. On SmolLM2 one evaluation of 400 costs minutes on a
    CPU (most before its warm-up, whose answers run to the token cap). SMOKE uses 40."""
    return 400


# Chapter 4 measures held-out accuracy during its run (every ``eval_every`` steps) on the first IN_RUN_EVAL
# held-out questions — half a full evaluation's cost at each of its 12 checks — and chapter 5 compares
# TRL with chapter 4 there, at the same step, on the same questions (``in_run_questions``).
IN_RUN_EVAL = 200


def in_run_questions(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The held-out questions chapter 4 evaluates during its run: the first :data:`IN_RUN_EVAL`."""
    return entries[:IN_RUN_EVAL]


# Bump when greedy decoding changes what it writes, or the key's meaning changes: cached evaluations from
# before are then not reused. 2: keyed by the weights the policy computes with (the base inside
# ``disable_adapter()``), not by its adapters' merged sums whatever their state.
EVAL_CACHE_VERSION = 2
# greedy evaluation multiplies in fp32 on every CPU: with bf16 matrices SmolLM2's greedy answers after a
# one-epoch warm-up scored 3.25 points lower on the same 400 held-out questions (95% interval −5.4 to −1.1;
# 90 of 400 answers written differently; benchmarks/LOG.md, 2026-12-06). Sampling keeps bf16: there the
# gap is measured and corrected every step (kimina_edu.trainer).
EVAL_MATMUL = "float32"


def _digest_tensors(digest, pairs) -> None:
    import torch

    for name, tensor in pairs:
        t = tensor.detach().to("cpu").contiguous()
        digest.update(f"{name}{tuple(t.shape)}{t.dtype}".encode())
        digest.update(t.view(-1).view(torch.uint8).numpy())


def evaluation_key(model, tok, entries: list[dict[str, Any]], max_new_tokens: int, batch_size: int) -> str:
    """What a greedy evaluation's result depends on, hashed: the weights the policy computes with
    (:func:`kimina_edu.merged_weights.effective_weights`: inside ``model.disable_adapter()`` the base,
    so the reference is never read back as the adapted policy), the decoder that runs them, the
    tokenizer and chat template, the questions and answers, the lengths, the batch (padding changes
    floating-point sums), the thread count (so does that), and on ``model.generate``'s path the
    model's generation config (it supplies every setting the call does not pass).

    The plain-torch decoder computes with exactly those merged weights; ``model.generate`` runs a PEFT
    policy's base and adapter matrices apart, so there the key also holds every raw tensor and whether
    the adapters are off: the same sums from another split round differently."""
    import hashlib
    import json

    import torch

    from kimina_edu import smalldecode
    from kimina_edu.merged_weights import effective_weights

    merged = smalldecode.supported(model) is None
    raw = not merged and hasattr(model, "peft_config")
    # model.generate reads settings the call does not pass (repetition_penalty…) from the model's own config
    config = None if merged else getattr(model, "generation_config", None)
    generation_settings = config.to_diff_dict() if hasattr(config, "to_diff_dict") else None
    digest = hashlib.sha256()
    vocab = tok.get_vocab() if hasattr(tok, "get_vocab") else None  # by content: two loads' paths may differ
    header = {"version": EVAL_CACHE_VERSION,
              "tokenizer": [sorted(vocab.items()) if vocab else None, getattr(tok, "eos_token_id", None),
                            getattr(tok, "pad_token_id", None), getattr(tok, "chat_template", None)],
              "max_new_tokens": max_new_tokens, "batch_size": batch_size, "threads": torch.get_num_threads(),
              "decoder": f"merged weights, {EVAL_MATMUL}" if merged else "model forward",
              "adapters_off": _adapters_off(model) if raw else None, "generation_config": generation_settings,
              "entries": entries}
    digest.update(json.dumps(header, sort_keys=True, default=str).encode())
    _digest_tensors(digest, effective_weights(model))
    if raw:
        _digest_tensors(digest, model.named_parameters())
    return digest.hexdigest()[:16]


def _adapters_off(model) -> list[bool]:
    """Each PEFT layer's switch, in order: ``disable_adapter()`` flips them all."""
    return [bool(m.disable_adapters) for m in model.modules() if hasattr(m, "disable_adapters")
            and not hasattr(m, "peft_config")]


def _cached_evaluation(path, n: int) -> dict[str, Any] | None:
    """A stored evaluation of ``n`` questions, or None (absent, or damaged: then it is recomputed)."""
    import json

    try:
        out = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        print(f"evaluate: the cached result {path} is unreadable; evaluating again")
        return None
    if not isinstance(out, dict) or out.get("n") != n or len(out.get("completions") or []) != n:
        print(f"evaluate: the cached result {path} does not match these {n} questions; evaluating again")
        return None
    return out


def evaluate_policy(model, tok, entries: list[dict[str, Any]], *, max_new_tokens: int = 128, batch_size: int = 100,
                    progress: bool = True, keep_completions: bool = False, cache: bool = True) -> dict[str, Any]:
    """Greedy accuracy, format rate and mean completion length (tokens) over ``entries``.

    ``keep_completions``: also return every completion's text (``"completions"``, in the order
    of ``entries``), for a look at *what* the policy wrote, not only whether it scored.

    ``cache``: greedy decoding is deterministic, so a result is kept in the course cache under
    :func:`evaluation_key` and an evaluation of the same weights on the same questions with the same
    settings is read back, with one line saying so — chapter 4's "before GRPO" is chapter 3's "after
    SFT" when the lengths agree (on SmolLM2, 3 minutes on 2 cores)."""
    import json
    import os

    from kimina_edu.runtime import cache_dir

    path = None
    if cache:
        path = cache_dir() / "eval" / f"{evaluation_key(model, tok, entries, max_new_tokens, batch_size)}.json"
        found = _cached_evaluation(path, len(entries))
        if found is not None:
            print(f"evaluate: {len(entries)} questions, read back from {path.parent} (the same weights, questions "
                  "and settings were evaluated before)")
            return found if keep_completions else {k: v for k, v in found.items() if k != "completions"}
    out = _evaluate(model, tok, entries, max_new_tokens=max_new_tokens, batch_size=batch_size, progress=progress)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(out))
            tmp.replace(path)
        except OSError as exc:
            print(f"evaluate: could not keep this result in {path.parent} ({exc.strerror}); it is not cached")
    return out if keep_completions else {k: v for k, v in out.items() if k != "completions"}


def _evaluate(model, tok, entries: list[dict[str, Any]], *, max_new_tokens: int, batch_size: int,
              progress: bool) -> dict[str, Any]:
    import torch
    from tqdm.auto import tqdm

    from kimina_edu.rewards import correctness_reward, extract_answer, format_reward
    from kimina_edu.rollouts import chat_prompt, generate

    correct = fmt = n_tokens = 0
    samples, texts = [], []
    for i in tqdm(range(0, len(entries), batch_size), desc="evaluate", disable=not progress):
        chunk = entries[i : i + batch_size]
        _, completions = generate(model, tok, [chat_prompt(tok, e["question"]) for e in chunk], max_new_tokens=max_new_tokens,
                                  matmul_dtype=getattr(torch, EVAL_MATMUL))
        for entry, ids in zip(chunk, completions):
            text = tok.decode(ids, skip_special_tokens=True)
            correct += correctness_reward(extract_answer(text), entry)
            fmt += format_reward(text)
            n_tokens += len(ids)
            texts.append(text)
            if len(samples) < 8:
                samples.append({"question": entry["question"], "completion": text})
    n = max(len(entries), 1)
    return {"accuracy": correct / n, "format_rate": fmt / n, "mean_length": n_tokens / n, "n": len(entries),
            "samples": samples, "completions": texts}
