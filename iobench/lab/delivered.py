"""What a lab volume delivered, against what its options allow: the one place that says
whether a figure measured on the lab was set by the emulated volume or by the lab itself.

The daemon keeps a :class:`Meter` per direction (reads, writes): the requests and bytes; the
time at least one request of that direction was in the daemon (``busy_s``: the union of
their spans, from the moment the daemon got one to its reply); the sum of those spans
(``span_s``); the sum of what each span should have been (``intended_s``: from the moment
the daemon got it to its deadline — the IOPS bucket's wait, the queue on the shared link,
its bytes at the rate in force, its latency); and the seconds the volume's rate limits
spent on those bytes (``pipe_s``: each request's time on the link, metered as the preset
meters, or under the client's cap, whichever is longer; no rate limit, no ``pipe_s``). Two
snapshots of the live stats give a :class:`Delivery`.

Method. The lab *delivered* ``bytes / busy_s``. Had every request taken exactly the time
the options intend, the same requests in flight would have moved the same bytes in
``intended_s / span_s`` of the time, so the volume *allows*

    allowed = min(R, delivered × span_s / intended_s),    R = bytes / pipe_s

(``R``: the rate limit in force, burst or baseline, reads metered at a third, or the
client's cap). Whatever holds a figure by the options themselves — a single stream of 1 MiB
writes at EFS's 2.7 ms, ~310 MB/s under Elastic's 1,573 MB/s per client; requests queued
behind a Provisioned rate — is in ``intended_s`` and allowed; what the lab adds (Python's
time per request, a late wake-up, a CPU shared with the workload) is not. When the lab
delivers less than 90 % of that (``LAB_SHORTFALL``, :func:`iobench.units.lab_gave`), the lab
limited the figure, and runs, reports and ``lab status`` say so. Time a request spends before
the daemon sees it (the kernel's queue, libfuse's own copy) is not in any span: the rule can
miss a lab that is slow there, never blame one that is not. Only volumes with a rate limit
are judged (a volume with no rate promises none).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from iobench.lab.state import find, mount_path, read_json
from iobench.system import procfs

#: the daemon's request directions with a meter
DIRECTIONS = ("read", "write")
#: below this many bytes moved in a direction, nothing is judged (too little to say)
MIN_BYTES = 8_000_000
FUSE_TYPE = "fuse.iobench-lab"
#: how long a snapshot waits for the daemon's next refresh of its live stats (every 0.25 s)
FRESH_S = 0.3


class Meter:
    """One direction's counters in the daemon (thread-safe; see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests = 0
        self.bytes = 0
        self.busy_s = 0.0
        self.span_s = 0.0
        self.intended_s = 0.0
        self.pipe_s = 0.0
        self._in_flight = 0
        self._busy_since = 0.0

    def begin(self, t0: float) -> None:
        """A request of this direction reached the daemon at ``t0`` (monotonic)."""
        with self._lock:
            if not self._in_flight:
                self._busy_since = t0
            self._in_flight += 1

    def end(self, t0: float, t1: float, nbytes: int, pipe_s: float, intended_s: float) -> None:
        """It was answered at ``t1``, moving ``nbytes`` in ``pipe_s`` of the rate limits; the
        options meant it to take ``intended_s``."""
        with self._lock:
            self._in_flight -= 1
            if not self._in_flight:
                self.busy_s += t1 - self._busy_since
            self.requests += 1
            self.bytes += nbytes
            self.span_s += t1 - t0
            self.intended_s += max(intended_s, 0.0)
            self.pipe_s += pipe_s

    def to_dict(self, now: float) -> dict[str, float | int]:
        """The counters as the stats file holds them (a busy period still open counts to ``now``)."""
        with self._lock:
            busy = self.busy_s + (now - self._busy_since if self._in_flight else 0.0)
            return {
                "requests": self.requests,
                "bytes": self.bytes,
                "busy_s": round(busy, 6),
                "span_s": round(self.span_s, 6),
                "intended_s": round(self.intended_s, 6),
                "pipe_s": round(self.pipe_s, 9),
            }


@dataclass(frozen=True)
class Delivery:
    """One direction of a lab volume between two snapshots of its stats."""

    direction: str
    requests: int
    bytes: int
    busy_s: float
    span_s: float
    intended_s: float
    pipe_s: float | None  # None: the volume has no rate limit

    @property
    def mb_per_s(self) -> float | None:
        """What the lab delivered while requests of this direction were in it, MB/s."""
        return self.bytes / self.busy_s / 1e6 if self.busy_s > 0 and self.bytes else None

    @property
    def allowed_mb_per_s(self) -> float | None:
        """What the volume's options allow these requests, MB/s (module docstring); None
        without a rate limit, or with too little moved to judge."""
        delivered = self.mb_per_s
        if self.pipe_s is None or self.pipe_s <= 0 or self.bytes < MIN_BYTES or not delivered:
            return None
        rate = self.bytes / self.pipe_s / 1e6
        if self.intended_s <= 0:
            return rate
        return min(rate, delivered * max(self.span_s / self.intended_s, 1.0))

    def to_dict(self) -> dict[str, Any]:
        return {
            "direction": self.direction,
            "bytes": self.bytes,
            "requests": self.requests,
            "mb_per_s": _round(self.mb_per_s),
            "allowed_mb_per_s": _round(self.allowed_mb_per_s),
            "in_flight": round(self.span_s / self.busy_s, 2) if self.busy_s > 0 else None,
        }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


def deliveries(after: dict[str, Any], before: dict[str, Any] | None = None) -> dict[str, Delivery]:
    """Each direction's :class:`Delivery` between two stats snapshots (``before`` None: since
    mounting); empty for stats that keep no meters (a daemon older than schema 3)."""
    data = after.get("data")
    if not isinstance(data, dict):
        return {}
    old = (before or {}).get("data") or {}
    options = after.get("options") or {}
    rated = bool(options.get("mb_per_s") or options.get("client_mb_per_s"))
    out = {}
    for d in DIRECTIONS:
        now, then = data.get(d) or {}, old.get(d) or {}
        try:
            diff = {k: float(now.get(k, 0)) - float(then.get(k, 0)) for k in _KEYS}
        except (TypeError, ValueError):
            continue
        out[d] = Delivery(
            d,
            int(diff["requests"]),
            int(diff["bytes"]),
            diff["busy_s"],
            diff["span_s"],
            diff["intended_s"],
            diff["pipe_s"] if rated else None,
        )
    return out


_KEYS = ("requests", "bytes", "busy_s", "span_s", "intended_s", "pipe_s")


def _older(stats: dict[str, Any] | None, than: float) -> bool:
    updated = stats.get("updated") if isinstance(stats, dict) else None
    return not isinstance(updated, (int, float)) or updated < than


@dataclass(frozen=True)
class VolumeDelivery:
    """What one lab volume delivered during a stretch of a run."""

    mountpoint: str
    read: Delivery | None
    write: Delivery | None
    preset: str = ""  # the volume's preset ("" when its options were given by hand)

    @property
    def moved(self) -> int:
        return sum(d.bytes for d in (self.read, self.write) if d is not None)


class Gauge:
    """The lab volumes under some folders, read before and after a stretch of work (a trial)."""

    def __init__(self, folders: list[str | os.PathLike[str]]) -> None:
        mounts = []
        for folder in folders:
            mount = procfs.mount_of(os.fspath(folder))
            if mount is not None and mount.fstype == FUSE_TYPE and mount.mountpoint not in mounts:
                mounts.append(mount.mountpoint)
        self.mounts = mounts

    def snapshot(self, fresh_s: float = FRESH_S) -> dict[str, dict[str, Any]]:
        """Each volume's live stats as of now (those that cannot be read are left out): the
        daemon rewrites them every 0.25 s when something changed, so this waits up to
        ``fresh_s`` for a copy written after the call (an idle volume writes none)."""
        out = {}
        asked = time.time()
        for mp in self.mounts:
            lab = find(mount_path(mp))
            if lab is None:
                continue
            deadline = time.monotonic() + fresh_s
            stats = read_json(lab.live_stats_path)
            while _older(stats, asked) and time.monotonic() < deadline:
                time.sleep(0.05)
                stats = read_json(lab.live_stats_path)
            if isinstance(stats, dict):
                out[mp] = stats
        return out

    def since(self, before: dict[str, dict[str, Any]]) -> VolumeDelivery | None:
        """What the volume that moved the most bytes since ``before`` delivered, or None."""
        best = None
        for mp, stats in self.snapshot().items():
            got = deliveries(stats, before.get(mp))
            preset = str((stats.get("options") or {}).get("preset") or "")
            vd = VolumeDelivery(mp, got.get("read"), got.get("write"), preset)
            if vd.moved and (best is None or vd.moved > best.moved):
                best = vd
        return best
