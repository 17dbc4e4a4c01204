"""Noisy neighbours: other processes that did significant disk I/O during a trial.

Why: a trial's time-to-ready is only comparable with others if the volume was not busy
with someone else's work (a checkpoint save, another install, a backup). iobench cannot
prevent that, but it can say so: the trial row's ``contended`` column names them.

Method: two passes over ``psutil.process_iter`` per trial, one at ``start()`` and one at
``stop()`` (none per tick), reading each process's storage-level counters
(``/proc/PID/io`` ``read_bytes`` + ``write_bytes``: bytes the process caused to be fetched
from or sent to the storage layer, not bytes moved through pipes or sockets). A process
seen at both ends (same pid and start time) is charged the difference; one that appeared
in between is charged all of its counters. Excluded: iobench's own process, its
descendants (seen at either pass: the installer trees), and ``exclude_pids``.

Limits: a process that both started and ended inside the interval is not seen; without
root (or CAP_SYS_PTRACE) other users' counters cannot be read (counted in
``unreadable``); writes through FUSE without writeback cache and some network file
systems are not charged as storage bytes by the kernel.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import psutil

DEFAULT_THRESHOLD = 5_000_000  # bytes of storage I/O in one trial that count as contention
_ATTRS = ["pid", "name", "create_time", "io_counters"]


@dataclass(frozen=True)
class Contender:
    """A process that did more storage I/O than the threshold during the interval."""

    name: str
    pid: int
    read_bytes: int
    write_bytes: int

    @property
    def bytes(self) -> int:
        return self.read_bytes + self.write_bytes

    @property
    def mb(self) -> float:
        return self.bytes / 1e6


@dataclass(frozen=True)
class _Seen:
    name: str
    create_time: float | None
    read_bytes: int
    write_bytes: int


def _descendants(pid: int) -> set[int]:
    try:
        return {p.pid for p in psutil.Process(pid).children(recursive=True)}
    except psutil.Error:
        return set()


class ContentionWatch:
    """Snapshot every process's disk counters at ``start()``; ``stop()`` names the busy ones.

    ``exclude_pids``: pids not to report, or a callable returning them, evaluated at
    ``stop()`` (for processes the runner only knows later).
    """

    def __init__(
        self,
        exclude_pids: set[int] | frozenset[int] | Callable[[], Iterable[int]] = frozenset(),
        threshold_bytes: int = DEFAULT_THRESHOLD,
        tree_of: int | None = None,
    ) -> None:
        self.exclude_pids = exclude_pids
        self.tree_of = tree_of  # a fleet's launcher: its ranks are this run, not contention
        self.threshold_bytes = threshold_bytes
        self.own_pid = os.getpid()
        self.unreadable = 0  # processes whose counters could not be read (other users)
        self.scan_s = 0.0  # time spent in the two passes, to keep the cost visible
        self._before: dict[int, _Seen] | None = None
        self._ours: set[int] = set()

    def _scan(self) -> dict[int, _Seen]:
        t0 = time.perf_counter()
        seen: dict[int, _Seen] = {}
        unreadable = 0
        for proc in psutil.process_iter(_ATTRS, ad_value=None):
            info = proc.info
            io = info.get("io_counters")
            if io is None:
                unreadable += 1
                continue
            seen[info["pid"]] = _Seen(
                str(info.get("name") or "?"),
                info.get("create_time"),
                int(io.read_bytes),
                int(io.write_bytes),
            )
        self.unreadable = unreadable
        self.scan_s += time.perf_counter() - t0
        return seen

    def start(self) -> ContentionWatch:
        self.scan_s = 0.0
        self._before = self._scan()
        self._ours = _descendants(self.own_pid)
        return self

    def stop(self) -> list[Contender]:
        """Processes over the threshold since ``start()``, busiest first."""
        if self._before is None:
            raise RuntimeError("ContentionWatch.stop() before start()")
        after = self._scan()
        excluded = {self.own_pid} | self._ours | _descendants(self.own_pid)
        if self.tree_of is not None:
            excluded |= _descendants(self.tree_of)
        extra = self.exclude_pids() if callable(self.exclude_pids) else self.exclude_pids
        excluded.update(extra)
        out: list[Contender] = []
        for pid, now in after.items():
            if pid in excluded:
                continue
            was = self._before.get(pid)
            if was is not None and was.create_time == now.create_time:
                rd, wr = now.read_bytes - was.read_bytes, now.write_bytes - was.write_bytes
            else:  # started during the interval (or a reused pid): all of it is new
                rd, wr = now.read_bytes, now.write_bytes
            if rd + wr > self.threshold_bytes:
                out.append(Contender(now.name, pid, max(rd, 0), max(wr, 0)))
        self._before = None
        return sorted(out, key=lambda c: c.bytes, reverse=True)


def _mb(mb: float) -> str:
    return f"{mb:.0f}" if mb >= 10 else f"{mb:.1f}"


def format_contended(contenders: Iterable[Contender], limit: int = 5) -> str:
    """``name[pid]:MB;...`` for the trials.csv ``contended`` column (per name, busiest
    first): the pid when one process had the name (another iobench run, say, is then found),
    ``name[xN]`` when N had it."""
    by_name: dict[str, float] = {}
    pids: dict[str, set[int]] = {}
    for c in contenders:
        name = re.sub(r"[:;,\s\[\]]", "_", c.name) or "?"
        by_name[name] = by_name.get(name, 0.0) + c.mb
        pids.setdefault(name, set()).add(c.pid)
    top = sorted(by_name.items(), key=lambda kv: kv[1], reverse=True)[:limit]

    def label(name: str) -> str:
        who = pids[name]
        return f"{name}[{next(iter(who))}]" if len(who) == 1 else f"{name}[x{len(who)}]"

    return ";".join(f"{label(name)}:{_mb(mb)}" for name, mb in top)


def parse_contended(text: str | None) -> list[tuple[str, float]]:
    """Read a ``contended`` cell back: ``[(name, MB), ...]``; empty or malformed parts skipped."""
    out: list[tuple[str, float]] = []
    for part in (text or "").split(";"):
        name, sep, mb = part.rpartition(":")
        if not sep or not name:
            continue
        try:
            out.append((name, float(mb)))
        except ValueError:
            continue
    return out
