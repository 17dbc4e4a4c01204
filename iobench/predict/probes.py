"""The single storage micro-probes of a folder, each bounded in time: what one metadata
operation, an fsync, a megabyte and a lock cost there (the method is in
:mod:`iobench.predict.probe`'s docstring, which runs them all on a folder).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from iobench.predict.latency import Latency

_FSYNC_BYTES = 4096
#: the cold random read: 4 KiB requests in a 1 MiB file, each range's cached pages dropped
#: first (what ioping does by default: its -s 4k and -S 1m)
READ_BLOCK, READ_FILE = 4096, 1 << 20


@dataclass(frozen=True)
class RateResult:
    """``count`` operations took ``seconds``; ``latency``: each one's time, where timed;
    ``opened``: for a create, its ``open(O_CREAT)`` alone (what fio's ``filecreate`` engine
    times: its clat leaves out the write and the ``close``)."""

    count: int
    seconds: float
    latency: Latency | None = None
    opened: Latency | None = None

    @property
    def per_s(self) -> float:
        return self.count / self.seconds if self.seconds > 0 else float("inf")

    @property
    def ms_each(self) -> float:
        return self.seconds / self.count * 1000.0 if self.count else 0.0


@dataclass(frozen=True)
class ThroughputPoint:
    """MB/s (10**6 bytes) during the bucket ending ``t`` seconds after the write began."""

    t: float
    mbps: float


@dataclass(frozen=True)
class WriteResult:
    """A sequential, fsync'd write: totals and the per-bucket timeline."""

    total_mb: float
    seconds: float
    block_kb: int
    timeline: tuple[ThroughputPoint, ...]

    @property
    def mean_mbps(self) -> float:
        return self.total_mb / self.seconds if self.seconds > 0 else float("inf")


@dataclass(frozen=True)
class Space:
    """Free and total bytes and inodes (``statvfs``; inodes 0 where the filesystem has none)."""

    free_bytes: int
    total_bytes: int
    free_inodes: int
    total_inodes: int


class _Deadline:
    """The moment a probe stops starting new operations."""

    def __init__(self, seconds: float | None) -> None:
        self.at = None if seconds is None else time.perf_counter() + seconds

    def passed(self) -> bool:
        return self.at is not None and time.perf_counter() >= self.at


def _timed_loop(
    names: Iterable[Any], op: Callable[[Any], object], seconds: float | None
) -> RateResult:
    """Apply ``op`` to each name until the names or ``seconds`` run out; each call timed."""
    deadline = _Deadline(seconds)
    each: list[int] = []
    clock = time.perf_counter_ns
    t0 = time.perf_counter()
    for name in names:
        if deadline.passed():
            break
        start = clock()
        op(name)
        each.append(clock() - start)
    return RateResult(len(each), time.perf_counter() - t0, Latency.of(each))


def _dir_fd(folder: str | os.PathLike[str]) -> int:
    return os.open(folder, os.O_RDONLY | os.O_DIRECTORY)


def create_files_in(
    folder: str | os.PathLike[str], n: int, size: int = 128, seconds: float | None = None
) -> RateResult:
    """Create files ``f0`` .. ``f{n-1}`` of ``size`` bytes in an existing, empty ``folder``."""
    data = b"x" * size
    dfd = _dir_fd(folder)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    clock = time.perf_counter_ns
    opens: list[int] = []

    def make(i: int) -> None:
        t0 = clock()
        fd = os.open(f"f{i}", flags, 0o644, dir_fd=dfd)
        opens.append(clock() - t0)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    try:
        res = _timed_loop(range(n), make, seconds)
    finally:
        os.close(dfd)
    return replace(res, opened=Latency.of(opens))


def stat_files_in(
    folder: str | os.PathLike[str], n: int, seconds: float | None = None, prefix: str = "f"
) -> RateResult:
    """``stat`` the files made by :func:`create_files_in`; ``prefix="missing"`` stats absent names."""
    dfd = _dir_fd(folder)

    def look(i: int) -> None:
        try:
            os.stat(f"{prefix}{i}", dir_fd=dfd)
        except FileNotFoundError:
            if prefix == "f":
                raise

    try:
        return _timed_loop(range(n), look, seconds)
    finally:
        os.close(dfd)


def drop_cache(path: str | os.PathLike[str], dir_fd: int | None = None) -> None:
    """Write ``path`` back and ask the kernel to forget its pages (a no-op on tmpfs)."""
    fd = os.open(path, os.O_RDONLY, dir_fd=dir_fd)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def open_read_files_in(
    folder: str | os.PathLike[str], n: int, seconds: float | None = None
) -> RateResult:
    """Drop the first ``n`` files' pages (untimed, bounded too), then time open+read+close."""
    dfd = _dir_fd(folder)

    def read(i: int) -> None:
        fd = os.open(f"f{i}", os.O_RDONLY, dir_fd=dfd)
        try:
            while os.read(fd, 1 << 16):
                pass
        finally:
            os.close(fd)

    try:
        dropped = _timed_loop(range(n), lambda i: drop_cache(f"f{i}", dfd), seconds)
        return _timed_loop(range(dropped.count), read, seconds)
    finally:
        os.close(dfd)


def each_in(
    folder: str | os.PathLike[str], n: int, seconds: float | None, op: Callable[[int, int], object]
) -> RateResult:
    dfd = _dir_fd(folder)
    try:
        return _timed_loop(range(n), lambda i: op(i, dfd), seconds)
    finally:
        os.close(dfd)


def fsync_latency(path: str, seconds: float, max_count: int = 2000) -> Latency:
    """Write 4 KiB and fsync, repeatedly, until ``seconds`` or ``max_count``; the fsyncs timed."""
    block = os.urandom(_FSYNC_BYTES)
    times: list[int] = []
    deadline = _Deadline(seconds)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while len(times) < max_count and not deadline.passed():
            os.write(fd, block)
            t0 = time.perf_counter_ns()
            os.fsync(fd)
            times.append(time.perf_counter_ns() - t0)
    finally:
        os.close(fd)
    return Latency.of(times)


def make_read_file(path: str) -> str:
    """The 1 MiB file the cold random reads read (written and synced); its path."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, os.urandom(READ_FILE))
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def read_latency(path: str, count: int, seconds: float | None, seed: int = 0) -> RateResult:
    """Cold random 4 KiB reads of the file :func:`make_read_file` made, as ioping reads a
    folder: no readahead (``POSIX_FADV_RANDOM``), and before each read the range's cached
    pages dropped (``POSIX_FADV_DONTNEED``, untimed); the ``pread`` alone is timed, so each
    reaches the storage once. ``count`` reads at most."""
    fd = os.open(path, os.O_RDONLY)
    try:
        blocks = max(os.fstat(fd).st_size // READ_BLOCK, 1)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no readahead past the 4 KiB (ioping's)
        rng = random.Random(seed)
        deadline = _Deadline(seconds)
        each: list[int] = []
        t0 = time.perf_counter()
        while len(each) < count and not deadline.passed():
            offset = rng.randrange(blocks) * READ_BLOCK
            os.posix_fadvise(fd, offset, READ_BLOCK, os.POSIX_FADV_DONTNEED)
            start = time.perf_counter_ns()
            if len(os.pread(fd, READ_BLOCK, offset)) != READ_BLOCK:
                raise OSError(f"{path}: short read at {offset}")
            each.append(time.perf_counter_ns() - start)
        return RateResult(len(each), time.perf_counter() - t0, Latency.of(each))
    finally:
        os.close(fd)


def scratch_folder(directory: str | os.PathLike[str]) -> str:
    return tempfile.mkdtemp(prefix=".iobench-probe-", dir=os.fspath(directory))


def sequential_write(
    directory: str | os.PathLike[str],
    total_mb: float = 64.0,
    block_kb: int = 1024,
    bucket_s: float = 0.25,
    max_seconds: float | None = None,
) -> WriteResult:
    """Write ``total_mb`` MB (or until ``max_seconds``) and return the throughput timeline."""
    scratch = scratch_folder(directory)
    try:
        return write_file(
            os.path.join(scratch, "seq.bin"), total_mb, block_kb, bucket_s, max_seconds
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def write_file(
    path: str, total_mb: float, block_kb: int, bucket_s: float, max_seconds: float | None
) -> WriteResult:
    block = os.urandom(block_kb * 1024)  # incompressible, so no layer can cheat
    total = int(total_mb * 1e6)
    timeline: list[ThroughputPoint] = []
    written = bucket_bytes = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        t0 = time.perf_counter()
        last = now = 0.0
        while written < total and (max_seconds is None or now < max_seconds):
            n = os.write(fd, block[: min(len(block), total - written)])
            written += n
            bucket_bytes += n
            now = time.perf_counter() - t0
            if now - last >= bucket_s or written >= total:
                os.fsync(fd)
                now = time.perf_counter() - t0
                timeline.append(ThroughputPoint(now, bucket_bytes / 1e6 / max(now - last, 1e-9)))
                last, bucket_bytes = now, 0
        if bucket_bytes:
            os.fsync(fd)
            now = time.perf_counter() - t0
            timeline.append(ThroughputPoint(now, bucket_bytes / 1e6 / max(now - last, 1e-9)))
    finally:
        os.close(fd)
    return WriteResult(written / 1e6, now, block_kb, tuple(timeline))


def cold_read(path: str, seconds: float | None, block_kb: int = 1024) -> RateResult:
    """Drop ``path``'s pages, then read it sequentially; ``count`` is bytes read."""
    drop_cache(path)
    deadline = _Deadline(seconds)
    got = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        t0 = time.perf_counter()
        while not deadline.passed():
            chunk = os.read(fd, block_kb * 1024)
            if not chunk:
                break
            got += len(chunk)
        return RateResult(got, time.perf_counter() - t0)
    finally:
        os.close(fd)


_LOCK_CHILD = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
try:
    if sys.argv[2] == "flock":
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    else:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except OSError as exc:
    print("error", exc.strerror, flush=True)
    sys.exit(0)
print("locked", flush=True)
sys.stdin.read()
"""


def _try_lock(path: str, kind: str) -> str:
    """This process's attempt at the lock another process holds: "works" when refused."""
    import fcntl

    fd = os.open(path, os.O_RDWR)
    try:
        if kind == "flock":
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except (BlockingIOError, PermissionError):
        return "works"
    except OSError as exc:
        return f"error: {exc.strerror or exc}"
    finally:
        os.close(fd)
    return "no exclusion: a second process got the lock the first one held"


def lock_works(path: str, kind: str, timeout_s: float = 10.0) -> str:
    """Whether ``kind`` ("flock" or "fcntl") locks on ``path`` exclude a second process."""
    import select

    child = subprocess.Popen(
        [sys.executable, "-c", _LOCK_CHILD, path, kind],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert child.stdout is not None  # stdout=PIPE
        ready, _, _ = select.select([child.stdout], [], [], timeout_s)
        line = child.stdout.readline().strip() if ready else ""
        if not line:
            return f"timed out after {timeout_s:g} s taking the lock"
        if line.startswith("error"):
            return f"error: {line[6:]}"
        return _try_lock(path, kind)
    finally:
        if child.stdin:
            child.stdin.close()
        try:
            child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def space_of(directory: str | os.PathLike[str]) -> Space:
    """Free space and inodes as an unprivileged user sees them."""
    st = os.statvfs(directory)
    return Space(st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize, st.f_favail, st.f_files)
