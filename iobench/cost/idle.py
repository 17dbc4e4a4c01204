"""The idle-cost model: what a slow cold start costs in rented GPUs, from the price the user
gave or the preset of the GPU the run detected (``iobench.cost.prices``).

The model is deliberately plain so that anyone can redo it by hand:

* cost per cold start  = median time-to-ready (s) / 3600 x price per hour of the pod,
  where the pod's price is ``price per GPU-hour x GPUs`` (or a whole instance's price);
* storage per start    = GB written on the ``target`` role x ``--storage-usd-per-gb``
  (optional: metered volumes make "faster" and "cheaper" two different questions);
* per month            = (GPU idle + storage) per start x starts per month.

Every report prints the price it used and where it came from; ``--gpu-price`` overrides any
preset.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from iobench.cost.checkpoint import MTBF_HOURS
from iobench.cost.month import LifeFigures
from iobench.cost.prices import (
    DEFAULT_STARTS_PER_MONTH,
    GpuPreset,
    find_preset,
    find_storage_preset,
    match_detected,
)
from iobench.errors import UsageError
from iobench.rundir.meta import GpuInfo

#: MLPerf Storage's bar for accelerator utilisation (U-Net3D, ResNet-50; CosmoFlow's is 0.7):
#: a storage system passes when the emulated accelerators compute at least this share of the time
AU_TARGET = 0.9


@dataclass(frozen=True)
class CostOptions:
    """What the user said about prices (all optional); validated on construction."""

    gpu: str | None = None
    gpu_price: float | None = None
    gpus: int | None = None
    starts_per_month: float = DEFAULT_STARTS_PER_MONTH
    storage_usd_per_gb: float | None = None
    storage: str | None = None  # a volume price preset (iobench/cost/storage_prices.csv)
    au_target: float = AU_TARGET  # a dataset run's bar for accelerator utilisation
    mtbf_hours: float = MTBF_HOURS  # a checkpoint run's pod: mean hours between failures
    every_minutes: float | None = None  # a checkpoint run's own interval between saves
    #: strategies the user measured elsewhere (--strategy-figure), ranked beside the run's
    entered: tuple[LifeFigures, ...] = ()

    def __post_init__(self) -> None:
        _check_number("--gpu-price", self.gpu_price, allow_zero=True)
        _check_number("--storage-usd-per-gb", self.storage_usd_per_gb, allow_zero=True)
        _check_number("--starts-per-month", self.starts_per_month, allow_zero=True)
        if self.gpus is not None and (not isinstance(self.gpus, int) or self.gpus < 1):
            raise UsageError(f"--gpus must be a whole number of at least 1, not {self.gpus!r}")
        if self.gpu is not None and self.gpu_price is None:
            find_preset(self.gpu)  # unknown names fail before anything runs
        if self.storage is not None:
            find_storage_preset(self.storage)
        if not (isinstance(self.au_target, float | int) and 0 < self.au_target <= 1):
            raise UsageError(
                f"--au-target must be a share from 0 to 1 (e.g. 0.9), not {self.au_target!r}"
            )
        _check_number("--mtbf-hours", self.mtbf_hours, allow_zero=False)
        _check_number("--every-minutes", self.every_minutes, allow_zero=False)


@dataclass(frozen=True)
class PriceChoice:
    """The price the report uses, and where it came from (printed next to every $)."""

    usd_per_hour: float  # for the whole pod: all its GPUs, or the whole instance
    label: str  # e.g. "2x H100 SXM at $2.69/GPU-hour (RunPod Secure Cloud, 2026-05-22)"
    gpus: int
    preset: GpuPreset | None = None
    source: str = ""


def _check_number(flag: str, value: float | None, *, allow_zero: bool) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UsageError(f"{flag} must be a number, not {value!r}")
    if value < 0:
        raise UsageError(f"{flag} must not be negative (got {value:g})")
    if value == 0 and not allow_zero:
        raise UsageError(f"{flag} must be more than 0")


def resolve_price(
    options: CostOptions, detected: GpuInfo | None
) -> tuple[PriceChoice | None, list[str]]:
    """Choose the pod's price per hour from flags, else the run's detected GPU.

    Order: ``--gpu-price`` (per GPU-hour), ``--gpu NAME``, the GPU the run detected.
    Returns the choice (or None when nothing is known) and notes that say what was done.
    """
    notes: list[str] = []
    detected_count = detected.count if detected else None
    if options.gpu_price is not None:
        gpus = options.gpus or detected_count or 1
        what = options.gpu or (detected.name if detected else "GPU")
        label = f"{gpus}x {what} at ${options.gpu_price:g}/GPU-hour (given)"
        return PriceChoice(options.gpu_price * gpus, label, gpus, None, "--gpu-price"), notes
    if options.gpu is not None:
        preset = find_preset(options.gpu)
        return _from_preset(preset, options.gpus or None, notes), notes
    if detected is not None:
        matched, how = match_detected(detected)
        if matched is None:
            notes.append(
                f"detected {detected.count}x {detected.name}, which has no price preset; "
                "pass --gpu NAME or --gpu-price USD to see costs"
            )
            return None, notes
        gpus = options.gpus or detected.count
        choice = _from_preset(matched, gpus, notes)
        where = f" on {detected.instance_type}" if detected.instance_type else ""
        closeness = " (closest preset)" if how == "closest" else ""
        notes.insert(
            0,
            f"no price given: detected {detected.count}x {detected.name}{where} "
            f"(via {detected.source}), using preset {matched.name}{closeness}: {choice.label}; "
            "override with --gpu or --gpu-price",
        )
        return choice, notes
    notes.append(
        "no GPU price: pass --gpu NAME (e.g. --gpu H100) or --gpu-price USD_PER_GPU_HOUR "
        "to see what slow starts cost"
    )
    return None, notes


def _from_preset(preset: GpuPreset, gpus: int | None, notes: list[str]) -> PriceChoice:
    """A whole instance bills whole; a per-GPU preset is multiplied by the GPU count."""
    origin = f"{preset.provider}, {preset.date}"
    if preset.kind == "instance":
        if gpus is not None and gpus != preset.gpus:
            notes.append(
                f"{preset.name} is billed as a whole instance ({preset.gpus} GPUs); "
                f"--gpus {gpus} does not change its price"
            )
        label = f"{preset.name} ({preset.gpus} GPUs) at ${preset.usd_per_hour:g}/hour ({origin})"
        return PriceChoice(preset.usd_per_hour, label, preset.gpus, preset, preset.source)
    n = gpus or 1
    label = f"{n}x {preset.name} at ${preset.usd_per_hour:g}/GPU-hour ({origin})"
    return PriceChoice(preset.usd_per_hour * n, label, n, preset, preset.source)


# --- the cost model: pure functions -------------------------------------------------------


def idle_cost_usd(seconds: float, usd_per_hour: float) -> float:
    """What the pod bills while it waits ``seconds`` for the environment to be ready."""
    return seconds / 3600.0 * usd_per_hour


def storage_cost_usd(bytes_on_target: float, usd_per_gb: float) -> float:
    """Metered storage charge for the bytes a start writes to the target (decimal GB)."""
    return max(bytes_on_target, 0.0) / 1e9 * usd_per_gb


def monthly_usd(per_start_usd: float, starts_per_month: float) -> float:
    """A per-start cost over a month of cold starts."""
    return per_start_usd * starts_per_month
