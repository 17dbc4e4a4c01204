"""The traps of the start-up strategies, for `iobench doctor` (docs/doctor.md): each check
looks at where things live on this machine and returns findings with their fix.

- **cache and TMPDIR apart**: pip unpacks into TMPDIR and moves what it keeps into its cache;
  across filesystems a move is a copy and a delete, so two installs at once, or a crash, can
  leave a half-written cache entry (pip#13540). uv links from its cache into the venv: with
  the cache on another filesystem than the venv it copies every file instead.
- **locks that fail where a cache lives**: uv takes a ``flock`` on its cache for every
  install, and where ``flock`` fails (ENOSYS, EBADF, error 524 on many NFS mounts) uv stops;
  where a lock is granted but does not exclude, two installs share a cache unprotected.
- **a persistent venv on a volume without bytecode**: each first import writes a ``.pyc``, a
  round trip (or several) each on a network volume, and the next pod pays it again if the
  volume refuses the write.
- **/dev/shm smaller than a venv**: a tmpfs strategy (venv or TMPDIR on /dev/shm) fails in a
  container with Docker's default 64 MiB.
- **a venv on a volume that a packed one would beat**: each cold start of a venv kept on a
  network volume pays a round trip per file its imports open; one archive of it restored to
  local disk pays the volume's read rate instead. Both predicted from the doctor's probe of
  the target (when the venv lives on it) and the venv's size.
- **loop mounts**: packed-venv's squashfs restore mounts with ``mount -t squashfs -o loop``,
  which needs CAP_SYS_ADMIN; most pods refuse it, so the restore falls back to ``squashfuse``
  (user space) or tar+zstd.

Measuring only: no finding writes anything.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from iobench import shell
from iobench.predict.finding import Finding
from iobench.system.procfs import mount_of

#: a torch + CUDA venv's size, for /dev/shm when no venv is active to measure (bytes)
TYPICAL_VENV_BYTES = 5 * 10**9
#: the most entries a venv walk looks at (a network volume: every entry is a round trip)
WALK_LIMIT = 200_000
#: the share of a venv's modules without bytecode past which it is worth a finding
NO_BYTECODE_SHARE = 0.5
#: bit 21 of a capability set: CAP_SYS_ADMIN (mount)
CAP_SYS_ADMIN = 21


class Place(Protocol):
    """What a check needs of a located folder (:class:`iobench.predict.doctor.Location`)."""

    @property
    def name(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def mountpoint(self) -> str: ...
    @property
    def fstype(self) -> str: ...
    @property
    def kind(self) -> str: ...


def _by_name(locs: Iterable[Place]) -> dict[str, Place]:
    return {loc.name: loc for loc in locs}


def _moves(name: str, tmp: str, sub: str) -> tuple[str, ...]:
    mine = shell.per_user(tmp)
    dest = os.path.join(mine, sub)
    return (*shell.PRIVATE_DIR, shell.private_dir(mine), shell.private_dir(dest),
            f"export {name}={shell.quote(dest)}")  # fmt: skip


def cache_apart(locs: Iterable[Place], tmp: str) -> list[Finding]:
    """pip's cache on another filesystem than TMPDIR; uv's on another than the venv."""
    by = _by_name(locs)
    out: list[Finding] = []
    tmpdir, pip = by.get("TMPDIR"), by.get("PIP_CACHE_DIR")
    if tmpdir and pip and tmpdir.mountpoint and pip.mountpoint != tmpdir.mountpoint:
        out.append(Finding(
            "warn", "cache-apart",
            f"PIP_CACHE_DIR {pip.path} ({pip.fstype} at {pip.mountpoint}) and TMPDIR "
            f"{tmpdir.path} ({tmpdir.fstype} at {tmpdir.mountpoint}) are on different "
            "filesystems: pip's moves into its cache become copies, not atomic renames (two "
            "installs at once or a crash can leave a broken entry); keep both on one local disk",
            _moves("PIP_CACHE_DIR", tmp, "pip-cache") + _moves("TMPDIR", tmp, "tmp"),
        ))  # fmt: skip
    venv, uv = by.get("venv"), by.get("UV_CACHE_DIR")
    if venv and uv and venv.mountpoint and uv.mountpoint != venv.mountpoint:
        out.append(Finding(
            "info", "cache-apart",
            f"UV_CACHE_DIR {uv.path} is on {uv.mountpoint}, the venv {venv.path} on "
            f"{venv.mountpoint}: uv cannot hard-link across filesystems and copies every "
            "file of every install (UV_LINK_MODE=copy); a cache beside the venv links",
        ))  # fmt: skip
    return out


def lock_fallout(locs: Iterable[Place], target_locks: Mapping[str, str], target_mount: str,
                 tmp: str) -> list[Finding]:  # fmt: skip
    """What uv and pip do with their caches on a target whose locks fail."""
    by = _by_name(locs)
    flock = target_locks.get("flock", "not tested")
    out: list[Finding] = []
    if flock in ("works", "not tested") or not target_mount:
        return out
    uv, pip = by.get("UV_CACHE_DIR"), by.get("PIP_CACHE_DIR")
    if uv and uv.mountpoint == target_mount:
        failing = flock.startswith(("error", "timed out"))
        out.append(Finding(
            "bad" if failing else "warn", "locks",
            f"uv's cache {uv.path} is on the target, where flock {flock}: "
            + ("uv takes a flock on its cache for every install and stops when it fails"
               if failing else "two uv installs at once share the cache unprotected")
            + "; keep UV_CACHE_DIR on local disk (pack it onto the volume if it must persist)",
            _moves("UV_CACHE_DIR", tmp, "uv-cache"),
        ))  # fmt: skip
    if pip and pip.mountpoint == target_mount:
        out.append(Finding(
            "warn", "locks",
            f"pip's cache {pip.path} is on the target, where flock {flock}: pip's cache has "
            "no lock of its own, so fleets installing at once through it can corrupt entries",
            _moves("PIP_CACHE_DIR", tmp, "pip-cache"),
        ))  # fmt: skip
    return out


def bytecode_share(venv: Path, limit: int = WALK_LIMIT) -> tuple[int, int]:
    """(modules, modules without a ``__pycache__`` entry) under the venv's site-packages,
    looking at no more than ``limit`` entries."""
    modules = missing = seen = 0
    for lib in sorted(venv.glob("lib*/python3*/site-packages")):
        for root, dirs, names in os.walk(lib):
            seen += len(names) + len(dirs)
            if seen > limit:
                return modules, missing
            py = [n[:-3] for n in names if n.endswith(".py")]
            if not py:
                continue
            try:
                cached = {n.split(".", 1)[0] for n in os.listdir(os.path.join(root, "__pycache__"))}
            except OSError:
                cached = set()
            modules += len(py)
            missing += sum(1 for m in py if m not in cached)
    return modules, missing


def bytecode_missing(locs: Iterable[Place]) -> list[Finding]:
    """The active venv lives on a network or FUSE volume and most of it has no bytecode."""
    venv = _by_name(locs).get("venv")
    if venv is None or venv.kind not in ("network", "fuse"):
        return []
    modules, missing = bytecode_share(Path(venv.path))
    if not modules or missing / modules < NO_BYTECODE_SHARE:
        return []
    return [Finding(
        "warn", "bytecode",
        f"the venv {venv.path} on {venv.fstype} has no bytecode for {missing:,} of its "
        f"{modules:,} modules: each first import compiles and writes a .pyc there (round "
        "trips on the volume, paid again by every pod when the write is refused); compile "
        "once, or keep bytecode on local disk",
        (f"python -m compileall -q -j 0 {shell.quote(venv.path)}",
         "# or, without writing to the volume: export PYTHONPYCACHEPREFIX=/tmp/pycache",
         "# and at build time: export UV_COMPILE_BYTECODE=1 (uv) / pip compiles by default"),
    )]  # fmt: skip


#: the share of a venv's files its program's imports open at a cold start: torch-like's
#: recorded import set was 1,466 of 12,145 files here (docs/strategies.md, prewarm)
IMPORT_SHARE = 0.12


class Rates(Protocol):
    """What the check needs of a probed folder (:class:`iobench.predict.model.Costs`)."""

    @property
    def ms(self) -> dict[str, float]: ...
    @property
    def read_mbps(self) -> float | None: ...


def packed_would_start_faster(locs: Iterable[Place], target: Rates | None) -> list[Finding]:
    """The active venv lives on the probed target (a network or FUSE volume), and restoring
    one archive of it would take less than the round trips of a cold start's imports."""
    venv = _by_name(locs).get("venv")
    if venv is None or venv.kind not in ("network", "fuse") or target is None:
        return []
    per_file, rate = target.ms.get("open_read"), target.read_mbps
    files, size = tree_files(Path(venv.path))
    if not per_file or not rate or not files:
        return []
    cold = files * IMPORT_SHARE * per_file / 1000
    restore = size / 1e6 / rate
    if restore >= cold:
        return []
    return [Finding(
        "info", "strategy",
        f"the venv {venv.path} on {venv.fstype} ({files:,} files, {size / 1e9:.2f} GB): a cold "
        f"start whose imports open ~{IMPORT_SHARE:.0%} of them pays ~{cold:.1f} s in round "
        f"trips at the {per_file:.2f} ms per file probed on the target; one archive of it, "
        f"restored to local disk at the target's {rate:,.0f} MB/s, ~{restore:.1f} s. If its "
        "package list rarely changes, a packed venv would start faster (a packed cache "
        "survives a change: its install runs from local disk)",
        measure=(f"iobench run --target {shell.quote(venv.mountpoint)} --scenario lifecycle "
                 "--configs persistent-venv,packed-venv,packed-cache",
                 "  the venv kept on the volume, packed onto it, or its cache packed: each "
                 "first start and restart; --dry-run prints the plan and its disk first"),
    )]  # fmt: skip


def tree_files(path: Path, limit: int = WALK_LIMIT) -> tuple[int, int]:
    """(files, bytes) under ``path``, looking at no more than ``limit`` entries."""
    files = total = seen = 0
    for root, dirs, names in os.walk(path):
        seen += len(names) + len(dirs)
        if seen > limit:
            break
        for n in names:
            try:
                total += os.lstat(os.path.join(root, n)).st_size
            except OSError:
                continue
            files += 1
    return files, total


def venv_bytes(path: Path, limit: int = WALK_LIMIT) -> int | None:
    """Bytes under ``path`` (None past ``limit`` entries or when unreadable)."""
    total = seen = 0
    for root, dirs, names in os.walk(path):
        seen += len(names) + len(dirs)
        if seen > limit:
            return None
        for n in names:
            try:
                total += os.lstat(os.path.join(root, n)).st_size
            except OSError:
                continue
    return total


def shm_for_venv(shm: Mapping[str, Any] | None, locs: Iterable[Place]) -> list[Finding]:
    """/dev/shm smaller than the venv a tmpfs strategy would put there."""
    if not shm:
        return []
    venv = _by_name(locs).get("venv")
    size = venv_bytes(Path(venv.path)) if venv else None
    what = f"the active venv ({size / 1e9:.1f} GB)" if size else "a torch + CUDA venv (~5 GB)"
    need = size or TYPICAL_VENV_BYTES
    if shm["total_bytes"] >= need:
        return []
    return [Finding(
        "warn", "shm",
        f"{shm['path']} holds {shm['total_bytes'] / 2**20:,.0f} MiB, less than {what}: a "
        "strategy that puts the venv or TMPDIR on /dev/shm fails here with ENOSPC",
        (f"# docker run --shm-size={max(1, -(-need // 2**30))}g (compose: shm_size), or put "
         "the venv on the container's disk",),
    )]  # fmt: skip


def _cap_eff(status: str = "/proc/self/status") -> int | None:
    try:
        with open(status, encoding="ascii") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError):
        return None
    return None


def loop_mount(status: str = "/proc/self/status", dev: str = "/dev") -> tuple[dict[str, Any], list[Finding]]:  # fmt: skip
    """Whether packed-venv's squashfs can be loop-mounted here, and what the restore falls
    back to when it cannot."""
    caps = _cap_eff(status)
    admin = caps is not None and bool(caps >> CAP_SYS_ADMIN & 1)
    loop = os.path.exists(os.path.join(dev, "loop-control"))
    fuse = shutil.which("squashfuse") is not None and os.path.exists(os.path.join(dev, "fuse"))
    zstd = shutil.which("zstd") is not None
    info = {"cap_sys_admin": admin, "loop_control": loop, "squashfuse": fuse, "zstd": zstd}
    if admin and loop:
        return info, [Finding("ok", "loop-mount", "squashfs images can be loop-mounted here "
                              "(CAP_SYS_ADMIN, /dev/loop-control)")]  # fmt: skip
    why = "no CAP_SYS_ADMIN" if not admin else "no /dev/loop-control"
    if fuse:
        fallback = ("squashfuse mounts the image in user space (the restore iobench measures; "
                    "--pack-method squashfs-fuse,squashfs-extract,tar+zstd compares the ways)")  # fmt: skip
    elif zstd:
        fallback = "no squashfuse either: pack with tar+zstd (iobench run --pack-method tar+zstd)"
    else:
        fallback = "no squashfuse and no zstd: pack with plain tar (--pack-method tar)"
    return info, [Finding(
        "info", "loop-mount",
        f"mount -t squashfs -o loop is refused here ({why}, as in most unprivileged pods): "
        f"{fallback}",
        () if fuse else ("# apt-get install squashfuse (or pack with tar+zstd)",),
    )]  # fmt: skip


def ext4_without_journal(path: str | os.PathLike[str], sysfs: str = "/sys/fs/ext4") -> bool:
    """Whether ``path`` is on an ext4 filesystem mounted without a journal (the kernel names
    no journal thread for it: ``journal_task`` reads ``<none>``), where a create soon after
    many deletions is slower (doctor: the target's create cost moved)."""
    m = mount_of(os.path.realpath(path))
    if m is None or m.fstype != "ext4":
        return False
    device = os.path.basename(os.path.realpath(m.source))
    try:
        return Path(sysfs, device, "journal_task").read_text().strip() == "<none>"
    except OSError:
        return False


__all__ = [
    "bytecode_missing",
    "bytecode_share",
    "cache_apart",
    "ext4_without_journal",
    "lock_fallout",
    "loop_mount",
    "shm_for_venv",
    "venv_bytes",
]
