"""Predict a fleet's time-to-ready: N workers starting at once on one volume (docs/fleet.md).

One worker alone takes what :mod:`iobench.predict.model` says (its phases: the fast part
``F`` and the volume's round trips at the probe's costs). A fleet adds what its workers
share. Each shared resource is a queue served at a fixed rate, and over each phase (the
workers started together, so they go through their phases together) the fleet's phase
takes at least as long as the busiest of them needs for N workers' demand — the bottleneck
bound of operational analysis (Denning and Buzen, "The Operational Analysis of Queueing
Network Models", 1978; Lazowska et al., "Quantitative System Performance", 1984, ch. 5):

    T_phase(N) = max( T_phase(1),                      one worker alone
                      N · requests_phase / IOPS,       the volume's operations cap
                      pipe(N · MB_phase),              its throughput (burst credits spent first)
                      N · F_phase / CPUs )             only where the workers share CPUs

- **requests**: what each of the worker's operations sends the server: a create is a
  lookup, the create, its write, a flush, a release and the attributes of the new entry
  (``fleet.toml``, counted on the lab volume's own counters: tools/fleet_requests.py); stats
  as many as the client's attribute cache lets through (the model's stat curve).
- **MB**: the bytes the worker moves on the volume; where the volume meters as Amazon EFS
  does, each request counts at least 4 KiB (metadata) or 32 KiB (data), reads a third.
- **pipe**: a volume with burst credits moves bytes at its burst rate while the balance
  lasts (which earns at the baseline rate and spends at the rate moved), then at the
  baseline: what the lab's byte link does (:mod:`iobench.system.shaping`).
- **fan-out** is one install plus N − 1 restores: the builder's install and pack alone
  (lifecycle's pack step), then every other worker's restore at once, its archive through
  the shared pipe and caps, then the ready check.

A preset (``iobench lab presets``) gives a volume's published latencies and caps without a
probe: each operation then costs its requests at the preset's latencies (metadata, read,
write) over the tmpfs the fast times were measured on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iobench.predict import lifecycle
from iobench.predict.model import (
    ATTR_CACHE_S,
    OPS,
    Costs,
    Size,
    fast_costs,
    import_mix,
    load_opmix,
    predict_config,
    read_toml,
    scales,
    stats_sent,
)
from iobench.rundir.records import PHASES

REQUESTS_FILE = Path(__file__).parent / "fleet.toml"
TARGET = "target"
#: a data request moves at most this much (FUSE's max_write; an NFS client's wsize is 1 MiB)
REQUEST_BYTES = 128 * 1024
#: EFS metering: a data request counts at least 32 KiB, a metadata one 4 KiB, reads a third
METER_DATA, METER_META, METER_READ = 32 * 1024, 4 * 1024, 1 / 3
#: the operations that read (their requests meter at a third)
_READS = ("stat", "stat_miss", "open_read")
#: how often a fan-out waiter looks for the archive (iobench.trial.fanout.POLL_S)
POLL_S = 0.05


@dataclass(frozen=True)
class Caps:
    """What a volume's clients share: operations and bytes a second, burst credits."""

    iops: float | None = None
    mb_per_s: float | None = None  # the baseline rate, MB/s
    burst_mb_per_s: float | None = None
    burst_credits_mb: float | None = None
    metered: bool = False
    client_mb_per_s: float | None = None  # one client's own cap (not shared)

    def pipe_s(self, mb: float) -> float:
        """Seconds to move ``mb`` through the shared pipe (0 without a rate cap)."""
        if not self.mb_per_s or mb <= 0:
            return 0.0
        base, burst, credits = self.mb_per_s, self.burst_mb_per_s, self.burst_credits_mb or 0.0
        if not burst or burst <= base or credits <= 0:
            return mb / base
        last_s = credits / (burst - base)  # the balance falls at (burst - baseline) MB/s
        if mb <= burst * last_s:
            return mb / burst
        return last_s + (mb - burst * last_s) / base

    def describe(self) -> str:
        parts = [f"{self.iops:,.0f} IOPS" if self.iops else "no IOPS cap"]
        if self.mb_per_s:
            rate = f"{self.mb_per_s:,.1f} MB/s"
            if self.burst_mb_per_s:
                rate += (f" (burst {self.burst_mb_per_s:,.1f} MB/s while "
                         f"{(self.burst_credits_mb or 0) / 1e3:,.0f} GB of credits last)")  # fmt: skip
            parts.append(rate + (", metered as EFS meters" if self.metered else ""))
        return ", ".join(parts)


@dataclass(frozen=True)
class Demand:
    """One worker's use of the shared volume in one phase."""

    requests: float = 0.0
    mb: float = 0.0

    def __add__(self, other: Demand) -> Demand:
        return Demand(self.requests + other.requests, self.mb + other.mb)


@dataclass(frozen=True)
class FleetTime:
    """A config's predicted fleet time-to-ready at ``workers``, with what decided each part."""

    config: str
    workers: int
    seconds: float
    alone_s: float
    parts: dict[str, tuple[float, str]] = field(default_factory=dict)  # part -> (s, bound)

    @property
    def bound(self) -> str:
        """What decided the largest part's time: alone, iops, bandwidth or cpu."""
        return max(self.parts.values())[1] if self.parts else "alone"


def load_requests(path: Path = REQUESTS_FILE) -> dict[str, dict[str, float]]:
    """Requests per operation, by kind (meta, read, write, free): ``fleet.toml``."""
    return {op: {k: float(v) for k, v in kinds.items()}
            for op, kinds in read_toml(path)["requests"].items()}  # fmt: skip


def preset_costs(latency_ms: float, read_ms: float, write_ms: float,
                 client_mb_per_s: float | None, opmix: dict[str, Any]) -> Costs:  # fmt: skip
    """What each operation costs on a volume of these latencies: its requests at them over
    the tmpfs the fast times were measured on (a metadata request ``latency_ms``, a data read
    ``read_ms``, a write ``write_ms``); bytes at one client's cap."""
    fast, table = fast_costs(opmix), load_requests()
    ms = {
        op: fast.ms.get(op, 0.0) + r.get("meta", 0) * latency_ms + r.get("read", 0) * read_ms
        + r.get("write", 0) * write_ms
        for op, r in table.items()
    }  # fmt: skip
    return Costs(ms, client_mb_per_s, client_mb_per_s)


def demand(mix: dict[str, Any], k: float, k_b: float, phase_s: float, metered: bool,
           attr_cache_s: float = ATTR_CACHE_S) -> Demand:  # fmt: skip
    """What one role's operation mix (scaled by ``k``, its bytes by ``k_b``) asks of the
    server in a phase lasting ``phase_s``."""
    table = load_requests()
    counts = {op: float(mix.get(op, 0)) * k for op in OPS if op != "stat"}
    counts["stat"] = stats_sent(mix, phase_s, k, attr_cache_s)
    written = float(mix.get("bytes_written", 0)) * k_b
    read = float(mix.get("bytes_read", 0)) * k_b
    requests, meter = 0.0, 0.0
    for op, n in counts.items():
        r = table.get(op, {})
        per = sum(r.values())
        requests += n * per
        share = METER_READ if op in _READS else 1.0
        meter += n * (r.get("meta", 0) + r.get("free", 0)) * METER_META * share
    # bytes past the one small write or read each create or open already sent
    extra_w = max(0.0, written / REQUEST_BYTES - counts.get("create", 0.0))
    extra_r = max(0.0, read / REQUEST_BYTES - counts.get("open_read", 0.0))
    requests += extra_w + extra_r
    writes = counts.get("create", 0.0) + counts.get("fsync", 0.0) + extra_w
    reads = counts.get("open_read", 0.0) + extra_r
    meter += max(written, writes * METER_DATA) + max(read, reads * METER_DATA) * METER_READ
    return Demand(requests, (meter if metered else written + read) / 1e6)


def phase_demands(cfg: Any, alone: dict[str, float], opmix: dict[str, Any], size: Size,
                  metered: bool, shared: Sequence[str] = (TARGET,)) -> dict[str, Demand]:  # fmt: skip
    """Each phase's demand on the shared volume of a config whose roles in ``shared`` are
    on it, the phases lasting ``alone``."""
    state = "warm" if cfg.cache_state == "warm" else "cold"
    roles = {"venv": cfg.venv, "tmpdir": cfg.tmpdir, "cache": cfg.cache}
    traced = Size.traced(opmix)
    out = {}
    for phase in PHASES:
        total = Demand()
        for role, where in roles.items():
            mix = opmix["ops"][state].get(phase, {}).get(role)
            if where in shared and mix:
                k, k_b = scales(phase, size, traced, role)
                total += demand(mix, k, k_b, alone.get(phase, 0.0), metered)
        out[phase] = total
    return out


def bounded(alone_s: float, each: Demand, cpu_s: float, n: int, caps: Caps,
            cpus: float | None) -> tuple[float, str]:  # fmt: skip
    """A part's time with ``n`` workers at once, and which bound decides it."""
    candidates = [(alone_s, "alone")]
    if caps.iops:
        candidates.append((n * each.requests / caps.iops, "iops"))
    candidates.append((caps.pipe_s(n * each.mb), "bandwidth"))
    if cpus:
        candidates.append((n * cpu_s / cpus, "cpu"))
    return max(candidates)


def fleet_install(cfg: Any, folders: dict[str, Costs], size: Size, caps: Caps, sizes: Sequence[int],
                  cpus: float | None = None, cpu_s: float | None = None,
                  fast_s: dict[str, float] | None = None) -> list[FleetTime]:  # fmt: skip
    """Every worker installs as ``cfg`` says, all at once; ``fast_s``: the fast part per
    phase, measured (else the recorded one, scaled by ``cpu_s``)."""
    opmix = load_opmix(cfg.installer)
    roles = {"venv": folders[cfg.venv], "tmpdir": folders[cfg.tmpdir],
             "cache": folders[cfg.cache] if cfg.cache != "off" else None}  # fmt: skip
    pred = predict_config(cfg.name, roles, cfg.cache_state, opmix, size, fast_s, cpu_s=cpu_s)
    alone = dict(pred.phases)
    if cfg.compile != "on":
        alone["compile"] = 0.0
    cpu = {p: alone[p] - pred.storage_s.get(p, 0.0) for p in PHASES}
    need = phase_demands(cfg, alone, opmix, size, caps.metered)
    out = []
    for n in sizes:
        parts = {p: bounded(alone[p], need[p], cpu[p], n, caps, cpus) for p in PHASES}
        out.append(FleetTime(cfg.name, n, sum(s for s, _ in parts.values()), sum(alone.values()),
                             parts))  # fmt: skip
    return out


def fleet_fan_out(cfg: Any, folders: dict[str, Costs], size: Size, caps: Caps,
                  sizes: Sequence[int], pack_method: str, cpus: float | None = None,
                  cpu_s: float | None = None,
                  fast_s: dict[str, float] | None = None) -> list[FleetTime]:  # fmt: skip
    """Rank 0 installs on its local disk and packs onto the volume; the others restore at
    once, then each runs its ready check."""
    first = fleet_install(cfg, folders, size, caps, [1], cpus, cpu_s, fast_s)[0]
    life = lifecycle.predict_lifecycle(cfg, folders, size, pack_method, cpu_s)
    if life is None:
        return []
    pack, restore, ready = (life.parts.get(k, 0.0) for k in ("pack", "restore", "ready"))
    install = first.seconds - first.parts["import"][0]  # its own ready check comes later
    steps = lifecycle.load_steps()
    kind = "squashfs" if pack_method.startswith("squashfs") else pack_method
    archive_mb = lifecycle.tree(load_opmix(cfg.installer), "venv", PHASES, size).bytes * float(
        steps["ratio"].get(kind, 1.0)) / 1e6  # fmt: skip
    mounted = pack_method in ("squashfs", "squashfs-loop", "squashfs-fuse")
    if mounted:  # a mounted image: the ready check reads its share of the archive's blocks
        mix, _, k_b = import_mix(load_opmix(cfg.installer), size)
        read_mb = float(mix.get("bytes_read", 0)) * k_b * float(steps["ratio"]["squashfs"]) / 1e6
    else:
        read_mb = archive_mb
    each = Demand(1 + read_mb * 1e6 / REQUEST_BYTES, read_mb * (1 / 3 if caps.metered else 1.0))
    out = []
    for n in sizes:
        if n == 1:  # alone, rank 0 is ready once installed (its pack follows, untimed)
            parts = {"install": (install, "alone"), "ready": (first.parts["import"][0], "alone")}
        else:
            parts = {"install": (install, "alone"), "pack": (pack, "alone"),
                     "restore": bounded(restore, each, restore, n - 1, caps, cpus),
                     "ready": bounded(ready, Demand(), ready, n - 1, caps, cpus)}  # fmt: skip
        total = sum(s for s, _ in parts.values())
        out.append(FleetTime(cfg.name, n, total, first.seconds, parts))
    return out


def polls_per_s(n: int) -> float:
    """The stats a fan-out's waiters send the volume each second while they wait."""
    return max(0, n - 1) / POLL_S


__all__ = [
    "Caps", "Demand", "FleetTime", "bounded", "demand", "fleet_fan_out", "fleet_install",
    "load_requests", "phase_demands", "polls_per_s", "preset_costs",
]  # fmt: skip
