"""Start-up strategies: where a pod's venv lives between starts, and the steps that keep it.

A strategy is measured at two events. The **first start** finds only what persists on the
target (the network volume); the **restart** finds what the strategy persisted there, every
local role empty again, and caches cold (:mod:`iobench.trial.coldcache`).

=================  =====================================  ========================================
strategy           first start                            restart
=================  =====================================  ========================================
reinstall          install (as the config says)           install again (a cache kept on the
                                                          target is warm)
persistent-venv    install into a venv on the target      ready check only, from the target, cold
packed-venv        install on tmp, then **pack** the      **restore** the archive onto tmp, then
                   venv into one archive on the target    the ready check
copied-venv        install on tmp, then **copy-out** the  **copy-in** the tree from the target to
                   venv tree to the target                tmp, then the ready check
packed-cache       install on tmp with the cache on tmp,  **restore** the cache onto tmp, then
                   then **pack** the cache onto the       **install** from it (nothing to
                   target (tar or tar+zstd)               download), then the ready check
=================  =====================================  ========================================

Each step runs shell tools a start script would run (``tar``, ``zstd``, ``mksquashfs``,
``mount``, ``cp -a``), so what is measured is what iobench may later print; it returns a
:class:`StepResult` (method, tool, command, bytes, files, seconds).

Absolute paths: a venv holds its own absolute path (``pyvenv.cfg``'s ``home``/``command``,
the ``#!`` line of every ``bin/`` script, ``VIRTUAL_ENV`` in the activate scripts). A
packed or copied venv is therefore always restored to the **path it was built at**, which
is the path the start script uses; the pack records it in ``iobench-venv.json`` next to the
archive and :func:`restore` refuses any other path.

Safety: every path a step creates or deletes lies inside an iobench scratch folder
(:mod:`iobench.system.scratch`); a step refuses to write over anything that exists, and on
failure removes only what it made.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from iobench import files
from iobench.errors import SafetyError
from iobench.scenario.vocab import STRATEGIES, Strategy
from iobench.system.scratch import owning_scratch, remove
from iobench.trial import squashfs
from iobench.trial.manifest import MANIFEST, MANIFEST_SCHEMA, archive_name, manifest_problem
from iobench.trial.packmethods import (  # noqa: F401 (the strategies' words)
    AUTO_METHODS,
    StrategyError,
    _archive_kind,
    _pack_commands,
    _unpack_commands,
    available_methods,
    choose_method,
    compressor,
    squashfs_mounter,
)

#: Runs one command (argv); raises on failure. The trial passes its own, to sample it.
Runner = Callable[[Sequence[str]], None]


@dataclass(frozen=True)
class StepResult:
    """What one persist or restore step did, for the trial's row."""

    step: str  # "pack", "restore", "copy-out", "copy-in"
    method: str  # "tar", "tar+zstd", "squashfs" (a restore's: "squashfs-loop", ...), "copy"
    tool: (
        str  # what ran: "zstd binary", "zstandard module", "mount -t squashfs", "squashfuse", "cp"
    )
    command: str  # the shell line(s) a start script would use; "" when a Python module ran
    bytes: int  # bytes moved to or from the target (archive size, or tree size for copies)
    files: int  # entries (files and symlinks) in the venv tree
    seconds: float  # wall time of the step's commands (counting is outside it)
    path: str  # what the step made: the archive, the stored tree, or the restored venv
    mounted: bool = False  # squashfs restores mount the image at the venv: call release()
    relocated: int = 0  # files rewritten for a restore at another path (a fan-out's worker)

    def to_row(self, prefix: str) -> dict[str, Any]:
        """Columns for trials.csv, e.g. ``restore_method``, ``restore_s``."""
        d = asdict(self)
        out = {f"{prefix}_{k}": v for k, v in d.items() if k not in ("seconds", "step", "path")}
        out[f"{prefix}_s"] = self.seconds
        return out


def get(name: str) -> Strategy:
    """The strategy called ``name`` (raises StrategyError naming the known ones)."""
    try:
        return STRATEGIES[name]
    except KeyError:
        raise StrategyError(f"unknown strategy {name!r}; known: {', '.join(STRATEGIES)}") from None


# ---- helpers ----------------------------------------------------------------------------------


def run_checked(argv: Sequence[str]) -> None:
    """The default runner: run ``argv``; raise StrategyError with its output's tail on failure."""
    r = subprocess.run(list(argv), capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
        raise StrategyError(
            f"{argv[0]} failed (exit {r.returncode}): {' | '.join(tail) or 'no output'}"
        )


def tree_size(path: Path) -> tuple[int, int]:
    """(entries that are not folders, their bytes) under ``path``; symlinks are not followed."""
    files = size = 0
    for root, dirs, names in os.walk(path):
        for name in names + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            files += 1
            size += os.lstat(os.path.join(root, name)).st_size
    return files, size


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(path))


def _check_new(path: Path, what: str) -> Path:
    """``path`` must not exist and must lie inside an iobench scratch folder."""
    path = _absolute(path)
    if owning_scratch(path) is None:
        raise SafetyError(
            f"{what} {path} is not inside an iobench scratch folder; refusing to write there"
        )
    if os.path.lexists(path):
        raise SafetyError(f"{what} {path} already exists; refusing to write over it")
    return path


def _timed(commands: list[list[str]], run: Runner) -> float:
    t0 = time.monotonic()
    for argv in commands:
        # squashfuse leaves a daemon serving the mount, which a trial's phase would end as a
        # stray of its tree (the mount then dead): it runs outside the phases, timed all the same
        (run_checked if argv[0] == squashfs.TOOLS["fuse"] else run)(argv)
    return time.monotonic() - t0


def _shell(commands: list[list[str]]) -> str:
    if any(argv[:1] == [sys.executable] for argv in commands):
        return ""  # a Python helper ran, not a line a start script would hold
    return " && ".join(shlex.join(argv) for argv in commands)


def _write_manifest(store: Path, data: dict[str, Any]) -> None:
    data = {"schema": MANIFEST_SCHEMA, "created": time.time(), **data}
    files.write(store / MANIFEST, json.dumps(data, indent=1) + "\n")


def read_manifest(store: Path) -> dict[str, Any]:
    """What a persist step recorded in ``store`` (raises StrategyError when absent or unknown)."""
    path = Path(store) / MANIFEST
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise StrategyError(f"{path}: no readable venv manifest ({e})") from None
    if (schema := isinstance(data, dict) and data.get("schema")) != MANIFEST_SCHEMA:
        raise StrategyError(f"{path}: unknown manifest schema {schema!r}")
    if problem := manifest_problem(data):  # read back from the volume: untrusted
        raise StrategyError(f"{path}: not a manifest iobench wrote: {problem}")
    return data


def stored_bytes(store: Path) -> int:
    """Bytes the strategy keeps on the target (what storage is billed for)."""
    return int(read_manifest(store)["bytes"])


# ---- the steps ----------------------------------------------------------------------------------


def pack(
    venv: Path, store: Path, method: str = "auto", run: Runner = run_checked, kind: str = "venv"
) -> StepResult:
    """Pack the venv at ``venv`` into one archive in the new folder ``store`` (on the target);
    ``kind="cache"``: an installer's cache instead (packed-cache), never as squashfs."""
    venv = _absolute(venv)
    if kind == "venv" and not (venv / "pyvenv.cfg").is_file():
        raise StrategyError(f"{venv} is not a venv (no pyvenv.cfg)")
    if not venv.is_dir():
        raise StrategyError(f"{venv}: no {kind} folder to pack")
    asked = choose_method(method, writable=kind != "venv")
    method = _archive_kind(asked)
    store = _check_new(store, "store")
    archive = store / archive_name(method, kind)
    commands, tool = _pack_commands(method, venv, archive)
    files, tree_bytes = tree_size(venv)
    store.mkdir()
    try:
        seconds = _timed(commands, run)
        size = archive.stat().st_size
        _write_manifest(
            store,
            {
                "kind": "archive",
                "tree": kind,
                "method": method,
                "tool": tool,
                "venv": str(venv),
                "archive": archive.name,
                "bytes": size,
                "files": files,
                "tree_bytes": tree_bytes,
                **({"restore": asked.split("-", 1)[1]} if asked != method else {}),
            },
        )
    except BaseException:
        remove(store)
        raise
    return StepResult("pack", method, tool, _shell(commands), size, files, seconds, str(archive))


def unpack(
    store: Path, venv: Path, run: Runner = run_checked, elsewhere: bool = False
) -> StepResult:
    """Restore the venv packed in ``store`` at ``venv``, which must be the path it was built at
    (squashfs: mount the image there, read-only, or extract it, the way the pack asked;
    call :func:`release` when done).

    ``elsewhere``: a fan-out's worker that shares a host with the one that built the venv
    restores at its own path, of the same name, and :func:`relocate` rewrites the old path
    where it is written (timed with the restore; a read-only squashfs image keeps it)."""
    manifest = read_manifest(store)
    venv = _restore_target(manifest, venv, elsewhere)
    archive = _absolute(store) / manifest["archive"]
    way = str(manifest.get("restore", ""))
    commands, tool = _unpack_commands(manifest["method"], manifest["tool"], archive, venv, way)
    method = manifest["method"]
    if method == "squashfs":  # the way it ran: squashfs-loop, squashfs-fuse, squashfs-extract
        method = f"squashfs-{squashfs.way_of(tool)}"
    mounted = method in (f"squashfs-{w}" for w in squashfs.MOUNTS)
    try:
        t0 = time.monotonic()
        _timed(commands, run)
        moved = 0
        if str(venv) != manifest["venv"] and not mounted:
            moved = relocate(venv, manifest["venv"])
        seconds = time.monotonic() - t0
    except BaseException:
        _undo_restore(venv, mounted, tool)
        raise
    return StepResult(
        "restore",
        method,
        tool,
        _shell(commands),
        int(manifest["bytes"]),
        int(manifest["files"]),
        seconds,
        str(venv),
        mounted,
        moved,
    )


def relocate(venv: Path, old: str) -> int:
    """Rewrite ``old`` (where the venv was built) as ``venv`` in the files that hold the
    venv's absolute path: the ``#!`` lines of ``bin/`` scripts, the activate scripts and
    ``pyvenv.cfg`` (what ``venv-pack`` and ``conda-unpack`` do on unpacking). Returns how many
    files were rewritten. Bytecode keeps the old path in its tracebacks only."""
    if not os.path.isabs(old) or old == "/":  # "" would land between every byte
        raise StrategyError(f"relocate: {old!r} is not where a venv was made")
    old_b, new_b = old.encode(), str(venv).encode()
    moved = 0
    candidates = [venv / "pyvenv.cfg", *sorted((venv / "bin").iterdir())]
    for path in candidates:
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if old_b not in data or b"\0" in data[:4096]:  # binaries (python itself) are links
            continue
        mode = path.stat().st_mode
        path.write_bytes(data.replace(old_b, new_b))
        os.chmod(path, mode)
        moved += 1
    return moved


def copy_out(venv: Path, store: Path, run: Runner = run_checked) -> StepResult:
    """Copy the venv tree into the new folder ``store`` on the target (``cp -a``)."""
    venv = _absolute(venv)
    if not (venv / "pyvenv.cfg").is_file():
        raise StrategyError(f"{venv} is not a venv (no pyvenv.cfg)")
    store = _check_new(store, "store")
    files, size = tree_size(venv)
    commands = [["cp", "-a", str(venv), str(store / "venv")]]
    store.mkdir()
    try:
        seconds = _timed(commands, run)
        _write_manifest(
            store,
            {
                "kind": "tree",
                "method": "copy",
                "tool": "cp",
                "venv": str(venv),
                "archive": "venv",
                "bytes": size,
                "files": files,
                "tree_bytes": size,
            },
        )
    except BaseException:
        remove(store)
        raise
    return StepResult(
        "copy-out", "copy", "cp", _shell(commands), size, files, seconds, str(store / "venv")
    )


def copy_in(store: Path, venv: Path, run: Runner = run_checked) -> StepResult:
    """Copy the venv tree kept in ``store`` back to ``venv``, the path it was built at."""
    manifest = read_manifest(store)
    if manifest.get("kind") != "tree":
        raise StrategyError(f"{store} holds a packed venv, not a copied tree; use unpack")
    venv = _restore_target(manifest, venv)
    commands = [["cp", "-a", str(_absolute(store) / "venv"), str(venv)]]
    try:
        seconds = _timed(commands, run)
    except BaseException:
        _undo_restore(venv, False, "cp")
        raise
    return StepResult(
        "copy-in",
        "copy",
        "cp",
        _shell(commands),
        int(manifest["bytes"]),
        int(manifest["files"]),
        seconds,
        str(venv),
    )


def _restore_target(manifest: dict[str, Any], venv: Path, elsewhere: bool = False) -> Path:
    venv = _absolute(venv)
    if elsewhere and venv.name != Path(manifest["venv"]).name:
        raise StrategyError(
            f"restore as {Path(manifest['venv']).name!r} (the archive's folder name), not "
            f"{venv.name!r}"
        )
    if str(venv) != manifest["venv"] and not elsewhere:
        what = manifest.get("tree", "venv")
        raise StrategyError(
            f"restore to {manifest['venv']}, where the {what} was made, not {venv}"
            + (
                ": a venv holds its absolute path (pyvenv.cfg, bin/ shebangs, activate scripts)"
                if what == "venv"
                else ""
            )  # fmt: skip
        )
    if not venv.parent.is_dir():
        raise StrategyError(f"cannot restore to {venv}: {venv.parent} does not exist")
    return _check_new(venv, "venv")


def _undo_restore(venv: Path, mounted: bool, tool: str) -> None:
    """Remove what a failed restore made (unmount first if the image got mounted)."""
    if mounted:
        squashfs.unmount(venv, tool)
    if os.path.lexists(venv):
        remove(venv)


def release(result: StepResult) -> None:
    """Undo what a restore left mounted (squashfs), so the venv folder can be removed."""
    if result.mounted:
        squashfs.unmount(Path(result.path), result.tool)
        if os.path.ismount(result.path):
            raise StrategyError(f"could not unmount {result.path}; try `umount -l {result.path}`")
        os.rmdir(result.path)


# ---- a strategy's persist and restore, by name ---------------------------------------------------


def persist(
    name: str,
    venv: Path,
    store: Path,
    method: str = "auto",
    run: Runner = run_checked,
    cache: Path | None = None,
) -> StepResult | None:
    """The first start's step after the install: pack (the venv, or packed-cache's
    ``cache``) or copy-out; None for the others."""
    steps = get(name).first_start
    if "pack-cache" in steps:
        if cache is None:
            raise StrategyError(f"{name} packs the installer's cache, and this config has none")
        return pack(cache, store, "auto", run, kind="cache")
    if "pack" in steps:
        return pack(venv, store, method, run)
    if "copy-out" in steps:
        return copy_out(venv, store, run)
    return None


def restore(
    name: str,
    store: Path,
    venv: Path,
    run: Runner = run_checked,
    elsewhere: bool = False,
    cache: Path | None = None,
) -> StepResult | None:
    """The restart's step before the ready check: restore (the venv, or packed-cache's
    ``cache``, which must not exist yet) or copy-in; None for the others (``elsewhere``: see
    :func:`unpack`)."""
    steps = get(name).restart
    if "restore-cache" in steps:
        if cache is None:
            raise StrategyError(f"{name} restores the installer's cache, and this config has none")
        return unpack(store, cache, run)
    if "restore" in steps:
        return unpack(store, venv, run, elsewhere)
    if "copy-in" in steps:
        return copy_in(store, venv, run)
    return None
