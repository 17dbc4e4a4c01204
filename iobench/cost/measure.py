"""What makes one config better than another: a kind's question, answered for one run.

Each kind of work asks its own question (docs/verdicts.md): an install, how long until the
venv is ready (with a start-up strategy, what a month of starts costs); a training set, what a
month of training costs while the accelerator waits for data; a checkpoint, the share of GPU
time lost to saves and crashes at the best interval. ``Measure`` is that question answered for
one run: each trial's figure (lower is better), its unit and its words. One verdict engine
(``iobench.report.verdict``) and the early stop (``iobench.run.earlystop``) judge every kind by
its measure: the same intervals of the ratio, paired by round, the same tie rule.

``Pricing`` is what a measure is priced with: the pod's price, the volume's charges and the
assumptions (starts and training hours a month, the pod's time between failures), resolved
once from the run's options (``iobench.cost.idle.pricing``) and kept in meta.json, so that a
report rebuilt later says the same dollars.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from iobench.rundir.records import TrialRow
from iobench.units import fmt_times

#: a month of training: hours of accelerator compute at full use (a month of wall time)
TRAINING_HOURS = 730.0


@dataclass(frozen=True)
class Pricing:
    """The prices and assumptions a measure is priced with (every figure plain numbers)."""

    usd_per_hour: float | None = None  # the pod's, all its GPUs (None: no price known)
    label: str = ""  # where the price came from, printed beside every dollar
    starts_per_month: float = 30.0
    training_hours: float = TRAINING_HOURS
    mtbf_hours: float = 24.0
    au_target: float = 0.9
    every_minutes: float | None = None
    storage: str = ""  # the volume's price preset ("" none)
    gb_month_usd: float = 0.0  # the volume's charge per GB stored a month
    read_usd_per_gb: float = 0.0  # its charge per GB read (EFS Elastic)
    written_usd_per_gb: float | None = None  # --storage-usd-per-gb: per GB written at a start

    @property
    def priced(self) -> bool:
        return self.usd_per_hour is not None


@dataclass(frozen=True)
class Measure:
    """One run's question: each trial's figure (lower is better) and how to say it."""

    name: str  # "time-to-ready", "a month of training", "GPU time lost"
    unit: str  # "s", "$", "GPU-h", "share"
    value: Callable[[TrialRow], float | None]
    fmt: Callable[[float], str]
    better: str = "faster"  # the ratio's word when lower: "faster", "cheaper", "less GPU time"
    worse: str = "slower"
    verb: str = "is"  # the headline's: "X is 2× faster", "X loses 3× less GPU time"
    best: str = "fastest"  # the best config is the "fastest", "cheapest", "least lost"
    alike: str = "as fast"  # two configs noise cannot tell apart are "as fast", "as cheap"
    #: the figure is the trial's time-to-ready: a trial given up (``--give-up-after``) is a
    #: lower bound of it, and the bound speaks in the verdict
    timed: bool = True
    #: the figure as dollars a month (None: no price, or the figure is dollars already)
    usd_per_month: Callable[[float], float] | None = None
    #: a spread of two figures in one unit (``$20,392–22,189/month``; None: each in full)
    fmt_range: Callable[[float, float], str] | None = None

    def spread_text(self, low: float, high: float) -> str:
        """``2.0–3.1 s``, ``$20,392–22,189/month``: a spread said once with its unit."""
        if self.fmt_range is not None:
            return self.fmt_range(low, high)
        return f"{self.fmt(low)}–{self.fmt(high)}"

    def of(self, row: TrialRow) -> float | None:
        """The row's figure: a finite number, else None (not measured, or not ok)."""
        try:
            v = self.value(row)
            x = float(v) if v is not None and v != "" else math.nan  # a CSV cell reads as text
        except (TypeError, ValueError, ZeroDivisionError):
            return None
        return x if math.isfinite(x) and x >= 0 else None

    def ratio_words(self, ratio: float, other: str | None = None) -> str:
        """``2.06× faster than naive``, ``1.9× cheaper``: other's figure over this one's."""
        if not math.isfinite(ratio) or ratio <= 0:
            return "—"
        than = f" than {other}" if other else ""
        if round(ratio, 2) == 1.0:
            return f"same as {other}" if other else "1.00× (same)"
        word = self.better if ratio > 1 else self.worse
        return f"{fmt_times(ratio if ratio > 1 else 1 / ratio)} {word}{than}"


def dollars(x: float) -> str:
    """Dollars as a month's figures read: cents under $100, whole dollars above."""
    if not math.isfinite(x):
        return "—"
    return f"${x:,.0f}" if abs(x) >= 100 else (f"${x:,.2f}" if abs(x) >= 0.01 else f"${x:.2g}")


def month(x: float) -> str:
    return f"{dollars(x)}/month"


def month_range(low: float, high: float) -> str:
    return f"{dollars(low)}–{dollars(high).lstrip('$')}/month"


__all__ = ["TRAINING_HOURS", "Measure", "Pricing", "dollars", "month", "month_range"]
