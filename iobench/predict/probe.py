"""Storage micro-probes of a folder, each bounded in time: what one metadata operation, an
fsync, a megabyte and a lock cost there. Pure measuring: nothing is printed, results are
dataclasses (and a versioned JSON form, :func:`result_to_dict`).

Method (every operation relative to an open directory fd, so each pays only for itself and
not for the lookups of the folders above it):

- create: ``open(O_CREAT|O_EXCL)`` + one write of ``file_bytes`` + ``close``. On a network
  volume about ``1 / (round trips per create × latency)``.
- stat / stat-miss: ``stat`` of the files just made / of names that do not exist.
- cold open+read: the files are fsync'd and their pages dropped (``posix_fadvise
  DONTNEED``), untimed; then ``open`` + ``read`` + ``close`` each.
- rename, unlink, mkdir, chmod: one each per file, in that order.
- fsync: write 4 KiB + ``fsync`` on one file, repeatedly; p50 and p99 latency.
- sequential write: one file written in ``block_kb`` blocks until ``write_mb`` or
  ``write_seconds``; at the end of every ``bucket_s`` bucket the file is fsync'd and the
  bucket's MB/s recorded, so the timeline shows what reached the storage (a burst-credit
  volume falls from burst to baseline in it). Then its pages are dropped and it is read
  back cold, in MB/s.
- locks: a second process takes an exclusive ``flock`` (then an ``fcntl`` lock) on a file;
  this process must then be refused the same lock. "works" only if it is; NFS and FUSE
  volumes often grant both (no exclusion) or fail (ENOLCK).

Time bounds: each micro-probe stops starting new operations at its deadline (``seconds``).
The probes run in a worker thread; if one operation itself does not return within
``seconds + HANG_GRACE_S`` (a hung volume), the probe of that folder is abandoned, marked
``hung``, and its scratch folder left (removing it would hang too). Everything else happens
in a hidden scratch folder that is removed afterwards.
"""

from __future__ import annotations

import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from iobench.wheels.profile import load_profile

#: version of :func:`result_to_dict`'s JSON; bump on any change of keys or meaning
SCHEMA_VERSION = 1
#: how long past its deadline one operation may take before the folder counts as hung
HANG_GRACE_S = 10.0
_FSYNC_BYTES = 4096


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
class LatencyResult:
    """``count`` timed operations: their median and 99th percentile in milliseconds."""

    count: int
    p50_ms: float
    p99_ms: float


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


@dataclass(frozen=True)
class ProbeResult:
    """All probes of one folder; a probe that was not run (or was cut off) is ``None``."""

    path: str
    create: RateResult
    stat: RateResult
    write: WriteResult | None
    stat_miss: RateResult | None = None
    open_read: RateResult | None = None
    rename: RateResult | None = None
    unlink: RateResult | None = None
    mkdir: RateResult | None = None
    chmod: RateResult | None = None
    fsync: LatencyResult | None = None
    read: RateResult | None = None  # count = bytes read cold, so per_s / 1e6 = MB/s
    locks: dict[str, str] = field(default_factory=dict)
    space: Space | None = None
    file_bytes: int = 128
    seconds: float | None = None
    hung: str | None = None  # the probe that did not return, when the folder hung

    @property
    def read_mbps(self) -> float | None:
        return self.read.per_s / 1e6 if self.read and self.read.count else None

    def ms(self, op: str) -> float | None:
        """Milliseconds per operation of probe ``op`` (fsync: its p50); None when not measured."""
        if op == "fsync":
            return self.fsync.p50_ms if self.fsync and self.fsync.count else None
        got = getattr(self, op, None)
        return got.ms_each if isinstance(got, RateResult) and got.count else None


# --------------------------------------------------------------------------- single probes


class _Deadline:
    """The moment a probe stops starting new operations."""

    def __init__(self, seconds: float | None) -> None:
        self.at = None if seconds is None else time.perf_counter() + seconds

    def passed(self) -> bool:
        return self.at is not None and time.perf_counter() >= self.at


def _timed_loop(
    names: Iterable[Any], op: Callable[[Any], object], seconds: float | None
) -> RateResult:
    """Apply ``op`` to each name until the names or ``seconds`` run out."""
    deadline = _Deadline(seconds)
    n = 0
    t0 = time.perf_counter()
    for name in names:
        if deadline.passed():
            break
        op(name)
        n += 1
    return RateResult(n, time.perf_counter() - t0)


def _dir_fd(folder: str | os.PathLike[str]) -> int:
    return os.open(folder, os.O_RDONLY | os.O_DIRECTORY)


def create_files_in(
    folder: str | os.PathLike[str], n: int, size: int = 128, seconds: float | None = None
) -> RateResult:
    """Create files ``f0`` .. ``f{n-1}`` of ``size`` bytes in an existing, empty ``folder``."""
    data = b"x" * size
    dfd = _dir_fd(folder)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL

    def make(i: int) -> None:
        fd = os.open(f"f{i}", flags, 0o644, dir_fd=dfd)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    try:
        return _timed_loop(range(n), make, seconds)
    finally:
        os.close(dfd)


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


def _each_in(
    folder: str | os.PathLike[str], n: int, seconds: float | None, op: Callable[[int, int], object]
) -> RateResult:
    dfd = _dir_fd(folder)
    try:
        return _timed_loop(range(n), lambda i: op(i, dfd), seconds)
    finally:
        os.close(dfd)


def fsync_latency(path: str, seconds: float, max_count: int = 2000) -> LatencyResult:
    """Write 4 KiB and fsync, repeatedly, until ``seconds`` or ``max_count``."""
    block = os.urandom(_FSYNC_BYTES)
    times: list[float] = []
    deadline = _Deadline(seconds)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while len(times) < max_count and not deadline.passed():
            os.write(fd, block)
            t0 = time.perf_counter()
            os.fsync(fd)
            times.append((time.perf_counter() - t0) * 1000.0)
    finally:
        os.close(fd)
    if not times:
        return LatencyResult(0, 0.0, 0.0)
    times.sort()
    p99 = times[min(len(times) - 1, int(round(0.99 * (len(times) - 1))))]
    return LatencyResult(len(times), statistics.median(times), p99)


def _scratch(directory: str | os.PathLike[str]) -> str:
    return tempfile.mkdtemp(prefix=".iobench-probe-", dir=os.fspath(directory))


def create_rate(directory: str | os.PathLike[str], n: int = 300, size: int = 128) -> RateResult:
    """Create ``n`` files of ``size`` bytes in a scratch folder of ``directory``."""
    scratch = _scratch(directory)
    try:
        return create_files_in(scratch, n, size)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


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
        return _write_file(
            os.path.join(scratch, "seq.bin"), total_mb, block_kb, bucket_s, max_seconds
        )
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


# --------------------------------------------------------------------------- locks and space

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


# --------------------------------------------------------------------------- all probes of a folder


def _steps(
    scratch: str,
    files: int,
    file_bytes: int,
    seconds: float | None,
    write_mb: float | None,
    write_seconds: float | None,
    bucket_s: float,
    locks: bool,
    fsyncs: int = 2000,
) -> list[tuple[str, Callable[[], Any]]]:
    """The probes in order; later ones use the files the create probe made."""
    made = {"n": 0}

    def create() -> RateResult:
        res = create_files_in(scratch, files, file_bytes, seconds)
        made["n"] = res.count
        return res

    def rename(i: int, dfd: int) -> None:
        os.rename(f"f{i}", f"r{i}", src_dir_fd=dfd, dst_dir_fd=dfd)

    seq = os.path.join(scratch, "seq.bin")
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("create", create),
        ("stat", lambda: stat_files_in(scratch, made["n"], seconds)),
        ("stat_miss", lambda: stat_files_in(scratch, files, seconds, prefix="missing")),
        ("open_read", lambda: open_read_files_in(scratch, made["n"], seconds)),
        (
            "chmod",
            lambda: _each_in(
                scratch, made["n"], seconds, lambda i, d: os.chmod(f"f{i}", 0o600, dir_fd=d)
            ),
        ),
        ("rename", lambda: _each_in(scratch, made["n"], seconds, rename)),
        ("unlink", lambda: _each_in(scratch, made["n"], seconds, _unlink_either)),
        (
            "mkdir",
            lambda: _each_in(scratch, files, seconds, lambda i, d: os.mkdir(f"d{i}", dir_fd=d)),
        ),
        (
            "fsync",
            lambda: fsync_latency(os.path.join(scratch, "fsync.bin"), seconds or 1.0, fsyncs),
        ),
    ]
    if write_mb:
        steps.append(("write", lambda: _write_file(seq, write_mb, 1024, bucket_s, write_seconds)))
        steps.append(("read", lambda: cold_read(seq, write_seconds)))
    if locks:
        lock_file = os.path.join(scratch, "lock")
        steps.append(("locks", lambda: {k: lock_works(lock_file, k) for k in ("flock", "fcntl")}))
    return steps


def _unlink_either(i: int, dfd: int) -> None:
    """Unlink the renamed file, or the original when the rename probe stopped before it."""
    try:
        os.unlink(f"r{i}", dir_fd=dfd)
    except FileNotFoundError:
        os.unlink(f"f{i}", dir_fd=dfd)


def _run_steps(
    steps: list[tuple[str, Callable[[], Any]]], limit_s: Callable[[str], float]
) -> tuple[dict[str, Any], str | None]:
    """Run the steps in a worker thread; stop waiting for one that overruns its limit."""
    results: queue.Queue[tuple[str, Any]] = queue.Queue()

    def work() -> None:
        for name, fn in steps:
            try:
                results.put((name, fn()))
            except OSError as exc:
                results.put((name, exc))

    threading.Thread(target=work, name="iobench-probe", daemon=True).start()
    out: dict[str, Any] = {}
    for name, _ in steps:
        try:
            got_name, value = results.get(timeout=limit_s(name))
        except queue.Empty:
            return out, name
        out[got_name] = value
    return out, None


def probe(
    directory: str | os.PathLike[str],
    files: int = 300,
    write_mb: float | None = 64.0,
    *,
    seconds: float | None = None,
    file_bytes: int = 128,
    write_seconds: float | None = None,
    bucket_s: float = 0.25,
    locks: bool = True,
    fsyncs: int = 2000,
) -> ProbeResult:
    """Run every probe on ``directory``: each on up to ``files`` items (``fsyncs`` fsyncs)
    or for ``seconds``, whichever comes first.

    The sequential write is skipped when ``write_mb`` is falsy; it never takes more than a
    quarter of the free space.
    """
    space = space_of(directory)
    if write_mb:
        write_mb = min(write_mb, space.free_bytes / 4 / 1e6)
    scratch = _scratch(directory)
    steps = _steps(
        scratch, files, file_bytes, seconds, write_mb, write_seconds, bucket_s, locks, fsyncs
    )
    per_step = (seconds if seconds is not None else 60.0) + HANG_GRACE_S

    def limit(name: str) -> float:
        if name in ("write", "read"):
            return (write_seconds if write_seconds is not None else 600.0) + HANG_GRACE_S
        return 2 * per_step if name == "open_read" else per_step

    out, hung = _run_steps(steps, limit)
    if hung is None:
        shutil.rmtree(scratch, ignore_errors=True)
    errors = {k: f"error: {v.strerror or v}" for k, v in out.items() if isinstance(v, OSError)}
    ok = {k: v for k, v in out.items() if not isinstance(v, OSError)}
    lock_map = ok.pop("locks", None) or {k: "not tested" for k in ("flock", "fcntl")}
    empty = RateResult(0, 0.0)
    return ProbeResult(
        path=str(Path(directory)),
        create=ok.pop("create", empty),
        stat=ok.pop("stat", empty),
        write=ok.pop("write", None),
        locks={**lock_map, **{f"{k}_error": v for k, v in errors.items()}}
        if locks or errors
        else {},
        space=space,
        file_bytes=file_bytes,
        seconds=seconds,
        hung=hung,
        **ok,
    )


def probe_roles(
    roles: dict[str, str | os.PathLike[str]],
    seconds: float = 0.3,
    file_bytes: int | None = None,
    *,
    locks: bool = True,
    cpu_runs: int = 3,
    write_mb: float = 256.0,
    files: int = 5000,
    fsyncs: int = 2000,
) -> dict[str, Any]:
    """Probe each role's folder briefly (for the start of a run) and return the JSON document.

    One filesystem is probed once, in the first role's folder on it: the probe measures the
    filesystem, not the folder (``roles`` maps each role to the folder that was probed for
    it). The write is short (``4 × seconds``) and at most ``write_mb``. ``cpu_s``:
    :func:`cpu_seconds` (median of ``cpu_runs``), for scaling recorded fast times.
    ``locks``: test flock/fcntl (two processes each; ``iobench doctor`` wants them, a
    run's predictions do not). ``files``, ``fsyncs``: each small-file probe's cap on items
    and the fsync probe's on calls (what a probe leaves is removed after it); on a fast disk
    the cap ends a probe before ``seconds``, on a slow volume the time does.
    """
    size = file_bytes if file_bytes is not None else median_file_bytes("smoke")
    done: dict[int, ProbeResult] = {}
    probed: dict[str, str] = {}
    for role, path in roles.items():
        key = os.path.realpath(path)
        fs = os.stat(key).st_dev
        if fs not in done:
            done[fs] = probe(
                key,
                files=files,
                write_mb=write_mb,
                seconds=seconds,
                file_bytes=size,
                write_seconds=4 * seconds,
                bucket_s=max(seconds / 2, 0.05),
                locks=locks,
                fsyncs=fsyncs,
            )
        probed[role] = done[fs].path
    doc = results_to_dict(list(done.values()))
    doc["roles"] = probed
    doc["cpu_s"] = cpu_seconds(runs=cpu_runs)
    return doc


#: a small start-up-and-import job like the fast part of an install: a new interpreter, a
#: few stdlib imports, some bytecode compiling and pure-Python work
_CPU_JOB = (
    "import compileall, email.parser, http.client, json, zipfile\n"
    "src = 'def f(x):\\n' + ''.join(f'    y{i} = x * {i}\\n' for i in range(400)) + '    return x\\n'\n"
    "for i in range(40):\n    compile(src, f'<job{i}>', 'exec')\n"
    "sum(i * i for i in range(200000))\n"
)


def cpu_seconds(runs: int = 3) -> float:
    """Median wall time of a fixed interpreter job: how fast this machine runs pip's CPU
    part right now (load included), to scale fast times measured elsewhere."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-I", "-c", _CPU_JOB], check=True, capture_output=True, timeout=60
        )
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def median_file_bytes(profile_name: str) -> int:
    """The size of a profile's median installed file (groups weighted by their counts)."""

    groups = sorted(
        (g.median_bytes, g.count) for d in load_profile(profile_name).dists for g in d.files
    )
    half = sum(c for _, c in groups) / 2
    seen = 0
    for size, count in groups:
        seen += count
        if seen >= half:
            return int(size)
    return 128


# --------------------------------------------------------------------------- JSON


def result_to_dict(result: ProbeResult) -> dict[str, Any]:
    """One folder's probe as plain data, with derived rates (ms each, MB/s)."""
    out: dict[str, Any] = {
        "path": result.path,
        "file_bytes": result.file_bytes,
        "seconds_per_probe": result.seconds,
        "hung": result.hung,
    }
    for op in ("create", "stat", "stat_miss", "open_read", "chmod", "rename", "unlink", "mkdir"):
        r = getattr(result, op)
        out[op] = (
            None if r is None else {"count": r.count, "seconds": r.seconds, "ms_each": r.ms_each}
        )
    out["fsync"] = asdict(result.fsync) if result.fsync else None
    w = result.write
    out["write"] = (
        None
        if w is None
        else {
            "total_mb": w.total_mb,
            "seconds": w.seconds,
            "mean_mbps": w.mean_mbps,
            "timeline": [[p.t, p.mbps] for p in w.timeline],
        }
    )
    out["read"] = (
        None
        if result.read is None
        else {
            "total_mb": result.read.count / 1e6,
            "seconds": result.read.seconds,
            "mbps": result.read_mbps,
        }
    )
    out["locks"] = dict(result.locks)
    out["space"] = asdict(result.space) if result.space else None
    return out


def results_to_dict(results: list[ProbeResult]) -> dict[str, Any]:
    """The ``iobench probe --format json`` document."""
    return {
        "schema": "iobench-probe",
        "schema_version": SCHEMA_VERSION,
        "paths": [result_to_dict(r) for r in results],
    }
