"""The ``dataset`` kind's question: what a month of training costs when the accelerator waits
for its data (docs/dataset.md). A month of training is the compute a month at full use holds
(``Pricing.training_hours`` of accelerator time); at an accelerator utilisation AU the same work
takes ``hours / AU`` of a billed GPU, and every pod start copies the data first where the config
copies it. Priced: those GPU-hours at the pod's price, plus the volume's charges for the data
kept and read (EFS Elastic bills every GB read: in place, every epoch reads the volume; copied,
each start reads it once). Without a price: the GPU-hours. A run without emulated compute
(``compute_ms = 0``) asks only how long the data took to read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from iobench.cost.measure import Measure, Pricing, month, month_range
from iobench.rundir.kinds import dataset as rows
from iobench.units import fmt_s

NAME = rows.NAME


def gpu_hours(row: Any, p: Pricing) -> float | None:
    """Billed GPU-hours for a month of training: the work at this AU, and the month's copies."""
    au = getattr(row, "au", None)
    if not au:
        return None
    copies = p.starts_per_month * (getattr(row, "stage_s", None) or 0.0) / 3600
    return p.training_hours / au + copies


def reads_gb(row: Any, p: Pricing) -> float | None:
    """GB read from the data's volume in a month of training (in place: every epoch)."""
    epochs = max(int(getattr(row, "epochs", None) or 1), 1)
    data, compute = getattr(row, "data_bytes", None), getattr(row, "compute_s", None)
    if not data or not compute:
        return None
    epoch_gb = data / epochs / 1e9
    if getattr(row, "stage_s", None) is not None:  # copied: once a start
        return epoch_gb * p.starts_per_month
    return epoch_gb * p.training_hours * 3600 / (compute / epochs)


def month_usd(row: Any, p: Pricing) -> float | None:
    """A month of training in dollars: the GPU-hours, the data kept, its reads."""
    hours, gb = gpu_hours(row, p), reads_gb(row, p)
    if hours is None or gb is None or p.usd_per_hour is None:
        return None
    data_gb = (
        (getattr(row, "data_bytes", None) or 0) / max(getattr(row, "epochs", None) or 1, 1) / 1e9
    )
    return hours * p.usd_per_hour + data_gb * p.gb_month_usd + gb * p.read_usd_per_gb


def question(trials: Sequence[Any], p: Pricing) -> Measure:
    if not any((getattr(r, "compute_s", None) or 0) > 0 for r in trials):
        return Measure("time to read the data", "s", lambda r: r.time_to_ready_s, fmt_s)
    if p.usd_per_hour is None:
        return Measure(
            f"GPU-hours for a month of training ({p.training_hours:g} h of compute)", "GPU-h",
            lambda r: gpu_hours(r, p), lambda h: f"{h:,.0f} GPU-h", better="cheaper",
            worse="dearer", timed=False, best="cheapest", alike="as cheap",
        )  # fmt: skip
    return Measure(
        "a month of training", "$", lambda r: month_usd(r, p),
        month, better="cheaper", worse="dearer", timed=False, fmt_range=month_range,
        best="cheapest", alike="as cheap",
    )  # fmt: skip


__all__ = ["NAME", "gpu_hours", "month_usd", "question", "reads_gb"]
