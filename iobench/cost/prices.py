"""Price tables at the bottom of the cost wing: GPUs (``gpu_prices.csv``) and volumes
(``storage_prices.csv``), each row with its provider, the page the price came from and its
date, looked up by name or alias; the pod's prices as one record; dollars people can read.

Prices drift; every report prints the preset it used, and ``--gpu-price`` /
``--storage-usd-per-gb`` override any of them.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from iobench.errors import UsageError
from iobench.rundir.meta import GpuInfo
from iobench.units import did_you_mean

DEFAULT_STARTS_PER_MONTH = 30.0  # one cold start a day


PRICES_FILE = "gpu_prices.csv"


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
    hint = did_you_mean(name, known_names())
    raise UsageError(
        f"unknown --gpu {name!r}{': ' + hint if hint else ''} (known: {', '.join(known_names())}; "
        "or give --gpu-price USD_PER_GPU_HOUR)"
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


STORAGE_PRICES_FILE = "storage_prices.csv"


@dataclass(frozen=True)
class Prices:
    """The pod's price per hour (all its GPUs) and the volume's prices."""

    gpu_usd_per_hour: float
    storage_usd_per_gb_month: float = 0.0
    read_usd_per_gb: float = 0.0


@dataclass(frozen=True)
class StoragePreset:
    """One row of storage_prices.csv."""

    name: str
    aliases: tuple[str, ...]
    usd_per_gb_month: float
    usd_per_gb_read: float
    usd_per_mibs_month: float  # provisioned throughput, per MiB/s a month (EFS Provisioned)
    billed: str  # "used" (metered) or "provisioned" (you pay for the size you ask for)
    provider: str
    source: str
    date: str
    note: str

    def prices(self, gpu_usd_per_hour: float) -> Prices:
        return Prices(gpu_usd_per_hour, self.usd_per_gb_month, self.usd_per_gb_read)


@lru_cache(maxsize=1)
def load_storage_presets() -> tuple[StoragePreset, ...]:
    """Read the packaged storage price table once."""
    text = resources.files("iobench.cost").joinpath(STORAGE_PRICES_FILE).read_text(encoding="utf-8")
    return tuple(
        StoragePreset(
            name=row["name"].strip(),
            aliases=tuple(a.strip() for a in row["aliases"].split(";") if a.strip()),
            usd_per_gb_month=float(row["usd_per_gb_month"]),
            usd_per_gb_read=float(row["usd_per_gb_read"] or 0),
            usd_per_mibs_month=float(row.get("usd_per_mibs_month") or 0),
            billed=row["billed"].strip(),
            provider=row["provider"].strip(),
            source=row["source"].strip(),
            date=row["date"].strip(),
            note=(row.get("note") or "").strip(),
        )
        for row in csv.DictReader(text.splitlines())
    )


def find_storage_preset(name: str) -> StoragePreset:
    """The preset for a user-typed ``--storage`` name (case-insensitive, aliases accepted)."""
    key = normalise(name)
    for p in load_storage_presets():
        if key == normalise(p.name) or key in {normalise(a) for a in p.aliases}:
            return p
    known = ", ".join(p.name for p in load_storage_presets())
    raise UsageError(f"unknown --storage {name!r}; known: {known} (or give --storage-usd-per-gb)")
