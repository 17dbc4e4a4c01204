"""Scratch folders that iobench owns, and the only code allowed to delete anything.

Rule: iobench deletes only inside a scratch folder it made. A scratch folder is
``<role dir>/.iobench-scratch`` and carries a sentinel file written at creation; every
removal checks that the path resolves inside such a folder whose sentinel is intact, and
``shutil.rmtree`` never follows symlinks (a link inside is removed, not what it points
to). Dangerous places (``/``, a home folder itself, system folders) are refused as roles.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import time
from pathlib import Path

import psutil

from iobench.errors import SafetyError, UsageError

SCRATCH_NAME = ".iobench-scratch"
SENTINEL = ".iobench-sentinel"
_SENTINEL_MAGIC = "iobench scratch folder: everything in here was made by iobench and may be deleted by it"
_SYSTEM = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc",
           "/run", "/sbin", "/sys", "/usr", "/var")
# system trees that are refused whole; others (/dev/shm, /var/tmp, /run/user/...) are fine
_SYSTEM_TREES = ("/bin", "/boot", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc",
                 "/sbin", "/sys", "/usr")


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
        raise SafetyError(f"--{name}: refusing the root folder / (give a folder on the volume, e.g. /workspace)")
    if real in homes:
        raise SafetyError(f"--{name}: refusing the home folder {real} itself (give a sub-folder)")
    if str(real) in _SYSTEM or any(str(real).startswith(t + "/") for t in _SYSTEM_TREES):
        raise SafetyError(f"--{name}: refusing the system folder {real}")
    if not os.access(real, os.W_OK | os.X_OK):
        raise UsageError(f"--{name}: {path} is not writable")
    return real


class Scratch:
    """The scratch folder of one role: create, mark, hand out trial folders, remove safely."""

    def __init__(self, role_dir: Path, run_id: str = "") -> None:
        self.root = role_dir / SCRATCH_NAME
        self.run_id = run_id

    def ensure(self) -> Scratch:
        """Create (or adopt an earlier iobench scratch); refuse a foreign folder of that name."""
        if self.root.is_symlink():
            raise SafetyError(f"{self.root} is a symlink; iobench will not use it as scratch")
        if self.root.exists():
            if not is_scratch(self.root):
                raise SafetyError(
                    f"{self.root} exists but has no iobench sentinel; move it away (iobench will not touch it)"
                )
            return self
        try:
            self.root.mkdir()
            (self.root / SENTINEL).write_text(
                json.dumps(
                    {
                        "magic": _SENTINEL_MAGIC,
                        "created_at": time.time(),
                        "host": socket.gethostname(),
                        "pid": os.getpid(),
                        "run_id": self.run_id,
                    }
                )
                + "\n"
            )
        except OSError as exc:
            raise UsageError(f"cannot create scratch folder in {self.root.parent}: {exc.strerror}") from None
        return self

    @property
    def run_root(self) -> Path:
        """This run's own folder inside the scratch: runs sharing a role never collide."""
        return self.root / (self.run_id or f"pid-{os.getpid()}")

    def claim(self) -> Scratch:
        """Make this run's folder and mark it with its owner, so that `iobench clean`
        leaves it alone while the run lives (a shared tmp role holds many runs' folders)."""
        try:
            self.run_root.mkdir(exist_ok=True)
            (self.run_root / OWNER).write_text(json.dumps(_me()) + "\n")
        except OSError as exc:
            raise UsageError(f"cannot create {self.run_root}: {exc.strerror}") from None
        return self

    def trial_dir(self, trial_id: str) -> Path:
        path = self.run_root / trial_id
        if path.exists():
            remove(path)
        path.mkdir(parents=True)
        return path

    def finish(self) -> None:
        """Remove this run's folder (what is left of it after its trials cleaned up)."""
        remove(self.run_root)

    def leftovers(self) -> list[Path]:
        """Folders left behind by a run that crashed (everything but the sentinel and lock)."""
        if not self.root.is_dir():
            return []
        return sorted(
            p
            for p in self.root.iterdir()
            if p.name not in (SENTINEL, "lock.json", "lock.json.takeover") and not p.name.startswith(".lock-")
        )


OWNER = ".iobench-owner"


def _me() -> dict:
    proc = psutil.Process()
    return {"pid": proc.pid, "host": socket.gethostname(), "started": proc.create_time()}


def live_owner(run_root: Path) -> dict | None:
    """The owner of a run folder if that process still runs on this host, else None."""
    try:
        owner = json.loads((run_root / OWNER).read_text())
        if owner.get("host") != socket.gethostname():
            return owner  # another machine's run on a shared volume: assume alive
        proc = psutil.Process(int(owner["pid"]))
        if abs(proc.create_time() - float(owner["started"])) < 1.0:
            return owner
    except (OSError, ValueError, KeyError, TypeError, psutil.Error):
        return None
    return None


def is_scratch(path: Path) -> bool:
    """True if ``path`` is a real folder carrying an intact iobench sentinel."""
    sentinel = path / SENTINEL
    if path.is_symlink() or not path.is_dir() or sentinel.is_symlink() or not sentinel.is_file():
        return False
    try:
        return json.loads(sentinel.read_text()).get("magic") == _SENTINEL_MAGIC
    except (OSError, ValueError, AttributeError):
        return False


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
        raise SafetyError(f"refusing to delete {path}: it is not inside an iobench scratch folder")
    if path.is_symlink() or not path.is_dir():
        path.unlink()
        return

    failures: list[str] = []

    def retry(func, p, _exc):  # noqa: ANN001 - shutil's callback signature
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


def remove_scratch(root: Path) -> tuple[int, list[str]]:
    """Remove a scratch folder (``iobench clean``) but the folders of runs still alive;
    returns (entries removed, what was kept and why). The sentinel goes last."""
    if not is_scratch(root):
        raise SafetyError(f"{root} is not an iobench scratch folder (no sentinel); nothing removed")
    count = 0
    kept: list[str] = []
    for child in sorted(root.iterdir()):
        if child.name == SENTINEL:
            continue
        owner = live_owner(child) if child.is_dir() and not child.is_symlink() else None
        if owner is not None:
            kept.append(f"{child.name} (in use by pid {owner.get('pid')} on {owner.get('host')})")
            continue
        remove(child)
        count += 1
    if not kept:
        (root / SENTINEL).unlink()
        root.rmdir()
    return count, kept
