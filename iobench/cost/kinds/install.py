"""The ``install`` kind's question: how long until the venv is ready, each start (the GPU bills
while it waits); with a start-up strategy (docs/strategies.md), what a month of starts costs:
the first start, then a restart at every other start, plus what the strategy keeps on the
volume and reads back (``iobench.cost.month``, the one monthly model)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from iobench.cost.measure import Measure, Pricing, month, month_range
from iobench.cost.month import LifeFigures, idle_seconds, monthly
from iobench.cost.prices import Prices
from iobench.rundir.kinds import install as rows
from iobench.rundir.records import TrialRow
from iobench.units import fmt_s

NAME = rows.NAME


def life(row: TrialRow) -> LifeFigures | None:
    """A strategy trial's first start and restart (None when it has no restart)."""
    restart = getattr(row, "restart_s", None)
    first = getattr(row, "first_start_s", None) or row.time_to_ready_s
    if restart is None or first is None:
        return None
    kept = getattr(row, "stored_bytes", None) or 0.0
    read = getattr(row, "restart_target_read_bytes", None) or 0.0
    return LifeFigures(row.config, float(first), float(restart), float(kept), float(read))


def question(trials: Sequence[Any], p: Pricing) -> Measure:
    """Time-to-ready; with restarts measured, a month of starts (dollars when priced)."""
    if not any(life(r) is not None for r in trials):
        usd = None
        if p.usd_per_hour is not None:
            hourly = p.usd_per_hour

            def usd(s: float) -> float:
                return s / 3600 * hourly * p.starts_per_month

        return Measure("time-to-ready", "s", lambda r: r.time_to_ready_s, fmt_s, usd_per_month=usd)
    starts = max(p.starts_per_month, 1.0)
    if p.usd_per_hour is None:
        return Measure(
            f"GPU idle over a month of {starts:g} starts", "s",
            lambda r: idle_seconds(f, starts) if (f := life(r)) else None, fmt_s,
            better="less GPU idle", worse="more GPU idle", verb="has", timed=False,
            best="least GPU idle", alike="as idle",
        )  # fmt: skip
    prices = Prices(p.usd_per_hour, p.gb_month_usd, p.read_usd_per_gb)
    return Measure(
        f"a month of {starts:g} starts", "$",
        lambda r: monthly(f, starts, prices).total_usd if (f := life(r)) else None,
        month, better="cheaper", worse="dearer", timed=False, fmt_range=month_range,
        best="cheapest", alike="as cheap",
    )  # fmt: skip


__all__ = ["NAME", "life", "question"]
