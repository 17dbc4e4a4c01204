"""Scratch folders that iobench owns, and the only code allowed to delete anything.

Rule: iobench deletes only inside a scratch folder it made. A scratch folder is
``<role dir>/.iobench-scratch`` and carries a sentinel file written at creation; every
removal checks that the path resolves inside such a folder whose sentinel is intact, and
``shutil.rmtree`` never follows symlinks (a link inside is removed, not what it points
to). Dangerous places (``/``, a home folder itself, system folders) are refused as roles.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shlex
import subprocess
import time
from pathlib import Path

from iobench import files
from iobench.errors import IOBenchError, SafetyError, UsageError, VolumeHungError, VolumeLostError
from iobench.system import child, procfs
from iobench.system.lock import LOCK_NAME, TAKEOVER_NAME, TMP_PREFIX
from iobench.system.trust import private_dir_problem, strict_modes_problem
from iobench.system.unlinkat import delete_below, mount_id

SCRATCH_NAME = ".iobench-scratch"
#: what another user could swap in a role folder they may change (iobench.system.trust)
SWAPPABLE = "iobench's scratch folder"
SENTINEL = ".iobench-sentinel"
_SENTINEL_MAGIC = (
    "iobench scratch folder: everything in here was made by iobench and may be deleted by it"
)
_SYSTEM = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/run",
    "/sbin",
    "/sys",
    "/usr",
    "/var",
)
# system trees that are refused whole; others (/dev/shm, /var/tmp, /run/user/...) are fine
_SYSTEM_TREES = (
    "/bin",
    "/boot",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/sbin",
    "/sys",
    "/usr",
)


def dangerous_folder(real: Path) -> str | None:
    """Why iobench refuses to write in the resolved folder ``real`` (the root, a system
    folder, a home folder itself), or None."""
    homes = {Path.home().resolve()}
    try:
        homes.update(p.resolve() for p in Path("/home").iterdir() if p.is_dir())
    except OSError:
        pass
    if str(real) == "/":
        return "refusing the root folder / (give a folder on the volume, e.g. /workspace)"
    if real in homes:
        return f"refusing the home folder {real} itself (give a sub-folder)"
    if str(real) in _SYSTEM or any(str(real).startswith(t + "/") for t in _SYSTEM_TREES):
        return f"refusing the system folder {real}"
    return None


def check_role_dir(name: str, path: Path) -> Path:
    """Validate a role's folder: exists, is a folder, writable, not a dangerous place."""
    if not path.exists():
        raise UsageError(
            f"--{name}: {path} does not exist (make it: mkdir -p {shlex.quote(str(path))})"
        )
    if not path.is_dir():
        raise UsageError(f"--{name}: {path} is not a directory")
    real = path.resolve()
    if problem := dangerous_folder(real):
        raise SafetyError(f"--{name}: {problem}")
    if not os.access(real, os.W_OK | os.X_OK):
        raise UsageError(f"--{name}: {path} is not writable")
    return real


def check_scratch(name: str, role_dir: Path) -> None:
    """Refuse a role now (before anything is created) if its scratch folder could not be
    used: one that exists but is not ours and private, or a role folder others could swap it in."""
    root = role_dir / SCRATCH_NAME
    problem = strict_modes_problem(role_dir, SWAPPABLE) or (
        scratch_problem(root) if os.path.lexists(root) else None
    )
    if problem:
        raise SafetyError(f"--{name}: {problem}")


class Scratch:
    """The scratch folder of one role: create, mark, hand out trial folders, remove safely.

    Every method that hands out or deletes a path first checks the folder again
    (:func:`scratch_problem`): ours, not a symlink, not writable by others.
    """

    def __init__(self, role_dir: Path, run_id: str = "") -> None:
        self.root = role_dir / SCRATCH_NAME
        if run_id and (run_id.startswith(".") or run_id in _RESERVED or "/" in run_id):
            # a run id read from a received meta.json must not name the scratch's own files
            raise SafetyError(f"run id {run_id[:80]!r} names one of the scratch folder's own files")
        self.run_id = run_id
        #: set by a run: hand out trial folders from a child process, given up after this
        #: many seconds without progress (the first call on a volume that hung between
        #: trials would otherwise hold iobench's main thread for good)
        self.quiet_s: float | None = None

    def check(self) -> Scratch:
        """Raise SafetyError unless the scratch folder is still ours and private;
        VolumeLostError when it is gone (or its volume fails every call)."""
        try:
            os.lstat(self.root)
        except OSError as exc:
            if exc.errno in _VOLUME_GONE:
                raise VolumeLostError(
                    f"{self.root} is gone ({exc.strerror}): was its volume unmounted, or did "
                    "its server go away?"
                ) from None
        problem = scratch_problem(self.root)
        if problem and problem.endswith(_NO_SENTINEL):
            problem = _after_a_concurrent_creation(self.root)
        if problem:
            raise SafetyError(problem)
        return self

    def ensure(self) -> Scratch:
        """Create (or adopt our own earlier) scratch; refuse any other folder of that name."""
        parent_problem = strict_modes_problem(self.root.parent, SWAPPABLE)
        if parent_problem:
            raise SafetyError(parent_problem)
        if not os.path.lexists(self.root):
            try:
                os.mkdir(self.root, 0o700)
            except FileExistsError:
                pass  # another of our runs made it just now: judged below like any other
            except OSError as exc:
                raise UsageError(
                    f"cannot create scratch folder in {self.root.parent}: {exc.strerror}"
                ) from None
            else:
                try:
                    self._write_sentinel()
                except IOBenchError:  # a full disk: leave no empty scratch behind
                    with contextlib.suppress(OSError):
                        os.unlink(self.root / SENTINEL)
                    with contextlib.suppress(OSError):
                        os.rmdir(self.root)
                    raise
        return self.check()

    def _write_sentinel(self) -> None:
        problem = private_dir_problem(self.root)  # the folder we just made must show as ours
        if problem:
            raise SafetyError(problem)
        record = {
            "magic": _SENTINEL_MAGIC,
            "created_at": time.time(),
            "run_id": self.run_id,
            **procfs.ProcessStamp.current().to_dict(),
        }
        # written whole under another name, then renamed: a run beside this one (a fleet's
        # ranks sharing a host) never reads a half-written sentinel
        part = self.root / f"{SENTINEL}.{os.getpid()}.part"
        try:
            fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "w") as f:
                f.write(json.dumps(record) + "\n")
            os.rename(part, self.root / SENTINEL)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(part)
            raise UsageError(
                f"cannot create scratch folder in {self.root.parent}: {exc.strerror}"
            ) from None

    @property
    def run_root(self) -> Path:
        """This run's own folder inside the scratch: runs sharing a role never collide."""
        return self.root / (self.run_id or f"pid-{os.getpid()}")

    def claim(self) -> Scratch:
        """Make this run's folder and mark it with its owner, so that `iobench clean`
        leaves it alone while the run lives (a shared tmp role holds many runs' folders)."""
        self.check()
        try:
            os.makedirs(self.run_root, 0o700, exist_ok=True)
            _refuse_link(self.run_root)
            files.write(
                self.run_root / OWNER, json.dumps(procfs.ProcessStamp.current().to_dict()) + "\n"
            )
        except OSError as exc:
            raise UsageError(f"cannot create {self.run_root}: {exc.strerror}") from None
        return self

    def trial_dir(self, trial_id: str) -> Path:
        """A new, empty folder for the trial (a killed run's leftover of it removed first);
        raises VolumeHungError when ``quiet_s`` is set and the volume stopped answering."""
        if self.quiet_s is None:
            return self._trial_dir(trial_id)
        try:
            return child.call(
                lambda: self._trial_dir(trial_id),
                self.quiet_s,
                what=f"making a folder in {self.root}",
            )
        except child.Hung as exc:
            raise VolumeHungError(
                f"{self.root} stopped answering: {exc}", volume=self.root
            ) from None

    def _trial_dir(self, trial_id: str) -> Path:
        self.check()
        path = self.run_root / trial_id
        if os.path.lexists(path):  # a killed run's (--resume): its own image unmounted first
            release_own_mounts(path)
            remove(path)
        _refuse_link(self.run_root)
        path.mkdir(parents=True)
        return path

    def finish(self) -> None:
        """Remove this run's folder (what is left of it after its trials cleaned up)."""
        remove(self.run_root)

    def drop_if_empty(self) -> None:
        """Remove the scratch folder once nothing but its sentinel is left, so a clean run
        leaves no trace; a run that made its own folder there meanwhile keeps it."""
        if not is_scratch(self.root) or [p.name for p in self.root.iterdir()] != [SENTINEL]:
            return
        sentinel = self.root / SENTINEL
        record = sentinel.read_bytes()
        sentinel.unlink()
        try:
            self.root.rmdir()
        except OSError:  # another run arrived between the look and the removal: keep it marked
            fd = os.open(sentinel, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as f:
                f.write(record)

    def leftovers(self) -> list[Path]:
        """Folders left behind by a run that crashed (everything but the sentinel and lock)."""
        if not self.root.is_dir():
            return []
        self.check()
        return sorted(
            p
            for p in self.root.iterdir()
            if p.name not in (SENTINEL, LOCK_NAME, TAKEOVER_NAME)
            and not p.name.startswith(TMP_PREFIX)
        )


OWNER = ".iobench-owner"


def _refuse_link(path: Path) -> None:
    if path.is_symlink():
        raise SafetyError(
            f"{path} is a symlink inside iobench's scratch; iobench will not follow it"
        )


#: the scratch folder's own entries besides the runs' folders (the sentinel and the lock's
#: files start with a dot or are named here)
_RESERVED = {LOCK_NAME, TAKEOVER_NAME}

#: what a folder that was there answers once its volume went away (unmounted, server gone)
_VOLUME_GONE = {errno.ENOENT, errno.ENOTCONN, errno.EIO, errno.ESTALE, errno.ENODEV}


def live_owner(run_root: Path) -> dict | None:
    """The owner of a run folder if that process still runs (or runs on another host), else None."""
    try:
        stamp = procfs.ProcessStamp.from_dict(json.loads((run_root / OWNER).read_text()))
    except (OSError, ValueError):
        return None
    if stamp is None or stamp.gone_reason() is not None:
        return None
    return stamp.to_dict()


def scratch_problem(path: Path) -> str | None:
    """Why ``path`` is not iobench's scratch folder for this user, or None when it is:
    a real folder of ours, not writable by others, carrying an intact sentinel."""
    problem = private_dir_problem(path)
    if problem:
        return problem
    sentinel = path / SENTINEL
    try:
        fd = os.open(sentinel, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd) as f:
            magic = json.loads(f.read(4096)).get("magic")
    except (OSError, ValueError, AttributeError):
        magic = None
    if magic != _SENTINEL_MAGIC:
        return f"{path} {_NO_SENTINEL}"
    return None


_NO_SENTINEL = "exists but has no iobench sentinel; move it away (iobench will not touch it)"
#: how long a private folder of ours may lack its sentinel: another run is between its mkdir
#: and its sentinel's rename, or between drop_if_empty's unlink and its restore (seen with a
#: fleet's ranks on one host)
SENTINEL_GRACE_S = 2.0


def _after_a_concurrent_creation(path: Path) -> str | None:
    """scratch_problem(path) again, for up to SENTINEL_GRACE_S while the folder is private
    to this user, young (changed in the last minute) and empty but for sentinels being
    written: a run beside this one may be between its mkdir and its sentinel. Any other
    folder without a sentinel is judged at once."""
    deadline = time.monotonic() + SENTINEL_GRACE_S
    while True:
        try:  # looked at first: a sentinel renamed in after this look is seen just below
            young = time.time() - os.lstat(path).st_mtime < 60
            bare = all(name.startswith(SENTINEL) for name in os.listdir(path))
        except OSError:
            young = bare = False
        problem = scratch_problem(path)
        if problem is None or not problem.endswith(_NO_SENTINEL):
            return problem
        if not (young and bare) or time.monotonic() >= deadline:
            return problem
        time.sleep(0.02)


def is_scratch(path: Path) -> bool:
    """True if ``path`` is a real folder of ours carrying an intact iobench sentinel."""
    return scratch_problem(path) is None


def owning_scratch(path: Path) -> Path | None:
    """The sentinel-marked scratch folder that ``path`` lies inside, if any (no symlinks)."""
    parent = Path(os.path.abspath(path)).parent
    for candidate in (parent, *parent.parents):
        if candidate.name == SCRATCH_NAME and is_scratch(candidate):
            real_c = candidate.resolve()
            real_p = Path(os.path.realpath(path.parent)) / path.name
            if str(real_p).startswith(str(real_c) + os.sep):
                return candidate
            return None
    return None


def remove(path: Path) -> None:
    """Delete ``path`` (file, link or tree) only if it lies inside an iobench scratch folder,
    and never beyond that folder's filesystem: a tree with a mount point inside is refused
    before anything is deleted, and the walk checks every folder's device and mount as it
    goes (a bind mount of the same filesystem keeps the device: its mount id tells it)."""
    if not os.path.lexists(path):
        return
    owner = owning_scratch(path)
    if owner is None:
        raise SafetyError(
            f"refusing to delete {path}: it is not inside an iobench scratch folder of yours"
        )
    mount = mount_inside(path)
    if mount:
        raise SafetyError(f"refusing to delete {path}: {mount} is mounted there (unmount it first)")
    if path.is_symlink() or not path.is_dir():
        path.unlink()
        return
    failures: list[str] = []
    dev = os.stat(owner).st_dev
    home = os.open(owner, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        on = mount_id(home)  # the scratch folder's own mount: a piece of a tree must be on it
    finally:
        os.close(home)
    top = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        if os.fstat(top).st_dev != dev or (on is not None and mount_id(top) != on):
            raise SafetyError(f"refusing to delete {path}: it lies on another filesystem or mount")
        delete_below(top, str(path), (dev, on), failures)
    finally:
        os.close(top)
    try:
        os.rmdir(path)
    except OSError as exc:
        failures.append(f"{path}: {exc.strerror}")
    if failures:
        raise OSError(f"could not remove {len(failures)} entries under {path}, e.g. {failures[0]}")


OWN_MOUNT_TYPES = ("squashfs", "fuse.squashfuse")


def release_own_mounts(path: Path, timeout_s: float = 30.0) -> list[str]:
    """Unmount the squashfs images iobench mounted inside ``path`` (a scratch folder of ours,
    or a trial's folder in it), deepest first: what a run killed mid-restore left mounted.
    Any other mount is left alone (the caller refuses to delete around it). Returns what
    could not be unmounted, each with the command that would."""
    if owning_scratch(path / "x") is None and not is_scratch(path):
        return []
    real = os.path.realpath(path)
    left = []
    for m in sorted(procfs.mounts(), key=lambda m: -len(m.mountpoint)):
        if m.fstype not in OWN_MOUNT_TYPES or not procfs.is_within(m.mountpoint, real):
            continue
        argv = (
            ["fusermount3", "-u", m.mountpoint]
            if m.fstype.startswith("fuse")
            else ["umount", m.mountpoint]
        )
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
        except (OSError, subprocess.TimeoutExpired) as exc:
            left.append(f"{m.mountpoint} ({exc}; run: {' '.join(argv)})")
            continue
        if done.returncode != 0:
            left.append(f"{m.mountpoint} ({done.stderr.strip()[:80]}; run: {' '.join(argv)})")
    return left


def mount_inside(path: Path) -> str | None:
    """A mount point at or below ``path``: deleting must not descend into another filesystem."""
    if path.is_symlink():
        return None
    real = os.path.realpath(path)
    for m in procfs.mounts():
        if procfs.is_within(m.mountpoint, real) and (m.mountpoint != "/" or real == "/"):
            return m.mountpoint
    return None


def _kept_reason(child: Path, in_use: dict[str, int]) -> str | None:
    """Why ``iobench clean`` must leave ``child`` alone: a live run owns it, a live process
    works in it, or a filesystem is mounted inside it."""
    if child.is_symlink():
        return None
    owner = live_owner(child) if child.is_dir() else None
    if owner is not None:
        return f"in use by pid {owner.get('pid')} on {owner.get('host')}"
    real = os.path.realpath(child)
    user = next((pid for p, pid in in_use.items() if procfs.is_within(p, real)), None)
    if user is not None:
        return f"in use by live process {user} ({procfs.cmdline(user)[:40] or '?'})"
    mount = mount_inside(child)
    if mount:
        return f"{mount} is mounted inside"
    return None


def remove_scratch(root: Path) -> tuple[int, list[str]]:
    """Remove a scratch folder (``iobench clean``) but what live runs or processes use and
    what holds a mount; returns (entries removed, what was kept and why). The sentinel goes last."""
    problem = scratch_problem(root)
    if problem:
        raise SafetyError(f"{problem}; nothing removed")
    in_use = procfs.paths_in_use()
    count = 0
    kept: list[str] = [f"mounted: {m}" for m in release_own_mounts(root)]
    for entry in sorted(root.iterdir()):
        if entry.name == SENTINEL:
            continue
        why = _kept_reason(entry, in_use)
        if why is not None:
            kept.append(f"{entry.name} ({why})")
            continue
        remove(entry)
        count += 1
    if not kept:
        (root / SENTINEL).unlink()
        root.rmdir()
    return count, kept
