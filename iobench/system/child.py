"""Steps that may block on a volume that stopped answering run in a child process.

Why: a system call on a hung FUSE volume waits in the kernel, and once the request has
reached the filesystem's daemon (sshfs is running, the SFTP server behind it stopped) it
waits uninterruptibly: no signal ends it, SIGKILL included. A *thread* of iobench stuck so
keeps the whole process from exiting — seen: iobench printed "stopped answering", then
stayed a zombie with three threads in ``request_wait_answer`` (a removal, the lock's
heartbeat, the sampler's statfs) for 283 s, until the server was continued; ``timeout``
could not end it. A *child process* stuck so holds only itself: iobench gives up on it,
says where the leftovers are and exits; the child ends when the volume answers again.

Method: :func:`call` forks. The child puts /dev/null on its standard streams and closes
every other inherited descriptor (a pipe it kept would hold a reader of iobench's output,
``iobench run | tee``, until the volume answered), ignores SIGINT (a removal under way is
finished first; the parent re-raises the interrupt after it), runs ``fn``, sends back its
return value or the exception it raised (pickled) on a pipe, and ends with ``_exit``. The
parent waits as long as the child's scheduler counters (``/proc/PID/task/*/schedstat``: CPU
time and time slices of each of its threads) advance — they move with every system call
that completes — and gives up after ``quiet_s`` seconds in which they stood still: the
child is sent SIGKILL (it ends once its call returns) and :class:`Hung` is raised.
:class:`Poller` is the long-lived form: a child that repeats a step and streams its results.

Why fork and not a fresh interpreter (multiprocessing's spawn): a fresh interpreter costs
tens of milliseconds and its imports before the first system call, and ``fn`` is a closure
over the caller's state (what to remove, under which checks). A fork costs a few
milliseconds (6 ms for an iobench with pandas loaded, here) and the child has all of it. The child runs only ``fn``: system calls on
paths, no imports, no logging, no printing, so locks that other threads of the parent held
at the fork cannot stop it. What ``fn`` changes in memory stays in the child: everything the
caller needs comes back as the return value.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import select
import signal
import threading
import time
import warnings
from collections.abc import Callable
from typing import TypeVar

from iobench.errors import IOBenchError

T = TypeVar("T")

#: seconds between looks at the child's counters
POLL_S = 0.05
#: children given up on (blocked in a call on a hung volume): reaped when they end
_ABANDONED: set[int] = set()
#: every helper child not yet reaped, and the lock held while one is forked: whoever ends
#: stray children (the runner, after a trial's phase) leaves these alone
HELPERS: set[int] = set()
FORK_LOCK = threading.Lock()


_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> Callable[[], None]:
    """What a child runs first so that it is killed when ``parent`` (the thread that made
    it) ends: SIGKILL on its death, and an exit when it died before that took effect."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here, not in the child

    def become() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return become


class Hung(IOBenchError):
    """The child made no system call for ``quiet_s`` seconds: its volume does not answer."""


class Stopped(IOBenchError):
    """The caller's ``stop`` event was set: the child was ended before it finished."""


def counters(pid: int) -> tuple[bytes, ...] | None:
    """The scheduler counters of every thread of ``pid``; None once it is gone."""
    try:
        tids = sorted(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return None
    seen = []
    for tid in tids:
        for name in ("schedstat", "stat"):
            try:
                with open(f"/proc/{pid}/task/{tid}/{name}", "rb") as fh:
                    seen.append(fh.read())
                break
            except OSError:
                continue
    return tuple(seen)


def _exited(pid: int) -> bool:
    """Reap ``pid`` if it has exited (without waiting); True also when it is no child of
    ours any more (reaped elsewhere)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return bool(done)


def _reap_abandoned() -> None:
    for pid in list(_ABANDONED):
        if _exited(pid):
            _ABANDONED.discard(pid)
            HELPERS.discard(pid)


def abandon(pid: int) -> None:
    """End ``pid`` when it can be ended, without waiting for it."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    _ABANDONED.add(pid)
    _reap_abandoned()


def _fork() -> int:
    # Python 3.12+ warns about forking a process with threads; the child runs only system
    # calls (see the module docstring), which is what makes that safe
    with FORK_LOCK, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
        if pid:
            HELPERS.add(pid)
        return pid


def _become_child(keep: int, die: Callable[[], None]) -> int:
    """In the child: killed with iobench, quiet streams, no descriptor of the parent but
    ``keep`` (moved to 3), SIGINT ignored and SIGTERM at its default. Returns the kept
    descriptor."""
    die()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    if keep != 3:
        os.dup2(keep, 3)
    os.closerange(4, os.sysconf("SC_OPEN_MAX"))
    return 3


def _payload(fn: Callable[[], object]) -> bytes:
    try:
        result: tuple[bool, object] = (True, fn())
    except BaseException as exc:  # sent to the parent, raised there
        result = (False, exc)
    try:
        return pickle.dumps(result)
    except Exception as exc:  # an unpicklable value or exception: its words still travel
        return pickle.dumps((False, IOBenchError(f"{type(exc).__name__}: {exc}")))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def call(
    fn: Callable[[], T], quiet_s: float, stop: threading.Event | None = None, what: str = ""
) -> T:
    """``fn()`` in a child process: its return value, or the exception it raised.

    Raises :class:`Hung` after ``quiet_s`` seconds without progress of the child, and
    :class:`Stopped` when ``stop`` is set first (the child is ended: what it did stays done).
    A KeyboardInterrupt while the child runs waits for the child, then goes on."""
    _reap_abandoned()
    die = die_with_parent(os.getpid())
    read, write = os.pipe()
    pid = _fork()
    if pid == 0:  # the child: never returns
        try:
            fd = _become_child(write, die)
            _write_all(fd, _payload(fn))
        finally:
            os._exit(0)
    os.close(write)
    try:
        data, stopped = _watch(pid, read, quiet_s, stop, what)
    finally:
        os.close(read)
    if stopped:
        raise Stopped(f"{what or 'the step'} was stopped")
    if not data:
        raise IOBenchError(f"{what or 'the step'} ended without an answer (killed?)")
    ok, value = pickle.loads(data)
    if not ok:
        raise value
    return value


def _watch(
    pid: int, read: int, quiet_s: float, stop: threading.Event | None, what: str
) -> tuple[bytes, bool]:
    """Collect the child's answer while it progresses: (answer, whether it was stopped)."""
    chunks: list[bytes] = []
    last, quiet_since = None, time.monotonic()
    interrupted = stopped = False
    while True:
        try:
            ready, _, _ = select.select([read], [], [], POLL_S)
            if ready:
                chunk = os.read(read, 1 << 16)
                if not chunk:
                    break  # the child closed its end: it is done
                chunks.append(chunk)
                continue
            if stop is not None and stop.is_set() and not stopped:
                stopped = True
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            now = counters(pid)
            if now != last:
                last, quiet_since = now, time.monotonic()
            elif time.monotonic() - quiet_since >= quiet_s:
                abandon(pid)
                raise Hung(
                    f"no progress for {quiet_s:.0f} s (a hung volume?)"
                    + (f" while {what}" if what else "")
                )
        except KeyboardInterrupt:  # the step under way is finished first
            interrupted = True
    _reaped(pid)
    if interrupted:
        raise KeyboardInterrupt
    return b"".join(chunks), stopped


def _reaped(pid: int, wait_s: float = 2.0) -> None:
    """Reap a child that closed its pipe (it is exiting); abandon it if it lingers."""
    deadline = time.monotonic() + wait_s
    while True:
        if _exited(pid):
            HELPERS.discard(pid)
            return
        if time.monotonic() >= deadline:
            abandon(pid)
            return
        time.sleep(0.001)


class Poller:
    """A child that runs ``step()`` every ``period_s`` seconds and sends each result back:
    a step blocked on a hung volume holds the child only (``latest`` stops changing).

    ``start`` forks; ``latest()`` is the newest result received (None before the first);
    ``close`` ends the child without waiting for it."""

    def __init__(self, step: Callable[[], object], period_s: float) -> None:
        self.step = step
        self.period_s = period_s
        self.pid: int | None = None
        self._read: int | None = None
        self._buf = b""
        self._latest: object = None
        self._lock = threading.Lock()

    def start(self) -> Poller:
        die = die_with_parent(os.getpid())
        read, write = os.pipe()
        pid = _fork()
        if pid == 0:
            try:
                fd = _become_child(write, die)
                parent = os.getppid()
                while os.getppid() == parent:  # the parent died: stop
                    try:
                        value = self.step()
                    except Exception:  # a step that failed this time: nothing to send
                        value = None
                    data = pickle.dumps(value)
                    _write_all(fd, len(data).to_bytes(4, "big") + data)
                    time.sleep(self.period_s)
            finally:
                os._exit(0)
        os.close(write)
        os.set_blocking(read, False)
        self.pid, self._read = pid, read
        return self

    def latest(self) -> object:
        """The newest result the child sent (reads what has arrived; never blocks)."""
        with self._lock:
            if self._read is not None:
                try:
                    while chunk := os.read(self._read, 1 << 16):
                        self._buf += chunk
                except BlockingIOError:
                    pass
                except OSError:
                    pass
                while len(self._buf) >= 4:
                    size = int.from_bytes(self._buf[:4], "big")
                    if len(self._buf) < 4 + size:
                        break
                    self._latest = pickle.loads(self._buf[4 : 4 + size])
                    self._buf = self._buf[4 + size :]
            return self._latest

    def close(self) -> None:
        with self._lock:
            if self._read is not None:
                os.close(self._read)
                self._read = None
            if self.pid is not None:
                abandon(self.pid)
                self.pid = None


__all__ = [
    "FORK_LOCK",
    "HELPERS",
    "POLL_S",
    "Hung",
    "Poller",
    "Stopped",
    "abandon",
    "call",
    "counters",
    "die_with_parent",
]
