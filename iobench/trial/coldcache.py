"""Make what a strategy persisted cold before a restart, the best way this machine allows, and
say which way ran and what stayed warm.

A restarted pod finds its volume's files in no cache of the new machine. Methods, best first:

1. ``lab-flush`` — the tree lies on an iobench lab volume (``--kind fuse``): its daemon tells
   the kernel to forget every cached name and attribute of that mount (``iobench lab flush``;
   file data is re-read at each open there anyway). Only that mount is touched.
2. ``drop_caches`` — ``sync``, then ``3`` into ``/proc/sys/vm/drop_caches``: the page cache,
   dentries and inodes of every filesystem, so a network or FUSE client looks names up again.
   Needs root and a writable ``/proc/sys``; containers usually mount it read-only (EROFS) or
   deny it (EACCES/EPERM) — detected, and the next method runs. It is global: other processes
   lose their caches too. On sshfs, sshfs's own directory cache (20 s) stays warm.
3. ``fadvise`` — ``posix_fadvise(POSIX_FADV_DONTNEED)`` on every file of the tree: the page
   cache only. Directory and attribute caches stay warm, and opening each file to advise it
   refreshes them — so a restart measured this way is only partly cold, and the result says so.

``warm`` mode does nothing (method ``none``). :func:`make_cold` returns a :class:`ColdResult`
the trial records per row (``cold_method``, ``cold_warm_left``).
"""

from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iobench.errors import IOBenchError, UsageError
from iobench.lab.flush import flush
from iobench.lab.state import read_stats
from iobench.system.procfs import mount_of

METHODS = ("lab-flush", "drop_caches", "fadvise")
MODES = ("cold", "warm")
DROP_CACHES = "/proc/sys/vm/drop_caches"
LAB_FSTYPE = "fuse.iobench-lab"


class ColdCacheUnavailable(IOBenchError):
    """One method cannot run here; its message says why (the next method is tried)."""


@dataclass(frozen=True)
class ColdResult:
    """How a tree was made cold, for the trial's row."""

    method: str  # "lab-flush", "drop_caches", "fadvise", or "none" (warm mode)
    warm_left: str  # what stayed warm ("" when nothing known did)
    seconds: float
    detail: str  # e.g. "forgot 3 of 3 top-level names", "advised 2,345 files"
    skipped: tuple[str, ...] = ()  # better methods that could not run, each with why

    def to_row(self) -> dict[str, Any]:
        return {
            "cold_method": self.method,
            "cold_warm_left": self.warm_left,
            "cold_s": round(self.seconds, 6),
            "cold_skipped": "; ".join(self.skipped),
        }


def make_cold(
    tree: str | os.PathLike[str], mode: str = "cold", methods: tuple[str, ...] = METHODS
) -> ColdResult:
    """Drop the caches holding ``tree`` with the first of ``methods`` that works here."""
    if mode not in MODES:
        raise UsageError(f"--cache-mode must be one of {', '.join(MODES)}, not {mode!r}")
    if mode == "warm":
        return ColdResult("none", "everything (warm mode)", 0.0, "caches left as they were")
    path = Path(os.path.abspath(tree))
    if not path.exists():
        raise UsageError(f"cannot make {path} cold: it does not exist")
    skipped: list[str] = []
    for method in methods:
        t0 = time.monotonic()
        try:
            detail, warm_left = _RUN[method](path)
        except ColdCacheUnavailable as e:
            skipped.append(f"{method}: {e}")
            continue
        return ColdResult(method, warm_left, time.monotonic() - t0, detail, tuple(skipped))
    raise ColdCacheUnavailable(f"no way to drop the caches of {path} here: {'; '.join(skipped)}")


def _lab_flush(path: Path) -> tuple[str, str]:
    mount = mount_of(path)
    if mount is None or mount.fstype != LAB_FSTYPE:
        raise ColdCacheUnavailable("not on an iobench lab volume of --kind fuse")
    try:
        data = flush(mount.mountpoint)
    except IOBenchError as e:
        raise ColdCacheUnavailable(str(e)) from None
    return (
        f"forgot {data['dropped']} of {data['root_names']} top-level names of "
        f"{mount.mountpoint} and all below them"
    ), "negative entries at the volume's root"


def drop_caches() -> None:
    """``sync`` and drop the page, dentry and inode caches of the whole machine."""
    os.sync()
    try:
        with open(DROP_CACHES, "w") as f:
            f.write("3\n")
    except OSError as e:
        reasons = {
            errno.EROFS: "read-only /proc/sys (a container?)",
            errno.EACCES: "not permitted",
            errno.EPERM: "not permitted (needs root / CAP_SYS_ADMIN)",
            errno.ENOENT: "no /proc/sys/vm/drop_caches",
        }
        why = reasons.get(e.errno or 0, e.strerror or str(e))
        raise ColdCacheUnavailable(f"cannot write {DROP_CACHES}: {why}") from None


def _drop_caches(path: Path) -> tuple[str, str]:
    drop_caches()
    mount = mount_of(path)
    warm_left = (
        "sshfs's own directory cache (20 s)" if mount and mount.fstype == "fuse.sshfs" else ""
    )
    return "page cache, dentries and inodes of every filesystem", warm_left


def fadvise_tree(tree: Path) -> int:
    """``POSIX_FADV_DONTNEED`` on every regular file under ``tree`` (no symlinks followed);
    returns how many files were advised."""
    count = 0
    for root, _dirs, names in os.walk(tree):
        for name in names:
            try:
                fd = os.open(os.path.join(root, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                continue  # a symlink, a socket, or unreadable: nothing of ours to drop
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                count += 1
            finally:
                os.close(fd)
    return count


def _fadvise(path: Path) -> tuple[str, str]:
    if not hasattr(os, "posix_fadvise"):
        raise ColdCacheUnavailable("posix_fadvise is not available on this system")
    os.sync()  # dirty pages are not dropped
    files = fadvise_tree(path) if path.is_dir() else fadvise_file(path)
    return (
        f"advised {files:,} files",
        "directory and attribute caches (walking the tree refreshed them)",
    )


def fadvise_file(path: Path) -> int:
    """``POSIX_FADV_DONTNEED`` on one file (an archive); returns 1."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return 1


_RUN = {"lab-flush": _lab_flush, "drop_caches": _drop_caches, "fadvise": _fadvise}


def lab_counters(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The live counters of the lab volume holding ``path`` (None when it is not on one), so a
    trial can check that its restart really read from the target (diff two of these)."""
    mount = mount_of(os.fspath(path))
    if mount is None or mount.fstype != LAB_FSTYPE:
        return None
    time.sleep(0.3)  # the daemon refreshes its live file every 0.25 s
    return read_stats(mount.mountpoint)


def target_reads(before: dict[str, Any], after: dict[str, Any]) -> dict[str, int]:
    """What a restart asked of the lab volume: bytes read, lookups (getattr), opens, reads,
    and files created (bytecode an import wrote)."""

    def count(stats: dict[str, Any], op: str) -> int:
        return int(stats.get("ops", {}).get(op, {}).get("count", 0))

    out = {"bytes_read": int(after.get("bytes_read", 0)) - int(before.get("bytes_read", 0))}
    for op in ("getattr", "open", "read", "create"):
        out[op] = count(after, op) - count(before, op)
    return out
