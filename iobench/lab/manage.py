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
import os
import shlex
import shutil
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iobench.errors import LabError
from iobench.lab import kinds, system
from iobench.lab.kinds.fuse import FUSE
from iobench.lab.options import VolumeOptions
from iobench.lab.state import (
    LabMount,
    exclusive,
    find,
    mount_id,
    mount_path,
    read_json,
    recorded,
    state_root,
)
from iobench.system import procfs
from iobench.system.scratch import dangerous_folder
from iobench.system.trust import strict_modes_problem

FUSE_TYPE = FUSE.fstype


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
    if system.which("fusermount3") is None:
        return "fusermount3 is missing (apt-get install fuse3)"
    return kinds.get(kind).unavailable()


# ---- state ---------------------------------------------------------------------------------


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
    with exclusive(mp):
        existing = find(mp)
        if existing is not None:
            if _status_of(existing).problem is None:
                raise LabError(
                    f"{mp} is already an iobench lab volume; run `iobench lab down {mp}` first"
                )
            teardown(existing)  # a stale record of ours: clean it up and go on
        created = _prepare_mountpoint(mp)
        state_dir = state_root() / mount_id(mp)
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


#: the system's own state below /var: never a lab's backing folder itself (a sub-folder is
#: yours to give)
_VAR_SYSTEM = ("backups", "cache", "lib", "local", "lock", "log", "mail", "opt", "run", "spool")


def _check_backing(backing: str | os.PathLike[str] | None, mp: str) -> str | None:
    """The backing folder, resolved; refused when the volume would write into a system
    folder, or into a folder other users can change (the daemon runs as root, so what they
    plant or swap there it would serve and write through)."""
    if backing is None:
        return None
    path = os.path.realpath(os.fspath(backing))
    if not os.path.isdir(path):
        raise LabError(f"--backing {backing} is not an existing folder")
    if procfs.is_within(path, mp) or procfs.is_within(mp, path):  # also --backing /
        raise LabError(f"--backing {backing} and the mountpoint {mp} must not contain each other")
    if problem := dangerous_folder(Path(path)):  # the volume writes into it: not /etc, /usr
        raise LabError(f"--backing: {problem}")
    if os.path.dirname(path) == "/var" and os.path.basename(path) in _VAR_SYSTEM:
        raise LabError(f"--backing: refusing the system folder {path} (give a folder of your own)")
    mode = os.stat(path).st_mode
    if mode & 0o022:
        raise LabError(
            f"--backing {backing}: other users can write in {path} (mode "
            f"{stat.S_IMODE(mode):04o}), and the volume would serve what they put there; "
            f"give a folder of your own inside it (mkdir -m 0700 {shlex.quote(path)}/backing)"
        )
    if problem := strict_modes_problem(Path(path), "the volume's files"):
        raise LabError(f"--backing: {problem}")
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
    with exclusive(mp):
        lab = find(mp)
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

    step(unmount, lab.mountpoint, kinds.fstype_of(lab), True)
    step(system.end_process, lab.pid, kinds.needles_of(lab))
    step(kinds.get(lab.kind).stop, lab)
    if lab.backing_tmpfs:
        step(unmount, lab.backing, "tmpfs", False)
    stats = read_json(lab.live_stats_path)
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
    for lab in recorded():
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
    mounted = procfs.mounted_at(lab.mountpoint, kinds.fstype_of(lab)) is not None
    state = procfs.proc_state(lab.pid) if lab.pid else None
    alive = state not in (None, "Z", "X") and procfs.is_ours(lab.pid, kinds.needles_of(lab))
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
        read_json(lab.live_stats_path),
    )
