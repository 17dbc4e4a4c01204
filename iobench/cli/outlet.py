"""Output that never holds up a fleet's rank: what the launcher stops reading is dropped.

Under ``mpirun`` a rank's stdout and stderr are a pseudo-terminal (or a pipe) read by the
launcher. Once one rank dies, Open MPI stops reading the others' output while it ends the
job; a rank that writes then blocks in ``write`` — the live progress's refresh thread first,
then the main thread behind its lock — and rank 0 never records the rows it has gathered
before the launcher's SIGKILL. ``Outlet`` wraps such a stream: each write waits at most
``patience_s`` for room (``poll``), writes what fits without blocking, and drops the rest
(counted in ``dropped``); once a write was dropped, the next ones do not wait at all until
the reader drains again. Output to a file or a terminal that reads is never dropped.

Kept hand-written: the standard library has no write with a deadline, and rich writes to
whatever ``sys.stdout`` is at the time of writing, which is this.
"""

from __future__ import annotations

import fcntl
import io
import os
import select
import sys
import time
from typing import TextIO

#: how long one write waits for the reader before what is left of it is dropped
PATIENCE_S = 1.0


class Outlet(io.TextIOBase):
    """A text stream onto ``stream``'s file descriptor whose writes never block for long."""

    def __init__(self, stream: TextIO, patience_s: float = PATIENCE_S) -> None:
        super().__init__()
        stream.flush()
        self._stream = stream
        self._fd = stream.fileno()
        self._encoding = getattr(stream, "encoding", None) or "utf-8"
        self.patience_s = patience_s
        self.dropped = 0  # bytes the reader never took
        self._stuck = False

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._encoding

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._fd

    def flush(self) -> None:
        """Every write goes straight to the descriptor: nothing waits in a buffer."""

    def write(self, text: str) -> int:
        data = memoryview(text.encode(self._encoding, "replace"))
        deadline = time.monotonic() + (0.0 if self._stuck else self.patience_s)
        poller = select.poll()
        poller.register(self._fd, select.POLLOUT)
        flags = fcntl.fcntl(self._fd, fcntl.F_GETFL)
        fcntl.fcntl(self._fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)
        try:
            while data:
                try:
                    data = data[os.write(self._fd, data) :]
                    continue
                except BlockingIOError:
                    pass
                left_ms = max(0.0, deadline - time.monotonic()) * 1000
                if not poller.poll(left_ms):
                    self.dropped += len(data)
                    self._stuck = True
                    return len(text)
            self._stuck = False
            return len(text)
        finally:
            fcntl.fcntl(self._fd, fcntl.F_SETFL, flags)


def install(patience_s: float = PATIENCE_S) -> None:
    """``sys.stdout`` and ``sys.stderr`` as outlets for the rest of the process (a fleet's
    rank: its last line, the error at the exit, goes through them too)."""
    if not isinstance(sys.stdout, Outlet):
        sys.stdout = Outlet(sys.stdout, patience_s)
    if not isinstance(sys.stderr, Outlet):
        sys.stderr = Outlet(sys.stderr, patience_s)


__all__ = ["PATIENCE_S", "Outlet", "install"]
