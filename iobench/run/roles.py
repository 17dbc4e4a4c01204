"""The roles' folders: the ones given, a resumed run's, or the defaults, and what they share.

Why apart from the plan: where the venv, TMPDIR and caches go is the product's question, and
its defaults and same-filesystem rules are read by themselves (and tested by themselves).

- ``--target``: ``/workspace`` when it is a mount point (a cloud pod's network volume),
  else the current folder; ``/`` and a home folder itself are refused.
- ``--tmp``: the system temp dir, unless it shares the target's filesystem (then the run
  would compare a disk with itself): then ``/dev/shm`` when it exists and has room.
- Roles on one filesystem (same device and mount) are grouped: configs that differ only in
  them measure the same storage, which the plan says in a note.
- A role on an ext4 without a journal where a run here ended minutes ago is said in a
  warning: such a filesystem creates files slower while the run's clean-up is recent.
"""

from __future__ import annotations

import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from iobench.errors import IOBenchError, UsageError
from iobench.run import facts, space
from iobench.run.resume import ResumeState
from iobench.rundir.folder import RunDir
from iobench.scenario.load import Scenario
from iobench.system import procfs
from iobench.system.scratch import SCRATCH_NAME, check_role_dir, check_scratch
from iobench.system.trust import check_user_dirs


def resolve(
    target: Path | None,
    tmp: Path | None,
    paths: list[tuple[str, Path]] | None,
    state: ResumeState | None,
    scenario: Scenario,
) -> tuple[dict[str, Path], list[str]]:
    """The roles' folders (given, a resumed run's, or the defaults) and why defaults were chosen."""
    notes: list[str] = []
    given: dict[str, Path] = {}
    if state is not None:
        given = dict(state.roles)
    if target is not None:
        given["target"] = target
    if tmp is not None:
        given["tmp"] = tmp
    extra = {name: path for name, path in given.items() if name not in ("target", "tmp")}
    if paths:
        extra = {}
        for name, path in paths:
            if name in ("target", "tmp") or name in extra:
                raise UsageError(f"--path {name}=...: role '{name}' given twice")
            extra[name] = path
    if "target" not in given:
        given["target"], why = default_target()
        notes.append(f"target: {given['target']} ({why}; give --target DIR to choose)")
    roles = {"target": check_role_dir("target", given["target"])}
    if "tmp" not in given:
        given["tmp"], why = default_tmp(roles["target"], scenario)
        notes.append(f"tmp: {given['tmp']} ({why}; give --tmp DIR to choose)")
    roles["tmp"] = check_role_dir("tmp", given["tmp"])
    for name, path in extra.items():
        roles[name] = check_role_dir(f"path {name}", path)
    for name, path in roles.items():  # a scratch folder that would be refused refuses the run now
        check_scratch(name, path)
    check_user_dirs()  # HOME and XDG folders: the tools' configuration and seed wheels
    return roles, notes


def default_target() -> tuple[Path, str]:
    """``/workspace`` when it is a mount point, else the current folder (never / or a home)."""
    workspace = Path("/workspace")
    if workspace.is_dir() and os.path.ismount(workspace):
        return workspace, "/workspace is a mount point"
    cwd = Path.cwd().resolve()
    if cwd == Path("/") or cwd in _homes():
        raise UsageError("give --target DIR (your network volume)")
    return cwd, "the current folder"


def _homes() -> set[Path]:
    homes = {Path.home().resolve()}
    try:
        homes.update(p.resolve() for p in Path("/home").iterdir() if p.is_dir())
    except OSError:
        pass
    return homes


def default_tmp(target: Path, scenario: Scenario) -> tuple[Path, str]:
    """The system temp dir, unless it shares the target's filesystem: then /dev/shm if it has room."""
    system = Path(tempfile.gettempdir())
    if not same_filesystem(system, target):
        return system, "the system temp dir"
    shm = Path("/dev/shm")
    need = space.need_mb(scenario).get("tmp", 0.0) + space.need_mb(scenario).get("target", 0.0)
    if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK) and space.free_mb(shm) >= need:
        return shm, f"the system temp dir {system} shares the target's filesystem; /dev/shm is RAM"
    return system, "the system temp dir; it shares the target's filesystem and /dev/shm has no room"


def filesystem_of(path: Path) -> tuple[int, str]:
    """(device, mount point) of the filesystem holding ``path``."""
    mount = procfs.mount_of(path)
    return os.stat(path).st_dev, mount.mountpoint if mount is not None else ""


def same_filesystem(a: Path, b: Path) -> bool:
    try:
        return filesystem_of(a) == filesystem_of(b)
    except OSError:
        return False


def same_storage(scenario: Scenario, roles: dict[str, Path]) -> list[list[str]]:
    """Groups of two or more roles the scenario uses that sit on one filesystem (same
    device and mount): configs that differ only in these roles compare a disk with itself."""
    used = sorted(set().union(*(c.roles() for c in scenario.configs)) & set(roles))
    groups: dict[tuple[int, str], list[str]] = {}
    for role in used:
        groups.setdefault(filesystem_of(roles[role]), []).append(role)
    return [g for g in groups.values() if len(g) > 1]


def same_storage_note(group: list[str], roles: dict[str, Path]) -> str:
    fs = facts.mount_of(roles[group[0]])
    return (
        f"note: roles {' and '.join(group)} are on one filesystem ({fs.get('fstype', '?')} at "
        f"{fs.get('mountpoint', '?')}): configs that differ only in them measure the same storage"
    )


def results_note(results: Path, target: Path) -> list[str]:
    """Logs written during trials onto a network volume under test would add to what is measured."""
    fstype = facts.fstype_of(target)
    remote = fstype.startswith(
        ("nfs", "fuse", "cifs", "smb", "9p", "ceph", "lustre", "gluster", "virtiofs")
    )
    existing = next((p for p in (results, *results.parents) if p.exists()), Path("/"))
    if remote and os.stat(existing).st_dev == os.stat(target).st_dev:
        return [
            f"note: the results folder is on the target ({fstype}); give --results a local folder "
            "so that iobench's own logs do not share the volume under test"
        ]
    return []


#: an ext4 without a journal skips, when it allocates an inode, every inode freed in the last
#: minute (six while its inode-table block is unwritten: fs/ext4/ialloc.c, recently_deleted)
RECENTLY_DELETED_S = 360
_EXT = ("ext2", "ext3", "ext4")


def recent_deletions(results: Path, roles: dict[str, Path], now: float | None = None) -> list[str]:
    """A warning for each ext4 without a journal that holds a role and a role of a run in
    ``results`` that ended less than ``RECENTLY_DELETED_S`` ago. Its clean-up freed its
    trials' inodes, and until they age the kernel reads past them at every file created
    there: default runs started within a minute of another took 2.3-3.9 s a naive trial
    against 1.5-1.6 s six minutes later, and named a winner where there was none."""
    ended = _last_run(results)
    if ended is None:
        return []
    rid, at, used = ended
    ago = (now if now is not None else datetime.now(timezone.utc).timestamp()) - at
    if not 0 <= ago < RECENTLY_DELETED_S:
        return []
    out, seen = [], set()
    for role, path in roles.items():
        mount = procfs.mount_of(path)
        if mount is None or mount.mountpoint in seen or mount.mountpoint not in used:
            continue
        seen.add(mount.mountpoint)
        if mount.fstype in _EXT and journal_less(mount.source):
            out.append(
                f"warning: {role} is {mount.fstype} without a journal, and run {rid} there ended "
                f"{ago:.0f} s ago: until the files it deleted are {RECENTLY_DELETED_S // 60} "
                f"minutes old, the kernel looks past them at every file created there, so "
                f"trials on {role} run slower than this machine does (start "
                f"{RECENTLY_DELETED_S - ago:.0f} s later for its own figures; docs/running.md)"
            )
    return out


def journal_less(device: str) -> bool:
    """True for a mounted ext2/3/4 device that runs without a journal (sysfs says
    ``<none>`` for its journal's task); False when it has one or sysfs cannot tell."""
    name = os.path.basename(os.path.realpath(device))  # /dev/mapper/x -> dm-0, as sysfs names it
    try:
        return Path("/sys/fs/ext4", name, "journal_task").read_text().strip() == "<none>"
    except OSError:
        return False


def _last_run(results: Path) -> tuple[str, float, set[str]] | None:
    """The run in ``results`` that ended last (of the newest few by name, which begins with
    its start): its id, its end (epoch seconds) and the mount points its roles were on."""
    try:
        names = sorted((p.name for p in results.iterdir() if p.is_dir()), reverse=True)[:5]
    except OSError:
        return None
    best: tuple[str, float, set[str]] | None = None
    for name in names:
        try:
            meta = RunDir(results / name).meta()  # one read of meta.json, checked
            at = datetime.fromisoformat(str(meta.ended_at).replace("Z", "+00:00")).timestamp()
        except (IOBenchError, OSError, ValueError):
            continue
        if best is None or at > best[1]:
            best = (meta.run_id, at, {r.mountpoint for r in meta.roles.values()})
    return best


def check_roles_used(scenario: Scenario, roles: dict[str, Path]) -> None:
    used = set().union(*(c.roles() for c in scenario.configs))
    for role in sorted(used):
        if role not in roles:
            raise UsageError(
                f"scenario {scenario.name} uses role '{role}' but no --path {role}=DIR was given"
            )


def check_results_place(results: Path, roles: dict[str, Path]) -> None:
    """Results never inside a scratch folder (it is deleted at the end), nor scratch inside results."""
    real = Path(os.path.realpath(results))
    if SCRATCH_NAME in real.parts:
        raise UsageError(
            f"--results {results}: inside an iobench scratch folder, which iobench deletes"
        )
    for name, path in roles.items():
        scratch = str(path / SCRATCH_NAME)
        if procfs.is_within(scratch, str(real)):
            raise UsageError(
                f"--results {results}: the scratch folder of role {name} ({scratch}) would lie inside it; "
                "give --results a folder beside the roles, not above them"
            )


__all__ = [
    "check_results_place",
    "check_roles_used",
    "default_target",
    "default_tmp",
    "filesystem_of",
    "resolve",
    "results_note",
    "same_filesystem",
    "same_storage",
    "same_storage_note",
]
