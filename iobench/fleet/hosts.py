"""Hosts of their own on one machine: ``iobench lab hosts up N --volume DIR`` (docs/fleet.md).

Each emulated host is a set of namespaces (:mod:`iobench.fleet.netns`): its own address on
a private bridge, its own /tmp and /dev/shm, its own mount of the shared volume served over
that network from a storage namespace (:mod:`iobench.fleet.serve`: sshfs, so each host has
its own client cache), its own host name and /etc/hosts, and its own monotonic clock where
the kernel has time namespaces. Open MPI reaches them through its ordinary remote launcher:
a hostfile, and an rsh agent that enters a host as ssh would log into it, so the
``mpirun ... iobench run --fleet`` typed on real hosts runs here unchanged.

Everything made is recorded in ``/run/iobench-hosts/<name>/state.json`` before it is made,
so ``down`` undoes a set half made or left by a crash: every process in a host's
namespaces ended, its mounts gone with its mount namespace, its veth with its network
namespace, then the server, the bridge and the folder. Addresses: a free /24 of
10.204.0.0/16, this machine ``.1`` on the bridge (where ``mpirun`` listens), the server
``.2``, host *i* ``.(10+i)``.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from iobench import files
from iobench.errors import LabError, UsageError
from iobench.fleet import netns, serve
from iobench.system import procfs

ROOT = Path("/run/iobench-hosts")
#: each host is an sshfs client and an sshd session on this machine, and every rank of a
#: fleet on it a process: beyond this many, the machine measures itself, not the volume
MAX_HOSTS = 64
#: the hosts' monotonic clocks run this many seconds apart (host i: i days ahead), as the
#: clocks of machines booted at different times do
OFFSET_STEP_S = 86_400.0
SCHEMA = 1
_NET = ipaddress.IPv4Network("10.204.0.0/16")
_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")
_WAIT_S = 20.0


@dataclass
class Host:
    name: str
    ip: str
    veth: str
    folder: str
    offset_s: float
    sshfs_pid: int | None = None

    def files(self) -> dict[str, Path]:
        kinds = ("net", "mnt", "uts", "time") if netns.time_namespaces() else ("net", "mnt", "uts")
        return {k: Path(self.folder) / k for k in kinds}


@dataclass
class HostSet:
    """What ``up`` made, as recorded (enough for ``down`` to undo it)."""

    name: str
    folder: str
    subnet: str
    volume: str  # the folder served, here; each host mounts it at the same path
    cache_s: float
    bridge: str = ""
    server_ip: str = ""
    server_veth: str = ""
    sshd_pid: int | None = None
    hosts: list[Host] = field(default_factory=list)
    schema: int = SCHEMA

    @property
    def path(self) -> Path:
        return Path(self.folder)

    @property
    def agent(self) -> Path:
        return self.path / "enter"

    @property
    def hostfile(self) -> Path:
        return self.path / "hostfile"

    @property
    def server_net(self) -> Path:
        return self.path / "server-net"

    def save(self) -> None:
        files.write(self.path / "state.json", json.dumps(asdict(self), indent=1) + "\n")

    @classmethod
    def load(cls, folder: Path) -> HostSet:
        try:
            data = json.loads((folder / "state.json").read_text())
            hosts = [Host(**h) for h in data.pop("hosts")]
            hs = cls(**data, hosts=hosts)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise LabError(
                f"{folder}/state.json cannot be read ({exc}); remove it by hand"
            ) from None
        inside = all(Path(h.folder).parent == folder for h in hs.hosts)
        if hs.schema != SCHEMA or Path(hs.folder) != folder or not inside:
            raise LabError(f"{folder}/state.json is not a record of these hosts; remove it by hand")
        return hs

    def launch_line(self, n: int | None = None) -> str:
        """The mpirun options that launch on these hosts, one rank each."""
        root = " --allow-run-as-root" if os.geteuid() == 0 else ""
        return (f"mpirun{root} --hostfile {self.hostfile} --mca plm_rsh_agent {self.agent} "
                f"-n {n or len(self.hosts)}")  # fmt: skip


# ---- preflight ---------------------------------------------------------------------------


def unavailable() -> str | None:
    """Why hosts cannot be made here (one line, the next step in it), or None."""
    if os.geteuid() != 0:
        return "iobench lab hosts needs root: it makes namespaces, a bridge and mounts"
    for name in ("ip", "unshare", "nsenter", "sshd", "ssh", "ssh-keygen", "sshfs", "fusermount3"):
        try:
            netns.tool(name)
        except LabError as exc:
            return str(exc)
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing (run the container with --device /dev/fuse)"
    return None


def _check(name: str, n: int, volume: Path) -> None:
    if not _NAME.match(name):
        raise UsageError(f"--name {name!r}: a lower-case letter, then up to 11 letters or digits")
    if not 1 <= n <= MAX_HOSTS:
        raise UsageError(
            f"{n} hosts: from 1 to {MAX_HOSTS} (each is an sshfs client and an sshd session "
            "on this machine; past that it measures itself, not the volume)"
        )
    if not volume.is_dir():
        raise UsageError(f"--volume {volume}: not a folder")
    if str(volume.resolve()) == "/":
        raise UsageError("--volume /: give the volume's folder, not the root")
    if name == socket.gethostname() or any(
        f"{name}-{i}" == socket.gethostname() for i in range(1, n + 1)
    ):
        raise UsageError(f"--name {name}: this machine is called that already")


# ---- up ----------------------------------------------------------------------------------


def up(name: str, n: int, volume: Path, cache_s: float = 1.0) -> HostSet:
    """Make ``n`` hosts named ``<name>-1`` ... ``<name>-<n>``, each with ``volume`` mounted
    at its own path over the network; returns once every mount is live."""
    _check(name, n, volume)
    if reason := unavailable():
        raise LabError(reason)
    with _locked():
        folder = ROOT / name
        if folder.exists():
            old = _load_or_none(folder)
            if old is not None and not _problems(old):
                raise UsageError(
                    f"hosts {name!r} are up already ({len(old.hosts)}); "
                    f"`iobench lab hosts down {name}` first, or pick another --name"
                )
            if old is not None:  # a set left half made or by a crash: undo it, go on
                _teardown(old)
            else:
                _remove_folder(folder)
        folder.mkdir(mode=0o700)
        hs = HostSet(name, str(folder), str(_free_subnet()), str(volume.resolve()), cache_s)
        try:
            _make(hs, n)
        except BaseException:
            with contextlib.suppress(LabError, OSError):
                _teardown(hs)
            raise
    return hs


def _make(hs: HostSet, n: int) -> None:
    net = ipaddress.IPv4Network(hs.subnet)
    third = str(net.network_address).split(".")[2]
    hs.bridge, hs.server_veth = f"ibh{third}", f"ibh{third}s"
    hs.server_ip = str(net.network_address + 2)
    hs.hosts = [
        Host(f"{hs.name}-{i}", str(net.network_address + 10 + i), f"ibh{third}h{i}",
             str(hs.path / f"{hs.name}-{i}"), i * OFFSET_STEP_S if netns.time_namespaces() else 0.0)
        for i in range(1, n + 1)
    ]  # fmt: skip
    hs.save()  # before anything is made: `down` undoes what follows
    netns.bridge(hs.bridge, f"{net.network_address + 1}/{net.prefixlen}")
    _server(hs)
    (hs.path / "etc-hosts").write_text(_etc_hosts(hs))
    for host in hs.hosts:
        _host(hs, host)
        hs.save()
    for host in hs.hosts:
        _wait_mounted(hs, host)
    hs.hostfile.write_text("".join(f"{h.name} slots=1\n" for h in hs.hosts))
    hs.agent.write_text(serve.agent_script(hs.name, {h.name: h.files() for h in hs.hosts}))
    hs.agent.chmod(0o700)


def _server(hs: HostSet) -> None:
    """The storage namespace on the bridge, and sshd serving the volume from it."""
    netns.make({"net": hs.server_net})
    prefix = ipaddress.IPv4Network(hs.subnet).prefixlen
    netns.plug(hs.server_net, hs.server_veth, hs.bridge, f"{hs.server_ip}/{prefix}")
    config = serve.keys(hs.path, hs.subnet, hs.server_ip)
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation folder
    hs.sshd_pid = _spawn(serve.sshd_argv(hs.server_net, config), hs.path / "sshd.log")
    hs.save()
    deadline = time.monotonic() + _WAIT_S
    while True:  # listening: a connection from here, over the bridge
        with contextlib.suppress(OSError), socket.create_connection((hs.server_ip, 22), 0.5):
            return
        if not procfs.alive(hs.sshd_pid) or time.monotonic() > deadline:
            log = procfs.tail_file(hs.path / "sshd.log") or "no output"
            raise LabError(f"sshd in the hosts' storage namespace did not listen: {log}")
        time.sleep(0.05)


def _host(hs: HostSet, host: Host) -> None:
    """One host: its namespaces, its place on the bridge, its own mounts, and sshfs."""
    folder = Path(host.folder)
    folder.mkdir(mode=0o700)
    ns = host.files()
    netns.make(ns, host.offset_s)
    prefix = ipaddress.IPv4Network(hs.subnet).prefixlen
    netns.plug(ns["net"], host.veth, hs.bridge, f"{host.ip}/{prefix}")
    mounts = netns.run(netns.inside({"mnt": ns["mnt"]}, ["cat", "/proc/self/mountinfo"]))
    script = serve.setup_script(host.name, netns.foreign_mounts(mounts), hs.volume,
                                hs.path / "etc-hosts")  # fmt: skip
    netns.run(netns.inside({"mnt": ns["mnt"], "uts": ns["uts"]}, ["sh", "-c", script]))
    argv = serve.sshfs_argv(ns, hs.path, hs.server_ip, hs.volume, hs.volume, hs.cache_s)
    host.sshfs_pid = _spawn(argv, folder / "sshfs.log")


def _wait_mounted(hs: HostSet, host: Host) -> None:
    deadline = time.monotonic() + _WAIT_S
    while not _mounted(hs, host):
        if not procfs.alive(host.sshfs_pid) or time.monotonic() > deadline:
            log = procfs.tail_file(Path(host.folder) / "sshfs.log") or "no output from sshfs"
            raise LabError(f"{host.name} could not mount {hs.volume} over the network: {log}")
        time.sleep(0.05)


def _mounted(hs: HostSet, host: Host) -> bool:
    """Whether the host's sshfs is live on the volume's path (seen in its own namespace)."""
    if not procfs.alive(host.sshfs_pid):
        return False
    table = procfs.mounts(f"/proc/{host.sshfs_pid}/mountinfo")
    return any(m.mountpoint == hs.volume and m.fstype == "fuse.sshfs" for m in table)


def _etc_hosts(hs: HostSet) -> str:
    net = ipaddress.IPv4Network(hs.subnet)
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback",
             f"{net.network_address + 1}\t{socket.gethostname()}",
             f"{hs.server_ip}\t{hs.name}-storage"]  # fmt: skip
    return "\n".join(lines + [f"{h.ip}\t{h.name}" for h in hs.hosts]) + "\n"


def _spawn(argv: list[str], log: Path) -> int:
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    with open(fd, "ab") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True, cwd="/")  # fmt: skip
    _CHILDREN.append(proc)
    return proc.pid


#: the daemons this process started, reaped when they end (no zombies while it lives)
_CHILDREN: list[subprocess.Popen[bytes]] = []


def _free_subnet() -> ipaddress.IPv4Network:
    used = set()
    for line in netns.run(["ip", "-o", "-4", "addr", "show"]).splitlines():
        parts = line.split()
        if "inet" in parts:
            ip = ipaddress.IPv4Interface(parts[parts.index("inet") + 1]).ip
            if ip in _NET:
                used.add(ipaddress.IPv4Network(f"{ip}/24", strict=False))
    for old in _recorded():
        used.add(ipaddress.IPv4Network(old.subnet))
    for subnet in _NET.subnets(new_prefix=24):
        if subnet not in used:
            return subnet
    raise LabError("no free /24 left in 10.204.0.0/16 for the hosts' network")


# ---- down and status -----------------------------------------------------------------------


def down(name: str) -> HostSet:
    """End every process in the set's hosts and undo all it made; what it was."""
    folder = ROOT / name
    if not _NAME.match(name) or not folder.is_dir():
        raise UsageError(f"no hosts named {name!r} (iobench lab hosts status)")
    with _locked():
        if not folder.is_dir():  # another `down` took it meanwhile
            raise UsageError(f"no hosts named {name!r} (iobench lab hosts status)")
        hs = _load_or_none(folder)
        if hs is None:
            _remove_folder(folder)
            raise LabError(f"{folder} held no readable record; removed what was there")
        _teardown(hs)
        return hs


def _teardown(hs: HostSet) -> None:
    """Undo everything recorded in ``hs``, past failures; LabError naming what is left."""
    errors: list[str] = []

    def step(fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except (LabError, OSError) as exc:
            errors.append(str(exc))

    for host in hs.hosts:  # the volume first: what waits on it is released
        if netns.kept(host.files()["mnt"]) is not None:
            step(netns.run, netns.inside({"mnt": host.files()["mnt"]}, ["umount", "-l", hs.volume]),
                 20.0, False)  # fmt: skip
    spaces = [(h.files(), h.sshfs_pid) for h in hs.hosts] + [({"net": hs.server_net}, hs.sshd_pid)]
    step(_end_processes, spaces)  # all at once: each takes its time to exit
    for ns, _ in spaces:
        for path in ns.values():
            step(netns.release, path)
    for veth in [h.veth for h in hs.hosts] + [hs.server_veth]:
        if veth:
            step(netns.delete_link, veth)
    if hs.bridge and netns.link_exists(hs.bridge):
        step(netns.run, ["ip", "link", "del", hs.bridge])
    for child in _CHILDREN:
        child.poll()
    if errors:
        raise LabError(f"hosts {hs.name}: " + "; ".join(errors) + f" (record kept in {hs.folder})")
    _remove_folder(hs.path)


def _end_processes(spaces: list[tuple[dict[str, Path], int | None]]) -> None:
    """Every process in these namespaces (and the daemon recorded for each, while it is
    still in them) ended."""
    members: set[int] = set()
    for ns, pid in spaces:
        inodes = {k: netns.kept(p) for k, p in ns.items() if k in ("net", "mnt")}
        for kind, ino in inodes.items():
            if ino is not None:
                members.update(netns.pids_in(kind, ino))
        if pid is not None and procfs.alive(pid) and _in(pid, inodes):
            members.add(pid)
    if left := netns.end_all(members):
        raise LabError(f"processes {', '.join(map(str, left))} did not end after SIGKILL")


def _in(pid: int, inodes: dict[str, int | None]) -> bool:
    """Whether ``pid`` is still in one of these namespaces (a recorded pid may be reused)."""
    for kind, ino in inodes.items():
        with contextlib.suppress(OSError):
            if ino is not None and os.readlink(f"/proc/{pid}/ns/{kind}") == f"{kind}:[{ino}]":
                return True
    return False


def _problems(hs: HostSet) -> list[str]:
    """What is wrong with a recorded set ([] while every part lives)."""
    out = []
    if not procfs.alive(hs.sshd_pid):
        out.append("its server is gone")
    for h in hs.hosts:
        if not _mounted(hs, h):
            out.append(f"{h.name} lost its volume")
    return out


@dataclass(frozen=True)
class SetStatus:
    hosts: HostSet
    problems: list[str]


def status() -> list[SetStatus]:
    """Every recorded set of hosts, with what is wrong with it."""
    return [SetStatus(hs, _problems(hs)) for hs in _recorded()]


def find(name: str) -> HostSet | None:
    folder = ROOT / name
    return _load_or_none(folder) if _NAME.match(name) and folder.is_dir() else None


def _recorded() -> list[HostSet]:
    if not ROOT.is_dir():
        return []
    found = (_load_or_none(p) for p in sorted(ROOT.iterdir()) if p.is_dir())
    return [hs for hs in found if hs is not None]


def _load_or_none(folder: Path) -> HostSet | None:
    try:
        return HostSet.load(folder)
    except LabError:
        return None


def _remove_folder(folder: Path) -> None:
    """The set's folder: its own files only (namespace files released first)."""
    if not folder.is_dir():
        return
    for path in sorted(folder.rglob("*"), key=lambda p: -len(p.parts)):
        if netns.kept(path) is not None:
            raise LabError(f"{path} still keeps a namespace; run `iobench lab hosts down` again")
        path.rmdir() if path.is_dir() and not path.is_symlink() else path.unlink()
    folder.rmdir()


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """One ``up`` or ``down`` at a time on this machine (the subnets and names they pick)."""
    lock = ROOT / ".lock"
    while True:
        ROOT.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        with contextlib.suppress(FileNotFoundError):
            if os.stat(lock).st_ino == os.fstat(fd).st_ino:
                break
        os.close(fd)  # removed by the command that held it: lock the one there now
    try:
        yield
    finally:
        if not any(p.is_dir() for p in ROOT.iterdir()):  # nothing left: no trace either
            lock.unlink()
            with contextlib.suppress(OSError):
                ROOT.rmdir()
        os.close(fd)


__all__ = [
    "MAX_HOSTS",
    "Host",
    "HostSet",
    "SetStatus",
    "down",
    "find",
    "status",
    "unavailable",
    "up",
]
