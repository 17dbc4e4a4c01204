"""Small Linux helpers the lab needs: the mount table, processes by pid, and commands.

Kept apart from :mod:`iobench.lab.manage` so both the FUSE and the sshfs kinds share one
careful implementation of "is it mounted", "is that pid still our process" and "end it".
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

from iobench.errors import LabError

_OCTAL = re.compile(r"\\([0-7]{3})")

# Popen objects of daemons started by this process, so that they are reaped (no zombies,
# no "still running" warnings) when they end; keyed by pid.
CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


@dataclass(frozen=True)
class Mount:
    """One line of ``/proc/self/mountinfo``."""

    mountpoint: str
    fstype: str
    source: str


def _unescape(field: str) -> str:
    """Undo mountinfo's octal escapes (space, tab, newline, backslash as \\ooo)."""
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), field)


def mounts() -> list[Mount]:
    """The current mount namespace's mounts, in mount order."""
    result = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, rest = left.split(), right.split()
            if len(fields) >= 5 and len(rest) >= 2:
                result.append(Mount(_unescape(fields[4]), rest[0], _unescape(rest[1])))
    return result


def mounted_at(path: str, fstype: str | None = None) -> Mount | None:
    """The topmost mount on ``path`` (of type ``fstype`` if given), or None."""
    found = None
    for m in mounts():
        if m.mountpoint == path and (fstype is None or m.fstype == fstype):
            found = m
    return found


def run(cmd: Sequence[str], timeout: float = 20.0, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a short command; on failure raise LabError with its last line of output."""
    try:
        proc = subprocess.run(
            list(cmd), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except FileNotFoundError as e:
        raise LabError(f"{cmd[0]} is not installed ({e.strerror})") from None
    except subprocess.TimeoutExpired:
        raise LabError(f"{' '.join(cmd)} did not finish within {timeout:g} s") from None
    if check and proc.returncode != 0:
        raise LabError(f"{' '.join(cmd)} failed: {last_line(proc.stderr or proc.stdout)}")
    return proc


def last_line(text: str) -> str:
    """The last non-empty line of ``text`` (for one-line error messages)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "(no output)"


def tail(path: str, n: int = 3) -> str:
    """The last ``n`` non-empty lines of a log file joined with ' | ' ('' if unreadable)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [ln.strip() for ln in f.read().splitlines() if ln.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-n:])


def proc_state(pid: int) -> str | None:
    """The one-letter state of ``pid`` (R, S, D, T, Z, ...), or None when it does not exist."""
    child = CHILDREN.get(pid)
    if child is not None and child.poll() is not None:
        CHILDREN.pop(pid, None)
        return None
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            data = f.read()
    except OSError:
        return None
    return data.rpartition(")")[2].split()[0]


def alive(pid: int | None) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    return bool(pid) and proc_state(pid) not in (None, "Z", "X")  # type: ignore[arg-type]


def cmdline(pid: int) -> str:
    """The command line of ``pid`` with spaces between arguments ('' if gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def is_ours(pid: int | None, needles: Sequence[str]) -> bool:
    """True if ``pid`` is alive and its command line holds every needle (guards pid reuse)."""
    if not alive(pid):
        return False
    line = cmdline(pid)  # type: ignore[arg-type]
    return all(n in line for n in needles)


def wait_gone(pid: int, timeout: float) -> bool:
    """Wait up to ``timeout`` s for ``pid`` to end; True if it did."""
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def end_process(pid: int | None, needles: Sequence[str], grace_s: float = 3.0) -> None:
    """End our process ``pid`` for sure: wait ``grace_s``, then SIGTERM, then SIGKILL.

    A Python FUSE daemon blocks in C, so its Python signal handlers never run; libfuse's own
    SIGTERM handler usually ends it, and SIGKILL always does (also when it is stopped).
    """
    if not pid or not is_ours(pid, needles):
        return
    if grace_s and proc_state(pid) != "T" and wait_gone(pid, grace_s):
        return
    for sig in (signal.SIGTERM, signal.SIGCONT):
        _signal(pid, sig)
    if wait_gone(pid, 1.5):
        return
    _signal(pid, signal.SIGKILL)
    if not wait_gone(pid, 5.0):
        raise LabError(f"process {pid} ({cmdline(pid)[:60]}) did not end after SIGKILL")


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
