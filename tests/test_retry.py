"""The one backoff rule both clients retry with (kimina_edu/retry.py): it grows, it is capped, its
jitter stays within the spread, and a retrying call still ends at its deadline."""

from __future__ import annotations

import random
import time

import httpx
import pytest

from kimina_edu.lean.client import LeanVerifier
from kimina_edu.retry import backoff_delay


class Fixed(random.Random):
    """An rng whose every draw is ``u``: the spread's ends become exact."""

    def __init__(self, u: float):
        super().__init__()
        self.u = u

    def random(self) -> float:
        return self.u


def test_the_nominal_delay_doubles_with_each_attempt():
    mid = Fixed(0.5)  # spread (0.5, 1.5): factor exactly 1
    assert [backoff_delay(a, 0.25, rng=mid) for a in range(5)] == [0.25, 0.5, 1.0, 2.0, 4.0]


def test_the_cap_bounds_every_wait_and_a_long_retry_loop_does_not_overflow():
    top = Fixed(0.999999)
    assert backoff_delay(3, 1.0, cap=5.0, spread=(0.5, 1.0), rng=top) <= 5.0
    assert backoff_delay(10_000, 1.0, cap=10.0, spread=(0.5, 1.0), rng=top) <= 10.0
    assert backoff_delay(10_000, 1.0) > 1e18  # no cap: huge, but a float, not an OverflowError


@pytest.mark.parametrize(("spread", "attempt"), [((0.5, 1.5), 0), ((0.5, 1.5), 3), ((0.5, 1.0), 2), ((1.0, 1.0), 4)])
def test_jitter_stays_within_the_spread_and_covers_it(spread, attempt):
    rng = random.Random(0)
    nominal = 0.1 * 2**attempt
    delays = [backoff_delay(attempt, 0.1, spread=spread, rng=rng) for _ in range(2000)]
    low, high = spread[0] * nominal, spread[1] * nominal
    assert all(low <= d <= high for d in delays)
    if spread[0] < spread[1]:  # spread out, not one value: both ends of the range are reached
        width = high - low
        assert min(delays) < low + 0.05 * width and max(delays) > high - 0.05 * width


@pytest.mark.parametrize(("attempt", "base", "kw"), [(-1, 1.0, {}), (0, -1.0, {}), (0, 1.0, {"cap": -1.0}),
                                                     (0, 1.0, {"spread": (1.0, 0.5)})])
def test_nonsense_is_refused(attempt, base, kw):
    with pytest.raises(ValueError):
        backoff_delay(attempt, base, **kw)


def test_a_verifier_backing_off_from_a_busy_server_still_ends_at_its_deadline():
    busy = httpx.MockTransport(lambda request: httpx.Response(429, json={"detail": "busy"}))
    verifier = LeanVerifier("http://lean.test", transport=busy, retries=50, backoff=100.0, line_scheme="absolute")
    start = time.perf_counter()
    verdicts = verifier.verify(["import Init\n\ntheorem t : True := trivial"] * 3, deadline=0.5)
    took = time.perf_counter() - start
    assert [v.status for v in verdicts] == ["timeout_error"] * 3 and "deadline" in verdicts[0].error
    assert took < 4.5, took  # one backoff wait alone is 5-10 s
