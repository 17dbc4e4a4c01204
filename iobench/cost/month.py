"""What a start-up strategy costs over a pod's month: GPU time idle at every start plus what it
keeps on the volume — pure functions, redone by hand in docs/strategies.md.

Model, per strategy, for ``N`` starts a month (N >= 1; the month holds the first start):

* idle seconds   = first + (N - 1) x restart
* GPU dollars    = idle seconds / 3600 x the pod's price per hour
* storage        = GB kept on the volume x $/GB-month  (+ (N - 1) x GB read at a restart x
  $/GB read, for volumes that bill reads, e.g. EFS Elastic Throughput)
* total          = GPU dollars + storage

Each total is a line in N (``intercept + slope x N``), so two strategies cross at most once:
the break-even ``N* = (intercept_b - intercept_a) / (slope_a - slope_b)``. The recommendation is
the cheapest total at the user's N (ties: the faster restart). Storage presets live in
``iobench/cost/storage_prices.csv`` with source and date, like the GPU prices.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from iobench.cost.prices import Prices, format_usd
from iobench.errors import UsageError

_GB = 1e9


@dataclass(frozen=True)
class LifeFigures:
    """What one strategy measured: seconds to ready at each event, bytes it keeps and reads."""

    strategy: str
    first_s: float
    restart_s: float
    stored_bytes: float = 0.0  # kept on the volume between starts
    restart_read_bytes: float = 0.0  # read from the volume by one restart
    entered: bool = False  # the user's own figures (--strategy-figure), never measured here


#: how an entered strategy's name reads wherever it is ranked
ENTERED = " (entered)"


def strategy_figure(text: str) -> LifeFigures:
    """``NAME=FIRST_S,RESTART_S[,GB_KEPT]`` (``--strategy-figure``: a snapshot restore or
    FlashBoot measured elsewhere) as figures ranked beside the measured ones, marked entered."""
    name, eq, values = str(text).partition("=")
    name = name.strip()
    parts = [v.strip() for v in values.split(",")] if eq else []
    if not name or not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise UsageError(
            f"--strategy-figure {text!r}: NAME=FIRST_S,RESTART_S[,GB_KEPT], the name in letters, "
            "digits, '-', '_' or '.' (e.g. flashboot=40,0.6,2)"
        )
    if len(parts) not in (2, 3):
        raise UsageError(
            f"--strategy-figure {text!r}: NAME=FIRST_S,RESTART_S[,GB_KEPT] (e.g. flashboot=40,0.6,2)"
        )
    try:
        numbers = [float(p) for p in parts]
    except ValueError:
        raise UsageError(f"--strategy-figure {text!r}: seconds and GB are numbers") from None
    if not all(math.isfinite(x) and x >= 0 for x in numbers):
        raise UsageError(f"--strategy-figure {text!r}: seconds and GB are 0 or more")
    first, restart, gb = (*numbers, 0.0)[:3]
    return LifeFigures(name + ENTERED, first, restart, gb * _GB, 0.0, entered=True)


@dataclass(frozen=True)
class MonthlyCost:
    """One strategy's month at ``starts`` starts."""

    strategy: str
    starts: float
    idle_s: float
    gpu_usd: float
    storage_usd: float  # keeping plus reading
    total_usd: float


@dataclass(frozen=True)
class Recommendation:
    """The cheapest strategy at the user's N, the runner-up, and where they swap."""

    starts: float
    ranking: tuple[MonthlyCost, ...]  # cheapest first
    break_even: float | None  # starts a month where best and runner-up cost the same

    @property
    def best(self) -> MonthlyCost:
        return self.ranking[0]

    @property
    def runner_up(self) -> MonthlyCost | None:
        return self.ranking[1] if len(self.ranking) > 1 else None


def check_starts(starts: float) -> float:
    """``--starts`` must be a finite number of at least 1 (a month holds the first start)."""
    if (
        isinstance(starts, bool)
        or not isinstance(starts, (int, float))
        or not math.isfinite(starts)
    ):
        raise UsageError(f"--starts must be a number, not {starts!r}")
    if starts < 1:
        raise UsageError(f"--starts must be at least 1 start a month (got {starts:g})")
    return float(starts)


def idle_seconds(f: LifeFigures, starts: float) -> float:
    """Seconds the GPU waits in a month: the first start, then N - 1 restarts."""
    return f.first_s + (check_starts(starts) - 1) * f.restart_s


def _line(f: LifeFigures, p: Prices) -> tuple[float, float]:
    """(intercept, slope) of the monthly total as a function of N."""
    per_restart = (
        f.restart_s / 3600 * p.gpu_usd_per_hour + f.restart_read_bytes / _GB * p.read_usd_per_gb
    )
    first = f.first_s / 3600 * p.gpu_usd_per_hour
    keep = f.stored_bytes / _GB * p.storage_usd_per_gb_month
    return first - per_restart + keep, per_restart


def monthly(f: LifeFigures, starts: float, p: Prices) -> MonthlyCost:
    """The month of strategy ``f`` at ``starts`` starts."""
    idle = idle_seconds(f, starts)
    gpu = idle / 3600 * p.gpu_usd_per_hour
    storage = (
        f.stored_bytes / _GB * p.storage_usd_per_gb_month
        + (starts - 1) * f.restart_read_bytes / _GB * p.read_usd_per_gb
    )
    return MonthlyCost(f.strategy, float(starts), idle, gpu, storage, gpu + storage)


def break_even(a: LifeFigures, b: LifeFigures, p: Prices) -> float | None:
    """Starts a month (>= 1) at which ``a`` and ``b`` cost the same; None if they never cross."""
    ia, sa = _line(a, p)
    ib, sb = _line(b, p)
    if math.isclose(sa, sb, rel_tol=1e-12, abs_tol=1e-15):
        return None
    n = (ib - ia) / (sa - sb)
    return n if n >= 1 else None


def recommend(figures: list[LifeFigures], starts: float, p: Prices) -> Recommendation:
    """Rank the strategies by monthly total at ``starts`` (ties: faster restart, then name)."""
    if not figures:
        raise UsageError("no strategy figures to compare")
    starts = check_starts(starts)
    by_name = {f.strategy: f for f in figures}
    costs = sorted(
        (monthly(f, starts, p) for f in figures),
        key=lambda c: (round(c.total_usd, 9), by_name[c.strategy].restart_s, c.strategy),
    )
    even = (
        break_even(by_name[costs[0].strategy], by_name[costs[1].strategy], p)
        if len(costs) > 1
        else None
    )
    return Recommendation(starts, tuple(costs), even)


def crossings(
    figures: list[LifeFigures], p: Prices, lo: float = 1, hi: float = 1000
) -> list[tuple[float, str, str, float]]:
    """Every pair's crossing inside [lo, hi]: (starts, strategy a, strategy b, monthly $ there)."""
    found = []
    for i, a in enumerate(figures):
        for b in figures[i + 1 :]:
            n = break_even(a, b, p)
            if n is not None and lo <= n <= hi:
                found.append((n, a.strategy, b.strategy, monthly(a, n, p).total_usd))
    return sorted(found)


# ---- storage presets -----------------------------------------------------------------------


# ---- words ---------------------------------------------------------------------------------


def summary_lines(rec: Recommendation, figures: list[LifeFigures]) -> list[str]:
    """The recommendation as lines a report prints (cheapest first, then the break-even)."""
    by_name = {f.strategy: f for f in figures}
    n = rec.starts
    lines = [f"At {n:g} starts a month:"]
    for c in rec.ranking:
        f = by_name[c.strategy]
        lines.append(
            f"  {c.strategy}: {format_usd(c.total_usd)}/month (GPU idle {format_usd(c.gpu_usd)}, "
            f"storage {format_usd(c.storage_usd)}; first start {f.first_s:.1f} s, restart {f.restart_s:.1f} s)"
        )
    best, second = rec.best, rec.runner_up
    lines.append(f"Cheapest: {best.strategy}.")
    if second is not None:
        if rec.break_even is None:
            lines.append(f"It stays cheaper than {second.strategy} at every number of starts.")
        else:
            fewer = best.strategy if rec.break_even > n else second.strategy
            more = second.strategy if fewer == best.strategy else best.strategy
            lines.append(
                f"Break-even with {second.strategy}: {rec.break_even:.1f} starts a month "
                f"({fewer} below it, {more} above)."
            )
    return lines
