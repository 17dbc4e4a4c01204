"""Scratch folders that iobench owns, and the only code allowed to delete anything.

Rule: iobench deletes only inside a scratch folder it made. A scratch folder is
``<role dir>/.iobench-scratch`` and carries a sentinel file written at creation; every
removal checks that the path resolves inside such a folder whose sentinel is intact, and
``shutil.rmtree`` never follows symlinks (a link inside is removed, not what it points
to). Dangerous places (``/``, a home folder itself, system folders) are refused as roles.
"""

from __future__ import annotations

import errno
import json
import os
import pwd
import shutil
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path

from iobench.errors import SafetyError, UsageError
from iobench.system import procfs
from iobench.system.lock import LOCK_NAME, TAKEOVER_NAME, TMP_PREFIX

SCRATCH_NAME = ".iobench-scratch"
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


def check_role_dir(name: str, path: Path) -> Path:
    """Validate a role's folder: exists, is a folder, writable, not a dangerous place."""
    if not path.exists():
        raise UsageError(f"--{name}: {path} does not exist")
    if not path.is_dir():
        raise UsageError(f"--{name}: {path} is not a directory")
    real = path.resolve()
    homes = {Path.home().resolve()}
    try:
        homes.update(p.resolve() for p in Path("/home").iterdir() if p.is_dir())
    except OSError:
        pass
    if str(real) == "/":
        raise SafetyError(
            f"--{name}: refusing the root folder / (give a folder on the volume, e.g. /workspace)"
        )
    if real in homes:
        raise SafetyError(f"--{name}: refusing the home folder {real} itself (give a sub-folder)")
    if str(real) in _SYSTEM or any(str(real).startswith(t + "/") for t in _SYSTEM_TREES):
        raise SafetyError(f"--{name}: refusing the system folder {real}")
    if not os.access(real, os.W_OK | os.X_OK):
        raise UsageError(f"--{name}: {path} is not writable")
    return real


def check_scratch(name: str, role_dir: Path) -> None:
    """Refuse a role now (before anything is created) if its scratch folder could not be
    used: one that exists but is not ours and private, or a role folder others could swap it in."""
    root = role_dir / SCRATCH_NAME
    problem = _parent_problem(role_dir) or (
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
        self.run_id = run_id

    def check(self) -> Scratch:
        """Raise SafetyError unless the scratch folder is still ours and private."""
        problem = scratch_problem(self.root)
        if problem:
            raise SafetyError(problem)
        return self

    def ensure(self) -> Scratch:
        """Create (or adopt our own earlier) scratch; refuse any other folder of that name."""
        parent_problem = _parent_problem(self.root.parent)
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
                self._write_sentinel()
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
        try:
            fd = os.open(
                self.root / SENTINEL, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644
            )
            with os.fdopen(fd, "w") as f:
                f.write(json.dumps(record) + "\n")
        except OSError as exc:
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
            (self.run_root / OWNER).write_text(
                json.dumps(procfs.ProcessStamp.current().to_dict()) + "\n"
            )
        except OSError as exc:
            raise UsageError(f"cannot create {self.run_root}: {exc.strerror}") from None
        return self

    def trial_dir(self, trial_id: str) -> Path:
        self.check()
        path = self.run_root / trial_id
        if os.path.lexists(path):
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


def private_dir_problem(path: Path) -> str | None:
    """Why ``path`` is not a folder iobench may use as its own (scratch, lab state), or None.

    Opened with O_NOFOLLOW|O_DIRECTORY and judged by fstat of that very descriptor, so a
    link swapped in between a check and its use is refused, not followed.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            return f"{path} is a symlink or not a folder; iobench will not use it as scratch"
        return f"cannot open scratch folder {path}: {exc.strerror}"
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    me = os.geteuid()
    if st.st_uid != me:
        return (
            f"{path} belongs to {_user_name(st.st_uid)}, not to you ({_user_name(me)}); iobench uses only "
            f"scratch folders it made as you (on filesystems that do not keep owners, such as vfat or "
            f"NFS with root_squash, give a role folder on another filesystem)"
        )
    if st.st_mode & 0o022:
        return (
            f"{path} is writable by other users (mode {stat.S_IMODE(st.st_mode):04o}); another user could "
            f"plant programs in it: remove it (or chmod go-w it if it is yours)"
        )
    return None


def _parent_problem(role_dir: Path) -> str | None:
    """A role folder others may write to must be sticky (like /tmp), or our scratch could be renamed away."""
    try:
        st = os.stat(role_dir)
    except OSError as exc:
        return f"cannot use {role_dir}: {exc.strerror}"
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        return (
            f"{role_dir} is writable by other users and not sticky (mode {stat.S_IMODE(st.st_mode):04o}): "
            f"another user could swap iobench's scratch folder; use a private folder or chmod +t it"
        )
    return None


def _user_name(uid: int) -> str:
    try:
        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


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
        return (
            f"{path} exists but has no iobench sentinel; move it away (iobench will not touch it)"
        )
    return None


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
    """Delete ``path`` (file, link or tree) only if it lies inside an iobench scratch folder."""
    if not os.path.lexists(path):
        return
    if owning_scratch(path) is None:
        raise SafetyError(
            f"refusing to delete {path}: it is not inside an iobench scratch folder of yours"
        )
    mount = _mount_inside(path)
    if mount:
        raise SafetyError(f"refusing to delete {path}: {mount} is mounted there (unmount it first)")
    if path.is_symlink() or not path.is_dir():
        path.unlink()
        return

    failures: list[str] = []

    def retry(func: Callable[[str], object], p: str, _exc: object) -> None:  # shutil's callback
        try:  # a read-only folder inside (chmod by the installer): make it writable, retry
            os.chmod(os.path.dirname(p), 0o700)
            func(p)
        except OSError as exc:
            failures.append(f"{p}: {exc.strerror}")

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=retry)
    else:
        shutil.rmtree(path, onerror=retry)
    if failures:
        raise OSError(f"could not remove {len(failures)} entries under {path}, e.g. {failures[0]}")


def _mount_inside(path: Path) -> str | None:
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
    mount = _mount_inside(child)
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
    kept: list[str] = []
    for child in sorted(root.iterdir()):
        if child.name == SENTINEL:
            continue
        why = _kept_reason(child, in_use)
        if why is not None:
            kept.append(f"{child.name} ({why})")
            continue
        remove(child)
        count += 1
    if not kept:
        (root / SENTINEL).unlink()
        root.rmdir()
    return count, kept
