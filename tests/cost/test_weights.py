"""The weights kind's question (iobench/cost/kinds/weights.py): time to weights in memory, and
a month of starts priced by hand."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from iobench.cost.kinds import weights
from iobench.cost.measure import Pricing


def test_a_month_of_starts_by_hand() -> None:
    row = SimpleNamespace(time_to_ready_s=36.0, weights_bytes=7e9, volume_read_bytes=7.2e9)
    # EFS Elastic's charges: $0.30/GB-month kept, $0.03/GB read; an H100 at $2.69/h
    p = Pricing(usd_per_hour=2.69, starts_per_month=30, gb_month_usd=0.30, read_usd_per_gb=0.03)
    m = weights.month(row, p)
    assert m is not None
    assert m.per_start == pytest.approx(36 / 3600 * 2.69)  # $0.0269 a start
    assert m.gpu == pytest.approx(30 * 0.0269)
    assert m.reads == pytest.approx(7.2 * 0.03 * 30)  # the volume's own count of bytes read
    assert m.kept == pytest.approx(7 * 0.30)
    assert m.total == pytest.approx(0.807 + 6.48 + 2.1)
    assert weights.read_gb(SimpleNamespace(weights_bytes=5e9)) == 5.0  # off the lab: the files
    assert weights.month(row, Pricing()) is None  # no price


def test_the_measure_is_the_time_and_its_month_the_gpu_s() -> None:
    rows = [SimpleNamespace(time_to_ready_s=12.0)]
    m = weights.question(rows, Pricing(usd_per_hour=3.6, starts_per_month=30))  # type: ignore[arg-type]
    assert (m.name, m.unit, m.timed, m.better) == ("time to weights in memory", "s", True, "faster")
    assert m.of(rows[0]) == 12.0  # type: ignore[arg-type]
    assert m.usd_per_month is not None and m.usd_per_month(12.0) == pytest.approx(0.36)
    assert weights.question(rows, Pricing()).usd_per_month is None  # type: ignore[arg-type]
