"""Removing scratch on volumes that may hang: wait while the removal progresses, never for good.

Why: a removal on a hung volume (a stopped FUSE daemon, an sshfs server gone) blocks in
the kernel and never returns; a removal on a slow but healthy network volume may take
minutes for a big venv. A fixed timeout would fail one or the other.

Method: the removal runs in a daemon thread; the caller waits as long as that thread's
scheduler counters (``/proc/self/task/TID/schedstat``: CPU time, time slices) advance — they
move with every system call that completes — and gives up after ``quiet_s`` seconds in
which they stood still (one call that never returns). A volume that gave up once is "hung": nothing more is attempted under
it (a second attempt would only block another thread), and the caller says where the
leftovers are. A thread left blocked in the kernel ends with the process.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from iobench import procfs
from iobench.errors import IOBenchError
from iobench.scratch import remove

#: seconds without a single system call of the removal after which its volume counts as hung
QUIET_S = 20.0
_POLL_S = 0.05


def _activity(tid: int | None) -> bytes | None:
    """The thread's scheduler counters (CPU ns, waits, time slices): they stand still
    exactly while it sleeps in one call, and move with every call that completes."""
    if tid is None:
        return None
    for name in ("schedstat", "stat"):
        try:
            with open(f"/proc/self/task/{tid}/{name}", "rb") as fh:
                return fh.read()
        except OSError:
            continue
    return None


def bounded(fn: Callable[[], object], quiet_s: float = QUIET_S) -> str:
    """Run ``fn`` in a thread while it makes system calls; '' when it finished, else why not.

    Errors it raises (OSError, IOBenchError) come back as their message."""
    errors: list[str] = []
    tids: list[int] = []

    def call() -> None:
        tids.append(threading.get_native_id())
        try:
            fn()
        except (OSError, IOBenchError) as exc:
            errors.append(str(exc))

    worker = threading.Thread(target=call, name="iobench-remove", daemon=True)
    worker.start()
    last, quiet_since, interrupted = None, time.monotonic(), False
    while worker.is_alive():
        try:
            worker.join(_POLL_S)
        except (
            KeyboardInterrupt
        ):  # a removal under way is finished first, then the interrupt goes on
            interrupted = True
        now = _activity(tids[0] if tids else None)
        if now is None or now != last:
            last, quiet_since = now, time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s:
            errors.insert(0, f"no progress for {quiet_s:.0f} s (a hung volume?)")
            break
    if interrupted:
        raise KeyboardInterrupt
    return errors[0] if errors else ""


class Remover:
    """Remove scratch paths, remembering the folders whose volume hung."""

    def __init__(self, quiet_s: float = QUIET_S) -> None:
        self.quiet_s = quiet_s
        self.hung: list[Path] = []  # role scratch folders that stopped answering
        self.left: list[Path] = []  # what could not be removed

    def is_hung(self, path: Path) -> bool:
        return any(procfs.is_within(str(path), str(h)) for h in self.hung)

    def remove(self, path: Path, volume: Path) -> str:
        """Remove ``path`` (inside the scratch folder ``volume``); '' when done, else why not."""
        if self.is_hung(path):
            self.left.append(path)
            return f"{volume} does not answer"
        error = bounded(lambda: remove(path), self.quiet_s)
        if error:
            self.left.append(path)
            if "hung volume" in error:
                self.hung.append(volume)
        return error

    def run(self, fn: Callable[[], object], volume: Path) -> str:
        """Run another clean-up step on ``volume`` (freeing a lock) under the same rule."""
        if self.is_hung(volume):
            return f"{volume} does not answer"
        return bounded(fn, self.quiet_s)


__all__ = ["QUIET_S", "Remover", "bounded"]
