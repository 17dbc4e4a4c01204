"""One phase's process tree: started in its own session, watched, bounded in time, ended whole.

Why: a phase (venv creation, an install, a ready check) is a tree of processes that can
hang on the volume under test. iobench must end that tree, all of it, whatever it does,
and must never itself wait for good on a process stuck in a hung filesystem.

Method:
- The root is started with ``start_new_session`` (its own session and process group) and
  with ``PR_SET_PDEATHSIG`` = SIGKILL, so that a SIGKILLed iobench does not leave an
  installer running.
- The wait uses a pidfd and ``waitid(WNOWAIT)``: the root is left unreaped (a zombie) so
  that its exact counters, children folded in by the kernel, can be read before it goes.
- While it waits it ticks the caller's progress and checks two limits: no progress for
  ``stall_timeout_s`` (the sampler's rule) and a wall-clock ``deadline``. Either ends the tree.
- Ending a tree is ``procfs.end_tree`` (the process group and every descendant, also those
  that started their own session; SIGTERM, then SIGKILL), then the orphans iobench adopted
  as a child subreaper. Every wait is bounded: a root that does not exit (stuck in a
  stopped FUSE daemon) is left behind and said so, never waited on.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import psutil

from iobench import files, redact
from iobench.rundir.records import STALL_WORDS
from iobench.system import child, procfs
from iobench.trial.sampler import Sampler, TreeCounters, read_process

#: how much of a phase's output is kept (its tail) for the error message
OUTPUT_KEEP = 20_000
#: seconds a tree gets to end after SIGTERM, then again after SIGKILL
END_GRACE_S = 2.0
_PR_SET_CHILD_SUBREAPER = 36


@dataclass(frozen=True)
class Limits:
    """When iobench ends a phase: no progress for this long, at this monotonic time, or
    once ``stop`` is set (an interrupt whose KeyboardInterrupt was swallowed on its way)."""

    stall_timeout_s: float | None = None
    deadline: float | None = None
    stop: threading.Event | None = None


@dataclass
class PhaseResult:
    """What a phase did: its times, exit status, output tail, counters and, if iobench
    ended it, why (``stopped`` is "stalled" or "timeout", ``error`` the sentence)."""

    phase: str
    start_wall: float
    start: float
    end: float
    returncode: int | None  # None: it never started, or its root never exited
    output: str = ""
    counters: TreeCounters = field(default_factory=TreeCounters)
    stopped: str = ""
    error: str = ""

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.stopped and not self.error


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def set_subreaper(on: bool = True) -> bool:
    """Adopt orphaned descendants (a daemon a ready check started) so they can be ended."""
    try:
        return _libc().prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def run_phase(
    phase: str,
    argv: list[str],
    env: dict[str, str],
    cwd: Path,
    sampler: Sampler,
    out_path: Path,
    limits: Limits,
    on_tick: Callable[[float], None] | None = None,
) -> PhaseResult:
    """Run one phase's tree under ``sampler``; its output goes to ``out_path`` (kept only
    when the phase fails) through a pipe (``Copier``: a full results disk costs the copy,
    never the phase). A KeyboardInterrupt ends the tree and is raised again."""
    keep = our_children()
    sampler.phase = phase  # ticks while the process starts belong to this phase
    with files.open_stream(out_path) as out:
        start_wall, start = time.time(), time.monotonic()
        read_end, write_end = os.pipe()
        try:
            proc = subprocess.Popen(
                argv,
                env=env,
                cwd=cwd,
                stdout=write_end,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=child.die_with_parent(os.getpid()),
            )
        except OSError as exc:
            os.close(read_end)
            return PhaseResult(
                phase,
                start_wall,
                start,
                time.monotonic(),
                None,
                error=f"cannot start {argv[0]}: {exc.strerror or exc}",
            )
        finally:
            os.close(write_end)
        copier = Copier(read_end, out)
        sampler.watch(proc.pid, phase)
        try:
            stopped, why = _wait(proc.pid, sampler, limits, start, on_tick)
        except BaseException:
            _finish(proc, sampler, True, keep)
            raise
        end = time.monotonic()
        counters, returncode = _finish(proc, sampler, bool(stopped), keep)
        output = redact.redact_text(copier.tail())  # it reaches rows and messages
    result = PhaseResult(phase, start_wall, start, end, returncode, output, counters, stopped, why)
    if returncode is None:  # stuck in the kernel, e.g. on a stopped FUSE daemon: not waited for
        left = f"pid {proc.pid} did not exit after SIGKILL (a hung volume?) and was left behind"
        result.error = f"{why}; {left}" if why else left
    if result.ok:
        _unlink(out_path)
    else:  # kept under results/…/logs: no credentials in it
        redact.redact_file(out_path)
    return result


class Copier:
    """A phase's output from its pipe into its file, the last ``OUTPUT_KEEP`` bytes kept in
    memory; a file that cannot take more (a full disk) stops the copy, never the reading."""

    def __init__(self, fd: int, out: BinaryIO) -> None:
        self.fd, self.out, self.kept = fd, out, bytearray()
        self.thread = threading.Thread(target=self._copy, name="phase-output", daemon=True)
        self.thread.start()

    def _copy(self) -> None:
        writing = True
        try:
            while chunk := os.read(self.fd, 65536):
                self.kept += chunk
                del self.kept[: max(0, len(self.kept) - OUTPUT_KEEP)]
                if writing:
                    try:  # unbuffered: nothing left to fail at close
                        view = memoryview(chunk)
                        while view:
                            view = view[os.write(self.out.fileno(), view) :]
                    except OSError:
                        writing = False
        finally:
            os.close(self.fd)

    def tail(self) -> str:
        """What the tree wrote, its end; waits a bounded time for what a process stuck in
        the kernel still holds open (it ended with the tree otherwise)."""
        self.thread.join(timeout=END_GRACE_S)
        return bytes(self.kept).decode(errors="replace")


def _finish(
    proc: subprocess.Popen, sampler: Sampler, stopped: bool, keep: set[int]
) -> tuple[TreeCounters, int | None]:
    """End what is left of the tree, read the root's counters, reap it and the orphans
    it left (never blocking for long)."""
    exited = proc.pid not in procfs.end_tree(proc.pid, wait_s=END_GRACE_S) if stopped else True
    counters = zombie_counters(proc.pid, sampler) if exited else sampler.live()
    end_group(proc.pid)
    sampler.finish(counters)
    returncode = None
    if exited:
        try:
            returncode = proc.wait(timeout=END_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
    end_strays(keep)
    return counters, returncode


def _wait(
    pid: int,
    sampler: Sampler,
    limits: Limits,
    start: float,
    on_tick: Callable[[float], None] | None,
) -> tuple[str, str]:
    """Block until the root exits (left unreaped) -> ("", ""), or until a limit passes ->
    ("stalled" | "timeout" | "interrupted", the sentence)."""
    try:
        pidfd: int | None = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    try:
        while True:
            if pidfd is not None:
                select.select([pidfd], [], [], 0.25)
            else:
                time.sleep(0.02)
            if root_exited(pid):
                return "", ""
            now = time.monotonic()
            if limits.stop is not None and limits.stop.is_set():
                return "interrupted", "interrupted by the user (SIGINT/SIGTERM)"
            if on_tick is not None:
                on_tick(now - start)
            quiet = sampler.since_progress_s()
            if limits.stall_timeout_s is not None and quiet >= limits.stall_timeout_s:
                return "stalled", (
                    f"{STALL_WORDS} for {quiet:.0f} s (--stall-timeout "
                    f"{limits.stall_timeout_s:g}){held_files(pid)}; its process tree was ended"
                )
            if limits.deadline is not None and now >= limits.deadline:
                return "timeout", (
                    f"still running after {now - start:.0f} s, past the trial's time "
                    f"limit (--trial-timeout){held_files(pid)}; its process tree was ended"
                )
    finally:
        if pidfd is not None:
            os.close(pidfd)


def held_files(pid: int, most: int = 2) -> str:
    """``, holding FILE open`` for the files the tree of ``pid`` has open besides its
    standard streams (the newest descriptors first): what a stalled phase waits on, named
    in its one line; '' when none is."""
    found: list[str] = []
    try:
        tree = [pid, *(p.pid for p in psutil.Process(pid).children(recursive=True))]
    except psutil.Error:
        return ""
    for member in tree:
        try:
            fds = sorted((int(n) for n in os.listdir(f"/proc/{member}/fd")), reverse=True)
        except (OSError, ValueError):
            continue
        for fd in (n for n in fds if n > 2):
            try:
                target = os.readlink(f"/proc/{member}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("/") and target != "/dev/null" and target not in found:
                found.append(target)
    return f", holding {', '.join(found[:most])} open" if found else ""


def root_exited(pid: int) -> bool:
    """True once our child ``pid`` has exited (it stays a zombie: WNOWAIT)."""
    try:
        res = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
    except ChildProcessError:
        return True
    return res is not None and res.si_pid == pid


def zombie_counters(pid: int, sampler: Sampler) -> TreeCounters:
    """The exact totals of an exited root, children folded in; else the last sample."""
    try:
        return read_process(pid)[0]
    except (OSError, ValueError, IndexError):
        return sampler.live()


def end_group(pid: int) -> None:
    """Kill what a finished phase left in its process group (a background process of a
    ready check); the group id is safe to use while the root is an unreaped zombie."""
    _signal_group(pid, signal.SIGKILL)


def our_children() -> set[int]:
    """The pids of iobench's own children now (taken before a phase starts)."""
    try:
        return {p.pid for p in psutil.Process().children()}
    except psutil.Error:
        return set()


def end_strays(keep: set[int], grace_s: float = END_GRACE_S) -> list[int]:
    """Kill our children not in ``keep``: orphans a phase left, which came to us as their
    subreaper (a daemon a ready check started in its own session). iobench's own helper
    children (``iobench.system.child``: a removal, the lock's heartbeat) are not strays.
    Returns their pids."""
    try:
        with child.FORK_LOCK:
            strays = [
                p
                for p in psutil.Process().children()
                if p.pid not in keep and p.pid not in child.HELPERS
            ]
    except psutil.Error:
        return []
    for p in strays:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(strays, timeout=grace_s)
    return [p.pid for p in strays]


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


__all__ = [
    "Limits",
    "PhaseResult",
    "end_group",
    "end_strays",
    "our_children",
    "root_exited",
    "run_phase",
    "set_subreaper",
    "zombie_counters",
]
