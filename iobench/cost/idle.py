"""GPU price presets and the idle-cost model: what a slow cold start costs in rented GPUs.

The model is deliberately plain so that anyone can redo it by hand:

* cost per cold start  = median time-to-ready (s) / 3600 x price per hour of the pod,
  where the pod's price is ``price per GPU-hour x GPUs`` (or a whole instance's price);
* storage per start    = GB written on the ``target`` role x ``--storage-usd-per-gb``
  (optional: metered volumes make "faster" and "cheaper" two different questions);
* per month            = (GPU idle + storage) per start x starts per month.

Presets live in ``iobench/cost/gpu_prices.csv``: one row per GPU or whole instance, with
the provider, the page the price came from and its date. Prices drift; every report prints
the preset it used, and ``--gpu-price`` overrides any of them.
"""

from __future__ import annotations

import argparse
import csv
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from iobench.errors import UsageError
from iobench.system.gpu import GpuInfo

DEFAULT_STARTS_PER_MONTH = 30.0  # one cold start a day
PRICES_FILE = "gpu_prices.csv"
_BYTES_PER_GB = 1e9


@dataclass(frozen=True)
class GpuPreset:
    """One row of the price table: a GPU (price per GPU-hour) or a whole instance."""

    name: str
    aliases: tuple[str, ...]
    usd_per_hour: float
    gpus: int
    provider: str
    kind: str  # "gpu": per GPU-hour; "instance": whole instance per hour
    source: str
    date: str
    note: str = ""

    @property
    def usd_per_gpu_hour(self) -> float:
        """Price of one GPU-hour (an instance's price shared across its GPUs)."""
        return self.usd_per_hour / max(self.gpus, 1)

    def keys(self) -> set[str]:
        """Normalised names a user or a detected GPU may match."""
        return {normalise(self.name), *(normalise(a) for a in self.aliases)}


@dataclass(frozen=True)
class CostOptions:
    """What the user said about prices (all optional); validated on construction."""

    gpu: str | None = None
    gpu_price: float | None = None
    gpus: int | None = None
    starts_per_month: float = DEFAULT_STARTS_PER_MONTH
    storage_usd_per_gb: float | None = None
    storage: str | None = None  # a volume price preset (iobench/cost/storage_prices.csv)

    def __post_init__(self) -> None:
        _check_number("--gpu-price", self.gpu_price, allow_zero=True)
        _check_number("--storage-usd-per-gb", self.storage_usd_per_gb, allow_zero=True)
        _check_number("--starts-per-month", self.starts_per_month, allow_zero=True)
        if self.gpus is not None and (not isinstance(self.gpus, int) or self.gpus < 1):
            raise UsageError(f"--gpus must be a whole number of at least 1, not {self.gpus!r}")
        if self.gpu is not None and self.gpu_price is None:
            find_preset(self.gpu)  # unknown names fail before anything runs
        if self.storage is not None:
            from iobench.cost.month import find_storage_preset

            find_storage_preset(self.storage)


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


def normalise(name: str) -> str:
    """Lower-case, without vendor words, single spaces: ``NVIDIA GeForce RTX 4090`` -> ``rtx 4090``."""
    text = name.strip().lower().replace("_", " ")
    text = re.sub(r"\b(nvidia|geforce|tesla)\b", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def _tokens(name: str) -> set[str]:
    return {t for t in re.split(r"[^a-z0-9]+", normalise(name)) if t}


@lru_cache(maxsize=1)
def load_presets() -> tuple[GpuPreset, ...]:
    """Read the packaged price table once."""
    text = (resources.files("iobench.cost") / PRICES_FILE).read_text(encoding="utf-8")
    rows = csv.DictReader(text.splitlines())
    presets = []
    for row in rows:
        presets.append(
            GpuPreset(
                name=row["name"].strip(),
                aliases=tuple(a.strip() for a in row["aliases"].split(";") if a.strip()),
                usd_per_hour=float(row["usd_per_hour"]),
                gpus=int(row["gpus"]),
                provider=row["provider"].strip(),
                kind=row["kind"].strip(),
                source=row["source"].strip(),
                date=row["date"].strip(),
                note=(row.get("note") or "").strip(),
            )
        )
    return tuple(presets)


def known_names() -> list[str]:
    """Preset names, for error messages and ``--help``."""
    return [p.name for p in load_presets()]


def find_preset(name: str) -> GpuPreset:
    """The preset for a user-typed ``--gpu`` name (case-insensitive, aliases accepted)."""
    key = normalise(name)
    presets = load_presets()
    exact = [p for p in presets if normalise(p.name) == key]
    if exact:
        return exact[0]
    matches = [p for p in presets if key in p.keys()]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        names = ", ".join(p.name for p in matches)
        raise UsageError(f"--gpu {name!r} is ambiguous: it matches {names}; give one of those")
    raise UsageError(
        f"unknown --gpu {name!r}; known: {', '.join(known_names())} "
        "(or give --gpu-price USD_PER_GPU_HOUR)"
    )


def match_detected(gpu: GpuInfo) -> tuple[GpuPreset | None, str]:
    """The preset for a detected GPU, and how it was matched ("instance", "exact", "closest").

    An EC2 instance type wins (AWS bills whole instances); then an exact alias among per-GPU
    presets; then a whole-instance preset with the same GPU and count; then the per-GPU
    preset whose alias words are all in the detected name (most words wins).
    """
    presets = load_presets()
    if gpu.instance_type:
        for p in presets:
            if normalise(gpu.instance_type) in p.keys():
                return p, "instance"
    key = normalise(gpu.name)
    for p in presets:
        if p.kind == "gpu" and key in p.keys():
            return p, "exact"
    for p in presets:
        if p.kind == "instance" and key in p.keys() and p.gpus == gpu.count:
            return p, "exact"
    words = _tokens(gpu.name)
    best: tuple[int, GpuPreset] | None = None
    for p in presets:
        if p.kind != "gpu":
            continue
        for alias in p.keys():
            toks = _tokens(alias)
            if toks and toks <= words and (best is None or len(toks) > best[0]):
                best = (len(toks), p)
    return (best[1], "closest") if best else (None, "")


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
    return max(bytes_on_target, 0.0) / _BYTES_PER_GB * usd_per_gb


def monthly_usd(per_start_usd: float, starts_per_month: float) -> float:
    """A per-start cost over a month of cold starts."""
    return per_start_usd * starts_per_month


def format_usd(x: float | None) -> str:
    """Dollars people can read: cents above $1, three decimals above 1 cent, else enough
    digits to show two significant ones (idle costs of short starts are fractions of a cent)."""
    if x is None or not math.isfinite(x):
        return "—"
    if x == 0:
        return "$0"
    if abs(x) >= 1:
        return f"${x:,.2f}"
    if abs(x) >= 0.01:
        return f"${x:.3f}"
    decimals = min(-math.floor(math.log10(abs(x))) + 1, 8)
    return f"${x:.{decimals}f}"


# --- command-line helpers shared by `iobench run`, `report` and `compare` -------------------


def add_cost_arguments(parser: argparse.ArgumentParser, *, storage: bool = True) -> None:
    """Add ``--gpu``, ``--gpu-price``, ``--gpus``, ``--starts-per-month`` (and storage).

    Values stay text here and are checked in :func:`cost_options_from_args`, so a bad
    number is a ``UsageError`` (one line, exit 2) rather than argparse's usage dump.
    """
    group = parser.add_argument_group("cost (what idle GPU time costs)")
    group.add_argument(
        "--gpu",
        metavar="NAME",
        help="price preset, case-insensitive: " + ", ".join(known_names()),
    )
    group.add_argument(
        "--gpu-price", metavar="USD", help="price per GPU-hour in USD (overrides the preset)"
    )
    group.add_argument(
        "--gpus", metavar="N", help="GPUs the pod rents (default: as detected, else 1)"
    )
    group.add_argument(
        "--starts-per-month",
        "--starts",
        metavar="N",
        help=f"cold starts per month for the monthly figure (default {DEFAULT_STARTS_PER_MONTH:g})",
    )
    if storage:
        group.add_argument(
            "--storage-usd-per-gb",
            metavar="X",
            help="charge per GB written on the target volume (metered storage)",
        )
        group.add_argument(
            "--storage",
            metavar="PRESET",
            help="the volume's price preset, for what start-up strategies keep on it a month "
            "(e.g. runpod, efs, gp3: iobench/cost/storage_prices.csv)",
        )


def _number(flag: str, text: object, what: str) -> float | None:
    if text is None:
        return None
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        try:
            value = float(str(text).strip())
        except ValueError:
            raise UsageError(f"{flag} wants {what}, not {text!r}") from None
    if math.isnan(value) or math.isinf(value):
        raise UsageError(f"{flag} wants {what}, not {text!r}")
    return value


def cost_options_from_args(args: argparse.Namespace) -> CostOptions:
    """Build validated CostOptions from parsed arguments (raises UsageError)."""
    price = _number("--gpu-price", getattr(args, "gpu_price", None), "a price in USD per GPU-hour")
    starts = _number("--starts-per-month", getattr(args, "starts_per_month", None), "a number")
    storage = _number(
        "--storage-usd-per-gb", getattr(args, "storage_usd_per_gb", None), "a price in USD per GB"
    )
    gpus_raw = getattr(args, "gpus", None)
    gpus: int | None = None
    if gpus_raw is not None:
        try:
            gpus = int(str(gpus_raw).strip())
        except ValueError:
            raise UsageError(f"--gpus wants a whole number, not {gpus_raw!r}") from None
    return CostOptions(
        gpu=getattr(args, "gpu", None),
        gpu_price=price,
        gpus=gpus,
        starts_per_month=DEFAULT_STARTS_PER_MONTH if starts is None else starts,
        storage_usd_per_gb=storage,
        storage=getattr(args, "storage", None),
    )
