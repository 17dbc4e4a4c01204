"""What a lab volume delivered against what its options allow (iobench/lab/delivered.py):
the method with hand-made numbers, then real volumes — one whose rate limit holds, one whose
rate the lab cannot reach, and `lab status` saying which."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.lab import needs_fuse

from iobench.cli.lab import status_lines
from iobench.lab import manage
from iobench.lab.delivered import Delivery, Gauge, Meter, deliveries
from iobench.units import lab_gave


def test_a_meter_counts_busy_time_once_however_many_requests_overlap() -> None:
    m = Meter()
    m.begin(10.0)
    m.begin(10.5)  # a second request while the first is in
    m.end(10.0, 11.0, 1_000_000, 0.01)
    assert m.to_dict(11.2)["busy_s"] == pytest.approx(1.2)  # still one in: open to `now`
    m.end(10.5, 12.0, 1_000_000, 0.01)
    m.begin(20.0)  # idle from 12 to 20: not busy
    m.end(20.0, 20.5, 500_000, 0.005)
    got = m.to_dict(30.0)
    assert got == {
        "requests": 3,
        "bytes": 2_500_000,
        "busy_s": pytest.approx(2.5),
        "span_s": pytest.approx(3.0),  # 1 + 1.5 + 0.5: 1.2 requests in flight on average
        "pipe_s": pytest.approx(0.025),
    }


def test_what_the_options_allow_follows_the_rate_limit_and_the_latency() -> None:
    # 100 MB in 1 MB requests, one at a time, under a 100 MB/s limit with no latency: the
    # limit is what it allows; delivering 50 MB/s, the lab held it at half
    d = Delivery("write", 100, 100_000_000, 2.0, 2.0, 1.0, 0.0)
    assert d.mb_per_s == pytest.approx(50) and d.allowed_mb_per_s == pytest.approx(100)
    assert lab_gave(d.mb_per_s, d.allowed_mb_per_s, "nfs-lan") == (
        "the lab gave 50 of the preset's 100 MB/s"
    )
    # one stream of 1 MiB writes at EFS's 2.7 ms under Elastic's 1,573 MB/s per client: the
    # latency holds it at ~311 MB/s, and 300 MB/s delivered is not the lab's doing
    mib = 2**20
    n = 400
    busy = n * mib / 300e6
    d = Delivery("write", n, n * mib, busy, busy, n * mib / 1573e6, 0.0027)
    assert d.allowed_mb_per_s == pytest.approx(mib / (0.0027 + mib / 1573e6) / 1e6, rel=1e-6)
    assert 305 < d.allowed_mb_per_s < 315 and lab_gave(d.mb_per_s, d.allowed_mb_per_s) is None
    # four in flight: four times that, up to the limit
    d4 = Delivery("write", n, n * mib, busy, 4 * busy, n * mib / 1573e6, 0.0027)
    assert d4.allowed_mb_per_s == pytest.approx(4 * d.allowed_mb_per_s)
    # no rate limit, or too little moved: nothing to judge
    assert Delivery("read", 10, 10**9, 1.0, 1.0, None, 0.001).allowed_mb_per_s is None
    assert Delivery("read", 1, 10**6, 1.0, 1.0, 0.01, 0.0).allowed_mb_per_s is None


def test_deliveries_between_two_snapshots_of_the_stats() -> None:
    def stats(nbytes: int, busy: float, pipe: float) -> dict:
        meter = {"requests": nbytes // 10**6, "bytes": nbytes, "busy_s": busy, "span_s": busy}
        return {
            "options": {"mb_per_s": 100.0, "data_latency_ms": 0.0, "write_latency_ms": None},
            "data": {"read": {**meter, "pipe_s": pipe}, "write": {}},
        }

    got = deliveries(stats(300 * 10**6, 5.0, 3.0), stats(100 * 10**6, 3.0, 1.0))
    assert got["read"].bytes == 200 * 10**6 and got["read"].mb_per_s == pytest.approx(100)
    assert got["read"].allowed_mb_per_s == pytest.approx(100)  # limit-bound: faithful
    assert got["write"].bytes == 0 and got["write"].mb_per_s is None
    no_limit = stats(10**9, 1.0, 0.0)
    no_limit["options"] = {}
    assert deliveries(no_limit)["read"].pipe_s is None  # nothing promised, nothing judged
    assert deliveries({"schema": 2, "ops": {}}) == {}  # a daemon that kept no meters


def _streams(folder: Path, n: int, mb: int) -> None:
    block = os.urandom(1 << 20)

    def write(i: int) -> None:
        with open(folder / f"s{i}", "wb", buffering=0) as fh:
            for _ in range(mb * 10**6 // len(block)):
                fh.write(block)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)


@pytest.mark.lab
@pytest.mark.timing
@needs_fuse
def test_a_volume_at_its_limit_delivers_it_and_one_above_the_lab_says_so(
    volume: Callable[..., Path],
) -> None:
    """40 MB/s: the lab delivers the limit (no word). A million MB/s: no lab reaches it, and
    the gauge of the trial and `lab status` say what the lab gave instead."""
    capped = volume("capped", mb_per_s=40)
    gauge = Gauge([capped])
    before = gauge.snapshot()
    _streams(capped, 2, 20)
    got = gauge.since(before)
    assert got is not None and got.mountpoint == str(capped) and got.write is not None
    assert got.write.bytes >= 40 * 10**6 * 0.99
    assert got.write.mb_per_s == pytest.approx(40, rel=0.15)
    assert got.write.allowed_mb_per_s == pytest.approx(40, rel=0.05)
    assert lab_gave(got.write.mb_per_s, got.write.allowed_mb_per_s) is None

    fast = volume("fast", mb_per_s=1e6)
    gauge = Gauge([fast, capped])  # the one that moved the most bytes is the one reported
    before = gauge.snapshot()
    _streams(fast, 4, 64)
    got = gauge.since(before)
    assert got is not None and got.mountpoint == str(fast) and got.write is not None
    assert got.write.allowed_mb_per_s == pytest.approx(1e6, rel=0.01)
    assert got.write.mb_per_s is not None and got.write.mb_per_s < 2e5
    said = lab_gave(got.write.mb_per_s, got.write.allowed_mb_per_s)
    assert said is not None and "of the volume's " in said, said
    time.sleep(0.6)  # the daemon's next refresh of its live stats
    lines = status_lines([s for s in manage.status() if s.mountpoint == str(fast)])
    assert lines[1].startswith("  writes: ") and "the lab gave" in lines[1], lines
