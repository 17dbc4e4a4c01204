"""Mount, list and unmount emulated slow volumes, and never leave one behind.

``up`` starts a detached daemon (the Python FUSE filesystem of :mod:`iobench.lab.fs`, or
sshfs against an sshd in a private network namespace, :mod:`iobench.lab.kinds.sshfs`), backed by a
tmpfs it mounts itself unless ``backing`` is given, and returns once the mount is live.
Everything it made is written first to a JSON state file (``/run/iobench-lab/<id>/state.json``,
or a per-user folder under the temp dir when ``/run`` is not writable), so ``down`` and
``status`` work from any process, also after a crash.

``down`` unmounts first (``fusermount3 -u``, then a lazy ``umount -l`` when busy), then
ends the daemon by pid — it normally exits by itself once unmounted; a hung or stopped one
gets SIGTERM and then SIGKILL, because a Python FUSE loop blocks Python's signal handlers —
then removes the tmpfs, the namespace and the state it made. It never stats the mountpoint,
so a hung daemon cannot hang it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from iobench.system import procfs
from iobench.errors import LabError
from iobench.lab import kinds, system
from iobench.lab.kinds.fuse import FUSE
from iobench.lab.options import VolumeOptions
from iobench.system.scratch import private_dir_problem

STATE_ENV = "IOBENCH_LAB_STATE_DIR"  # overrides where state folders live
FUSE_TYPE = FUSE.fstype
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
    def fstype(self) -> str:
        return kinds.get(self.kind).fstype

    @property
    def live_stats_path(self) -> Path:
        return Path(self.state_dir) / "stats.json"

    @property
    def log_path(self) -> Path:
        return Path(self.state_dir) / "daemon.log"

    def daemon_needles(self) -> list[str]:
        """Strings the daemon's command line must hold before we signal its pid."""
        return kinds.get(self.kind).needles(self)

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
        if lab.state_dir != str(path.parent) or lab.kind not in kinds.NAMES:
            raise ValueError(f"{path} names another state folder or an unknown kind")
        if lab.backing_tmpfs and lab.backing != str(path.parent / "backing"):
            raise ValueError(f"{path}: a tmpfs backing outside its state folder")
        return lab


@dataclass(frozen=True)
class LabStatus:
    """One line of ``iobench lab status``: a recorded volume, or an orphan mount."""

    mountpoint: str
    kind: str
    pid: int | None
    options: dict[str, Any]
    mounted: bool
    daemon_alive: bool
    problem: str | None  # None when healthy
    stats: dict[str, Any] | None

    @property
    def stale(self) -> bool:
        return self.problem is not None


# ---- preflight ---------------------------------------------------------------------------


def lab_unavailable_reason(kind: str = "fuse") -> str | None:
    """Why the lab cannot run here (one line, with the next step), or None if it can."""
    if not sys.platform.startswith("linux"):
        return "iobench lab needs Linux (FUSE, tmpfs, network namespaces)"
    if os.geteuid() != 0:
        return "iobench lab needs root: it mounts tmpfs and FUSE filesystems (run it as root)"
    if not system.capability(system.CAP_SYS_ADMIN):
        return "iobench lab needs CAP_SYS_ADMIN to mount (run the container with --privileged or --cap-add SYS_ADMIN)"
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing (run the container with --device /dev/fuse)"
    try:
        os.close(os.open("/dev/fuse", os.O_RDWR))
    except OSError as e:
        return f"cannot open /dev/fuse: {e.strerror} (run the container with --device /dev/fuse)"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is missing (apt-get install fuse3)"
    return kinds.get(kind).unavailable()


# ---- state ---------------------------------------------------------------------------------


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


def _mount_id(mountpoint: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", mountpoint).strip("-")[-24:] or "root"
    return f"{slug}-{hashlib.sha1(mountpoint.encode()).hexdigest()[:8]}"


def _recorded() -> list[LabMount]:
    labs = []
    root = state_root()
    for path in sorted(root.glob("*/state.json")):
        with contextlib.suppress(OSError, ValueError, TypeError):
            labs.append(LabMount.load(path))
    return labs


@contextlib.contextmanager
def _exclusive(mp: str) -> Iterator[None]:
    """Only one ``lab up`` or ``lab down`` per mountpoint at a time (a local flock on a file
    beside the state folders: they live on this machine's /run or temp dir).

    The lock file goes when no volume is recorded at ``mp`` any more (after ``down``, or an
    ``up`` that failed), removed while still locked; a command that opened it meanwhile sees
    its file replaced (another inode) and locks the new one."""
    path = state_root() / f"{_mount_id(mp)}.lock"
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
        if _find(mp) is None:
            with contextlib.suppress(OSError):
                os.unlink(path)
        os.close(fd)


def find(mountpoint: str) -> LabMount | None:
    """The recorded volume mounted at ``mountpoint`` (as :func:`mount_path` spells it), or None."""
    return _find(mountpoint)


def _find(mountpoint: str) -> LabMount | None:
    for lab in _recorded():
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
    lab = _find(mount_path(mountpoint))
    if lab is None:
        raise LabError(f"no iobench lab volume at {mountpoint} (see `iobench lab status`)")
    return _read_json(lab.live_stats_path)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


# ---- up ------------------------------------------------------------------------------------


def up(
    mountpoint: str | os.PathLike[str],
    kind: str = "fuse",
    options: VolumeOptions | None = None,
    *,
    backing: str | os.PathLike[str] | None = None,
    stats: str | os.PathLike[str] | None = None,
    timeout_s: float = 20.0,
) -> LabMount:
    """Mount an emulated slow volume on ``mountpoint`` and return once it is live."""
    options = (options or VolumeOptions()).validate(kind)
    reason = lab_unavailable_reason(kind)
    if reason:
        raise LabError(reason)
    mp = mount_path(mountpoint)
    if mp == "/":
        raise LabError("refusing to mount over /")
    stats_file = _check_stats_file(stats)
    backing_dir = _check_backing(backing, mp)
    with _exclusive(mp):
        existing = _find(mp)
        if existing is not None:
            if _status_of(existing).problem is None:
                raise LabError(
                    f"{mp} is already an iobench lab volume; run `iobench lab down {mp}` first"
                )
            teardown(existing)  # a stale record of ours: clean it up and go on
        created = _prepare_mountpoint(mp)
        state_dir = state_root() / _mount_id(mp)
        lab = LabMount(
            id=state_dir.name,
            kind=kind,
            mountpoint=mp,
            state_dir=str(state_dir),
            backing=backing_dir or str(state_dir / "backing"),
            backing_tmpfs=backing_dir is None,
            created_mountpoint=created,
            options=options.to_dict(),
            stats_file=stats_file,
        )
        try:
            _mount(lab, options, timeout_s)
        except BaseException:
            with contextlib.suppress(Exception):
                teardown(lab)
            raise
    return lab


def _mount(lab: LabMount, options: VolumeOptions, timeout_s: float) -> None:
    state_dir = Path(lab.state_dir)
    if procfs.mounted_at(str(state_dir / "backing")):
        raise LabError(f"{state_dir} holds a mount from an earlier run; unmount it first")
    shutil.rmtree(state_dir, ignore_errors=True)
    state_dir.mkdir(mode=0o700)
    lab.save()  # recorded before anything is mounted, so `down` can always undo it
    if lab.backing_tmpfs:
        os.mkdir(lab.backing, 0o755)
        system.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "iobench-lab-backing", lab.backing])
    kinds.get(lab.kind).start(lab, options, timeout_s)
    lab.save()


def _check_stats_file(stats: str | os.PathLike[str] | None) -> str | None:
    if stats is None:
        return None
    path = os.path.abspath(os.fspath(stats))
    parent = os.path.dirname(path)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK):
        raise LabError(f"--stats {stats}: folder {parent} does not exist or is not writable")
    return path


def _check_backing(backing: str | os.PathLike[str] | None, mp: str) -> str | None:
    if backing is None:
        return None
    path = os.path.realpath(os.fspath(backing))
    if not os.path.isdir(path):
        raise LabError(f"--backing {backing} is not an existing folder")
    if procfs.is_within(path, mp) or procfs.is_within(mp, path):  # also --backing /
        raise LabError(f"--backing {backing} and the mountpoint {mp} must not contain each other")
    return path


def _prepare_mountpoint(mp: str) -> bool:
    """Check (or create) an empty folder to mount on; True if we created it."""
    if procfs.mounted_at(mp):
        raise LabError(f"{mp} is already a mount point; pick another folder or unmount it")
    if os.path.lexists(mp):
        if os.path.islink(mp) or not os.path.isdir(mp):
            raise LabError(f"{mp} is not a folder")
        if os.listdir(mp):
            raise LabError(
                f"{mp} is not empty; mounting would hide its files (use an empty folder)"
            )
        return False
    parent = os.path.dirname(mp)
    if not os.path.isdir(parent):
        raise LabError(f"cannot create {mp}: {parent} does not exist")
    os.mkdir(mp, 0o755)
    return True


# ---- down ----------------------------------------------------------------------------------


def down(mountpoint: str | os.PathLike[str]) -> dict[str, Any] | None:
    """Unmount the volume at ``mountpoint`` and end everything ``up`` started for it.

    Returns the daemon's final stats (None when it could not write them, e.g. killed).
    """
    mp = mount_path(mountpoint)
    with _exclusive(mp):
        lab = _find(mp)
        if lab is None:
            if procfs.mounted_at(mp, FUSE_TYPE):  # ours, but its state is lost
                unmount(mp, FUSE_TYPE, fuse=True)
                return None
            raise LabError(f"no iobench lab volume at {mp} (see `iobench lab status`)")
        return teardown(lab)


def teardown(lab: LabMount) -> dict[str, Any] | None:
    """Undo everything recorded in ``lab``, continuing past failures; raise LabError at the
    end naming what could not be undone."""
    errors: list[str] = []

    def step(fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except (LabError, OSError) as e:
            errors.append(str(e))

    step(unmount, lab.mountpoint, lab.fstype, True)
    step(system.end_process, lab.pid, lab.daemon_needles())
    step(kinds.get(lab.kind).stop, lab)
    if lab.backing_tmpfs:
        step(unmount, lab.backing, "tmpfs", False)
    stats = _read_json(lab.live_stats_path)
    state_dir = Path(lab.state_dir)
    # only our own tmpfs counts: a --backing folder that is itself a mount point stays mounted
    if lab.backing_tmpfs and procfs.mounted_at(lab.backing):
        errors.append(f"{lab.backing} is still mounted; state kept in {state_dir}")
    else:
        shutil.rmtree(state_dir, ignore_errors=True)
    if lab.created_mountpoint and not procfs.mounted_at(lab.mountpoint):
        with contextlib.suppress(OSError):
            os.rmdir(lab.mountpoint)
    if errors:
        raise LabError("; ".join(errors))
    return stats


def unmount(path: str, fstype: str | None, fuse: bool) -> None:
    """Unmount ``path`` (only a mount of ``fstype``); lazily when it is busy."""
    attempts = [["fusermount3", "-u", path]] if fuse else [["umount", path]]
    attempts.append(["umount", "-l", path])
    for cmd in attempts:
        if not procfs.mounted_at(path, fstype):
            return
        system.run(cmd, timeout=15, check=False)
    if procfs.mounted_at(path, fstype):
        raise LabError(f"could not unmount {path}; try `umount -l {path}`")


# ---- status --------------------------------------------------------------------------------


def status() -> list[LabStatus]:
    """Every volume iobench has recorded, and any orphan lab mount, with problems flagged."""
    result = []
    seen = set()
    for lab in _recorded():
        seen.add(lab.mountpoint)
        result.append(_status_of(lab))
    for m in procfs.mounts():
        if m.fstype == FUSE_TYPE and m.mountpoint not in seen:
            result.append(
                LabStatus(
                    m.mountpoint,
                    "fuse",
                    None,
                    {},
                    True,
                    False,
                    "no state recorded (orphan mount)",
                    None,
                )
            )
    return result


def _status_of(lab: LabMount) -> LabStatus:
    mounted = procfs.mounted_at(lab.mountpoint, lab.fstype) is not None
    state = procfs.proc_state(lab.pid) if lab.pid else None
    alive = state not in (None, "Z", "X") and procfs.is_ours(lab.pid, lab.daemon_needles())
    problem = None
    if not alive and not mounted:
        problem = "stale: daemon gone, not mounted"
    elif not alive:
        problem = "stale: daemon gone, mount dead"
    elif not mounted:
        problem = "stale: mount gone"
    elif state == "T":
        problem = "daemon stopped (SIGSTOP)"
    else:
        problem = kinds.get(lab.kind).problem(lab)
    return LabStatus(
        lab.mountpoint,
        lab.kind,
        lab.pid,
        lab.options,
        mounted,
        alive,
        problem,
        _read_json(lab.live_stats_path),
    )
