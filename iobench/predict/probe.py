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
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from iobench.predict.latency import Latency
from iobench.predict.probes import (
    RateResult,
    Space,
    WriteResult,
    cold_read,
    create_files_in,
    each_in,
    fsync_latency,
    lock_works,
    make_read_file,
    open_read_files_in,
    read_latency,
    scratch_folder,
    space_of,
    stat_files_in,
    write_file,
)
from iobench.predict.tree import PHASES, TreeResult, TreeShape, tree_probe
from iobench.wheels.profile import load_profile

#: version of :func:`result_to_dict`'s JSON; bump on any change of keys or meaning
#: 2: every timed operation's latency in fio's words (``total_ios``, ``runtime`` ms, ``iops``,
#:    ``clat_ns`` with p50/p95/p99/p99.9, min, max, mean, stddev, N), ``read4k`` (cold random
#:    4 KiB reads), ``tree`` (mdtest's phases); fsync's ``p50_ms``/``p99_ms`` kept
SCHEMA_VERSION = 2
#: how long past its deadline one operation may take before the folder counts as hung
HANG_GRACE_S = 10.0


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
    fsync: Latency | None = None
    read: RateResult | None = None  # count = bytes read cold, so per_s / 1e6 = MB/s
    read4k: RateResult | None = None  # cold random 4 KiB reads, each timed (as ioping's)
    tree: TreeResult | None = None  # mdtest's phases over a tree, when asked for
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


# --------------------------------------------------------------------------- locks and space


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
        ("read4k", lambda: read_latency(make_read_file(f"{scratch}/read4k.bin"), files, seconds)),
        (
            "chmod",
            lambda: each_in(
                scratch, made["n"], seconds, lambda i, d: os.chmod(f"f{i}", 0o600, dir_fd=d)
            ),
        ),
        ("rename", lambda: each_in(scratch, made["n"], seconds, rename)),
        ("unlink", lambda: each_in(scratch, made["n"], seconds, _unlink_either)),
        (
            "mkdir",
            lambda: each_in(scratch, files, seconds, lambda i, d: os.mkdir(f"d{i}", dir_fd=d)),
        ),
        (
            "fsync",
            lambda: fsync_latency(os.path.join(scratch, "fsync.bin"), seconds or 1.0, fsyncs),
        ),
    ]
    if write_mb:
        steps.append(("write", lambda: write_file(seq, write_mb, 1024, bucket_s, write_seconds)))
        steps.append(("read", lambda: cold_read(seq, write_seconds)))
    if locks:
        lock_file = os.path.join(scratch, "lock")
        steps.append(("locks", lambda: {k: lock_works(lock_file, k) for k in ("flock", "fcntl")}))
    return steps


def _limits(per_step: float, write_seconds: float | None) -> Callable[[str], float]:
    """How long each step may take before the folder counts as hung."""

    def limit(name: str) -> float:
        if name in ("write", "read"):
            return (write_seconds if write_seconds is not None else 600.0) + HANG_GRACE_S
        if name == "tree":  # its phases, and the streams' start
            return per_step * (len(PHASES) + 1)
        return 2 * per_step if name == "open_read" else per_step

    return limit


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
    tree: TreeShape | None = None,
    streams: int = 1,
    tree_bytes: int = 0,
) -> ProbeResult:
    """Run every probe on ``directory``: each on up to ``files`` items (``fsyncs`` fsyncs)
    or for ``seconds``, whichever comes first; with ``tree``, mdtest's phases over a tree of
    that shape by ``streams`` parallel streams (:mod:`iobench.predict.tree`), files of
    ``tree_bytes``.

    The sequential write is skipped when ``write_mb`` is falsy; it never takes more than a
    quarter of the free space.
    """
    space = space_of(directory)
    if write_mb:
        write_mb = min(write_mb, space.free_bytes / 4 / 1e6)
    scratch = scratch_folder(directory)
    steps = _steps(
        scratch, files, file_bytes, seconds, write_mb, write_seconds, bucket_s, locks, fsyncs
    )
    per_step = (seconds if seconds is not None else 60.0) + HANG_GRACE_S
    if tree is not None:
        steps.append(("tree", lambda: tree_probe(scratch, tree, streams, seconds, tree_bytes,
                                                 timeout_s=per_step * len(PHASES))))  # fmt: skip
    out, hung = _run_steps(steps, _limits(per_step, write_seconds))
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
    it). The write is short (``4 × seconds``) and at most ``write_mb``. ``cpu_s`` and
    ``cpu_others``: :func:`calibrate_cpu` (best of ``cpu_runs``), for scaling recorded fast
    times, and whether other processes shared the CPUs meanwhile (absent with ``cpu_runs=0``).
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
    if cpu_runs:  # 0: the caller has a CPU figure (doctor's second look)
        doc["cpu_s"], doc["cpu_others"] = calibrate_cpu(runs=cpu_runs)
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


def calibrate_cpu(runs: int = 3) -> tuple[float, float]:
    """(this machine's CPU job time, the CPUs other processes used meanwhile).

    The job time is the best of ``runs`` after one thrown away: on this VM the first CPU job
    after a quiet minute ran 1.3-1.6x slower than the next ones, and one such sample put a
    smoke venv-on-tmp's figure at +44 % (docs/prediction.md). The other processes' share,
    the system's busy CPU time from /proc/stat less this process's and its children's,
    says whether that best is the machine's speed or a share of a busy machine (two CPU
    burners made the job 1.6x slower but a smoke install 1.03-1.11x: the scheduler favours a
    process that waits on I/O)."""

    def own() -> float:
        s, c = (
            resource.getrusage(resource.RUSAGE_SELF),
            resource.getrusage(resource.RUSAGE_CHILDREN),
        )
        return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime

    cpu_seconds(runs=1)  # the warm-up
    busy0, own0, t0 = _busy_cpu_s(), own(), time.monotonic()
    best = min(cpu_seconds(runs=1) for _ in range(max(runs, 1)))
    wall = max(time.monotonic() - t0, 1e-3)
    others = max(0.0, (_busy_cpu_s() - busy0) - (own() - own0)) / wall
    return best, round(others, 2)


def _busy_cpu_s() -> float:
    """Seconds every CPU of the system spent busy so far (/proc/stat, via psutil)."""
    t = psutil.cpu_times()
    return (
        sum(t)
        - t.idle
        - getattr(t, "iowait", 0.0)
        - getattr(t, "guest", 0.0)
        - getattr(t, "guest_nice", 0.0)
    )


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


#: the timed operations of a probe, in the order they run and print
OPS = ("create", "stat", "stat_miss", "open_read", "read4k", "chmod", "rename", "unlink", "mkdir")


def op_to_dict(r: RateResult | None) -> dict[str, Any] | None:
    """One operation: its count, time and mean (``ms_each``, which the model reads) and, in
    fio's words, ``total_ios``, ``runtime`` (ms), ``iops`` and ``clat_ns`` (percentiles)."""
    if r is None:
        return None
    out: dict[str, Any] = {"count": r.count, "seconds": r.seconds, "ms_each": r.ms_each}
    out.update(total_ios=r.count, runtime=round(r.seconds * 1000, 3), iops=round(r.per_s, 1))
    if r.latency is not None:
        out["clat_ns"] = r.latency.clat_ns()
    if r.opened is not None:  # a create's open(O_CREAT) alone: fio's filecreate clat
        out["open_clat_ns"] = r.opened.clat_ns()
    return out


def result_to_dict(result: ProbeResult) -> dict[str, Any]:
    """One folder's probe as plain data, with derived rates (ms each, MB/s)."""
    out: dict[str, Any] = {
        "path": result.path,
        "file_bytes": result.file_bytes,
        "seconds_per_probe": result.seconds,
        "hung": result.hung,
    }
    for op in OPS:
        out[op] = op_to_dict(getattr(result, op))
    f = result.fsync
    out["fsync"] = (
        None
        if f is None
        else {"count": f.count, "p50_ms": f.p50_ms, "p99_ms": f.p99_ms, "clat_ns": f.clat_ns()}
    )
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
    out["tree"] = result.tree.to_dict() if result.tree is not None else None
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
