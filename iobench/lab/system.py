"""Running the lab's short commands and ending its daemons; Linux facts come from
:mod:`iobench.system.procfs` (mount table, process state, "is that pid still our process").
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from iobench.errors import LabError
from iobench.system import procfs

#: where root's tools (ip, tc, sshd, losetup) live: a plain PATH (``env -i PATH=/usr/bin:/bin``,
#: cron, CI) lacks them, and the lab needs them all the same
SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")

CAP_NET_ADMIN = 12
CAP_SYS_ADMIN = 21

# Popen objects of daemons started by this process, so that they are reaped (no zombies,
# no "still running" warnings) when they end; keyed by pid.
CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def which(name: str) -> str | None:
    """The program ``name`` on PATH, else in the sbin folders; None when it is in neither."""
    return shutil.which(name) or shutil.which(name, path=os.pathsep.join(SBIN))


def _resolved(cmd: Sequence[str]) -> list[str]:
    """``cmd`` with its program looked up by :func:`which` (unchanged when not found, so the
    error names the program)."""
    argv = list(cmd)
    if argv and os.sep not in argv[0]:
        argv[0] = which(argv[0]) or argv[0]
    return argv


def capability(bit: int) -> bool:
    """True if this process holds capability ``bit`` (e.g. CAP_SYS_ADMIN) in its effective set."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> bit & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def run(
    cmd: Sequence[str], timeout: float = 20.0, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run a short command; on failure raise LabError with its last line of output."""
    try:
        proc = subprocess.run(
            _resolved(cmd),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError as e:
        raise LabError(f"{cmd[0]} is not installed ({e.strerror})") from None
    except subprocess.TimeoutExpired:
        raise LabError(f"{' '.join(cmd)} did not finish within {timeout:g} s") from None
    if check and proc.returncode != 0:
        raise LabError(f"{' '.join(cmd)} failed: {procfs.last_line(proc.stderr or proc.stdout)}")
    return proc


def spawn(cmd: list[str], log_path: Path, env: dict[str, str] | None = None) -> int:
    """Start ``cmd`` detached (own session, output to ``log_path``); return its pid."""
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    with open(fd, "ab") as log:  # a link planted at the name is refused, not followed
        proc = subprocess.Popen(
            _resolved(cmd),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            cwd="/",
            env=env,
        )
    CHILDREN[proc.pid] = proc
    return proc.pid


def wait_mounted(
    mountpoint: str, fstype: str, pid: int | None, log_path: Path, timeout_s: float, what: str
) -> None:
    """Poll the mount table until ``mountpoint`` carries ``fstype``; fail fast when ``pid`` dies."""
    deadline = time.monotonic() + timeout_s
    while not procfs.mounted_at(mountpoint, fstype):
        if not procfs.alive(pid):
            raise LabError(
                f"{what} exited before mounting {mountpoint}: {procfs.tail_file(log_path) or 'no output'}"
            )
        if time.monotonic() > deadline:
            raise LabError(
                f"{mountpoint} was not mounted within {timeout_s:g} s: "
                f"{procfs.tail_file(log_path) or 'no output from ' + what}"
            )
        time.sleep(0.02)


def reap() -> None:
    """Collect the exit status of daemons of ours that ended (no zombies left behind)."""
    for pid, child in list(CHILDREN.items()):
        if child.poll() is not None:
            CHILDREN.pop(pid, None)


def end_process(pid: int | None, needles: Sequence[str], grace_s: float = 3.0) -> None:
    """End our daemon ``pid`` (and what it started) for sure: wait ``grace_s``, then SIGTERM
    with SIGCONT, then SIGKILL. Does nothing when the pid is no longer ours (pid reuse).

    A Python FUSE daemon blocks in C, so its Python signal handlers never run; libfuse's own
    SIGTERM handler usually ends it, and SIGKILL always does (also when it is stopped).
    """
    if not pid or not procfs.is_ours(pid, needles):
        return
    left = procfs.end_tree(pid, group=False, grace_s=grace_s, wait_s=2.5)
    reap()
    if left:
        raise LabError(
            f"process {left[0]} ({procfs.cmdline(left[0])[:60]}) did not end after SIGKILL"
        )
