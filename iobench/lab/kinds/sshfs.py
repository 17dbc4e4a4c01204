"""``--kind sshfs``: a real network filesystem, entirely inside this machine.

Method: iobench creates a network namespace and a veth pair on a private /30 in
10.203.0.0/16 (host side ``.1``, namespace side ``.2``), so the traffic only ever runs
between the host and that namespace. An sshd with a throwaway host key, started inside the
namespace, serves the backing folder over SFTP; sshfs mounts it on the host with a
throwaway client key. ``--mb-per-s`` becomes a ``tc tbf`` qdisc on both ends of the veth (one
per direction), so only this link is shaped. The backing folder is mounted *before* sshd
starts: ``ip netns exec`` gives sshd its own mount namespace, which does not see mounts
made later. ``-o no_contain_symlinks`` keeps absolute symlinks (venvs need them; Debian's
sshfs rejects them by default).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import time
from pathlib import Path

from iobench.errors import LabError
from iobench.lab import system
from iobench.lab.options import VolumeOptions
from iobench.lab.state import LabMount
from iobench.system import procfs

FSTYPE = "fuse.sshfs"
#: ssh's keepalive: seconds between probes, and unanswered probes before it gives up
KEEPALIVE_S = 5
KEEPALIVE_COUNT = 3
_NET = ipaddress.IPv4Network("10.203.0.0/16")


def tools() -> dict[str, str | None]:
    """Paths of the programs this kind needs (None where missing)."""
    names = ("sshfs", "sshd", "ssh", "ssh-keygen", "ip", "tc")
    return {n: system.which(n) for n in names}


def _used_subnets() -> set[ipaddress.IPv4Network]:
    """/30s already holding an address on this host (ours from earlier runs, or anyone's)."""
    used = set()
    proc = system.run(["ip", "-o", "-4", "addr", "show"], check=False)
    for line in proc.stdout.splitlines():
        parts = line.split()
        if "inet" in parts:
            iface = ipaddress.IPv4Interface(parts[parts.index("inet") + 1])
            if iface.ip in _NET:
                used.add(ipaddress.IPv4Network(f"{iface.ip}/30", strict=False))
    return used


def _pick_subnet() -> ipaddress.IPv4Network:
    used = _used_subnets()
    for subnet in _NET.subnets(new_prefix=30):
        if subnet not in used:
            return subnet
    raise LabError("no free /30 left in 10.203.0.0/16 for the sshfs namespace")


def start(lab: LabMount, options: VolumeOptions, timeout_s: float) -> None:
    """Create namespace, veth, sshd and the sshfs mount for ``lab`` (recording each in it)."""
    paths = tools()
    net = _network(lab, options)
    state = Path(lab.state_dir)
    config = _keys_and_config(
        state, net["host_ip"], net["ns_ip"], paths["ssh-keygen"] or "ssh-keygen"
    )
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation folder
    sshd = paths["sshd"] or "/usr/sbin/sshd"
    sshd_log = state / "sshd.log"
    sshd_pid = system.spawn(
        ["ip", "netns", "exec", net["netns"], sshd, "-D", "-e", "-f", str(config)], sshd_log
    )
    lab.net = {**net, "sshd_pid": sshd_pid}
    lab.save()
    _wait_listening(net["ns_ip"], sshd_pid, sshd_log, timeout_s)
    ssh_opts = [
        f"IdentityFile={state / 'client_key'}",
        "IdentitiesOnly=yes",
        f"UserKnownHostsFile={state / 'known_hosts'}",
        "StrictHostKeyChecking=yes",
        "BatchMode=yes",
        "ConnectTimeout=10",
        # a server that stops answering (stopped, its host gone) drops the connection after
        # 3 unanswered probes 5 s apart: sshfs then fails the requests waiting on it instead
        # of holding their callers in the kernel until the server returns
        f"ServerAliveInterval={KEEPALIVE_S}",
        f"ServerAliveCountMax={KEEPALIVE_COUNT}",
    ]
    cmd = [  # as root: lab_unavailable_reason() insists on it
        paths["sshfs"] or "sshfs",
        f"root@{net['ns_ip']}:{lab.backing}",
        lab.mountpoint,
        "-f",
        "-F",
        "/dev/null",
        "-o",
        ",".join(["no_contain_symlinks", "allow_other", "default_permissions", *ssh_opts]),
    ]
    lab.pid = system.spawn(cmd, lab.log_path)
    lab.save()
    system.wait_mounted(lab.mountpoint, FSTYPE, lab.pid, lab.log_path, timeout_s, "sshfs")


def _network(lab: LabMount, options: VolumeOptions) -> dict[str, str]:
    """The namespace and its veth pair on a free /30, shaped by ``tc tbf`` when capped;
    recorded in ``lab`` before each is made, so ``stop`` can undo a half-made one."""
    short = lab.id[-8:]  # the hash part: interface names may hold 15 characters
    host_ip, ns_ip = (str(a) for a in list(_pick_subnet().hosts())[:2])
    net = {
        "netns": f"iobench-{short}",
        "veth_host": f"ibl{short}h",
        "veth_ns": f"ibl{short}n",
        "host_ip": host_ip,
        "ns_ip": ns_ip,
    }
    lab.net = {**net, "sshd_pid": None}
    lab.save()
    ns, vh, vn = net["netns"], net["veth_host"], net["veth_ns"]
    system.run(["ip", "netns", "add", ns])
    system.run(["ip", "link", "add", vh, "type", "veth", "peer", "name", vn])
    system.run(["ip", "link", "set", vn, "netns", ns])
    system.run(["ip", "addr", "add", f"{host_ip}/30", "dev", vh])
    system.run(["ip", "link", "set", vh, "up"])
    system.run(["ip", "-n", ns, "addr", "add", f"{ns_ip}/30", "dev", vn])
    system.run(["ip", "-n", ns, "link", "set", vn, "up"])
    system.run(["ip", "-n", ns, "link", "set", "lo", "up"])
    if options.mb_per_s:
        rate_bit = int(options.mb_per_s * 8e6)  # MB/s -> bit/s for tc
        burst = max(64 * 1024, int(options.mb_per_s * 1e6 / 100))  # 10 ms worth, at least 64 KiB
        tbf = ["root", "tbf", "rate", f"{rate_bit}bit", "burst", str(burst), "latency", "50ms"]
        system.run(["tc", "qdisc", "add", "dev", vh, *tbf])
        tc = system.which("tc") or "tc"  # `ip netns exec` looks it up on PATH, not in sbin
        system.run(["ip", "netns", "exec", ns, tc, "qdisc", "add", "dev", vn, *tbf])
    return net


_SSHD_CONFIG = (
    "PidFile none",
    "PermitRootLogin prohibit-password",
    "PubkeyAuthentication yes",
    "PasswordAuthentication no",
    "KbdInteractiveAuthentication no",
    "UsePAM no",
    "StrictModes no",
    "UseDNS no",
    "AllowTcpForwarding no",
    "X11Forwarding no",
    "PrintMotd no",
    "LogLevel ERROR",
    "Subsystem sftp internal-sftp",
)


def _keys_and_config(state: Path, host_ip: str, ns_ip: str, keygen: str) -> Path:
    """Throwaway host and client keys, the files that pin them, and sshd's config."""
    host_key, client_key = state / "host_key", state / "client_key"
    for key in (host_key, client_key):
        system.run([keygen, "-q", "-t", "ed25519", "-N", "", "-C", "iobench-lab", "-f", str(key)])
    pub = client_key.with_suffix(".pub").read_text().strip()
    (state / "authorized_keys").write_text(f'restrict,from="{host_ip}" {pub}\n')
    host_pub = " ".join(host_key.with_suffix(".pub").read_text().split()[:2])
    (state / "known_hosts").write_text(f"{ns_ip} {host_pub}\n")
    config = state / "sshd_config"
    lines = [
        f"ListenAddress {ns_ip}:22",
        f"HostKey {host_key}",
        f"AuthorizedKeysFile {state / 'authorized_keys'}",
        *_SSHD_CONFIG,
        "",
    ]
    config.write_text("\n".join(lines))
    return config


def _wait_listening(ip: str, pid: int, log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((ip, 22), timeout=0.5):
                return
        except OSError:
            pass
        if not procfs.alive(pid):
            raise LabError(
                f"sshd exited in the lab namespace: {procfs.tail_file(str(log)) or 'no output'}"
            )
        if time.monotonic() > deadline:
            raise LabError(
                f"sshd in the lab namespace did not listen on {ip}:22 within {timeout_s:g} s"
            )
        time.sleep(0.05)


def stop(lab: LabMount) -> None:
    """End sshd and every process in the namespace, then delete the namespace and veth."""
    net = lab.net or {}
    ns = net.get("netns")
    errors = []
    sshd_pid = net.get("sshd_pid")
    if sshd_pid:
        try:
            system.end_process(sshd_pid, ["sshd", lab.state_dir], grace_s=0)
        except LabError as e:
            errors.append(str(e))
    if ns and _netns_exists(ns):
        pids = system.run(["ip", "netns", "pids", ns], check=False).stdout.split()
        for pid in pids:
            if pid.isdigit():
                try:
                    system.end_process(int(pid), [], grace_s=0)
                except LabError as e:
                    errors.append(str(e))
        system.run(["ip", "netns", "del", ns], check=False)
        if _netns_exists(ns):
            errors.append(f"could not delete network namespace {ns}")
    vh = net.get("veth_host")
    if vh and Path(f"/sys/class/net/{vh}").exists():
        system.run(["ip", "link", "del", vh], check=False)
        if Path(f"/sys/class/net/{vh}").exists():
            errors.append(f"could not delete interface {vh}")
    if errors:
        raise LabError("; ".join(errors))


def _netns_exists(ns: str) -> bool:
    return Path("/run/netns", ns).exists()


def problem(lab: LabMount) -> str | None:
    """What is wrong with a mounted sshfs volume's server side, or None."""
    net = lab.net or {}
    if not procfs.is_ours(net.get("sshd_pid"), ["sshd", lab.state_dir]):
        return "stale: sshd gone"
    if not _netns_exists(str(net.get("netns"))):
        return "stale: network namespace gone"
    return None


def unavailable() -> str | None:
    """What this machine lacks for --kind sshfs, or None."""
    missing = [name for name, path in tools().items() if path is None]
    if missing:
        return f"{', '.join(missing)} missing (apt-get install sshfs openssh-server openssh-client iproute2)"
    if not system.capability(system.CAP_NET_ADMIN):
        return "--kind sshfs needs CAP_NET_ADMIN for its network namespace (--cap-add NET_ADMIN)"
    return None


class SshfsKind:
    """sshfs against an sshd in a private network namespace, shaped only by its rate cap."""

    name = "sshfs"
    fstype = FSTYPE

    def unavailable(self) -> str | None:
        return unavailable()

    def start(self, lab: LabMount, options: VolumeOptions, timeout_s: float) -> None:
        start(lab, options, timeout_s)

    def needles(self, lab: LabMount) -> list[str]:
        return ["sshfs", lab.mountpoint]

    def stop(self, lab: LabMount) -> None:
        stop(lab)

    def problem(self, lab: LabMount) -> str | None:
        return problem(lab)


SSHFS = SshfsKind()
