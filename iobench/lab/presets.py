"""The storage people rent, by name: lab volumes that behave as Amazon EFS (Bursting,
Provisioned, Elastic), a RunPod network volume, NFS on a LAN, and local NVMe as the control.

Each preset is a set of :class:`~iobench.lab.options.VolumeOptions` numbers with where they
come from: the public figures (AWS's EFS performance page and user guide, RunPod's storage
page) and, for what no source gives (a RunPod volume's or a LAN's per-operation latency), an
estimate marked as one, with how it was chosen (docs/lab.md). EFS Bursting follows the
stored size: its baseline is 50 KiB/s per GiB stored (1 GiB at least), its burst 100 MiB/s
(100 MiB/s per TiB above 1 TiB), its credit cap 2.1 TiB (per TiB above 1 TiB); a new file
system starts with a full 2.1 TiB. Provisioned moves at the rate paid for. AWS speaks MiB/s
and the lab MB/s (10^6 bytes/s): the conversion is exact here, and both are shown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from iobench.errors import UsageError
from iobench.lab.options import VolumeOptions

MIB = 2**20 / 1e6  # MB in a MiB
GIB_MB = 2**30 / 1e6  # MB in a GiB
TIB_GIB = 1024
#: EFS Bursting's figures (AWS user guide, "Amazon EFS performance")
BASELINE_KIB_S_PER_GIB = 50
BURST_MIB_S_PER_TIB = 100
CREDIT_CAP_TIB_PER_TIB = 2.1
#: the stored size a Bursting preset assumes unless --size-gib says (the 500 GB of the team
#: whose job took 142 minutes instead of 35: a 25 MiB/s baseline)
DEFAULT_SIZE_GIB = 500.0
#: Provisioned's rate unless --throughput-mib-s says, and the rates AWS sells
DEFAULT_PROVISIONED_MIB_S = 100.0
PROVISIONED_MIB_S = (1.0, 3414.0)
#: the largest stored size a Bursting preset takes (~3.8 PiB): its credit cap, 2.1 TiB per
#: TiB stored, stays within what the lab's options hold (10^10 MB)
MAX_SIZE_GIB = 4_000_000.0


@dataclass(frozen=True)
class Preset:
    """One named volume: its numbers, where they come from, and which are estimates."""

    name: str
    product: str
    options: VolumeOptions
    source: str
    date: str
    estimates: tuple[str, ...] = ()  # VolumeOptions fields no public source gives
    note: str = ""
    rented: bool = True  # a product with a price (cost/storage_prices.csv names it too)


def _efs(mode: str, iops: float, client_mib_s: float, **extra: object) -> VolumeOptions:
    return VolumeOptions(
        latency_ms=1.0,  # ~1 ms per read; metadata round trips are reads here
        data_latency_ms=1.0,
        write_latency_ms=2.7,
        iops=iops,
        client_mb_per_s=client_mib_s * MIB,
        metered=mode != "elastic",
        preset=f"efs-{mode}",
        **extra,  # type: ignore[arg-type]
    )


EFS_SOURCE = (
    "AWS, Amazon EFS user guide, 'Amazon EFS performance' (General Purpose, Regional; "
    "latencies, IOPS, per-client throughput) and its Bursting credit rules; read 2026-12"
)
PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "efs-bursting",
            "Amazon EFS, Bursting throughput",
            _efs("bursting", 35_000, 500),  # rates from the size: bursting_options()
            EFS_SOURCE,
            "2026-12",
            note="baseline 50 KiB/s per GiB stored, burst 100 MiB/s while credits last",
        ),
        Preset(
            "efs-provisioned",
            "Amazon EFS, Provisioned throughput",
            _efs("provisioned", 55_000, 500, mb_per_s=DEFAULT_PROVISIONED_MIB_S * MIB),
            EFS_SOURCE,
            "2026-12",
            note="the rate paid for (--throughput-mib-s), no credits",
        ),
        Preset(
            "efs-elastic",
            "Amazon EFS, Elastic throughput",
            _efs("elastic", 900_000, 1500),
            EFS_SOURCE,
            "2026-12",
            note="no credits; 1,500 MiB/s per client; reads billed per GB",
        ),
        Preset(
            "runpod-volume",
            "RunPod network volume (MooseFS)",
            VolumeOptions(
                latency_ms=0.5, data_latency_ms=0.5, mb_per_s=300.0, preset="runpod-volume"
            ),  # fmt: skip
            "RunPod docs, 'Storage' and network volumes: MooseFS, '200-400 MB/s, up to "
            "10 GB/s'; read 2026-11-30",
            "2026-11",
            estimates=("latency_ms", "data_latency_ms", "mb_per_s"),
            note="per-op latency not published: 0.5 ms estimated; 300 MB/s, the middle of 200-400",
        ),
        Preset(
            "nfs-lan",
            "NFS on a local network",
            VolumeOptions(latency_ms=0.3, data_latency_ms=0.3, mb_per_s=1250.0, preset="nfs-lan"),
            "a LAN round trip of 0.1-0.5 ms; 10 Gb Ethernet moves 1,250 MB/s",
            "2026-12",
            estimates=("latency_ms", "data_latency_ms", "mb_per_s"),
            note="0.3 ms, the middle of a LAN's 0.1-0.5 ms round trip; a 10 GbE link",
            rented=False,
        ),
        Preset(
            "local-nvme",
            "local NVMe disk (the control)",
            VolumeOptions(preset="local-nvme"),
            "no added delay: the lab's own FUSE cost only (docs/lab.md)",
            "2026-12",
            note="the control: a lab volume with nothing added",
            rented=False,
        ),
    )
}


def bursting_figures(size_gib: float) -> tuple[float, float, float]:
    """EFS Bursting's (baseline MiB/s, burst MiB/s, credit cap GiB) for a stored size."""
    size = max(1.0, size_gib)
    baseline = BASELINE_KIB_S_PER_GIB * size / 1024
    tib = size / TIB_GIB
    burst = BURST_MIB_S_PER_TIB * max(1.0, tib)
    cap_gib = CREDIT_CAP_TIB_PER_TIB * TIB_GIB * max(1.0, tib)
    return baseline, burst, cap_gib


def preset_options(
    name: str,
    size_gib: float | None = None,
    credits_gib: float | None = None,
    throughput_mib_s: float | None = None,
) -> VolumeOptions:
    """The preset's numbers for this volume (``UsageError`` naming the known ones)."""
    preset = PRESETS.get(name)
    if preset is None:
        raise UsageError(
            f"unknown --preset {name!r}; known: {', '.join(PRESETS)} (iobench lab presets)"
        )
    options = preset.options
    if name == "efs-bursting":
        size = DEFAULT_SIZE_GIB if size_gib is None else size_gib
        if not (math.isfinite(size) and 0 < size <= MAX_SIZE_GIB):
            raise UsageError(
                f"--size-gib must be a number above 0 and at most {MAX_SIZE_GIB:,.0f}, not {size:g}"
            )
        baseline, burst, cap_gib = bursting_figures(size)
        credits = cap_gib if credits_gib is None else credits_gib
        if not (math.isfinite(credits) and 0 <= credits <= cap_gib):
            raise UsageError(
                f"--credits-gib must be from 0 to {cap_gib:,.1f} (the credit cap of a {size:g} GiB "
                f"volume), not {credits:g}"
            )
        options = replace(options, mb_per_s=baseline * MIB, burst_mb_per_s=burst * MIB,
                          burst_credits_mb=credits * GIB_MB,
                          burst_cap_mb=cap_gib * GIB_MB)  # fmt: skip
    elif size_gib is not None or credits_gib is not None:
        raise UsageError(f"--size-gib and --credits-gib are efs-bursting's; {name} has no credits")
    if name == "efs-provisioned" and throughput_mib_s is not None:
        low, high = PROVISIONED_MIB_S
        if not (math.isfinite(throughput_mib_s) and low <= throughput_mib_s <= high):
            raise UsageError(
                f"--throughput-mib-s must be from {low:g} to {high:g}, not {throughput_mib_s:g}"
            )
        options = replace(options, mb_per_s=throughput_mib_s * MIB)
    elif throughput_mib_s is not None:
        raise UsageError(f"--throughput-mib-s is efs-provisioned's, not {name}'s")
    return options


def preset_rows() -> list[tuple[str, ...]]:
    """``iobench lab presets``: name, latencies, IOPS, MB/s, a client's cap (MB/s)."""
    rows: list[tuple[str, ...]] = [("preset", "ms meta/read/write", "IOPS", "MB/s", "client")]
    for p in PRESETS.values():
        o = preset_options(p.name)
        est = "*" if p.estimates else ""
        write = o.write_latency_ms if o.write_latency_ms is not None else o.data_latency_ms
        rate = "-" if not o.mb_per_s else f"{o.mb_per_s:,.1f}{est}"
        if o.burst_mb_per_s:
            rate = f"{o.mb_per_s:,.1f} (burst {o.burst_mb_per_s:,.1f})"
        rows.append((
            p.name,
            f"{o.latency_ms:g}/{o.data_latency_ms:g}/{write:g}{est}",
            f"{o.iops:,.0f}" if o.iops else "-",
            rate,
            f"{o.client_mb_per_s:,.0f}" if o.client_mb_per_s else "-",
        ))  # fmt: skip
    return rows


__all__ = ["PRESETS", "Preset", "bursting_figures", "preset_options", "preset_rows"]
