"""Linux facts read from /proc, in one place: mounts, process state, "is this pid still
ours", ending a process tree, and the tail of some output.

Why one module: the mount table, pid liveness and process killing were each written two or
three times with different rules (one start-time tolerance here, another there). Every
caller — metadata, the lock, scratch folders, the runner's phases and the lab — asks here.

Rules kept here:
- mountinfo fields are octal-escaped (space, tab, newline, backslash as ``\\ooo``); they are
  unescaped once, here.
- A pid is "still ours" when it exists, is not a zombie, and — when we know them — has the
  start time we recorded (pid reuse) and a command line holding every needle. A pid on
  another host, or in another pid namespace, cannot be checked and counts as alive.
- Ending a tree never blocks without bound: SIGTERM (with SIGCONT, so a stopped process can
  act on it), a bounded wait, SIGKILL, a bounded wait; what survives is returned, not waited
  for (a process in uninterruptible sleep on a hung mount may outlive us).
"""

from __future__ import annotations

import math
import os
import re
import signal
import socket
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

MOUNTINFO = "/proc/self/mountinfo"
PID_MAX = 1 << 22  # the kernel's hard ceiling for /proc/sys/kernel/pid_max on 64-bit Linux
START_TOLERANCE_S = 0.05  # start times come from jiffies since boot: 0.01 s resolution
_OCTAL = re.compile(r"\\([0-7]{3})")


# ---------------------------------------------------------------------------- mounts
@dataclass(frozen=True)
class Mount:
    """One line of ``/proc/self/mountinfo`` (fields unescaped)."""

    mountpoint: str
    fstype: str
    source: str
    options: str  # per-mount options, then the superblock's, comma-joined


def unescape(field: str) -> str:
    """Undo mountinfo's octal escapes (``\\040`` is a space, ``\\134`` a backslash)."""
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), field)


def parse_mountinfo(text: str) -> list[Mount]:
    """The mounts of a mountinfo text, in mount order; malformed lines are skipped."""
    result = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if not sep or len(fields) < 6 or len(rest) < 2:
            continue
        both = fields[5] + ("," + rest[2] if len(rest) > 2 else "")
        opts = ",".join(dict.fromkeys(both.split(",")))  # "rw" is in both: said once
        result.append(Mount(unescape(fields[4]), rest[0], unescape(rest[1]), opts))
    return result


def mounts(path: str = MOUNTINFO) -> list[Mount]:
    """The current mount namespace's mounts, in mount order ([] if unreadable)."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            return parse_mountinfo(f.read())
    except OSError:
        return []


def mounted_at(path: str, fstype: str | None = None) -> Mount | None:
    """The topmost mount on exactly ``path`` (of type ``fstype`` if given), or None."""
    found = None
    for m in mounts():
        if m.mountpoint == path and (fstype is None or m.fstype == fstype):
            found = m
    return found


def mount_of(path: Path | str, table: Sequence[Mount] | None = None) -> Mount | None:
    """The mount holding ``path`` (resolved): longest mount point, the later one on a tie."""
    real = os.path.realpath(path)
    best: Mount | None = None
    for m in mounts() if table is None else table:
        if is_within(real, m.mountpoint) and (
            best is None or len(m.mountpoint) >= len(best.mountpoint)
        ):
            best = m
    return best


def is_within(path: str, folder: str) -> bool:
    """True if ``path`` is ``folder`` or lies below it (string test on clean paths)."""
    return path == folder or folder == "/" or path.startswith(folder.rstrip("/") + "/")


# ---------------------------------------------------------------------------- processes
def valid_pid(value: object) -> int | None:
    """``value`` as a pid if it is an integer in 1..PID_MAX, else None (lock files, owners)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            return None
        value = int(value)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    return value if isinstance(value, int) and 1 <= value <= PID_MAX else None


def proc_state(pid: int) -> str | None:
    """The one-letter state of ``pid`` (R, S, D, T, Z, ...), or None when it does not exist."""
    try:
        with open(f"/proc/{int(pid)}/stat", encoding="utf-8", errors="replace") as f:
            data = f.read()
    except (OSError, ValueError):
        return None
    parts = data.rpartition(")")[2].split()
    return parts[0] if parts else None


def alive(pid: int | None) -> bool:
    """True while ``pid`` exists and is not a zombie (an exited, unreaped child is not alive)."""
    return bool(pid) and proc_state(pid) not in (None, "Z", "X")  # type: ignore[arg-type]


def cmdline(pid: int) -> str:
    """The command line of ``pid`` with spaces between arguments ('' if gone)."""
    try:
        with open(f"/proc/{int(pid)}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except (OSError, ValueError):
        return ""


def start_time(pid: int) -> float | None:
    """When ``pid`` started (seconds since the epoch), None if it is gone."""
    try:
        return psutil.Process(pid).create_time()
    except (psutil.Error, ValueError, OverflowError):
        return None


def pid_namespace() -> str | None:
    """This process's pid namespace: pids compare only inside one (containers share hostnames)."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def why_not_ours(pid: int, started: float | None = None, needles: Iterable[str] = ()) -> str | None:
    """Why ``pid`` is no longer the process we recorded, or None while it still is.

    ``started``: its recorded start time (guards pid reuse); ``needles``: strings its
    command line must hold (for processes whose start time was not recorded).
    """
    state = proc_state(pid)
    if state is None:
        return "is gone"
    if state in ("Z", "X"):
        return "has exited"
    if started is not None:
        now = start_time(pid)
        if now is None:
            return "is gone"
        if abs(now - started) > START_TOLERANCE_S:
            return "is gone (the pid now belongs to another process)"
    needles = list(needles)
    if needles and not all(n in cmdline(pid) for n in needles):
        return "is gone (the pid now runs another command)"
    return None


def is_ours(pid: int | None, needles: Iterable[str] = (), started: float | None = None) -> bool:
    """True if ``pid`` is alive and still the process we recorded (see :func:`why_not_ours`)."""
    return bool(pid) and why_not_ours(pid, started, needles) is None  # type: ignore[arg-type]


def wait_gone(pid: int, timeout: float) -> bool:
    """Wait up to ``timeout`` s for ``pid`` to end (a zombie counts as ended); True if it did."""
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


@dataclass(frozen=True)
class ProcessStamp:
    """Who a process is, as written into files (lock, scratch owner): pid, start, host, pid ns."""

    pid: int
    started: float | None
    host: str
    pid_ns: str | None = None

    @classmethod
    def current(cls) -> ProcessStamp:
        pid = os.getpid()
        return cls(pid, start_time(pid), socket.gethostname(), pid_namespace())

    def to_dict(self) -> dict[str, object]:
        return {"pid": self.pid, "started": self.started, "host": self.host, "pid_ns": self.pid_ns}

    @classmethod
    def from_dict(cls, d: object) -> ProcessStamp | None:
        """Parse a stamp read from disk; None unless every field is present and sane."""
        if not isinstance(d, dict):
            return None
        pid, started, host, ns = (
            valid_pid(d.get("pid")),
            d.get("started"),
            d.get("host"),
            d.get("pid_ns"),
        )
        if pid is None or not isinstance(host, str) or (ns is not None and not isinstance(ns, str)):
            return None
        if started is not None and not (
            isinstance(started, int | float) and math.isfinite(started) and started >= 0
        ):
            return None
        return cls(pid, None if started is None else float(started), host, ns)

    def checkable(self) -> bool:
        """Whether this machine can tell if the process lives (same host and pid namespace)."""
        return self.host == socket.gethostname() and (
            self.pid_ns is None or self.pid_ns == pid_namespace()
        )

    def gone_reason(self) -> str | None:
        """Why the process is gone, or None while it lives (or cannot be checked from here)."""
        if not self.checkable():
            return None
        why = why_not_ours(self.pid, self.started)
        return f"its process {self.pid} {why}" if why else None


def _signal(pid: int, sig: int, group: bool) -> None:
    try:
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _running(p: psutil.Process) -> bool:
    """Still the same process (pid reuse checked) and not a zombie: an orphan reparented to
    a subreaper stays a zombie until it reaps it, but it has ended."""
    try:
        return p.is_running() and alive(p.pid)
    except psutil.Error:
        return False


def _wait_ended(pid: int, others: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait up to ``timeout`` for the root to exit (zombie counts) and ``others`` to end;
    returns those of ``others`` still running."""
    deadline = time.monotonic() + timeout
    while True:
        left = [p for p in others if _running(p)]
        if (not alive(pid) and not left) or time.monotonic() >= deadline:
            return left
        time.sleep(0.02)


def end_tree(
    pid: int, *, group: bool = True, grace_s: float = 0.0, wait_s: float = 2.0
) -> list[int]:
    """End process ``pid`` and every descendant; returns the pids still alive afterwards.

    ``group``: ``pid`` leads its own process group (started with ``start_new_session``);
    the group is signalled too, which also reaches members that left the tree. ``grace_s``:
    first wait that long for a clean exit without any signal. The root is never reaped
    here: a child of ours stays a zombie, so its counters can still be read.
    """
    others = _descendants(pid)
    if grace_s and proc_state(pid) != "T":
        others = _wait_ended(pid, others, grace_s)
        if not alive(pid) and not others:
            return []
    for sigs in ((signal.SIGTERM, signal.SIGCONT), (signal.SIGKILL,)):
        others = [*others, *(p for p in _descendants(pid) if p not in others)]
        for sig in sigs:
            if group:
                _signal(pid, sig, group=True)
            _signal(pid, sig, group=False)
            for p in others:  # also those that left the process group
                try:
                    p.send_signal(sig)
                except psutil.Error:
                    pass
        others = _wait_ended(pid, others, wait_s)
        if not alive(pid) and not others:
            return []
    return ([pid] if alive(pid) else []) + [p.pid for p in others]


def paths_in_use() -> dict[str, int]:
    """Folders and files live processes work in or hold open (cwd, root, exe, open files),
    each with one pid; only the processes this user may inspect."""
    found: dict[str, int] = {}
    me = os.getpid()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        base = f"/proc/{entry.name}"
        links = [f"{base}/cwd", f"{base}/root", f"{base}/exe"]
        try:
            links += [f"{base}/fd/{fd}" for fd in os.listdir(f"{base}/fd")]
        except OSError:
            pass
        for link in links:
            try:
                target = os.readlink(link)
            except OSError:
                continue
            if target.startswith("/") and target != "/":
                found.setdefault(target.removesuffix(" (deleted)"), int(entry.name))
    return found


# ---------------------------------------------------------------------------- output
def tail(text: str, n: int = 3) -> str:
    """The last ``n`` non-empty lines of ``text`` joined with ' | ' (for one-line messages)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return " | ".join(lines[-n:])


def last_line(text: str) -> str:
    """The last non-empty line of ``text``, or '(no output)'."""
    return tail(text, 1) or "(no output)"


def tail_file(path: Path | str, n: int = 3, max_bytes: int = 64 * 1024) -> str:
    """The last ``n`` non-empty lines of a log file ('' if unreadable); reads its end only."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - max_bytes))
            return tail(f.read().decode(errors="replace"), n)
    except OSError:
        return ""
