"""mdtest's phases over a tree of a chosen shape, by one or several parallel streams.

Method (mdtest's, with its unique-folder mode ``-u``): each stream builds its own tree under
the probe's scratch folder — ``depth`` levels of ``branch`` folders below its root (mdtest's
``-z`` and ``-b``), ``files`` files in every folder (``-I``) — and all streams run the same
phases in order, each phase started together (a barrier):

- ``dir_create``: ``mkdir`` of every folder, top down;
- ``file_create``: ``open(O_CREAT|O_EXCL|O_WRONLY)``, then ``file_bytes`` written, then
  ``close``;
- ``file_stat``: ``stat`` of every file;
- ``file_read``: ``open``, read to the end, ``close``;
- ``file_remove``: ``unlink`` of every file;
- ``dir_remove``: ``rmdir`` of every folder, bottom up.

Every path is given whole, as mdtest and fio give theirs, so each pays for the lookups of the
folders above it that the client does not have cached. A phase's rate is mdtest's aggregate:
the items all streams did over the time of the slowest (from the barrier to its last item);
each stream's own rate is kept too. Each item is timed (:mod:`iobench.predict.latency`); in
``file_create`` only the ``open`` call, as fio's ``filecreate`` engine times it (the write and
the ``close`` count in the rate, not in the latency), elsewhere the whole item.

A phase stops starting items after ``seconds`` (mdtest's stonewall); later phases then work
on what was made. Streams beyond one are processes of their own (``spawn``), so they share
no interpreter lock, as mdtest's ranks do.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from iobench.errors import UsageError
from iobench.predict.latency import Latency

#: the phases, in the order they run
PHASES = ("dir_create", "file_create", "file_stat", "file_read", "file_remove", "dir_remove")
#: the most folders and files one stream's tree may hold
MAX_FOLDERS, MAX_FILES = 100_000, 1_000_000
MAX_STREAMS = 64


@dataclass(frozen=True)
class TreeShape:
    """How deep, how wide, and how many files in every folder (mdtest's -z, -b, -I)."""

    depth: int
    branch: int
    files: int

    @classmethod
    def parse(cls, text: str) -> TreeShape:
        """``"2,3,100"``: 2 levels of 3 folders below the root, 100 files in each of the 13."""
        parts = text.split(",")
        try:
            depth, branch, files = (int(p) for p in parts)
        except ValueError:
            raise UsageError(
                f"--tree {text!r}: expected DEPTH,BRANCH,FILES (e.g. 2,3,100: two levels of "
                "three folders, 100 files in each folder)"
            ) from None
        return cls(depth, branch, files).check()

    def check(self) -> TreeShape:
        if self.depth < 0 or self.branch < 0 or self.files < 1 or (self.depth and not self.branch):
            raise UsageError(
                f"--tree {self.depth},{self.branch},{self.files}: DEPTH and BRANCH 0 or more "
                "(BRANCH at least 1 below a root with levels), FILES at least 1"
            )
        folders = sum(self.branch**level for level in range(self.depth + 1))
        if folders > MAX_FOLDERS or folders * self.files > MAX_FILES:
            raise UsageError(
                f"--tree {self.depth},{self.branch},{self.files}: {folders:,} folders and "
                f"{folders * self.files:,} files a stream; at most {MAX_FOLDERS:,} and {MAX_FILES:,}"
            )
        return self

    def folders(self) -> list[str]:
        """Each folder's path below a stream's root, top down (the root is ``""``)."""
        out, level = [""], [""]
        for _ in range(self.depth):
            level = [f"{p}/d{i}" if p else f"d{i}" for p in level for i in range(self.branch)]
            out += level
        return out

    def describe(self) -> str:
        n = len(self.folders())
        return (
            f"{self.depth} deep, {self.branch} wide, {self.files:,} files a folder "
            f"({n:,} folders, {n * self.files:,} files a stream)"
        )


@dataclass(frozen=True)
class Phase:
    """One phase over every stream: items done, seconds of the slowest, each item's time."""

    name: str
    items: int
    seconds: float
    latency: Latency
    streams: tuple[tuple[int, float], ...]  # (items, seconds) of each stream

    @property
    def per_s(self) -> float:
        return self.items / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """fio's words: ``total_ios``, ``runtime`` (ms), ``iops``, ``clat_ns``."""

        def block(items: int, seconds: float) -> dict[str, Any]:
            iops = items / seconds if seconds > 0 else 0.0
            return {"total_ios": items, "runtime": round(seconds * 1000, 3), "iops": round(iops, 1)}

        return {
            **block(self.items, self.seconds),
            "clat_ns": self.latency.clat_ns(),
            "streams": [block(n, s) for n, s in self.streams],
        }


@dataclass(frozen=True)
class TreeResult:
    """Every phase of one tree probe."""

    shape: TreeShape
    streams: int
    file_bytes: int
    phases: dict[str, Phase]

    def to_dict(self) -> dict[str, Any]:
        return {
            "depth": self.shape.depth,
            "branch": self.shape.branch,
            "files_per_dir": self.shape.files,
            "file_bytes": self.file_bytes,
            "streams": self.streams,
            "phases": {name: p.to_dict() for name, p in self.phases.items()},
        }


def _phase_ops(
    root: str, shape: TreeShape, file_bytes: int
) -> dict[str, tuple[Callable[[], list[str]], Callable[[str], int]]]:
    """Each phase's items (asked for when it starts) and what it does to one, returning the
    nanoseconds to count as its latency."""
    data = b"x" * file_bytes
    made_dirs: list[str] = []
    made_files: list[str] = []
    clock = time.perf_counter_ns
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL

    def mkdir(path: str) -> int:
        t0 = clock()
        os.mkdir(path)
        ns = clock() - t0
        made_dirs.append(path)
        return ns

    def create(path: str) -> int:
        t0 = clock()
        fd = os.open(path, flags, 0o644)
        ns = clock() - t0
        try:
            if data:
                os.write(fd, data)
        finally:
            os.close(fd)
        made_files.append(path)
        return ns

    def timed(fn: Callable[[str], object]) -> Callable[[str], int]:
        def op(path: str) -> int:
            t0 = clock()
            fn(path)
            return clock() - t0

        return op

    def read(path: str) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            while os.read(fd, 1 << 16):
                pass
        finally:
            os.close(fd)

    dirs = [os.path.join(root, p) if p else root for p in shape.folders()]
    return {
        "dir_create": (lambda: dirs, mkdir),
        "file_create": (
            lambda: [os.path.join(d, f"f{i}") for d in made_dirs for i in range(shape.files)],
            create,
        ),
        "file_stat": (lambda: list(made_files), timed(os.stat)),
        "file_read": (lambda: list(made_files), timed(read)),
        "file_remove": (lambda: list(made_files), timed(os.unlink)),
        "dir_remove": (lambda: made_dirs[::-1], timed(os.rmdir)),
    }


def _stream(
    root: str,
    shape: TreeShape,
    file_bytes: int,
    seconds: float | None,
    sync: Callable[[], object],
    report: Callable[[str, int, float, list[int]], None],
) -> None:
    """One stream's phases: each after ``sync`` (the barrier), reported as it ends."""
    for name, (items, op) in _phase_ops(root, shape, file_bytes).items():
        todo = items()
        sync()
        each: list[int] = []
        t0 = time.perf_counter()
        deadline = None if seconds is None else t0 + seconds
        for path in todo:
            if deadline is not None and time.perf_counter() >= deadline:
                break
            each.append(op(path))
        report(name, len(each), time.perf_counter() - t0, each)


def _child(
    root: str,
    shape: TreeShape,
    file_bytes: int,
    seconds: float | None,
    barrier: Any,
    out: Any,
    index: int,
) -> None:
    """A stream in a process of its own (``spawn``): results and errors go to ``out``."""
    try:
        _stream(root, shape, file_bytes, seconds, barrier.wait,
                lambda *r: out.put((index, *r)))  # fmt: skip
    except (OSError, threading.BrokenBarrierError) as exc:
        out.put((index, "error", 0, 0.0, [str(exc) or "another stream failed"]))
        barrier.abort()


def tree_probe(
    scratch: str,
    shape: TreeShape,
    streams: int = 1,
    seconds: float | None = None,
    file_bytes: int = 0,
    timeout_s: float = 600.0,
) -> TreeResult:
    """Run every phase with ``streams`` streams under ``scratch`` (a folder of the probe's own)."""
    shape.check()
    if not 1 <= streams <= MAX_STREAMS:
        raise UsageError(f"--streams must be from 1 to {MAX_STREAMS}, not {streams}")
    got: dict[str, list[tuple[int, float, list[int]]]] = {name: [] for name in PHASES}
    if streams == 1:
        root = os.path.join(scratch, "s0")
        _stream(root, shape, file_bytes, seconds, lambda: None,
                lambda name, n, s, each: got[name].append((n, s, each)))  # fmt: skip
    else:
        _run_processes(scratch, shape, streams, seconds, file_bytes, timeout_s, got)
    phases = {}
    for name in PHASES:
        rows = got[name]
        phases[name] = Phase(
            name,
            sum(n for n, _, _ in rows),
            max((s for _, s, _ in rows), default=0.0),
            Latency.of(x for _, _, each in rows for x in each),
            tuple((n, s) for n, s, _ in rows),
        )
    return TreeResult(shape, streams, file_bytes, phases)


def _run_processes(
    scratch: str,
    shape: TreeShape,
    streams: int,
    seconds: float | None,
    file_bytes: int,
    timeout_s: float,
    got: dict[str, list[tuple[int, float, list[int]]]],
) -> None:
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(streams, timeout=timeout_s), ctx.Queue()
    procs = [
        ctx.Process(
            target=_child,
            args=(os.path.join(scratch, f"s{i}"), shape, file_bytes, seconds, barrier, out, i),
            daemon=True,
        )
        for i in range(streams)
    ]
    for p in procs:
        p.start()
    try:
        for _ in range(streams * len(PHASES)):
            try:
                _, name, n, s, each = out.get(timeout=timeout_s)
            except queue.Empty:
                raise OSError(f"a tree stream sent nothing for {timeout_s:g} s") from None
            if name == "error":
                raise OSError(f"a tree stream failed: {each[0]}")
            got[name].append((n, s, each))
    finally:
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
