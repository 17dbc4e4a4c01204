"""Storage micro-probes for any folder: small-file create rate, stat rate, and sequential
write throughput over time. Pure measuring: nothing is printed, results are dataclasses.

Method:
- create rate: ``n`` files made with ``open(O_CREAT|O_EXCL)`` + one small ``write`` +
  ``close``, relative to an open directory fd (``dir_fd``), so each file pays only its own
  operations and not the lookups of the folders above it. On a network volume this is
  about ``1 / (round trips per create × latency)``.
- stat rate: ``stat`` of each of those files, again relative to the directory fd.
- sequential write: one file written in ``block_kb`` blocks; at the end of every
  ``bucket_s`` bucket the file is ``fsync``'d and the bucket's MB/s recorded, so the
  timeline shows what reached the storage, not the page cache (a burst-credit volume falls
  from burst to baseline in it).
Everything happens in a hidden scratch folder that is removed afterwards.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RateResult:
    """``count`` operations took ``seconds``."""

    count: int
    seconds: float

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
class ProbeResult:
    """All probes of one folder."""

    path: str
    create: RateResult
    stat: RateResult
    write: WriteResult | None


def _scratch(directory: str | os.PathLike[str]) -> str:
    return tempfile.mkdtemp(prefix=".iobench-probe-", dir=os.fspath(directory))


def create_rate(directory: str | os.PathLike[str], n: int = 300, size: int = 128) -> RateResult:
    """Create ``n`` files of ``size`` bytes in a scratch folder of ``directory``."""
    scratch = _scratch(directory)
    try:
        return create_files_in(scratch, n, size)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def create_files_in(folder: str | os.PathLike[str], n: int, size: int = 128) -> RateResult:
    """Create files ``f0`` .. ``f{n-1}`` in an existing, empty ``folder`` and time it."""
    data = b"x" * size
    dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        t0 = time.perf_counter()
        for i in range(n):
            fd = os.open(f"f{i}", flags, 0o644, dir_fd=dfd)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        return RateResult(n, time.perf_counter() - t0)
    finally:
        os.close(dfd)


def stat_files_in(folder: str | os.PathLike[str], n: int) -> RateResult:
    """``stat`` the files made by :func:`create_files_in` and time it."""
    dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        t0 = time.perf_counter()
        for i in range(n):
            os.stat(f"f{i}", dir_fd=dfd)
        return RateResult(n, time.perf_counter() - t0)
    finally:
        os.close(dfd)


def sequential_write(
    directory: str | os.PathLike[str],
    total_mb: float = 64.0,
    block_kb: int = 1024,
    bucket_s: float = 0.25,
    max_seconds: float | None = None,
) -> WriteResult:
    """Write ``total_mb`` MB (or until ``max_seconds``) and return the throughput timeline."""
    scratch = _scratch(directory)
    try:
        return _write_file(os.path.join(scratch, "seq.bin"), total_mb, block_kb, bucket_s, max_seconds)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _write_file(
    path: str, total_mb: float, block_kb: int, bucket_s: float, max_seconds: float | None
) -> WriteResult:
    block = os.urandom(block_kb * 1024)  # incompressible, so no layer can cheat
    total = int(total_mb * 1e6)
    timeline: list[ThroughputPoint] = []
    written = bucket_bytes = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        t0 = time.perf_counter()
        last = 0.0
        now = 0.0
        while written < total and (max_seconds is None or now < max_seconds):
            n = os.write(fd, block[: min(len(block), total - written)])
            written += n
            bucket_bytes += n
            now = time.perf_counter() - t0
            if now - last >= bucket_s or written >= total:
                os.fsync(fd)
                now = time.perf_counter() - t0
                timeline.append(ThroughputPoint(now, bucket_bytes / 1e6 / (now - last)))
                last, bucket_bytes = now, 0
        if bucket_bytes:
            os.fsync(fd)
            now = time.perf_counter() - t0
            timeline.append(ThroughputPoint(now, bucket_bytes / 1e6 / (now - last)))
    finally:
        os.close(fd)
    return WriteResult(written / 1e6, now, block_kb, tuple(timeline))


def probe(
    directory: str | os.PathLike[str], files: int = 300, write_mb: float | None = 64.0
) -> ProbeResult:
    """Run the create, stat and (unless ``write_mb`` is None) sequential-write probes."""
    scratch = _scratch(directory)
    try:
        create = create_files_in(scratch, files, 128)
        stat = stat_files_in(scratch, files)
        write = (
            _write_file(os.path.join(scratch, "seq.bin"), write_mb, 1024, 0.25, None)
            if write_mb
            else None
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return ProbeResult(str(Path(directory)), create, stat, write)
