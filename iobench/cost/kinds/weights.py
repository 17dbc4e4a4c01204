"""The ``weights`` kind's question: how long until a model's weights are in memory, each start
(the GPU bills while the server loads them, and a pod loads them at every start: docs/weights.md).
Priced like installs: a start's wait at the pod's price, times the starts a month; beside it,
what the volume charges for the weights kept and read at every start (EFS Elastic bills every GB
read; a packed copy is kept instead of the files)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from iobench.cost.measure import Measure, Pricing
from iobench.rundir.kinds import weights as rows
from iobench.rundir.records import TrialRow
from iobench.units import fmt_s

NAME = rows.NAME


@dataclass(frozen=True)
class Month:
    """A month of starts with one config, in dollars."""

    per_start: float  # GPU idle while the weights load, one start
    gpu: float  # that, every start of the month
    reads: float  # the volume's read charges: the weights read at every start
    kept: float  # the volume's charge for the weights kept on it

    @property
    def total(self) -> float:
        return self.gpu + self.reads + self.kept


def read_gb(row: Any) -> float:
    """GB a start reads from the weights' volume: its counters' figure, else the files'."""
    n = getattr(row, "volume_read_bytes", None) or getattr(row, "weights_bytes", None) or 0
    return float(n) / 1e9


def month(row: Any, p: Pricing) -> Month | None:
    """A month of ``p.starts_per_month`` starts with ``row``'s config (None: no price, or the
    trial has no time)."""
    s = getattr(row, "time_to_ready_s", None)
    if p.usd_per_hour is None or s is None:
        return None
    per_start = float(s) / 3600 * p.usd_per_hour
    kept_gb = float(getattr(row, "weights_bytes", None) or 0) / 1e9
    return Month(
        per_start, per_start * p.starts_per_month,
        read_gb(row) * p.read_usd_per_gb * p.starts_per_month, kept_gb * p.gb_month_usd,
    )  # fmt: skip


def question(trials: Sequence[TrialRow], p: Pricing) -> Measure:
    """Time to weights in memory (lower is better); a month of starts' GPU idle beside it."""
    usd = None
    if p.usd_per_hour is not None:
        hourly = p.usd_per_hour

        def usd(s: float) -> float:
            return s / 3600 * hourly * p.starts_per_month

    return Measure("time to weights in memory", "s", lambda r: r.time_to_ready_s, fmt_s,
                   usd_per_month=usd)  # fmt: skip


__all__ = ["NAME", "Month", "month", "question", "read_gb"]
