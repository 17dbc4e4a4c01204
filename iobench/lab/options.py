"""How slow the emulated volume is: one frozen, validated set of numbers shared by the CLI,
:mod:`iobench.lab.manage` and the daemon (validated before anything is mounted)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from iobench.errors import UsageError

KINDS = ("fuse", "sshfs")
_MAX_LATENCY_MS = 60_000.0


DEFAULT_CACHE_S = 1.0  # libfuse's own entry/attr timeout


@dataclass(frozen=True)
class VolumeOptions:
    """Milliseconds, operations per second, and MB/s (10**6 bytes per second).

    ``mbps`` is the baseline rate; ``burst_mbps`` with ``burst_credits_mb`` adds an
    EFS-Bursting-like credit balance on top of it (see :mod:`iobench.lab.shaping`).
    ``cache_s`` is how long the kernel may trust names and attributes it has looked up
    (FUSE entry/attr timeouts). The default, 1 s, is libfuse's own and behaves like an NFS
    client's attribute cache (about 12 round trips per installed file); 0 makes every path
    lookup a round trip (about 200 per installed file: far slower than real volumes).
    """

    latency_ms: float = 0.0
    data_latency_ms: float = 0.0
    iops: float | None = None
    mbps: float | None = None
    burst_mbps: float | None = None
    burst_credits_mb: float | None = None
    cache_s: float = DEFAULT_CACHE_S

    def validate(self, kind: str = "fuse") -> VolumeOptions:
        """Return self, or raise :class:`UsageError` naming the first bad option."""
        if kind not in KINDS:
            raise UsageError(f"--kind must be one of {', '.join(KINDS)}, not {kind!r}")
        for flag, value in (("--latency-ms", self.latency_ms), ("--data-latency-ms", self.data_latency_ms)):
            if not _finite(value) or not 0 <= value <= _MAX_LATENCY_MS:
                raise UsageError(f"{flag} must be a number from 0 to {_MAX_LATENCY_MS:g}, not {value}")
        if not _finite(self.cache_s) or not 0 <= self.cache_s <= 3600:
            raise UsageError(f"--cache-s must be a number from 0 to 3600, not {self.cache_s}")
        for flag, value in (
            ("--iops", self.iops),
            ("--mbps", self.mbps),
            ("--burst-mbps", self.burst_mbps),
            ("--burst-credits-mb", self.burst_credits_mb),
        ):
            if value is not None and (not _finite(value) or value <= 0):
                raise UsageError(f"{flag} must be a positive number, not {value}")
        if (self.burst_mbps is None) != (self.burst_credits_mb is None):
            raise UsageError("--burst-mbps and --burst-credits-mb go together; give both or neither")
        if self.burst_mbps is not None:
            if self.mbps is None:
                raise UsageError("--burst-mbps needs --mbps, the baseline rate once credits run out")
            if self.burst_mbps <= self.mbps:
                raise UsageError(
                    f"--burst-mbps ({self.burst_mbps:g}) must be above --mbps ({self.mbps:g})"
                )
        if kind == "sshfs":
            unsupported = [
                flag
                for flag, value in (
                    ("--latency-ms", self.latency_ms),
                    ("--data-latency-ms", self.data_latency_ms),
                    ("--iops", self.iops),
                    ("--burst-mbps", self.burst_mbps),
                    ("--cache-s", self.cache_s != DEFAULT_CACHE_S),
                )
                if value
            ]
            if unsupported:
                raise UsageError(
                    f"{', '.join(unsupported)} needs --kind fuse; --kind sshfs is a real network "
                    "filesystem shaped only by --mbps (tc tbf)"
                )
        return self

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for state and stats files."""
        return asdict(self)

    def daemon_args(self) -> list[str]:
        """Command-line flags for ``python -m iobench.lab.daemon``."""
        args = [
            "--latency-ms", repr(float(self.latency_ms)),
            "--data-latency-ms", repr(float(self.data_latency_ms)),
            "--cache-timeout-s", repr(float(self.cache_s)),
        ]
        for flag, value in (
            ("--iops", self.iops),
            ("--mbps", self.mbps),
            ("--burst-mbps", self.burst_mbps),
            ("--burst-credits-mb", self.burst_credits_mb),
        ):
            if value is not None:
                args += [flag, repr(float(value))]
        return args

    def describe(self) -> str:
        """Short human summary, e.g. ``latency 1 ms, 20 MB/s (burst 200 MB/s for 50 MB)``."""
        parts = []
        if self.latency_ms:
            parts.append(f"latency {self.latency_ms:g} ms")
        if self.data_latency_ms:
            parts.append(f"data latency {self.data_latency_ms:g} ms")
        if self.iops:
            parts.append(f"{self.iops:g} IOPS")
        if self.mbps:
            rate = f"{self.mbps:g} MB/s"
            if self.burst_mbps:
                rate += f" (burst {self.burst_mbps:g} MB/s for {self.burst_credits_mb:g} MB)"
            parts.append(rate)
        if self.cache_s != DEFAULT_CACHE_S:
            parts.append(f"kernel cache {self.cache_s:g} s")
        return ", ".join(parts) or "no added delay"


def _finite(value: float) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)
