"""A FUSE passthrough filesystem that is slow the way network volumes are slow.

Method: every request the kernel sends is served from a backing folder and then held until

    deadline = start + transfer + latency

where ``start`` is when the daemon received it, or later when the ``--iops`` token bucket
(:class:`~iobench.system.shaping.TokenBucket`) says so; ``transfer`` is the time the request's
bytes need on the shared byte link (:class:`~iobench.system.shaping.ByteLink`, ``--mb-per-s`` with
optional EFS-Bursting credits; reads and writes only); and ``latency`` is ``latency_ms`` for
metadata requests and ``data_latency_ms`` for read/write. The backing call itself runs
before the wait, so failing requests (a negative lookup) pay the round trip too. Data never
passes through Python: a read is answered with the backing file's descriptor, which libfuse
splices into ``/dev/fuse`` after the wait, and a write is copied by libfuse from its request
buffer into the backing file (:mod:`iobench.lab.libfuse`, which says why: ~0.8-1.1 GB/s with
four streams before, against ~2 GB/s now on a 2-core VM; docs/lab.md).

Choices, and why:
- The wait is a ``time.sleep`` in the FUSE worker thread that serves the request, not a
  global lock: a real network volume has many requests in flight, so two processes (or the
  kernel's asynchronous ``release``) overlap their round trips. libfuse's multithreaded
  loop serves up to ``max_threads`` (64) requests at once.
- Sleeps are made precise: timer slack 1 µs, and each sleep ends early by the mean
  lateness measured so far (an EWMA of wake-up delay, ~50-100 µs on a VM), so the mean
  wait equals the configured latency. The daemon runs at nice -10 so that the emulated
  server does not queue behind the workload for a CPU (a real one runs elsewhere). What
  remains is the Python FUSE cost of a request, ~40-50 µs on a 2-core VM.
- The kernel's name and attribute caches (FUSE ``entry_timeout``, ``attr_timeout``,
  ``negative_timeout``) last ``cache_s`` seconds. ``cache_s=1`` (``lab up``'s default) is
  libfuse's own and closer to NFS with default ``actimeo``; installs then need several
  times fewer round trips than with ``cache_s=0``, the worst case: every path component of
  every access is looked up again and every ``stat`` is a getattr, so each pays the round
  trip, like NFS mounted with ``noac``/``lookupcache=none``.
- Listings answer READDIRPLUS, as NFS does: with ``cache_s > 0`` each listed entry carries
  what getattr would answer (``lstat``), so the kernel holds the name and its attributes
  for ``cache_s`` and a stat or unlink of a name just listed needs no lookup (sshfs gets
  the same from its own attribute cache). A listing is one round trip (``readdir``) however
  many ~32 KB replies (~170 entries each) the kernel asks for: the daemon keeps it per open
  directory (libfuse does the same for filesystems that list without offsets). So every
  reply carries attributes: the kernel's adaptive mode, which wants them only in a
  listing's first reply unless lookups came between, is turned off (else a 3,000-entry
  folder listed, then stat'ed, still took 2,830 lookups). Cost: ~12 µs of daemon CPU per
  listed entry (an ``lstat``), against ~4 µs for a name. mfusepy sends names and types
  only, and libfuse 3.14 drops attributes given without offsets (fixed in 3.17), so
  ``LabFUSE`` (:mod:`iobench.lab.libfuse`) lists with offsets itself; libfuse then keeps
  one node too many per reply (it looks up the entry that no longer fits), memory only. With ``cache_s=0`` listings
  carry names and types only, as before.
- A create's reply carries the new file's attributes in real protocols (NFS post-op
  attributes), but libfuse's high-level API asks for them with a second getattr; that one
  is counted as ``entry_getattr`` and not delayed.
- Page cache: no ``kernel_cache``, so a file's cached pages are dropped when it is opened
  again (reads after open go to the daemon, like close-to-open consistency); writes are
  write-through (no ``writeback_cache``), so every ``write()`` reaches the daemon and the
  bandwidth cap.
- ``use_ino``: inode numbers of the backing folder pass through, so hard links and
  ``os.path.samefile`` behave. ``renameat2`` flags (``RENAME_NOREPLACE``) are honoured.
- The filesystem never follows a symlink inside the backing folder (``O_NOFOLLOW``,
  ``follow_symlinks=False``): venvs hold absolute symlinks to the host's Python, and the
  kernel resolves those on the client side, as with any network filesystem.
- The mount is private to the user who mounted it (no ``allow_other``; root in practice),
  and requests run with the daemon's rights: no ``default_permissions`` checks, which
  would each cost an extra getattr that a network protocol's ACCESS cache avoids.

Counters (requests and time spent waiting, per operation; bytes read and written) are kept
under one lock and written as JSON: periodically to a live file and once on unmount.

Flush (``iobench lab flush``, for cold restarts): the daemon keeps no cache of its own (a
passthrough), so a flush is the kernel's caches of this mount. A thread blocks on a control
FIFO (``control`` next to the live stats); on ``flush TOKEN`` it calls libfuse's
``fuse_lowlevel_notify_inval_entry`` for every name in the root — the kernel then forgets
those dentries and every cached name below them, so each path component is looked up again
— and ``fuse_lowlevel_notify_inval_inode`` on the root, then writes ``control.reply.json``.
mfusepy does not wrap these calls; they are reached through its ``_libfuse`` handle and the
session of the ``struct fuse`` captured in ``init``. The notification runs in its own thread,
never in a request's path, as libfuse requires (it would deadlock on the parent's lock).
File data needs no flush: without ``kernel_cache`` the kernel drops a file's pages at each
open. Negative entries cached at the root itself (``cache_s``) are not named, so they stay.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import itertools
import json
import os
import stat
import threading
import time
from pathlib import Path
from typing import Any

from iobench.lab import libfuse
from iobench.lab.delivered import DIRECTIONS, Meter
from iobench.lab.libfuse import mfusepy
from iobench.lab.options import VolumeOptions
from iobench.lab.state import REPLY_NAME
from iobench.system.shaping import ByteLink, TokenBucket, metered

#: 1: ops (count, delayed_s), bytes_read, bytes_written; 2: + credits_history; 3: + data
#: (each direction's meter: iobench.lab.delivered)
STATS_SCHEMA = 3
#: the credit history's points at most (then every other one is dropped and the step doubles)
HISTORY_MAX = 4000

#: Operation names, in the order of the counters; those in DATA_OPS pay ``data_latency``.
OPS = (
    "getattr",
    "readlink",
    "mknod",
    "mkdir",
    "unlink",
    "rmdir",
    "symlink",
    "rename",
    "link",
    "chmod",
    "chown",
    "truncate",
    "open",
    "read",
    "write",
    "statfs",
    "flush",
    "release",
    "fsync",
    "opendir",
    "readdir",
    "releasedir",
    "fsyncdir",
    "access",
    "create",
    "utimens",
    "fallocate",
    "entry_getattr",
)
DATA_OPS = frozenset({"read", "write"})
#: operations that change the volume (EFS meters them as writes, the others as reads)
WRITE_OPS = frozenset({"mknod", "mkdir", "unlink", "rmdir", "symlink", "rename", "link",
                       "chmod", "chown", "truncate", "write", "fsync", "fsyncdir", "create",
                       "utimens", "fallocate"})  # fmt: skip
_OP = {name: i for i, name in enumerate(OPS)}
_IS_WRITE = [name in WRITE_OPS for name in OPS]
_IS_DATA = [name in DATA_OPS for name in OPS]
_ENTRY_GETATTR = _OP["entry_getattr"]
_READ, _WRITE = _OP["read"], _OP["write"]

_MAX_EARLY = 0.0003
_FUSE_ROOT_ID = 1
_libc = ctypes.CDLL(None, use_errno=True)
_AT_FDCWD = -100
_PR_SET_TIMERSLACK = 29


def set_timer_slack(ns: int = 1000) -> None:
    """Make sleeps of this thread (and threads it starts later) precise to about ``ns``."""
    _libc.prctl(_PR_SET_TIMERSLACK, ctypes.c_ulong(ns), 0, 0, 0)


def _attrs(st: os.stat_result) -> dict[str, int]:
    """A ``stat`` result as mfusepy's attribute dict (times in ns: ``SlowFS.use_ns``)."""
    return {
        "st_mode": st.st_mode,
        "st_ino": st.st_ino,
        "st_nlink": st.st_nlink,
        "st_uid": st.st_uid,
        "st_gid": st.st_gid,
        "st_size": st.st_size,
        "st_rdev": st.st_rdev,
        "st_blocks": st.st_blocks,
        "st_blksize": st.st_blksize,
        "st_atime": st.st_atime_ns,
        "st_mtime": st.st_mtime_ns,
        "st_ctime": st.st_ctime_ns,
    }


class SlowFS(mfusepy.Operations):
    """Passthrough of ``backing`` with per-request delays (see module docstring)."""

    use_ns = True

    def __init__(
        self,
        backing: str | Path,
        options: VolumeOptions,
        stats_path: str | Path | None = None,
        live_stats_path: str | Path | None = None,
        control_path: str | Path | None = None,
        readdir_plus: bool = False,
    ) -> None:
        self.root = os.path.realpath(backing)
        if not os.path.isdir(self.root):
            raise NotADirectoryError(self.root)
        self.options = options
        self._latency = options.latency_ms / 1000.0
        self._data_latency = options.data_latency_ms / 1000.0
        write_ms = options.write_latency_ms
        self._write_latency = (options.data_latency_ms if write_ms is None else write_ms) / 1000.0
        self._bucket = TokenBucket(options.iops) if options.iops else None
        self._link = (
            ByteLink(
                options.mb_per_s * 1e6,
                options.burst_mb_per_s * 1e6 if options.burst_mb_per_s else None,
                options.burst_credits_mb * 1e6 if options.burst_credits_mb is not None else None,
                cap=options.burst_cap_mb * 1e6 if options.burst_cap_mb is not None else None,
            )
            if options.mb_per_s
            else None
        )
        self._metered = options.metered
        self._client = ByteLink(options.client_mb_per_s * 1e6) if options.client_mb_per_s else None
        self._mono0 = time.monotonic()
        self._history: list[list[float]] = []  # [seconds since mount, credits MB]
        self._history_step = 0.25
        # Thread idents, not threading.local: ctypes gives a libfuse worker thread a fresh
        # Python thread state (and so fresh thread-locals) on every callback.
        self._entry_threads: set[int] = set()
        self._lock = threading.Lock()
        self._counts = [0] * len(OPS)
        self._delayed = [0.0] * len(OPS)
        self._meters = {d: Meter() for d in DIRECTIONS}  # reads, writes: what was delivered
        self._started = time.time()
        self._stats_paths = [Path(p) for p in (stats_path, live_stats_path) if p]
        self._live_path = Path(live_stats_path) if live_stats_path else None
        self._stop = threading.Event()
        self._early = 0.0  # seconds; adapted in _pay (races between threads are harmless)
        self._written_total = -1
        self._control = Path(control_path) if control_path else None
        self._session: int | None = None  # libfuse's struct fuse_session *, set in init
        #: answer READDIRPLUS with full attributes (pointless when the kernel caches nothing)
        self.readdir_plus = readdir_plus
        self._handles = itertools.count(1)  # directory stream handles (opendir)
        self._listings: dict[int, list[str | os.DirEntry[str]]] = {}

    # ---- delays and counters -------------------------------------------------------------

    def _pay(self, op: int, t0: float, latency: float, nbytes: int = 0) -> None:
        """Hold the current request until its deadline (:meth:`_reserve`), then count it."""
        self._hold(op, self._reserve(op, t0, latency, nbytes)[0])

    def _reserve(self, op: int, t0: float, latency: float, nbytes: int) -> tuple[float, float]:
        """The request's deadline: the IOPS bucket, then the byte link (the metered bytes when
        the volume meters as EFS does: metadata too) and, beside it, the client's own cap on
        actual bytes, then the latency; and the seconds those rate limits spend on its bytes
        (:mod:`iobench.lab.delivered`)."""
        start = self._bucket.reserve(t0) if self._bucket is not None else t0
        done, pipe = start, 0.0
        data = _IS_DATA[op]
        if self._link is not None and (data or self._metered):
            amount = metered(nbytes, _IS_WRITE[op], data) if self._metered else nbytes
            if amount:
                done, pipe = self._link.reserve_span(start, amount)
        if self._client is not None and nbytes:
            client_done, client_pipe = self._client.reserve_span(start, nbytes)
            done, pipe = max(done, client_done), max(pipe, client_pipe)
        return done + latency, pipe

    def _hold(self, op: int, deadline: float) -> None:
        """Sleep until ``deadline``, then count the request."""
        slept = 0.0
        now = time.monotonic()
        if deadline > now:
            # Wake up early by the mean lateness seen so far (timer and scheduler wake-up,
            # ~50-100 µs on a VM), so the mean wait matches the configured latency.
            early = self._early
            if deadline - now > early:
                time.sleep(deadline - now - early)
            woke = time.monotonic()
            self._early = min(_MAX_EARLY, max(0.0, early + 0.05 * (woke - deadline)))
            slept = woke - now
        with self._lock:
            self._counts[op] += 1
            self._delayed[op] += slept

    def stats(self) -> dict[str, Any]:
        """Counters so far, as the JSON object written to ``--stats``."""
        with self._lock:
            counts = list(self._counts)
            delayed = list(self._delayed)
        now = time.monotonic()
        data = {d: meter.to_dict(now) for d, meter in self._meters.items()}
        return {
            "schema": STATS_SCHEMA,
            "backing": self.root,
            "options": self.options.to_dict(),
            "started": self._started,
            "updated": time.time(),
            "ops": {
                name: {"count": counts[i], "delayed_s": round(delayed[i], 6)}
                for i, name in enumerate(OPS)
                if counts[i]
            },
            "total_ops": sum(counts),
            "delayed_s": round(sum(delayed), 6),
            "bytes_read": data["read"]["bytes"],
            "bytes_written": data["write"]["bytes"],
            "data": data,
            "link_credits_mb": self._credits_mb(),
            "credits_history": [list(p) for p in self._history],
        }

    def _credits_mb(self) -> float | None:
        """The link's balance now (what it earned since its last request included), MB."""
        if self._link is None:
            return None
        return round(self._link.balance_at(time.monotonic()) / 1e6, 3)

    def _record_credits(self) -> None:
        """One point of the balance's history, every ``_history_step`` s; thinned when long."""
        if self._link is None or not self._link.max_credits:
            return
        now = time.monotonic() - self._mono0
        if self._history and now - self._history[-1][0] < self._history_step:
            return
        with self._lock:
            self._history.append([round(now, 3), self._credits_mb() or 0.0])
            if len(self._history) > HISTORY_MAX:
                self._history = self._history[::2]
                self._history_step *= 2

    def write_stats(self, final: bool = False) -> None:
        """Write the counters (atomically) to the stats files; skip when nothing changed."""
        data = self.stats()
        if not final and data["total_ops"] == self._written_total:
            return
        self._written_total = data["total_ops"]
        data["final"] = final
        paths = self._stats_paths if final else [p for p in (self._live_path,) if p]
        for path in paths:
            tmp = path.with_name(path.name + ".tmp")
            try:
                tmp.write_text(json.dumps(data, indent=1) + "\n")
                os.replace(tmp, path)
            except OSError:
                pass  # stats are a convenience; the volume keeps working

    def _stats_loop(self) -> None:
        while not self._stop.wait(0.25):
            self._record_credits()
            self.write_stats()

    def init(self, path: str) -> None:
        self._record_credits()  # the history starts with the balance the volume was given
        if self._live_path is not None:
            threading.Thread(target=self._stats_loop, name="stats", daemon=True).start()
        self._session = libfuse.current_session()
        if self._control is not None:
            threading.Thread(target=self._control_loop, name="control", daemon=True).start()

    # ---- flush (cold restarts) -------------------------------------------------------------

    def flush_caches(self) -> dict[str, Any]:
        """Make the kernel forget every cached name and attribute of this mount (see the
        module docstring); return what was done."""
        t0 = time.monotonic()
        if self._session is None:
            return {"ok": False, "error": "no libfuse session (fuse_get_session unavailable)"}
        lib = libfuse.notify_lib()
        names = os.listdir(self.root)
        dropped = 0
        for name in names:
            raw = os.fsencode(name)
            if (
                lib.fuse_lowlevel_notify_inval_entry(self._session, _FUSE_ROOT_ID, raw, len(raw))
                == 0
            ):
                dropped += 1
        lib.fuse_lowlevel_notify_inval_inode(self._session, _FUSE_ROOT_ID, 0, 0)
        return {
            "ok": True,
            "method": "fuse_lowlevel_notify_inval_entry",
            "root_names": len(names),
            "dropped": dropped,  # names the kernel had cached (each with its subtree)
            "daemon_cache": "none (passthrough)",
            "page_cache": "dropped at each open (no kernel_cache)",
            "seconds": round(time.monotonic() - t0, 6),
        }

    def _control_loop(self) -> None:
        """Serve ``flush TOKEN`` lines written to the control FIFO (one writer at a time)."""
        assert self._control is not None
        reply = self._control.with_name(REPLY_NAME)
        while not self._stop.is_set():
            try:
                with open(self._control, "rb") as f:  # blocks until a writer opens it
                    lines = f.read().decode("utf-8", "replace").splitlines()
            except OSError:
                return
            for line in lines:
                cmd, _, token = line.strip().partition(" ")
                if cmd != "flush":
                    continue
                data = self.flush_caches()
                data["token"] = token
                tmp = reply.with_name(reply.name + ".tmp")
                with contextlib.suppress(OSError):
                    tmp.write_text(json.dumps(data) + "\n")
                    os.replace(tmp, reply)

    def destroy(self, path: str) -> None:
        self._stop.set()
        self.write_stats(final=True)

    # ---- helpers ---------------------------------------------------------------------------

    def _p(self, path: str) -> str:
        return self.root + path

    def _entry_made(self) -> None:
        """Note that this thread just created an entry: libfuse's next getattr is not a round trip.

        libfuse's high-level API answers create/mkdir/symlink/mknod/link by calling getattr on
        the new path in the same thread; a network protocol returns those attributes in the
        create reply (NFS post-op attributes), so that getattr is counted as
        ``entry_getattr`` and not delayed.
        """
        self._entry_threads.add(threading.get_ident())

    # ---- metadata --------------------------------------------------------------------------

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        t0 = time.monotonic()
        free = False
        if self._entry_threads:
            ident = threading.get_ident()
            if ident in self._entry_threads:
                self._entry_threads.discard(ident)
                free = True
        try:
            st = os.lstat(self.root + path) if path is not None else os.fstat(fh)
        finally:
            if free:
                self._pay(_ENTRY_GETATTR, t0, 0.0)
            else:
                self._pay(0, t0, self._latency)
        return _attrs(st)

    def readlink(self, path: str) -> str:
        t0 = time.monotonic()
        try:
            return os.readlink(self.root + path)
        finally:
            self._pay(_OP["readlink"], t0, self._latency)

    def mknod(self, path: str, mode: int, dev: int) -> int:
        t0 = time.monotonic()
        try:
            full = self.root + path
            os.mknod(full, mode, dev)
            self._entry_made()
            return 0
        finally:
            self._pay(_OP["mknod"], t0, self._latency)

    def mkdir(self, path: str, mode: int) -> int:
        t0 = time.monotonic()
        try:
            full = self.root + path
            os.mkdir(full, mode)
            self._entry_made()
            return 0
        finally:
            self._pay(_OP["mkdir"], t0, self._latency)

    def unlink(self, path: str) -> int:
        t0 = time.monotonic()
        try:
            os.unlink(self.root + path)
            return 0
        finally:
            self._pay(_OP["unlink"], t0, self._latency)

    def rmdir(self, path: str) -> int:
        t0 = time.monotonic()
        try:
            os.rmdir(self.root + path)
            return 0
        finally:
            self._pay(_OP["rmdir"], t0, self._latency)

    def symlink(self, target: str, source: str) -> int:
        """Create ``target`` pointing at ``source``, stored verbatim (absolute stays absolute)."""
        t0 = time.monotonic()
        try:
            full = self.root + target
            os.symlink(source, full)
            self._entry_made()
            return 0
        finally:
            self._pay(_OP["symlink"], t0, self._latency)

    def rename(self, old: str, new: str, flags: int = 0) -> int:
        t0 = time.monotonic()
        try:
            if flags:
                res = _libc.renameat2(
                    _AT_FDCWD,
                    os.fsencode(self.root + old),
                    _AT_FDCWD,
                    os.fsencode(self.root + new),
                    ctypes.c_uint(flags),
                )
                if res != 0:
                    e = ctypes.get_errno()
                    raise OSError(e, os.strerror(e))
            else:
                os.rename(self.root + old, self.root + new)
            return 0
        finally:
            self._pay(_OP["rename"], t0, self._latency)

    def link(self, target: str, source: str) -> int:
        t0 = time.monotonic()
        try:
            os.link(self.root + source, self.root + target, follow_symlinks=False)
            self._entry_made()
            return 0
        finally:
            self._pay(_OP["link"], t0, self._latency)

    def chmod(self, path: str, mode: int) -> int:
        t0 = time.monotonic()
        try:
            full = self.root + path
            if stat.S_ISLNK(os.lstat(full).st_mode):
                raise OSError(errno.EOPNOTSUPP, "symlinks have no mode")
            os.chmod(full, stat.S_IMODE(mode))
            return 0
        finally:
            self._pay(_OP["chmod"], t0, self._latency)

    def chown(self, path: str, uid: int, gid: int) -> int:
        t0 = time.monotonic()
        try:
            os.chown(self.root + path, uid, gid, follow_symlinks=False)
            return 0
        finally:
            self._pay(_OP["chown"], t0, self._latency)

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        t0 = time.monotonic()
        try:
            if fh:
                os.ftruncate(fh, length)
            else:
                fd = os.open(self.root + path, os.O_WRONLY | os.O_NOFOLLOW)
                try:
                    os.ftruncate(fd, length)
                finally:
                    os.close(fd)
            return 0
        finally:
            self._pay(_OP["truncate"], t0, self._latency)

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        t0 = time.monotonic()
        try:
            if times is None:
                os.utime(self.root + path, follow_symlinks=False)
            else:
                os.utime(self.root + path, ns=(int(times[0]), int(times[1])), follow_symlinks=False)
            return 0
        finally:
            self._pay(_OP["utimens"], t0, self._latency)

    def access(self, path: str, amode: int) -> int:
        t0 = time.monotonic()
        try:
            if not os.access(self.root + path, amode, follow_symlinks=False):
                raise OSError(errno.EACCES, "access denied")
            return 0
        finally:
            self._pay(_OP["access"], t0, self._latency)

    def statfs(self, path: str) -> dict[str, int]:
        t0 = time.monotonic()
        try:
            sv = os.statvfs(self.root)
        finally:
            self._pay(_OP["statfs"], t0, self._latency)
        return {
            "f_bsize": sv.f_bsize,
            "f_frsize": sv.f_frsize,
            "f_blocks": sv.f_blocks,
            "f_bfree": sv.f_bfree,
            "f_bavail": sv.f_bavail,
            "f_files": sv.f_files,
            "f_ffree": sv.f_ffree,
            "f_favail": sv.f_favail,
            "f_flag": sv.f_flag,
            "f_namemax": sv.f_namemax,
        }

    # ---- directories -----------------------------------------------------------------------

    def opendir(self, path: str) -> int:
        """Open a directory stream; its handle keys the stream's listing (see ``listing``)."""
        t0 = time.monotonic()
        try:
            if not os.path.isdir(self.root + path):
                raise OSError(errno.ENOTDIR, "not a directory")
            return next(self._handles)
        finally:
            self._pay(_OP["opendir"], t0, self._latency)

    def listing(self, path: str, fh: int, offset: int) -> list[str | os.DirEntry[str]]:
        """The entries of directory stream ``fh``, ``.`` and ``..`` first (position = index).

        Read from the backing folder (one round trip, counted as ``readdir``) when the
        stream starts at offset 0 or is not known; the kernel's later requests of the same
        stream (one per ~32 KB of entries) are served from that read, as libfuse serves them
        from its own copy when a filesystem lists without offsets.
        """
        entries = self._listings.get(fh) if offset else None
        if entries is None:
            t0 = time.monotonic()
            try:
                with os.scandir(self.root + path) as it:
                    entries = [".", "..", *it]
            finally:
                self._pay(_OP["readdir"], t0, self._latency)
            self._listings[fh] = entries
        return entries

    @staticmethod
    def entry_type(entry: os.DirEntry[str]) -> int:
        """A listed entry's file type bits (from the listing itself where it has them)."""
        if entry.is_dir(follow_symlinks=False):
            return stat.S_IFDIR
        if entry.is_symlink():
            return stat.S_IFLNK
        if entry.is_file(follow_symlinks=False):
            return stat.S_IFREG
        try:
            return stat.S_IFMT(entry.stat(follow_symlinks=False).st_mode)
        except OSError:
            return 0

    def readdir(self, path: str, fh: int) -> list[Any]:
        """mfusepy's plain listing (names with type and inode). Its presence is what makes
        mfusepy register the readdir callback, which ``LabFUSE.readdir_fuse_3`` answers with
        offsets instead (see ``listing``); a plain ``mfusepy.FUSE`` would call this."""
        return [
            e
            if isinstance(e, str)
            else (e.name, {"st_mode": self.entry_type(e), "st_ino": e.inode()}, 0)
            for e in self.listing(path, fh, 0)
        ]

    def releasedir(self, path: str, fh: int) -> int:
        t0 = time.monotonic()
        self._listings.pop(fh, None)
        self._pay(_OP["releasedir"], t0, self._latency)
        return 0

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        t0 = time.monotonic()
        self._pay(_OP["fsyncdir"], t0, self._latency)
        return 0

    # ---- files -----------------------------------------------------------------------------

    def create(self, path: str, mode: int, flags: int) -> int:
        t0 = time.monotonic()
        try:
            full = self.root + path
            fd = os.open(full, flags | os.O_CREAT | os.O_NOFOLLOW, mode)
            self._entry_made()
            return fd
        finally:
            self._pay(_OP["create"], t0, self._latency)

    def open(self, path: str, flags: int) -> int:
        t0 = time.monotonic()
        try:
            return os.open(self.root + path, flags | os.O_NOFOLLOW)
        finally:
            self._pay(_OP["open"], t0, self._latency)

    def read_buf(self, path: str, bufpp: Any, size: int, offset: int, fh: int) -> int:
        """Answer a read with the backing file's descriptor (libfuse moves the bytes after
        the wait: :func:`iobench.lab.libfuse.reply_from_fd`); held for what the reply carries.
        Its place on the link is taken on arrival, so requests queue there in their order."""
        t0 = time.monotonic()
        meter = self._meters["read"]
        meter.begin(t0)
        n, deadline, pipe = 0, t0, 0.0
        try:
            n = max(0, min(size, os.fstat(fh).st_size - offset))
            deadline, pipe = self._reserve(_READ, t0, self._data_latency, n)
            libfuse.reply_from_fd(bufpp, fh, offset, n)
            return 0
        finally:
            self._hold(_READ, deadline)
            meter.end(t0, time.monotonic(), n, pipe, deadline - t0)

    def write_buf(self, path: str, buf: Any, offset: int, fh: int) -> int:
        """Copy a write from libfuse's buffer into the backing file, in C (no Python copy);
        its place on the link taken on arrival, as a read's."""
        t0 = time.monotonic()
        meter = self._meters["write"]
        meter.begin(t0)
        size = libfuse.size_of(buf)
        deadline, pipe = self._reserve(_WRITE, t0, self._write_latency, size)
        n = 0
        try:
            n = libfuse.copy_to_fd(buf, fh, offset)
            return n
        finally:
            self._hold(_WRITE, deadline)
            meter.end(t0, time.monotonic(), n, pipe, deadline - t0)

    def flush(self, path: str, fh: int) -> int:
        t0 = time.monotonic()
        self._pay(_OP["flush"], t0, self._latency)
        return 0

    def release(self, path: str, fh: int) -> int:
        t0 = time.monotonic()
        try:
            os.close(fh)
            return 0
        finally:
            self._pay(_OP["release"], t0, self._latency)

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        t0 = time.monotonic()
        try:
            if datasync:
                os.fdatasync(fh)
            else:
                os.fsync(fh)
            return 0
        finally:
            self._pay(_OP["fsync"], t0, self._latency)

    def fallocate(self, path: str, mode: int, offset: int, size: int, fh: int) -> int:
        t0 = time.monotonic()
        try:
            if mode:
                raise OSError(errno.EOPNOTSUPP, "only plain fallocate")
            os.posix_fallocate(fh, offset, size)
            return 0
        finally:
            self._pay(_OP["fallocate"], t0, self._latency)


def make_control_fifo(path: str | Path) -> Path:
    """Create the flush control FIFO (replacing a stale one of ours); return its path."""
    path = Path(path)
    if path.is_fifo():
        path.unlink()
    os.mkfifo(path, 0o600)
    return path


def serve(
    backing: str | Path,
    mountpoint: str | Path,
    options: VolumeOptions,
    stats_path: str | Path | None = None,
    live_stats_path: str | Path | None = None,
    cache_timeout_s: float = 0.0,
    max_threads: int = 64,
    control_path: str | Path | None = None,
) -> None:
    """Mount the slow volume on ``mountpoint`` and serve it until it is unmounted (blocks).

    ``control_path``: a FIFO to create for ``flush`` requests (see the module docstring).
    """
    set_timer_slack()
    with contextlib.suppress(OSError):
        # The emulated server should not queue behind the workload for a CPU (on a real
        # network volume it runs elsewhere); threads started later inherit this.
        os.setpriority(os.PRIO_PROCESS, 0, -10)
    if control_path is not None:
        control_path = make_control_fifo(control_path)
    ops = SlowFS(
        backing,
        options,
        stats_path,
        live_stats_path,
        control_path,
        readdir_plus=cache_timeout_s > 0,
    )
    try:
        libfuse.LabFUSE(
            ops,
            str(mountpoint),
            foreground=True,
            fsname="iobench-lab",
            subtype="iobench-lab",
            use_ino=True,
            attr_timeout=cache_timeout_s,
            entry_timeout=cache_timeout_s,
            negative_timeout=cache_timeout_s,
            max_threads=max_threads,
            max_idle_threads=max_threads,
        )
    finally:
        ops.write_stats(final=True)
