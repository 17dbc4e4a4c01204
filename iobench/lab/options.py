"""How slow the emulated volume is: one frozen, validated set of numbers shared by the CLI,
:mod:`iobench.lab.manage` and the daemon (validated before anything is mounted)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from iobench.errors import UsageError

_MAX_LATENCY_MS = 60_000.0
# upper bounds of the rates: far above any real volume, low enough that arithmetic on them
# (tokens, bytes, tc's bit rate) stays exact and finite
_MAX = {
    "--iops": 1e7,
    "--mb-per-s": 1e6,
    "--burst-mb-per-s": 1e6,
    "--burst-credits-mb": 1e10,  # EFS's cap: 2.1 TiB per TiB stored
    "--burst-cap-mb": 1e10,
    "--client-mb-per-s": 1e6,
}
# lower bounds: the slowest request stays a finite wait (one operation a second; a 1 MiB
# request at 1 kB/s waits ~17 minutes); below them every request failed with EINVAL (a
# wait too long for the clock). Credits may start at 0 (a Bursting volume at its baseline).
_MIN = {
    "--iops": 1.0,
    "--mb-per-s": 0.001,
    "--burst-mb-per-s": 0.001,
    "--burst-credits-mb": 0.0,
    "--burst-cap-mb": 0.001,
    "--client-mb-per-s": 0.001,
}
# state files written before the units were named (the numbers meant the same)
_OLD_NAMES = {"mbps": "mb_per_s", "burst_mbps": "burst_mb_per_s"}


DEFAULT_CACHE_S = 1.0  # libfuse's own entry/attr timeout
#: the kinds of emulated volume, in the order `--kind` lists them; the first is the default
KINDS = ("fuse", "sshfs")


@dataclass(frozen=True)
class VolumeOptions:
    """Milliseconds, operations per second, and MB/s (10**6 bytes per second).

    ``mb_per_s`` is the baseline rate; ``burst_mb_per_s`` with ``burst_credits_mb`` adds an
    EFS-Bursting-like credit balance on top of it (see :mod:`iobench.system.shaping`).
    ``write_latency_ms`` (default: ``data_latency_ms``) is added to writes instead (EFS
    writes take ~2.7 ms, reads ~1 ms). ``burst_cap_mb`` is the most the credit balance may
    hold (default: the starting balance); ``metered`` counts operations against the balance
    as EFS meters them (data operations at least 32 KiB, metadata ones 4 KiB, reads a third:
    :func:`iobench.system.shaping.metered`); ``client_mb_per_s`` caps the actual bytes of one
    client apart from the metered link (EFS: 500 or 1,500 MiB/s). ``preset`` names the
    :mod:`iobench.lab.presets` entry these numbers came from ("" when given by hand).
    ``cache_s`` is how long the kernel may trust names and attributes it has looked up
    (FUSE entry/attr timeouts). The default, 1 s, is libfuse's own and behaves like an NFS
    client's attribute cache (about 12 round trips per installed file); 0 makes every path
    lookup a round trip (about 200 per installed file: far slower than real volumes).
    """

    latency_ms: float = 0.0
    data_latency_ms: float = 0.0
    iops: float | None = None
    mb_per_s: float | None = None
    burst_mb_per_s: float | None = None
    burst_credits_mb: float | None = None
    cache_s: float = DEFAULT_CACHE_S
    write_latency_ms: float | None = None
    burst_cap_mb: float | None = None
    metered: bool = False
    client_mb_per_s: float | None = None
    preset: str = ""

    def validate(self, kind: str = "fuse") -> VolumeOptions:
        """Return self, or raise :class:`UsageError` naming the first bad option."""
        if kind not in KINDS:
            raise UsageError(f"--kind must be one of {', '.join(KINDS)}, not {kind!r}")
        for flag, value in (
            ("--latency-ms", self.latency_ms),
            ("--data-latency-ms", self.data_latency_ms),
            ("--write-latency-ms", self.write_latency_ms or 0.0),
        ):
            if not _finite(value) or not 0 <= value <= _MAX_LATENCY_MS:
                raise UsageError(
                    f"{flag} must be a number from 0 to {_MAX_LATENCY_MS:g}, not {value}"
                )
        if not _finite(self.cache_s) or not 0 <= self.cache_s <= 3600:
            raise UsageError(f"--cache-s must be a number from 0 to 3600, not {self.cache_s}")
        for flag, rate in self._rates():
            if rate is not None and (not _finite(rate) or not _MIN[flag] <= rate <= _MAX[flag]):
                raise UsageError(
                    f"{flag} must be a number from {_MIN[flag]:g} to {_MAX[flag]:g}, not {rate}"
                )
        if (self.burst_mb_per_s is None) != (self.burst_credits_mb is None):
            raise UsageError(
                "--burst-mb-per-s and --burst-credits-mb go together; give both or neither"
            )
        if self.burst_cap_mb is not None and self.burst_mb_per_s is None:
            raise UsageError("--burst-cap-mb needs --burst-mb-per-s and --burst-credits-mb")
        if self.burst_mb_per_s is not None:
            if self.mb_per_s is None:
                raise UsageError(
                    "--burst-mb-per-s needs --mb-per-s, the baseline rate once credits run out"
                )
            if self.burst_mb_per_s <= self.mb_per_s:
                raise UsageError(
                    f"--burst-mb-per-s ({self.burst_mb_per_s:g}) must be above --mb-per-s ({self.mb_per_s:g})"
                )
        if kind == "sshfs":
            unsupported = [
                flag
                for flag, value in (
                    ("--latency-ms", self.latency_ms),
                    ("--data-latency-ms", self.data_latency_ms),
                    ("--write-latency-ms", self.write_latency_ms),
                    ("--iops", self.iops),
                    ("--burst-mb-per-s", self.burst_mb_per_s),
                    ("--client-mb-per-s", self.client_mb_per_s),
                    ("a metered preset", self.metered),
                    ("--cache-s", self.cache_s != DEFAULT_CACHE_S),
                )
                if value
            ]
            if unsupported:
                raise UsageError(
                    f"{', '.join(unsupported)} needs --kind fuse; --kind sshfs is a real network "
                    "filesystem shaped only by --mb-per-s (tc tbf)"
                )
        return self

    def _rates(self) -> tuple[tuple[str, float | None], ...]:
        return (
            ("--iops", self.iops),
            ("--mb-per-s", self.mb_per_s),
            ("--burst-mb-per-s", self.burst_mb_per_s),
            ("--burst-credits-mb", self.burst_credits_mb),
            ("--burst-cap-mb", self.burst_cap_mb),
            ("--client-mb-per-s", self.client_mb_per_s),
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for state and stats files."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VolumeOptions:
        """Options read back from a state file (older names accepted, unknown keys dropped)."""
        known = {f.name for f in fields(cls)}
        renamed = {_OLD_NAMES.get(k, k): v for k, v in data.items()}
        return cls(**{k: v for k, v in renamed.items() if k in known})

    def describe(self) -> str:
        """Short human summary, e.g. ``latency 1 ms, 20 MB/s (burst 200 MB/s for 50 MB)``."""
        parts = [f"preset {self.preset}"] if self.preset else []
        if self.latency_ms:
            parts.append(f"latency {self.latency_ms:g} ms")
        if self.data_latency_ms:
            parts.append(f"data latency {self.data_latency_ms:g} ms")
        if self.write_latency_ms is not None and self.write_latency_ms != self.data_latency_ms:
            parts.append(f"write latency {self.write_latency_ms:g} ms")
        if self.iops:
            parts.append(f"{self.iops:g} IOPS")
        if self.mb_per_s:
            rate = f"{_n(self.mb_per_s)} MB/s"
            if self.burst_mb_per_s:
                rate += f" (burst {_n(self.burst_mb_per_s)} MB/s for {_n(self.burst_credits_mb)} MB"
                if self.burst_cap_mb is not None and self.burst_cap_mb != self.burst_credits_mb:
                    rate += f" of at most {_n(self.burst_cap_mb)} MB"
                rate += ")"
            if self.metered:
                rate += " metered as EFS meters"
            parts.append(rate)
        if self.client_mb_per_s:
            parts.append(f"{_n(self.client_mb_per_s)} MB/s per client")
        if self.cache_s != DEFAULT_CACHE_S:
            parts.append(f"kernel cache {self.cache_s:g} s")
        return ", ".join(parts) or "no added delay"


def _n(x: float | None) -> str:
    """A rate or size for people: ``5.12``, ``104.9``, ``2,308,970``."""
    v = float(x or 0.0)
    return f"{v:,.0f}" if v >= 1000 else f"{v:.4g}"


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
