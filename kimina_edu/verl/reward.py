"""The reward entry point verl calls: ``reward.custom_reward_function.path=<this file>``,
``.name=compute_score`` (verl 0.9.1 reads ``config.reward.custom_reward_function`` in
``verl/trainer/ppo/reward.py::get_custom_reward_fn``; the old top-level
``custom_reward_function`` key is still accepted by the config but only the experimental
fully-async entry point migrates it — with ``main_ppo`` it is silently ignored).

verl's reward loop calls ``compute_score`` once per response (the ``naive`` manager, in a
thread pool), so each call verifies one proof; the server batches across concurrent calls.
The dict's keys become ``reward_extra_info``: ``acc`` drives ``val-core`` and pass@k,
``pred`` enables ``maj@k``, ``tool_feedback`` feeds the second-turn cache.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from kimina_edu.lean.client import LeanVerifier
from kimina_edu.lean.reward import score_batch

_LOCK = threading.Lock()
_VERIFIER: LeanVerifier | None = None


def get_verifier() -> LeanVerifier:
    """The process-wide verifier verl's reward workers share, built from the environment on first use:
    ``LEAN_SERVER_API_URL`` / ``LEAN_SERVER_API_KEY`` (as kimina-client reads them),
    ``LEAN_SERVER_MAX_REPLS`` (the server's pool, sizes the client), ``LEAN_SERVER_TIMEOUT``
    (the recipe's 60 s) and ``LEAN_SERVER_LINE_SCHEME`` (``relative``/``absolute``; unset: probed
    once per server)."""
    global _VERIFIER
    with _LOCK:
        if _VERIFIER is None:
            scheme = os.environ.get("LEAN_SERVER_LINE_SCHEME") or None
            _VERIFIER = LeanVerifier(timeout=int(os.environ.get("LEAN_SERVER_TIMEOUT", "60")), batch_size=1,
                                     line_scheme=scheme)
        return _VERIFIER


def reset_verifier() -> None:
    """Forget the shared verifier (and probed line schemes): the next call reads the environment
    again — after pointing ``LEAN_SERVER_API_URL`` at another server, for instance."""
    global _VERIFIER
    from kimina_edu.lean.client import forget_line_schemes

    with _LOCK:
        _VERIFIER = None
    forget_line_schemes()


def _row(result: dict[str, Any], response: str) -> dict[str, Any]:
    return {"score": float(result["score"]), "acc": float(result["acc"]), "pred": result["pred"] or "",
            "format_error": result["format_error"], "tool_feedback": result["feedback"], "response": response,
            "status": result["status"]}  # a string: verl's metrics skip it, the notebooks show it


def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None,
                  **kwargs) -> dict[str, Any]:
    """``score`` = format ok × Lean valid; ``acc`` = Lean valid alone (recipe ``reward.py``)."""
    return compute_score_batch([data_source], [solution_str], [ground_truth], [extra_info or {}], **kwargs)[0]


def compute_score_batch(data_sources: list[str], solution_strs: list[str], ground_truths: list[str],
                        extra_infos: list[dict], verifier: LeanVerifier | None = None, **kwargs) -> list[dict[str, Any]]:
    """The batch form: one verifier call for many responses."""
    for i, info in enumerate(extra_infos):
        if not isinstance(info, dict) or "formal_statement" not in info:
            raise ValueError(f"item {i}: extra_info lacks 'formal_statement' — build the parquet with "
                             "kimina_edu.verl.data.prepare_data")
    prompts = [list(info.get("prompt") or []) for info in extra_infos]
    results = score_batch(list(solution_strs), [info["formal_statement"] for info in extra_infos],
                          verifier or get_verifier(), prompts if any(prompts) else None)
    return [_row(r, s) for r, s in zip(results, solution_strs)]
