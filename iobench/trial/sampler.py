"""Background sampling of the system and of the installer's process tree.

Why: the freeze iobench measures is silent. CPU iowait alone misses it on FUSE and NFS
(those waits often do not count as iowait), so each tick also records processes blocked
in the kernel (``procs_blocked``), the installer tree's threads in uninterruptible sleep
(D state), its CPU time (off-CPU fraction = 1 − CPU / wall) and its read()/write() bytes
and calls — progress is judged by those advancing, never by walking the target (walking a
slow volume would disturb what is measured).

Method: one daemon thread ticks at ``hz`` on a monotonic schedule (no drift). A tick reads
/proc/stat (CPU split, procs_blocked), /proc/diskstats and /proc/net/dev through psutil,
and for each process of the watched tree /proc/PID/io, /proc/PID/stat and its tasks'
states. The tree is found through /proc/PID/task/TID/children (no scan of all processes).
Tree counters are cumulative over the trial: the counters of phases that ended (read
exactly from the zombie before it is reaped, children included) plus the live tree.

Stall rule: no advance in the tree's write or read calls or bytes for ``stall_after``
seconds opens a stall interval; it closes at the next advance. (Writes alone would call a
slow import from a network volume a stall: it only reads.) Filesystem usage of the roles
is polled at the same rate by a child process (``iobench.system.child.Poller``), one statvfs
per filesystem, so that a volume that hangs statfs cannot stop the ticks that are meant to
show the hang, nor hold iobench at its exit (a thread blocked in statfs on a FUSE volume
whose server stopped cannot be ended). The sampler's own CPU time, the child's included, is
kept so its cost can be reported.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from iobench.rundir.records import Sample, Stall
from iobench.system import child

#: how often a lab volume's credit balance is re-read (its daemon writes it every 0.25 s)
CREDITS_EVERY_S = 0.25


@dataclass
class TreeCounters:
    """Cumulative I/O and CPU of a process tree (Linux /proc/PID/io and stat)."""

    read_bytes: int = 0  # rchar: bytes passed to read()-like calls
    write_bytes: int = 0  # wchar
    read_calls: int = 0  # syscr
    write_calls: int = 0  # syscw
    disk_write_bytes: int = 0  # write_bytes: caused to be sent to a block device
    cpu_s: float = 0.0

    def __add__(self, other: TreeCounters) -> TreeCounters:
        return TreeCounters(*(a + b for a, b in zip(astuple(self), astuple(other))))


def astuple(c: TreeCounters) -> tuple:
    return (c.read_bytes, c.write_bytes, c.read_calls, c.write_calls, c.disk_write_bytes, c.cpu_s)


_CLK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def fs_used(paths: dict[str, Path]) -> dict[str, int | None]:
    """Used bytes of each role's filesystem (None where it cannot be read): one statvfs per
    filesystem. Runs in the poller's child process."""
    by_dev: dict[int, int] = {}
    used: dict[str, int | None] = {}
    for label, path in paths.items():
        try:
            dev = os.stat(path).st_dev
            if dev not in by_dev:
                st = os.statvfs(path)
                by_dev[dev] = (st.f_blocks - st.f_bfree) * st.f_frsize
            used[label] = by_dev[dev]
        except OSError:
            used[label] = None
    return used


def _cpu_s(pid: int | None) -> float:
    """CPU seconds (user + system) of ``pid`` so far; 0 when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLK
    except (OSError, IndexError, ValueError):
        return 0.0


# Kernel functions a thread sleeps in while it waits for a filesystem or the block layer
# (/proc/PID/task/TID/wchan). FUSE waits sleep interruptibly (state S, no iowait), so
# neither D state nor iowait shows them; the wait channel does.
FS_WAIT = re.compile(
    rb"^(request_wait_answer|fuse_|rpc_wait|nfs|__rpc|io_schedule|folio_wait|wait_on_page|"
    rb"__lock_page|jbd2|blk_|bit_wait_io|ext4_|xfs_|__wait_on_buffer|wait_on_buffer|"
    rb"do_get_write_access|__filemap|filemap_|ovl_|p9_|cifs_|smb)"
)


def read_process(
    pid: int, include_children: bool = True, waits: bool = True
) -> tuple[TreeCounters, int, int]:
    """Counters, D-state thread count and RSS of one process (children reaped by it included).

    Works on a zombie that has not been reaped yet: the kernel has then folded every
    descendant it waited for into the process's own accounting.
    """
    c = TreeCounters()
    with open(f"/proc/{pid}/io", "rb") as fh:
        for line in fh:
            key, _, val = line.partition(b":")
            v = int(val)
            if key == b"rchar":
                c.read_bytes = v
            elif key == b"wchar":
                c.write_bytes = v
            elif key == b"syscr":
                c.read_calls = v
            elif key == b"syscw":
                c.write_calls = v
            elif key == b"write_bytes":
                c.disk_write_bytes = v
    with open(f"/proc/{pid}/stat", "rb") as fh:
        stat = fh.read()
    fields = stat[stat.rindex(b")") + 2 :].split()
    # fields[0] is state (field 3); utime is field 14 -> index 11
    ticks = int(fields[11]) + int(fields[12])
    if include_children:
        ticks += int(fields[13]) + int(fields[14])
    c.cpu_s = ticks / _CLK
    rss = int(fields[21]) * _PAGE
    return c, (_thread_waits(pid)[0] if waits else 0), rss


def _thread_waits(pid: int) -> tuple[int, int]:
    """(threads in D state, threads sleeping in a filesystem or block-layer wait)."""
    dstate = fswait = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0, 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as fh:
                s = fh.read()
            state = s[s.rindex(b")") + 2 : s.rindex(b")") + 3]
            if state == b"D":
                dstate += 1
            if state in (b"D", b"S"):
                with open(f"/proc/{pid}/task/{tid}/wchan", "rb") as fh:
                    if FS_WAIT.match(fh.read()):
                        fswait += 1
        except OSError:
            continue
    return dstate, fswait


def tree_pids(root: int) -> list[int]:
    """The root and all its live descendants, via /proc/PID/task/TID/children."""
    out = [root]
    i = 0
    while i < len(out):
        pid = out[i]
        i += 1
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                try:
                    with open(f"/proc/{pid}/task/{tid}/children") as fh:
                        out.extend(int(x) for x in fh.read().split())
                except OSError:
                    continue
        except OSError:
            continue
    return out


def _read_stat() -> tuple[list[int], int]:
    with open("/proc/stat", "rb") as fh:
        cpu: list[int] = []
        blocked = 0
        for line in fh:
            if line.startswith(b"cpu "):
                cpu = [int(x) for x in line.split()[1:]]
            elif line.startswith(b"procs_blocked"):
                blocked = int(line.split()[1])
    return cpu, blocked


def _walk_tree(root: int | None) -> tuple[TreeCounters, int, int, int, int]:
    """The live tree under ``root``: summed counters, threads in D state and in filesystem
    waits, resident bytes, and the number of processes."""
    live = TreeCounters()
    dstate = fswait = rss = procs = 0
    if root is None:
        return live, dstate, fswait, rss, procs
    for pid in tree_pids(root):
        try:
            c, _, r = read_process(pid, include_children=(pid == root), waits=False)
        except (OSError, ValueError, IndexError):
            continue
        dd, fw = _thread_waits(pid)
        live = live + c
        dstate += dd
        fswait += fw
        rss += r
        procs += 1
    return live, dstate, fswait, rss, procs


@dataclass
class SamplerResult:
    rows: list[dict]
    stalls: list[Stall]
    self_cpu_s: float
    ticks: int
    fs_peak: dict[str, int] = field(default_factory=dict)  # max used bytes per fs label


class Sampler:
    """Sample at ``hz`` in a thread; watch one process tree at a time (one per phase)."""

    def __init__(
        self,
        hz: float = 10.0,
        stall_after: float = 30.0,
        fs_paths: dict[str, Path] | None = None,
        credits: Callable[[], float | None] | None = None,
    ) -> None:
        if hz <= 0:
            raise ValueError("hz must be > 0")
        self.period = 1.0 / hz
        self.stall_after = stall_after
        self.fs_paths = dict(fs_paths or {})
        #: a lab volume's burst-credit balance (MB), read at most every CREDITS_EVERY_S
        self._credits = credits
        self._credits_at = -math.inf
        self._credits_mb: float | None = None
        self.rows: list[dict] = []
        self.stalls: list[Stall] = []
        self.phase = "setup"
        self._lock = threading.Lock()
        self._root: int | None = None
        self._done = TreeCounters()  # finished phases
        self._live = TreeCounters()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._progress_t = 0.0
        self._progress_key: tuple[int, ...] = (0, 0, 0, 0)
        self._stall_start: float | None = None
        self._stall_d = 0
        self._stall_iow: list[float] = []
        self._self_cpu = 0.0
        self._fs_peak: dict[str, int] = {}
        self._fs_used: dict[str, int | None] = {}
        self._fs_poller: child.Poller | None = None

    # ------------------------------------------------------------------ control
    def start(self, zero: float | None = None) -> Sampler:
        """Start ticking; sample times count from ``zero`` (a monotonic time: the trial's
        start, so that a sample's ``t`` and the row's times share one origin), else now."""
        self._t0 = time.monotonic() if zero is None else zero
        self._progress_t = self._t0
        self._prev_t = time.monotonic()  # the counters' own time, for the first tick's rates
        self._prev_stat = _read_stat()[0]
        self._prev_disk = psutil.disk_io_counters()
        self._prev_net = psutil.net_io_counters()
        if self.fs_paths:
            paths = dict(self.fs_paths)
            self._fs_poller = child.Poller(lambda: fs_used(paths), self.period).start()
        self._thread = threading.Thread(target=self._loop, name="iobench-sampler", daemon=True)
        self._thread.start()
        return self

    def _take_fs(self) -> dict[str, int | None]:
        """The newest usage the poller sent (the one before while none came since)."""
        if self._fs_poller is not None:
            used = self._fs_poller.latest()
            if isinstance(used, dict) and used is not self._fs_used:
                self._fs_used = used
                for label, u in used.items():
                    if u is not None:
                        self._fs_peak[label] = max(self._fs_peak.get(label, 0), u)
        return dict(self._fs_used)

    def watch(self, pid: int, phase: str) -> None:
        """Measure ``pid``'s tree from now on, labelled ``phase``."""
        with self._lock:
            self._root = pid
            self.phase = phase
            self._live = TreeCounters()

    def finish(self, counters: TreeCounters) -> None:
        """The watched root ended; its exact totals (read from the zombie) join the done sum."""
        with self._lock:
            self._done = self._done + counters
            self._live = TreeCounters()
            self._root = None

    def elapsed(self) -> float:
        return time.monotonic() - self._t0

    def current_stall_s(self) -> float:
        """Seconds since the tree last made progress, if that is longer than stall_after."""
        with self._lock:
            return (time.monotonic() - self._stall_start) if self._stall_start is not None else 0.0

    def since_progress_s(self) -> float:
        with self._lock:
            return time.monotonic() - self._progress_t

    def latest(self) -> dict | None:
        with self._lock:
            return self.rows[-1] if self.rows else None

    def live(self) -> TreeCounters:
        """The running phase's counters as last sampled (for a phase whose zombie is gone)."""
        with self._lock:
            return self._live

    def totals(self) -> TreeCounters:
        with self._lock:
            return self._done + self._live

    def stop(self) -> SamplerResult:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._fs_poller is not None:
            self._take_fs()
            self._self_cpu += _cpu_s(self._fs_poller.pid)
            self._fs_poller.close()
        with self._lock:
            self._close_stall(time.monotonic())
            return SamplerResult(
                rows=self.rows,
                stalls=self.stalls,
                self_cpu_s=self._self_cpu,
                ticks=len(self.rows),
                fs_peak=dict(self._fs_peak),
            )

    # ------------------------------------------------------------------ ticking
    def _loop(self) -> None:
        next_t = self._t0 + self.period
        while not self._stop.is_set():
            delay = next_t - time.monotonic()
            if delay > 0 and self._stop.wait(delay):
                break
            c0 = time.thread_time()
            try:
                self._tick()
            except Exception:  # noqa: BLE001 - a bad tick must never end the trial
                pass
            self._self_cpu += time.thread_time() - c0
            next_t += self.period
            now = time.monotonic()
            if next_t < now:  # fell behind (loaded machine): skip, do not burst
                next_t = now + self.period

    def _tick(self) -> None:
        now = time.monotonic()
        dt = max(now - self._prev_t, 1e-6)
        cpu, blocked = _read_stat()
        d = [b - a for a, b in zip(self._prev_stat, cpu)]
        total = max(sum(d[:8]), 1)  # user nice system idle iowait irq softirq steal
        disk = psutil.disk_io_counters()
        net = psutil.net_io_counters()
        with self._lock:
            root = self._root
            phase = self.phase
        live, dstate, fswait, rss, procs = _walk_tree(root)
        fs = self._take_fs()
        with self._lock:
            if root is not None and root == self._root:
                self._live = live
            cum = self._done + self._live
            self._watch_progress(cum, now, phase, dstate, root is not None)
            iowait = 100.0 * d[4] / total if len(d) > 4 else 0.0
            if self._stall_start is not None:
                self._stall_iow.append(iowait)
            sample = Sample(
                t=round(now - self._t0, 4),
                phase=phase,
                cpu_user_pct=round(100.0 * (d[0] + d[1]) / total, 2),
                cpu_system_pct=round(100.0 * (d[2] + d[5] + d[6]) / total, 2),
                iowait_pct=round(iowait, 2),
                procs_blocked=blocked,
                disk_read_bps=round((disk.read_bytes - self._prev_disk.read_bytes) / dt)
                if disk and self._prev_disk
                else 0,
                disk_write_bps=round((disk.write_bytes - self._prev_disk.write_bytes) / dt)
                if disk and self._prev_disk
                else 0,
                net_recv_bps=round((net.bytes_recv - self._prev_net.bytes_recv) / dt),
                net_sent_bps=round((net.bytes_sent - self._prev_net.bytes_sent) / dt),
                tree_procs=procs,
                tree_cpu_s=round(cum.cpu_s, 3),
                tree_read_bytes=cum.read_bytes,
                tree_write_bytes=cum.write_bytes,
                tree_write_calls=cum.write_calls,
                tree_dstate=dstate,
                tree_fswait=fswait,
                tree_rss_bytes=rss,
                fs_used_venv=fs.get("venv"),
                fs_used_tmpdir=fs.get("tmpdir"),
                fs_used_cache=fs.get("cache"),
                target_credits_mb=self._credit_balance(now),
            )
            # rows stay dicts keyed by column while the runner and live view index them by name
            self.rows.append(sample.as_dict())
        self._prev_stat, self._prev_disk, self._prev_net, self._prev_t = cpu, disk, net, now

    def _credit_balance(self, now: float) -> float | None:
        """The volume's balance, re-read only as often as the lab refreshes it."""
        if self._credits is not None and now - self._credits_at >= CREDITS_EVERY_S:
            self._credits_at = now
            try:
                self._credits_mb = self._credits()
            except (OSError, ValueError, TypeError):
                self._credits_mb = None
        return self._credits_mb

    def _watch_progress(
        self, cum: TreeCounters, now: float, phase: str, dstate: int, running: bool
    ) -> None:
        """Open a stall after ``stall_after`` s without read or write progress; close it on any."""
        key = (cum.write_calls, cum.write_bytes, cum.read_calls, cum.read_bytes)
        if key != self._progress_key:
            self._progress_key = key
            self._progress_t = now
            self._close_stall(now)
        elif now - self._progress_t >= self.stall_after and running:
            if self._stall_start is None:
                self._stall_start = self._progress_t
                self._stall_phase = phase
            self._stall_d = max(self._stall_d, dstate)

    def _close_stall(self, now: float) -> None:
        if self._stall_start is None:
            return
        iow = self._stall_iow
        self.stalls.append(
            Stall(
                start_s=round(self._stall_start - self._t0, 3),
                length_s=round(now - self._stall_start, 3),
                phase=getattr(self, "_stall_phase", self.phase),
                dstate_max=self._stall_d,
                iowait_mean_pct=round(sum(iow) / len(iow), 2) if iow else 0.0,
            )
        )
        self._stall_start = None
        self._stall_d = 0
        self._stall_iow = []


def stall_dicts(stalls: list[Stall]) -> list[dict]:
    return [asdict(s) for s in stalls]
