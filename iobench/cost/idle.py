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
from iobench.cost.measure import TRAINING_HOURS, Pricing
from iobench.cost.month import ENTERED, LifeFigures, strategy_figure
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
    training_hours: float = TRAINING_HOURS  # a dataset run's month: hours of compute at full use
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
        _check_number("--training-hours", self.training_hours, allow_zero=False)


#: CostOptions' fields as meta.json's ``pricing`` keeps them (entered strategies as lists)
STORED = ("gpu", "gpu_price", "gpus", "starts_per_month", "storage_usd_per_gb", "storage",
          "au_target", "mtbf_hours", "every_minutes", "training_hours")  # fmt: skip


def options_to_meta(options: CostOptions) -> dict[str, object]:
    """What meta.json keeps of a run's cost options (so that a report rebuilt later, or
    ``compare``, prices the run as it was priced)."""
    out: dict[str, object] = {k: getattr(options, k) for k in STORED}
    out["entered"] = [
        [f.strategy.removesuffix(ENTERED), f.first_s, f.restart_s, f.stored_bytes / 1e9]
        for f in options.entered
    ]
    return out


def options_from_meta(data: object, **given: object) -> CostOptions:
    """A run's stored cost options (``options_to_meta``), with ``given`` (the flags a report
    was given) on top; a stored value that no longer passes (a preset since renamed) is a
    UsageError, as the flag would be."""
    stored = data if isinstance(data, dict) else {}
    values: dict[str, object] = {k: stored[k] for k in STORED if stored.get(k) is not None}
    entered = stored.get("entered") or []
    if isinstance(entered, list) and entered:
        values["entered"] = tuple(
            strategy_figure(f"{e[0]}={e[1]},{e[2]},{e[3]}")
            for e in entered
            if isinstance(e, list) and len(e) == 4
        )
    values.update({k: v for k, v in given.items() if v is not None})
    if "gpus" in values and isinstance(values["gpus"], float) and values["gpus"].is_integer():
        values["gpus"] = int(values["gpus"])
    try:
        return CostOptions(**values)  # type: ignore[arg-type]
    except TypeError as exc:
        raise UsageError(f"meta.json: pricing: {exc}") from None


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


def pricing(options: CostOptions, detected: GpuInfo | None) -> tuple[Pricing, list[str]]:
    """What a run's measure is priced with: the pod's price (``resolve_price``), the volume's
    charges (its preset), the assumptions; and the notes saying where they came from."""
    price, notes = resolve_price(options, detected)
    preset = find_storage_preset(options.storage) if options.storage else None
    return Pricing(
        usd_per_hour=price.usd_per_hour if price is not None else None,
        label=price.label if price is not None else "",
        starts_per_month=options.starts_per_month,
        training_hours=options.training_hours,
        mtbf_hours=options.mtbf_hours,
        au_target=options.au_target,
        every_minutes=options.every_minutes,
        storage=preset.name if preset is not None else "",
        gb_month_usd=preset.usd_per_gb_month if preset is not None else 0.0,
        read_usd_per_gb=preset.usd_per_gb_read if preset is not None else 0.0,
        written_usd_per_gb=options.storage_usd_per_gb,
    ), notes


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
