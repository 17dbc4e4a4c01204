"""Pack methods: which ones this machine can run (``auto`` picks the best), and the shell
commands a pack and its restore are, as a start script would run them
(:mod:`iobench.trial.strategies` times them)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

from iobench.errors import IOBenchError
from iobench.scenario.vocab import PACK_METHODS
from iobench.trial import squashfs

AUTO_METHODS = ("squashfs", "tar+zstd", "tar")  # "auto" takes the first one available


class StrategyError(IOBenchError):
    """A strategy step could not run (missing tool, wrong path, failed command)."""


# ---- what this machine can do ---------------------------------------------------------------


def _zstd_module() -> bool:
    return importlib.util.find_spec("zstandard") is not None


def compressor() -> str | None:
    """How tar+zstd would compress here: "zstd binary", "zstandard module", or None."""
    if shutil.which("zstd"):
        return "zstd binary"
    if _zstd_module():
        return "zstandard module"
    return None


def squashfs_mounter() -> str | None:
    """How ``--pack-method squashfs`` mounts its image here: "mount -t squashfs" (a loop
    mount: CAP_SYS_ADMIN), "squashfuse", or None (:mod:`iobench.trial.squashfs`)."""
    way = squashfs.auto()
    return squashfs.TOOLS[way] if way else None


def available_methods() -> list[str]:
    """Pack methods ``auto`` chooses from that can run here, best first (the explicit
    squashfs ways are checked by :func:`choose_method`)."""
    found = []
    if shutil.which("mksquashfs") and squashfs_mounter():
        found.append("squashfs")
    if compressor():
        found.append("tar+zstd")
    if shutil.which("tar"):
        found.append("tar")
    return found


def choose_method(method: str = "auto", writable: bool = False) -> str:
    """``auto``: the best available pack method; else check that ``method`` can run here.
    ``writable``: what is restored is written to (an installer's cache), so not squashfs,
    whose image mounts read-only."""
    found = [m for m in available_methods() if not (writable and m == "squashfs")]
    if writable and method.startswith("squashfs"):
        raise StrategyError("a cache is written to when restored: pack it with tar or tar+zstd")
    if method.startswith("squashfs-") and method in PACK_METHODS:
        lacks = None if shutil.which("mksquashfs") else "mksquashfs is not installed"
        lacks = lacks or squashfs.missing(method.split("-", 1)[1])
        if lacks is not None:
            raise StrategyError(f"pack method {method} cannot run here: {lacks}")
        return method
    if method == "auto":
        if not found:
            raise StrategyError("cannot pack a venv here: tar is missing")
        return found[0]
    if method not in AUTO_METHODS:
        raise StrategyError(
            f"unknown pack method {method!r}; known: auto, {', '.join(PACK_METHODS)}"
        )
    if method not in found:
        need = {
            "squashfs": "mksquashfs, and squashfuse or CAP_SYS_ADMIN to mount",
            "tar+zstd": "zstd or the zstandard module",
        }
        raise StrategyError(
            f"pack method {method} cannot run here (needs {need.get(method, 'tar')})"
        )
    return method


@lru_cache(maxsize=1)
def _squashfs_comp() -> list[str]:
    """zstd at level 3 when this mksquashfs has it (fast to decompress, and to compress: its
    default level 15 took 339 s for torch's 876 MB on a loaded 2-core VM, level 3 took 6 s,
    like ``tar -I zstd``), else mksquashfs's default."""
    r = subprocess.run(["mksquashfs", "-help"], capture_output=True, text=True)
    if "zstd" in (r.stdout + r.stderr):
        return ["-comp", "zstd", "-Xcompression-level", "3"]
    return []


def _archive_kind(method: str) -> str:
    """What a pack method makes: ``squashfs-fuse`` packs the same image as ``squashfs``."""
    return "squashfs" if method.startswith("squashfs") else method


def _pack_commands(method: str, venv: Path, archive: Path) -> tuple[list[list[str]], str]:
    parent, name = str(venv.parent), venv.name
    if method == "squashfs":
        argv = [
            "mksquashfs",
            str(venv),
            str(archive),
            "-noappend",
            "-quiet",
            "-no-progress",
            *_squashfs_comp(),
        ]
        return [argv], "mksquashfs"
    if method == "tar":
        return [["tar", "-C", parent, "-cf", str(archive), name]], "tar"
    tool = compressor()
    if tool == "zstd binary":
        return [["tar", "-C", parent, "-I", "zstd -T0", "-cf", str(archive), name]], tool
    helper = [
        sys.executable,
        "-m",
        "iobench.trial.zstdtar",
        "zstd-pack",
        parent,
        name,
        str(archive),
    ]
    return [helper], str(tool)


def _unpack_commands(
    method: str, tool: str, archive: Path, venv: Path, way: str = ""
) -> tuple[list[list[str]], str]:
    """The restore's commands and what runs them; a squashfs image ``way`` (``loop``,
    ``fuse``, ``extract``; "": the mount this pod allows, :func:`squashfs_mounter`)."""
    parent = str(venv.parent)
    if method == "squashfs":
        if way and squashfs.missing(way):
            raise StrategyError(f"cannot restore squashfs-{way} here: {squashfs.missing(way)}")
        mounter = squashfs.TOOLS[way] if way else squashfs_mounter()
        if mounter is None:
            raise StrategyError(
                "cannot mount the squashfs image here (needs CAP_SYS_ADMIN or squashfuse)"
            )
        return squashfs.restore_commands(squashfs.way_of(mounter), archive, venv), mounter
    if method == "tar":
        return [["tar", "-C", parent, "-xf", str(archive)]], "tar"
    if compressor() == "zstd binary":
        return [["tar", "-C", parent, "-I", "zstd -T0", "-xf", str(archive)]], "zstd binary"
    if not _zstd_module():
        raise StrategyError(f"{archive} is zstd-compressed; install zstd or the zstandard module")
    return [
        [sys.executable, "-m", "iobench.trial.zstdtar", "zstd-unpack", str(archive), parent]
    ], "zstandard module"
