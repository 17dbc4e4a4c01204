"""How a packed venv's squashfs image is restored at a restart, and what each way needs here.

=========  ==============================================  ==========================================
way        the restore (image on the target, venv on tmp)  needs
=========  ==============================================  ==========================================
loop       ``mount -t squashfs -o loop,ro,nosuid,nodev``   CAP_SYS_ADMIN (refused in most unprivileged
                                                           pods), ``/dev/loop-control``, the kernel's
                                                           squashfs, ``mount``
fuse       ``squashfuse -o nosuid,nodev``: the image       ``squashfuse``, ``fusermount3``,
           mounted in user space                           ``/dev/fuse``
extract    ``unsquashfs -q -n -d VENV IMAGE``: every file  ``unsquashfs`` (squashfs-tools); no mount,
           copied out, a writable venv                     like a tar restore
=========  ==============================================  ==========================================

A mount reads only the pages the ready check touches, from the image on the volume; the
venv stays read-only while mounted and must be unmounted (:func:`unmount`) before its folder
goes. ``--pack-method squashfs`` takes the first of loop and fuse this pod allows (the start
script falls back the same way, then to extract); ``squashfs-loop``, ``squashfs-fuse`` and
``squashfs-extract`` ask for one way, so that a run can compare them (docs/strategies.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import psutil

from iobench.lab.system import CAP_SYS_ADMIN, capability

#: the ways, in the order ``squashfs`` (auto) tries the mounts
WAYS = ("loop", "fuse", "extract")
#: what runs each way (a row's ``restore_tool``)
TOOLS = {"loop": "mount -t squashfs", "fuse": "squashfuse", "extract": "unsquashfs"}
#: the ways that leave the image mounted at the venv
MOUNTS = ("loop", "fuse")


def _kernel_has(fstype: str) -> bool:
    try:
        with open("/proc/filesystems", encoding="ascii") as f:
            return any(line.split()[-1] == fstype for line in f if line.strip())
    except OSError:
        return False


def missing(way: str) -> str | None:
    """What this pod lacks to restore an image ``way``, in words for an error line; None
    when nothing is missing."""
    if way == "loop":
        if not capability(CAP_SYS_ADMIN):
            return (
                "a loop mount needs CAP_SYS_ADMIN, which this process lacks (an unprivileged pod)"
            )
        if not os.path.exists("/dev/loop-control"):
            return "no /dev/loop-control: this container has no loop devices"
        if not _kernel_has("squashfs"):
            return "the kernel has no squashfs (not in /proc/filesystems)"
        return None if shutil.which("mount") else "no mount command"
    if way == "fuse":
        if not shutil.which("squashfuse"):
            return "squashfuse is not installed (apt-get install squashfuse)"
        if not shutil.which("fusermount3"):
            return "fusermount3 is not installed (apt-get install fuse3)"
        return None if os.path.exists("/dev/fuse") else "no /dev/fuse in this container"
    if way == "extract":
        return None if shutil.which("unsquashfs") else "unsquashfs is not installed (apt-get install squashfs-tools)"  # fmt: skip
    raise ValueError(f"unknown squashfs restore way {way!r}")


def auto() -> str | None:
    """The mount ``--pack-method squashfs`` uses here: loop, else fuse, else None."""
    return next((way for way in MOUNTS if missing(way) is None), None)


def restore_commands(way: str, image: Path, venv: Path) -> list[list[str]]:
    """The commands that restore ``image`` at ``venv`` (which must not exist yet)."""
    if way == "extract":
        return [["unsquashfs", "-q", "-n", "-d", str(venv), str(image)]]
    if way == "fuse":
        mount = ["squashfuse", "-o", "nosuid,nodev", str(image), str(venv)]
    else:
        mount = ["mount", "-t", "squashfs", "-o", "loop,ro,nosuid,nodev", str(image), str(venv)]
    return [["mkdir", str(venv)], mount]


def way_of(tool: str) -> str:
    """The way a restore's tool (``TOOLS``' values) stands for."""
    return next(way for way, t in TOOLS.items() if t == tool)


def unmount(venv: Path, tool: str) -> None:
    """Release an image mounted at ``venv`` (lazily, when the plain unmount is refused)."""
    if not os.path.ismount(venv):
        return
    argv = ["fusermount3", "-u", str(venv)] if tool == TOOLS["fuse"] else ["umount", str(venv)]
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        subprocess.run(["umount", "-l", str(venv)], capture_output=True)
    if tool == TOOLS["fuse"]:
        reap_daemons()


def reap_daemons(wait_s: float = 2.0) -> None:
    """Reap the squashfuse daemons that exited once unmounted: a run is the subreaper of
    the daemons its restores left (:func:`iobench.trial.process.set_subreaper`)."""
    ours = []
    for p in psutil.Process().children():
        try:
            if p.name() == "squashfuse":
                ours.append(p)
        except psutil.Error:
            continue
    psutil.wait_procs(ours, timeout=wait_s)


__all__ = [
    "MOUNTS",
    "TOOLS",
    "WAYS",
    "auto",
    "missing",
    "reap_daemons",
    "restore_commands",
    "unmount",
    "way_of",
]
