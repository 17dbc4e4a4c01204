"""The shared volume over the hosts' network, and the way into a host.

The storage namespace runs an sshd that serves the volume's folder over SFTP; each host
mounts it with sshfs, over its own veth, into its own mount namespace: its own client, with
its own cache of names, attributes and pages, as each pod's NFS or EFS client has. The
server sits in this machine's mount namespace (``nsenter --net`` only), so it sees the
volume as it is here (a lab volume's caps and delays are the server's) and holds no copy
of anyone's mounts. Keys are thrown away with the hosts; the server takes only the hosts'
subnet.

``enter`` is a POSIX shell script in the hosts' folder: Open MPI's rsh agent
(``--mca plm_rsh_agent``), and a login for a person (``enter HOST`` gives a shell there).
It is called as ``ssh`` is (options, then the host, then the command as words), enters the
host's namespaces with ``nsenter`` and runs the command through ``sh -c`` in a fresh
environment, as sshd would (``HOME``, ``USER``, ``LOGNAME``, ``SHELL`` and a system
``PATH``; nothing of the caller's).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from iobench.fleet import netns

#: ssh's keepalive: a server that stops answering drops the connection after 3 probes 5 s
#: apart, and sshfs fails the requests waiting on it instead of holding them for good
KEEPALIVE = ("ServerAliveInterval=5", "ServerAliveCountMax=3")
#: the PATH sshd gives a login (OpenSSH's default for root)
LOGIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
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
    "MaxStartups 1024",  # every host connects at once
    "MaxSessions 1024",
    "Subsystem sftp internal-sftp",
)


def keys(folder: Path, subnet: str, server_ip: str) -> Path:
    """Throwaway host and client keys, the files that pin them, and sshd's config (its path)."""
    keygen = netns.tool("ssh-keygen")
    host_key, client_key = folder / "host_key", folder / "client_key"
    for key in (host_key, client_key):
        netns.run([keygen, "-q", "-t", "ed25519", "-N", "", "-C", "iobench-hosts", "-f", str(key)])
    pub = client_key.with_suffix(".pub").read_text().strip()
    (folder / "authorized_keys").write_text(f'restrict,from="{subnet}" {pub}\n')
    host_pub = " ".join(host_key.with_suffix(".pub").read_text().split()[:2])
    (folder / "known_hosts").write_text(f"{server_ip} {host_pub}\n")
    config = folder / "sshd_config"
    lines = [f"ListenAddress {server_ip}:22", f"HostKey {host_key}",
             f"AuthorizedKeysFile {folder / 'authorized_keys'}", *_SSHD_CONFIG, ""]  # fmt: skip
    config.write_text("\n".join(lines))
    return config


def sshd_argv(storage_net: Path, config: Path) -> list[str]:
    """sshd in the storage namespace's network, this machine's mounts."""
    return netns.inside({"net": storage_net}, [netns.tool("sshd"), "-D", "-e", "-f", str(config)])


def sshfs_argv(
    files: dict[str, Path], folder: Path, server_ip: str, export: str, at: str, cache_s: float
) -> list[str]:
    """sshfs in a host's network and mounts: ``export`` on the server at ``at`` there, its
    caches trusted for ``cache_s`` seconds (the kernel's names and attributes, sshfs's
    own folder cache), as a lab volume's ``--cache-s``."""
    ssh = [
        f"IdentityFile={folder / 'client_key'}", "IdentitiesOnly=yes",
        f"UserKnownHostsFile={folder / 'known_hosts'}", "StrictHostKeyChecking=yes",
        "BatchMode=yes", "ConnectTimeout=10", *KEEPALIVE,
    ]  # fmt: skip
    cache = [f"entry_timeout={cache_s:g}", f"attr_timeout={cache_s:g}"]
    cache += [f"dcache_timeout={max(1, round(cache_s))}"] if cache_s > 0 else ["dir_cache=no"]
    opts = ["no_contain_symlinks", "allow_other", "default_permissions", *cache, *ssh]
    sshfs = netns.tool("sshfs")
    return netns.inside(
        {"net": files["net"], "mnt": files["mnt"]},
        [sshfs, f"root@{server_ip}:{export}", at, "-f", "-F", "/dev/null", "-o", ",".join(opts)],
    )


def setup_script(name: str, foreign: Sequence[str], at: str, hosts_file: Path) -> str:
    """What a new host does in its mount and UTS namespaces before anything runs there: its
    name; the mounts it lets go of (:func:`iobench.fleet.netns.foreign_mounts`); its own
    /tmp and /dev/shm; the folder its volume mounts on; its /etc/hosts."""
    q = shlex.quote
    lines = ["set -e", f"hostname {q(name)}"]
    # a mount gone since the list was read (another test's, or one whose folder was removed:
    # the kernel then detaches it here too) is let go of already; one still there must go
    lines += [f"umount -l {q(m)} || ! mountpoint -q {q(m)}" for m in foreign]
    lines += [
        "mount -t tmpfs -o mode=1777,nosuid,nodev iobench-host-tmp /tmp",
        "mount -t tmpfs -o mode=1777,nosuid,nodev iobench-host-shm /dev/shm",
        f"mkdir -p {q(at)}",
        f"mount --bind {q(str(hosts_file))} /etc/hosts",
    ]
    return "\n".join(lines) + "\n"


def agent_script(set_name: str, hosts: dict[str, dict[str, Path]]) -> str:
    """The rsh agent and login of a set of hosts (each host name with its namespace files)."""
    q = shlex.quote
    nsenter = netns.tool("nsenter")
    cases = []
    for host, files in hosts.items():
        flags = " ".join(
            f"{flag}={q(str(files[k]))}"
            for k, flag in (
                ("net", "--net"),
                ("mnt", "--mount"),
                ("uts", "--uts"),
                ("time", "--time"),
            )
            if k in files
        )
        cases.append(f"    {q(host)}) ns={q(flags)} ;;")
    return "\n".join([
        "#!/bin/sh",
        f"# iobench lab hosts {set_name}: enter one of its hosts as ssh would log into it.",
        "# Open MPI's rsh agent (--mca plm_rsh_agent THIS), or: THIS HOST [COMMAND...]",
        "while [ $# -gt 0 ]; do",
        '    case "$1" in -l|-p|-o|-i|-F) shift 2 ;; -*) shift ;; *) break ;; esac',
        "done",
        '[ $# -gt 0 ] || { echo "usage: $0 HOST [COMMAND...]" >&2; exit 255; }',
        'host=$1; shift',
        'case "$host" in',
        *cases,
        f'    *) echo "iobench lab hosts {set_name}: no host $host" >&2; exit 255 ;;',
        "esac",
        "shell=/bin/sh; [ -x /bin/bash ] && shell=/bin/bash",
        f"login='env -i HOME=/root USER=root LOGNAME=root SHELL=/bin/sh PATH={LOGIN_PATH}'",
        'if [ $# -eq 0 ]; then',
        f'    exec {nsenter} $ns -- $login $shell -l',
        "fi",
        f'exec {nsenter} $ns -- $login /bin/sh -c "cd; $*"',
        "",
    ])  # fmt: skip


__all__ = ["agent_script", "keys", "setup_script", "sshd_argv", "sshfs_argv"]
