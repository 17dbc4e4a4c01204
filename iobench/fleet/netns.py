"""The namespaces an emulated host is made of, made and undone with the kernel's own tools.

A host is a network namespace (its own interfaces, address and loopback), a mount namespace
(its own /tmp and /dev/shm, its own mount of the shared volume), a UTS namespace (its own
host name) and, where the kernel has them (Linux 5.6+), a time namespace: its own
``CLOCK_MONOTONIC`` and ``CLOCK_BOOTTIME``. ``CLOCK_REALTIME`` is one per machine; no
namespace moves it. Each namespace is kept by a bind mount of its ``/proc/<pid>/ns`` file
(``unshare --net=FILE``), so no process has to hold it; ``nsenter`` enters it; it ends when
that file is unmounted and no process is left in it.

A new mount namespace starts as a copy of this one's mounts, and a copy holds what it
copies: another user's FUSE volume unmounted here would live on in it, its daemon waiting.
:func:`foreign_mounts` names what a host must let go of at once: FUSE and squashfs mounts,
namespace files, and the tmpfs mounts of tests and volumes (the system's own under /run,
/dev and /sys stay).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import psutil

from iobench.errors import LabError
from iobench.system import procfs

#: where root's tools live when PATH lacks them (cron, ``env -i PATH=/usr/bin:/bin``)
SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")
#: the Debian packages that hold each tool a host needs
PACKAGES = {
    "ip": "iproute2", "unshare": "util-linux", "nsenter": "util-linux",
    "sshd": "openssh-server", "ssh": "openssh-client", "ssh-keygen": "openssh-client",
    "sshfs": "sshfs", "fusermount3": "fuse3",
}  # fmt: skip
#: tmpfs mounts that belong to the system, not to a test or a volume: a host keeps them
_SYSTEM_TMPFS = ("/run", "/run/lock", "/dev", "/sys/fs/cgroup")


def tool(name: str) -> str:
    """The path of ``name`` on PATH or in the sbin folders; LabError naming its package."""
    found = shutil.which(name) or shutil.which(name, path=os.pathsep.join(SBIN))
    if found is None:
        raise LabError(f"{name} is missing (apt-get install {PACKAGES.get(name, name)})")
    return found


def run(argv: Sequence[str], timeout: float = 20.0, check: bool = True) -> str:
    """Run a short command (its program looked up with :func:`tool`); its output. On failure
    LabError with the command and its last line of output."""
    cmd = [tool(argv[0]), *argv[1:]]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)  # fmt: skip
    except subprocess.TimeoutExpired:
        raise LabError(f"{' '.join(argv)} did not finish within {timeout:g} s") from None
    if check and proc.returncode != 0:
        raise LabError(f"{' '.join(argv)} failed: {procfs.last_line(proc.stderr or proc.stdout)}")
    return proc.stdout


def inside(files: dict[str, Path], argv: Sequence[str]) -> list[str]:
    """``argv`` run inside the namespaces ``files`` keeps (kind -> file: net, mnt, uts, time)."""
    flags = {"net": "--net", "mnt": "--mount", "uts": "--uts", "time": "--time"}
    return [tool("nsenter"), *(f"{flags[k]}={p}" for k, p in files.items()), "--", *argv]


def time_namespaces() -> bool:
    """Whether this kernel has time namespaces (Linux 5.6 and later)."""
    return os.path.exists("/proc/self/ns/time")


def make(files: dict[str, Path], offset_s: float = 0.0) -> None:
    """New namespaces of the kinds in ``files``, each kept by a bind mount on its file (made
    empty first); a time namespace's clocks run ``offset_s`` (whole seconds) ahead of this one's."""
    flags = {"net": "--net", "mnt": "--mount", "uts": "--uts", "time": "--time"}
    for path in files.values():
        path.touch(0o600)
    argv = ["unshare", *(f"{flags[k]}={p}" for k, p in files.items())]
    if "time" in files:
        argv += ["--monotonic", f"{int(offset_s)}", "--boottime", f"{int(offset_s)}"]
    if "mnt" in files:
        argv += ["--propagation", "private"]  # its mounts never reach this namespace
    run([*argv, "true"])


def kept(path: Path) -> int | None:
    """The inode of the namespace ``path`` keeps, or None when it keeps none."""
    if procfs.mounted_at(str(path), "nsfs") is None:
        return None
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def pids_in(kind: str, inode: int) -> list[int]:
    """The processes in namespace ``inode`` of ``kind`` (net, mnt, ...)."""
    found = []
    want = f"{kind}:[{inode}]"
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if os.readlink(f"/proc/{entry.name}/ns/{kind}") == want:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def end_all(pids: Iterable[int], wait_s: float = 3.0) -> list[int]:
    """End these processes: SIGTERM (and SIGCONT, for a stopped one), then SIGKILL; the pids
    still there afterwards."""
    procs = []
    for pid in pids:
        try:
            procs.append(psutil.Process(pid))
        except psutil.Error:
            continue
    for sigs in ((signal.SIGTERM, signal.SIGCONT), (signal.SIGKILL,)):
        for p in procs:
            for sig in sigs:
                try:
                    p.send_signal(sig)
                except psutil.Error:
                    pass
        _, procs = psutil.wait_procs(procs, timeout=wait_s)
        procs = [p for p in procs if procfs.alive(p.pid)]  # a zombie has ended
        if not procs:
            return []
    return [p.pid for p in procs]


def release(path: Path) -> None:
    """Let the namespace ``path`` keeps go (its file removed); it ends with its last process."""
    if kept(path) is not None:
        run(["umount", str(path)], check=False)
        if kept(path) is not None:
            run(["umount", "-l", str(path)])
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def foreign_mounts(mountinfo: str, own: Sequence[str] = ("/tmp", "/dev/shm")) -> list[str]:
    """The mount points (deepest first) a new host lets go of: FUSE and squashfs mounts,
    namespace files, tmpfs mounts beyond the system's, and whatever lies on ``own`` (the
    folders the host mounts afresh)."""
    out = []
    for m in procfs.parse_mountinfo(mountinfo):
        target, fs = m.mountpoint, m.fstype
        under_own = any(target == o or target.startswith(o + "/") for o in own)
        if (
            under_own
            or fs.startswith("fuse")
            or fs in ("nsfs", "squashfs")
            or (
                fs == "tmpfs"
                and target not in _SYSTEM_TMPFS
                and not target.startswith("/run/user/")
            )
        ):
            out.append(target)
    return sorted(out, key=lambda t: (-t.count("/"), t))  # stacked ones: each


def link_exists(name: str) -> bool:
    return os.path.exists(f"/sys/class/net/{name}")


def delete_link(name: str, wait_s: float = 5.0) -> None:
    """Remove interface ``name`` here (a veth's peer goes with it); wait for it to be gone
    (a namespace's end removes its interfaces a moment later)."""
    deadline = time.monotonic() + wait_s
    while link_exists(name) and time.monotonic() < deadline:
        time.sleep(0.05)
    if link_exists(name):
        run(["ip", "link", "del", name], check=False)
    if link_exists(name):
        raise LabError(f"could not delete interface {name}")


def bridge(name: str, cidr: str) -> None:
    """A bridge here holding the address ``cidr`` (this machine's place on the hosts' network)."""
    run(["ip", "link", "add", name, "type", "bridge"])
    run(["ip", "addr", "add", cidr, "dev", name])
    run(["ip", "link", "set", name, "up"])


def plug(net: Path, veth: str, bridge_name: str, cidr: str) -> None:
    """A veth pair from the bridge into the namespace ``net`` (its end named eth0, holding
    ``cidr``), and the namespace's loopback up (a host's own 127.0.0.1: its package index)."""
    run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", str(net)])
    run(["ip", "link", "set", veth, "master", bridge_name, "up"])
    files = {"net": net}
    run(inside(files, ["ip", "addr", "add", cidr, "dev", "eth0"]))
    run(inside(files, ["ip", "link", "set", "eth0", "up"]))
    run(inside(files, ["ip", "link", "set", "lo", "up"]))


__all__ = [
    "bridge", "delete_link", "end_all", "foreign_mounts", "inside", "kept", "link_exists",
    "make", "pids_in", "plug", "release", "run", "time_namespaces", "tool",
]  # fmt: skip
