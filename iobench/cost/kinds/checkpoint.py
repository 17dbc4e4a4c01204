"""The ``checkpoint`` kind's question: the share of GPU time lost to saves and failures when
saving at the best interval (``iobench.cost.checkpoint``: Young's, never shorter than a save
and its copy) for the pod's mean time between failures: the save on the training's critical
path, plus, at a failure, the work since the last durable save and the restore. In dollars: that
share of a month of training at the pod's price."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from iobench.cost.checkpoint import SaveCosts, best_interval_s, lost_share
from iobench.cost.measure import Measure, Pricing
from iobench.rundir.kinds import checkpoint as rows
from iobench.rundir.records import TrialRow

NAME = rows.NAME


def costs(row: TrialRow) -> SaveCosts | None:
    """A trial's pause, the window a crash still loses its save, and its restore."""
    pause, restore = getattr(row, "write_s", None), getattr(row, "ckpt_read_s", None)
    if pause is None or restore is None:
        return None
    return SaveCosts(float(pause), float(getattr(row, "exposed_s", None) or 0.0), float(restore))


def lost(row: TrialRow, mtbf_s: float) -> float | None:
    """The share of GPU time ``row``'s placement loses at its best interval."""
    c = costs(row)
    return lost_share(c, best_interval_s(c, mtbf_s), mtbf_s) if c is not None else None


def question(trials: Sequence[Any], p: Pricing) -> Measure:
    mtbf_s = p.mtbf_hours * 3600
    usd = None
    if p.usd_per_hour is not None:
        month = p.training_hours * p.usd_per_hour

        def usd(share: float) -> float:
            return share * month

    return Measure(
        "GPU time lost at the best interval", "share", lambda r: lost(r, mtbf_s),
        lambda x: f"{100 * x:.2f}%", better="less GPU time", worse="more GPU time",
        verb="loses", timed=False, usd_per_month=usd, best="least lost", alike="as good",
    )  # fmt: skip


__all__ = ["NAME", "costs", "lost", "question"]
