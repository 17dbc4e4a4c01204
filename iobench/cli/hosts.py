"""``iobench lab hosts up|down|status``: hosts of their own on this machine, for fleet runs
(docs/fleet.md, "Hosts of their own on one machine").

Beside ``iobench lab up`` because it is lab equipment like the emulated volume: root only,
namespaces and mounts, for trying a fleet and for iobench's own tests; on real hosts nobody
needs it. ``up`` prints the ``mpirun`` options that launch on the hosts; handlers return an
exit code and leave errors to ``main``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from iobench.cli.common import positive_int


def register(lab_sub: Any) -> None:
    """Add ``hosts`` with ``up``, ``down`` and ``status`` to ``iobench lab``'s subcommands."""
    hosts = lab_sub.add_parser(
        "hosts",
        help="hosts of their own on this machine (namespaces), for fleet runs under mpirun",
        description="Make N emulated hosts: each a network namespace with its own address on "
        "a private bridge, its own /tmp and /dev/shm, its own mount of the shared volume over "
        "that network (sshfs from a storage namespace: its own client cache), its own host "
        "name and monotonic clock. mpirun reaches them through a hostfile and an rsh agent. "
        "Needs root.",
    )
    sub = hosts.add_subparsers(dest="hosts_command", metavar="{up,down,status}")
    sub.required = True
    p = sub.add_parser("up", help="make N hosts sharing one volume; print how to launch on them")
    p.add_argument("count", type=positive_int, metavar="N", help="how many hosts")
    p.add_argument(
        "--volume", required=True, type=Path, metavar="DIR",
        help="the folder every host mounts at the same path over the network (e.g. an "
        "`iobench lab up` volume: its delays and caps are the server's)",
    )  # fmt: skip
    p.add_argument(
        "--name", default="fleet",
        help="the set's name; its hosts are NAME-1 ... NAME-N (default fleet)",
    )  # fmt: skip
    p.add_argument(
        "--cache-s", type=float, default=1.0, metavar="S",
        help="how long each host's client trusts cached names and attributes (default 1, as "
        "a lab volume and an NFS client's attribute cache)",
    )  # fmt: skip
    p.set_defaults(func=handle_up)
    p = sub.add_parser("down", help="end everything in the hosts and remove them")
    p.add_argument("name", nargs="?", default="fleet", help="the set's name (default fleet)")
    p.set_defaults(func=handle_down)
    p = sub.add_parser("status", help="list the hosts iobench has made")
    p.set_defaults(func=handle_status)


def handle_up(args: argparse.Namespace) -> int:
    from iobench.errors import UsageError
    from iobench.fleet import hosts

    if not 0 <= args.cache_s <= 3600:
        raise UsageError(f"--cache-s must be from 0 to 3600, not {args.cache_s:g}")
    hs = hosts.up(args.name, args.count, args.volume, args.cache_s)
    first, last = hs.hosts[0], hs.hosts[-1]
    names = first.name if len(hs.hosts) == 1 else f"{first.name} ... {last.name}"
    print(f"{len(hs.hosts)} host(s) up: {names} ({first.ip}-{last.ip.rsplit('.', 1)[1]}), "
          f"each mounting {hs.volume} from {hs.server_ip} over sshfs")  # fmt: skip
    print(f"launch one rank on each: {hs.launch_line()} iobench run --fleet ...")
    print(f"a shell on one: {hs.agent} {first.name}")
    if os.path.realpath(sys.prefix).startswith("/tmp/"):
        print(f"warning: this Python lives in {sys.prefix}, under /tmp, which each host "
              "replaces with its own: ranks launched there cannot start it")  # fmt: skip
    print(f"take them down with: iobench lab hosts down {hs.name}")
    return 0


def handle_down(args: argparse.Namespace) -> int:
    from iobench.fleet import hosts

    hs = hosts.down(args.name)
    print(f"hosts {hs.name} down: {len(hs.hosts)} host(s), their processes, mounts, "
          "namespaces and network removed")  # fmt: skip
    return 0


def handle_status(args: argparse.Namespace) -> int:
    from iobench.fleet import hosts

    found = hosts.status()
    if not found:
        print("no iobench lab hosts")
    for s in found:
        hs = s.hosts
        health = "; ".join(s.problems) or "ok"
        print(f"{hs.name}  {len(hs.hosts)} host(s) on {hs.subnet}  volume {hs.volume}  {health}")
    return 0
