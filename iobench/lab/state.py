"""What the lab made, on record: one state folder per mounted volume (``state.json`` with
the daemon's pid, its backing, its network; the live stats; the flush control FIFO), found
again from any process, also after a crash. The kinds, ``manage`` and ``flush`` all read it;
it imports none of them."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from iobench.errors import LabError
from iobench.lab.options import KINDS
from iobench.system.trust import private_dir_problem

#: the flush control's reply, beside its FIFO in the state folder (iobench.lab.fs answers)
REPLY_NAME = "control.reply.json"

STATE_ENV = "IOBENCH_LAB_STATE_DIR"  # overrides where state folders live


STATE_SCHEMA = 1


@dataclass
class LabMount:
    """What ``up`` made, as recorded in the state file (enough for ``down`` to undo it)."""

    id: str
    kind: str
    mountpoint: str
    state_dir: str
    backing: str
    backing_tmpfs: bool
    created_mountpoint: bool
    options: dict[str, Any]
    stats_file: str | None = None
    pid: int | None = None  # the FUSE daemon, or sshfs
    started: float = field(default_factory=time.time)
    net: dict[str, Any] | None = None  # sshfs: netns, veths, addresses, sshd pid
    schema: int = STATE_SCHEMA

    @property
    def live_stats_path(self) -> Path:
        return Path(self.state_dir) / "stats.json"

    @property
    def log_path(self) -> Path:
        return Path(self.state_dir) / "daemon.log"

    def save(self) -> None:
        path = Path(self.state_dir) / "state.json"
        tmp = path.with_name("state.json.tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1) + "\n")
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> LabMount:
        data = json.loads(path.read_text())
        if data.get("schema") != STATE_SCHEMA:
            raise ValueError(f"unknown state schema {data.get('schema')}")
        lab = cls(**data)
        # read back, so checked: `down` deletes the state folder and (its own) tmpfs backing
        if lab.state_dir != str(path.parent) or lab.kind not in KINDS:
            raise ValueError(f"{path} names another state folder or an unknown kind")
        if lab.backing_tmpfs and lab.backing != str(path.parent / "backing"):
            raise ValueError(f"{path}: a tmpfs backing outside its state folder")
        return lab


def state_root() -> Path:
    """The folder holding one state folder per mounted volume."""
    env = os.environ.get(STATE_ENV)
    candidates = [Path(env)] if env else []
    candidates += [
        Path("/run/iobench-lab"),
        Path(tempfile.gettempdir()) / f"iobench-lab-{os.getuid()}",
    ]
    problems = []
    for cand in candidates:
        try:
            cand.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            problems.append(f"{cand}: {exc.strerror}")
            continue
        # its records name folders to delete and pids to end: only a private folder of ours
        problem = private_dir_problem(cand)
        if problem is None and os.access(cand, os.W_OK | os.X_OK):
            return cand
        problems.append(problem or f"{cand}: not writable")
    raise LabError(f"no private, writable folder for the lab's state ({'; '.join(problems)})")


def mount_id(mountpoint: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", mountpoint).strip("-")[-24:] or "root"
    return f"{slug}-{hashlib.sha1(mountpoint.encode()).hexdigest()[:8]}"


def recorded() -> list[LabMount]:
    labs = []
    root = state_root()
    for path in sorted(root.glob("*/state.json")):
        with contextlib.suppress(OSError, ValueError, TypeError):
            labs.append(LabMount.load(path))
    return labs


@contextlib.contextmanager
def exclusive(mp: str) -> Iterator[None]:
    """Only one ``lab up`` or ``lab down`` per mountpoint at a time (a local flock on a file
    beside the state folders: they live on this machine's /run or temp dir).

    The lock file goes when no volume is recorded at ``mp`` any more (after ``down``, or an
    ``up`` that failed), removed while still locked; a command that opened it meanwhile sees
    its file replaced (another inode) and locks the new one."""
    path = state_root() / f"{mount_id(mp)}.lock"
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LabError(
                f"another `iobench lab` command is working on {mp} right now; wait for it to finish"
            ) from None
        with contextlib.suppress(FileNotFoundError):
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                break
        os.close(fd)  # removed by the command that held it: lock the file there now
    try:
        yield
    finally:
        if find(mp) is None:
            with contextlib.suppress(OSError):
                os.unlink(path)
        os.close(fd)


def find(mountpoint: str) -> LabMount | None:
    """The recorded volume mounted at ``mountpoint`` (as :func:`mount_path` spells it), or None."""
    for lab in recorded():
        if lab.mountpoint == mountpoint:
            return lab
    return None


def mount_path(path: str | os.PathLike[str]) -> str:
    """Absolute, symlink-free form of ``path`` as the mount table spells it.

    Resolves the parent only: resolving the path itself would stat the mount's root and
    hang on a hung daemon.
    """
    p = os.path.abspath(os.path.expanduser(os.fspath(path)))
    parent, name = os.path.split(p)
    return os.path.join(os.path.realpath(parent), name) if name else p


def read_stats(mountpoint: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The live counters of the volume at ``mountpoint`` (refreshed every 0.25 s), or None."""
    lab = find(mount_path(mountpoint))
    if lab is None:
        raise LabError(f"no iobench lab volume at {mountpoint} (see `iobench lab status`)")
    return read_json(lab.live_stats_path)


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
