"""Workers no launcher can reach: a ``--fleet-dir`` on the shared volume, and each worker's
clock measured against the volume's file times.

Each worker writes its own run folder, ``DIR/workers/<worker id>/``, with nothing in common
but the folder: no messages, so nothing to hang on. Their clocks are compared through the
volume: a worker writes a small file there, between two readings of its own clock, and reads
the file's modification time back. A network filesystem stamps that time with the server's
clock (NFS, EFS), a FUSE volume with its daemon's, a local one with the host's: one clock for
every worker, so offsets from it line their starts up (``iobench.rundir.fleet``). The
uncertainty is half the write's round trip plus the filesystem's time granularity; the
shortest of a few rounds is kept, and both are recorded.
"""

from __future__ import annotations

import os
import re
import socket
import time
from pathlib import Path

from iobench.errors import IOBenchError
from iobench.fleet.comm import Fleet

ROUNDS = 5
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def default_worker_id() -> str:
    """``<host>-<pid>``, made safe as a folder name."""
    return _UNSAFE.sub("-", f"{socket.gethostname()}-{os.getpid()}").strip("-.")[:100] or "worker"


def clock_offset(folder: Path, worker: str) -> dict[str, float]:
    """This host's clock minus the volume's file clock: ``offset_s``, ``uncertainty_s``."""
    path = folder / f".iobench-clock-{worker}"
    best: tuple[float, float] | None = None
    try:
        for _ in range(ROUNDS):
            t1 = time.time()
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, b"%.6f\n" % t1)
                os.fsync(fd)
                mtime = os.fstat(fd).st_mtime
            finally:
                os.close(fd)
            t2 = time.time()
            half = (t2 - t1) / 2
            if best is None or half < best[1]:
                best = ((t1 + t2) / 2 - mtime, half)
    except OSError as exc:
        raise IOBenchError(
            f"cannot measure the clock against {folder}: {exc.strerror or exc}"
        ) from None
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    assert best is not None
    return {"offset_s": round(best[0], 6), "uncertainty_s": round(best[1], 6)}


class DirFleet(Fleet):
    """One worker of a ``--fleet-dir``: no messages; its name and its clock's offset."""

    engine = "dir"

    def __init__(self, folder: Path, worker: str) -> None:
        super().__init__()
        self.folder, self.worker_id = folder, worker
        self.clock = clock_offset(folder, worker)
        self.offset_s = self.clock["offset_s"]

    @property
    def worker(self) -> str:
        return self.worker_id


__all__ = ["DirFleet", "clock_offset", "default_worker_id"]
