"""The roles' folders: the ones given, a resumed run's, or the defaults, and what they share.

Why apart from the plan: where the venv, TMPDIR and caches go is the product's question, and
its defaults and same-filesystem rules are read by themselves (and tested by themselves).

- ``--target``: ``/workspace`` when it is a mount point (a cloud pod's network volume),
  else the current folder; ``/`` and a home folder itself are refused.
- ``--tmp``: the system temp dir, unless it shares the target's filesystem (then the run
  would compare a disk with itself): then ``/dev/shm`` when it exists and has room.
- Roles on one filesystem (same device and mount) are grouped: configs that differ only in
  them measure the same storage, which the plan says in a note.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from iobench.errors import UsageError
from iobench.run import facts, space
from iobench.run.resume import ResumeState
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
