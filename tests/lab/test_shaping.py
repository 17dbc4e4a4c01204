"""The lab's rate limits with literal numbers: the token bucket and the byte link with credits."""

from __future__ import annotations

import math

import pytest

from iobench.system.shaping import ByteLink, TokenBucket


def test_token_bucket_spaces_requests_after_its_depth() -> None:
    bucket = TokenBucket(rate=10.0, depth=2.0)
    start = bucket._stamp
    assert bucket.reserve(start) == start  # two tokens in the bucket
    assert bucket.reserve(start) == start
    assert bucket.reserve(start) == pytest.approx(start + 0.1)
    assert bucket.reserve(start) == pytest.approx(start + 0.2)
    # after a long idle period the bucket is full again (but not fuller than its depth)
    later = start + 10.0
    assert bucket.reserve(later) == later
    assert bucket.reserve(later) == later
    assert bucket.reserve(later) == pytest.approx(later + 0.1)


def test_byte_link_without_credits_is_a_serial_pipe() -> None:
    link = ByteLink(baseline_rate=10.0)
    assert link.reserve(100.0, 10) == pytest.approx(101.0)
    assert link.reserve(100.0, 10) == pytest.approx(102.0)  # queued behind the first
    assert link.reserve(105.0, 5) == pytest.approx(105.5)  # idle link: starts now


def test_byte_link_bursts_until_credits_are_spent_then_refills_only_when_idle() -> None:
    link = ByteLink(baseline_rate=10.0, burst_rate=100.0, credits=50.0)
    assert link.reserve(0.0, 50) == pytest.approx(0.5)  # 50 B of credit at 100 B/s
    assert link.credits == 0
    assert link.reserve(0.5, 10) == pytest.approx(1.5)  # baseline now
    assert link.reserve(1.5, 10) == pytest.approx(2.5)  # busy link earns nothing
    # 1 s idle earns 10 B of credit (the baseline's unused rate): 10 B at burst speed
    assert link.reserve(3.5, 20) == pytest.approx(3.5 + 10 / 100 + 10 / 10)
    # credits never exceed the initial balance
    link.reserve(1000.0, 1)
    assert link.credits == pytest.approx(49.0)


def test_byte_link_long_run_rate_is_bounded_by_credits_plus_baseline() -> None:
    link = ByteLink(baseline_rate=1e6, burst_rate=10e6, credits=5e6)
    t, moved = 0.0, 0
    while t < 20.0:  # a greedy writer with 1 ms gaps between 64 KiB requests
        t = link.reserve(t, 65536) + 0.001
        moved += 65536
    assert moved <= 5e6 + 1e6 * t + 65536
    assert moved >= 0.9 * (5e6 + 1e6 * t) - 10e6 * 0.001 * (t / 0.07)


def test_a_link_bucket_can_start_empty() -> None:
    bucket = TokenBucket(rate=10.0, depth=5.0, start_full=False)
    start = bucket._stamp
    assert bucket.reserve(start) == pytest.approx(start + 0.1)  # no free burst at t=0


@pytest.mark.parametrize("rate", [0.0, -1.0, math.inf, math.nan])
def test_rates_must_be_positive_and_finite(rate: float) -> None:
    with pytest.raises(ValueError, match="positive and finite"):
        TokenBucket(rate)
    with pytest.raises(ValueError, match="positive and finite"):
        ByteLink(rate)
