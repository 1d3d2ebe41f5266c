"""How long to wait before trying a request again: exponential backoff with jitter and a cap.

Both clients that talk to a server retry with it: the hosted SFT teacher
(:class:`kimina_edu.sft.OpenAITeacher`) and the Lean verifier
(:class:`kimina_edu.lean.client.LeanVerifier`). The delay doubles with each failed attempt so a
busy server gets room to recover; the jitter spreads clients that failed together over time so
they do not all come back at the same instant ("Exponential Backoff And Jitter", AWS
Architecture Blog, 2015). The cap bounds one wait; the whole call's deadline stays the caller's
(both callers cancel a retrying request when its deadline passes, sleeping or not).
"""

from __future__ import annotations

import math
import random


def backoff_delay(attempt: int, base: float, *, cap: float = math.inf, spread: tuple[float, float] = (0.5, 1.5),
                  rng: random.Random | None = None) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (0 for the first failure).

    ``min(cap, base · 2^attempt)`` times a factor drawn uniformly from ``spread``: the default
    ``(0.5, 1.5)`` centres the wait on the nominal delay; ``(0.5, 1.0)`` never waits longer than
    the cap. ``rng`` makes the draw reproducible in tests (default: the ``random`` module).
    """
    if attempt < 0 or base < 0 or cap < 0:
        raise ValueError(f"attempt, base and cap must be >= 0; got attempt={attempt}, base={base}, cap={cap}")
    low, high = spread
    if not 0 <= low <= high:
        raise ValueError(f"spread must be (low, high) with 0 <= low <= high; got {spread}")
    nominal = min(cap, base * 2.0 ** min(attempt, 64))  # 2^64 s is forever; a higher power would overflow
    return nominal * (low + (high - low) * (rng or random).random())
