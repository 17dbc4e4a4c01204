"""Running the lab's short commands and ending its daemons; Linux facts come from
:mod:`iobench.procfs` (mount table, process state, "is that pid still our process").
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from iobench import procfs
from iobench.errors import LabError

# Popen objects of daemons started by this process, so that they are reaped (no zombies,
# no "still running" warnings) when they end; keyed by pid.
CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


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
        raise LabError(f"{' '.join(cmd)} failed: {procfs.last_line(proc.stderr or proc.stdout)}")
    return proc


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
        raise LabError(f"process {left[0]} ({procfs.cmdline(left[0])[:60]}) did not end after SIGKILL")
