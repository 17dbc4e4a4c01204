"""The lab's rate limits with literal numbers: the token bucket and the byte link with credits."""

from __future__ import annotations

import math

import pytest

from iobench.system.shaping import ByteLink, TokenBucket, metered


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


def test_byte_link_earns_at_the_baseline_all_the_time_and_spends_per_byte() -> None:
    """EFS's rule: the balance changes at baseline - rate (burst 100 B/s, baseline 10 B/s)."""
    link = ByteLink(baseline_rate=10.0, burst_rate=100.0, credits=50.0, start=0.0)
    assert link.reserve(0.0, 50) == pytest.approx(0.5)  # at the burst rate
    assert link.credits == pytest.approx(50 - 50 + 10 * 0.5)  # spent 50, earned 5 meanwhile
    # 5 B of credit last 5 / 0.9 B at the burst rate, the rest moves at the baseline
    assert link.reserve(0.5, 10) == pytest.approx(0.5 + (5 / 0.9) / 100 + (10 - 5 / 0.9) / 10)
    assert link.credits == pytest.approx(0.0)
    assert link.reserve(1.0, 10) == pytest.approx(2.0)  # at zero: the baseline, balance stays 0
    assert link.credits == pytest.approx(0.0)
    assert link.balance_at(3.0) == pytest.approx(10.0)  # 1 s idle earns 10 B
    link.reserve(1000.0, 1)  # a long idle: the balance is capped at its cap (here the start)
    assert link.credits == pytest.approx(50.0 - 0.9, abs=0.01)


def test_byte_link_balance_can_start_below_its_cap() -> None:
    link = ByteLink(baseline_rate=10.0, burst_rate=100.0, credits=0.0, cap=1000.0, start=0.0)
    assert link.reserve(0.0, 10) == pytest.approx(1.0)  # no credit yet: the baseline
    assert link.balance_at(51.0) == pytest.approx(500.0)  # then it earns past its start
    assert link.balance_at(1e6) == pytest.approx(1000.0)


def test_byte_link_follows_aws_worked_example_of_a_day_at_a_scaled_clock() -> None:
    """AWS: a 100 GiB Bursting file system earns 432,000 MiB a day (its 5 MiB/s baseline),
    which is 72 minutes a day at 100 MiB/s. Each simulated day a greedy reader bursts until
    the rate falls, then the volume idles to the day's end; from the second day on (the
    first one starts with a day's earnings and no burst before it) it bursts 72 minutes."""
    mib, day = 2**20, 86400.0
    link = ByteLink(432_000 * mib / day, 100 * mib, credits=0.0, cap=2.1 * 2**40, start=0.0)
    minutes = []
    for d in range(1, 5):
        t = t0 = d * day
        while True:  # 16 MiB reads until one moves at under half the burst rate
            end = link.reserve(t, 16 * mib)
            if 16 * mib / (end - t) < 50 * mib:
                break
            t = end
        minutes.append((t - t0) / 60)
    assert minutes[1:] == pytest.approx([72.0] * 3, abs=0.5)


def test_efs_meters_small_operations_up_and_reads_at_a_third() -> None:
    assert metered(4096, write=True) == 32 * 1024  # a data operation counts at least 32 KiB
    assert metered(1 << 20, write=True) == 1 << 20
    assert metered(3 << 20, write=False) == pytest.approx(1 << 20)  # reads at one third
    assert metered(100, write=False) == pytest.approx(32 * 1024 / 3)
    assert metered(0, write=True, data=False) == 4096  # a create: 4 KiB
    assert metered(0, write=False, data=False) == pytest.approx(4096 / 3)  # a lookup: a read


def test_byte_link_long_run_rate_is_bounded_by_credits_plus_baseline() -> None:
    link = ByteLink(baseline_rate=1e6, burst_rate=10e6, credits=5e6, start=0.0)
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
