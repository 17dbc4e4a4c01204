"""Latency distributions (iobench/predict/latency.py) with hand-made samples, and their
JSON in fio's words, read back."""

from __future__ import annotations

import pytest

from iobench.predict.latency import PERCENTILES, Latency


def test_percentiles_follow_the_project_s_one_rule() -> None:
    # 1..100 µs: linear between order statistics (numpy's default), as stats.percentile
    lat = Latency.of([i * 1000 for i in range(100, 0, -1)])  # any order
    assert (lat.count, lat.min_ns, lat.max_ns) == (100, 1000, 100_000)
    assert lat.percentiles_ns == pytest.approx((50_500, 95_050, 99_010, 99_901))
    assert lat.mean_ns == pytest.approx(50_500)
    assert lat.stddev_ns == pytest.approx(29_011.49, rel=1e-6)  # the sample standard deviation
    assert lat.p50_ms == pytest.approx(0.0505) and lat.p99_ms == pytest.approx(0.09901)
    assert lat.words() == ("p50 0.051  p95 0.095  p99 0.099  p99.9 0.100  max 0.100 ms (n=100)")
    none = Latency.of([])
    assert none.count == 0 and none.words() == "not measured"
    assert Latency.of([7]).percentiles_ns == (7.0,) * len(PERCENTILES)


def test_the_json_block_is_fio_s_and_reads_back() -> None:
    lat = Latency.of([1_000_000, 1_100_000, 1_200_000, 9_000_000])
    block = lat.clat_ns()
    assert block == {
        "min": 1_000_000,
        "max": 9_000_000,
        "mean": 3_075_000.0,
        "stddev": 3_950_843.8,  # sqrt(46.8275 / 3) ms, the sample standard deviation
        "N": 4,
        "percentile": {
            "50.000000": 1_150_000,
            "95.000000": 7_830_000,
            "99.000000": 8_766_000,
            "99.900000": 8_976_600,
        },
    }
    back = Latency.from_clat_ns(block)
    assert back is not None and back.count == 4 and back.p99_ms == pytest.approx(8.766)
    # read back from a run folder: untrusted
    for bad in (None, {}, {**block, "N": "x"}, {**block, "percentile": {}},
                {**block, "max": float("nan")}, {**block, "min": -1}):  # fmt: skip
        assert Latency.from_clat_ns(bad) is None, bad
