"""Launching iobench under a real ``mpirun`` (Open MPI) in the fleet tests, and finding its
ranks: on this machine's processes, or on emulated hosts of their own (their processes are
this machine's too: the hosts have no pid namespace)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

#: a rank's death ends an Open MPI job this long after it (SIGCONT, wait, SIGTERM, wait, SIGKILL);
#: the docs say 15, the tests take 10 (rank 0 needs 5 s of it after SIGTERM: comm.py)
GRACE = 10


def mpirun(
    n: int, argv: list[str], grace: int = GRACE, launch: Sequence[str] = (), **kw: object
) -> subprocess.Popen[str]:
    """``grace``: Open MPI waits it twice after any rank's non-zero exit, even when every
    rank has already ended (a run whose trials failed: 2 x 15 s idle at the end).
    ``launch``: more mpirun options (a hostfile and its rsh agent)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TERM": "dumb"}
    if os.geteuid() == 0:  # Open MPI refuses root without both
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = ["mpirun", "-n", str(n), "--oversubscribe", "--mca", "odls_base_sigkill_timeout",
           str(grace), *launch, sys.executable, "-m", "iobench", *argv]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, **kw)  # type: ignore[call-overload]  # fmt: skip


def in_trial(job: subprocess.Popen[str], target: Path, rank: int, wait_s: float = 120) -> None:
    """Until ``rank``'s first trial folder is on the target (its trial has begun; a busy
    machine takes its time to get there)."""
    deadline = time.monotonic() + wait_s
    while not list(target.glob(f".iobench-scratch/*.w{rank}/*-w{rank}")):
        assert job.poll() is None and time.monotonic() < deadline, job.communicate()[0][-3000:]
        time.sleep(0.1)


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def ranks_of(pattern: str) -> dict[int, int]:
    """rank -> pid of the running ranks (``python -m iobench``, not the forks they make for
    removals, nor their children) whose command line holds ``pattern``."""
    found: dict[int, tuple[int, int]] = {}  # pid -> (rank, parent)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if pattern.encode() in cmd and b"\0-m\0iobench\0" in cmd:
            for item in env:
                if item.startswith(b"OMPI_COMM_WORLD_RANK="):
                    found[int(pid)] = (int(item.split(b"=")[1]), parent)
    return {rank: pid for pid, (rank, parent) in found.items() if parent not in found}
