"""``iobench lab up|down|status``: the command line of the emulated slow volume.

``register(sub)`` adds the ``lab`` subcommand to the core's argparse subparsers. Every
number is validated (:meth:`VolumeOptions.validate`, raising ``UsageError``) before
anything is mounted; handlers return an exit code and leave errors to ``main``.
"""

from __future__ import annotations

import argparse
import textwrap
from typing import TYPE_CHECKING, Any

from iobench.cli.common import LaterChoices
from iobench.cli.hosts import register as add_hosts
from iobench.errors import UsageError

if TYPE_CHECKING:
    from iobench.lab.options import VolumeOptions

if TYPE_CHECKING:  # the handlers import it: `iobench --help` must not pay for it
    from iobench.lab import manage
    from iobench.lab.delivered import Delivery


def register(sub: Any) -> None:
    """Add ``lab`` with its ``up``, ``down`` and ``status`` subcommands to ``sub``."""
    lab = sub.add_parser(
        "lab",
        help="an emulated slow network volume (FUSE with added latency, or sshfs)",
        description="Mount a volume that is slow the way network volumes are slow, to "
        "reproduce slow installs and to test against. Needs root and /dev/fuse.",
    )
    lab_sub = lab.add_subparsers(dest="lab_command", metavar="{up,down,status,flush,presets,hosts}")
    lab_sub.required = True
    _add_up(lab_sub.add_parser("up", help="mount a slow volume and return once it is live"))

    p = lab_sub.add_parser("down", help="unmount a slow volume and end its daemon")
    p.add_argument("mountpoint")
    p.set_defaults(func=handle_down)

    p = lab_sub.add_parser("status", help="list the volumes iobench has mounted")
    p.set_defaults(func=handle_status)

    p = lab_sub.add_parser(
        "flush", help="make a volume cold: the kernel forgets its cached names and attributes"
    )
    p.add_argument("mountpoint")
    p.set_defaults(func=handle_flush)

    p = lab_sub.add_parser(
        "presets", help="the storage people rent, by name: their figures, source and date"
    )
    p.set_defaults(func=handle_presets)
    add_hosts(lab_sub)


def _add_up(p: argparse.ArgumentParser) -> None:
    """The options of ``lab up``: the kind, the backing folder, and every delay and cap."""
    p.add_argument("mountpoint", help="empty folder to mount on (created if missing)")
    p.add_argument(
        "--kind",
        choices=LaterChoices(lambda: _options().KINDS),
        metavar="KIND",
        default="fuse",
        help="fuse: Python FUSE passthrough with delays (default); "
        "sshfs: sshd in a private network namespace",
    )
    p.add_argument(
        "--backing",
        metavar="DIR",
        help="folder holding the files (default: a tmpfs the lab mounts itself)",
    )
    presets = p.add_argument_group("presets (iobench lab presets)")
    presets.add_argument(
        "--preset",
        metavar="NAME",
        help="a named volume: efs-bursting, efs-provisioned, efs-elastic, runpod-volume, "
        "nfs-lan, local-nvme; flags given beside it override its values",
    )
    presets.add_argument(
        "--size-gib", type=float, metavar="G",
        help="efs-bursting: the stored size its baseline (50 KiB/s per GiB) and credit cap follow "
        "(default 500)",
    )  # fmt: skip
    presets.add_argument(
        "--credits-gib", type=float, metavar="C",
        help="efs-bursting: the starting credit balance (default: a new file system's, 2.1 TiB)",
    )  # fmt: skip
    presets.add_argument(
        "--throughput-mib-s", type=float, metavar="T",
        help="efs-provisioned: the throughput paid for, MiB/s (default 100)",
    )  # fmt: skip
    _add_delays(p)
    p.add_argument(
        "--stats",
        metavar="FILE",
        help="write operation counts, delays and the credit balance over time as JSON on unmount",
    )
    p.set_defaults(func=handle_up)


def _add_delays(p: argparse.ArgumentParser) -> None:
    """The volume's delays, caps, burst credits and kernel cache time."""
    p.add_argument(
        "--latency-ms",
        type=float,
        metavar="L",
        help="added to every metadata operation (lookup, create, open, ...); default 0",
    )
    p.add_argument(
        "--data-latency-ms",
        type=float,
        metavar="L",
        help="added to every read and write call; default 0",
    )
    p.add_argument(
        "--write-latency-ms",
        type=float,
        metavar="L",
        help="added to every write call instead (default: --data-latency-ms)",
    )
    p.add_argument("--iops", type=float, metavar="N", help="token bucket: operations per second")
    p.add_argument(
        "--mb-per-s", type=float, metavar="M", help="bandwidth cap for reads and writes, MB/s"
    )
    p.add_argument(
        "--burst-mb-per-s",
        type=float,
        metavar="B",
        help="EFS-Bursting-like: rate while credits last, MB/s (needs --mb-per-s as the baseline)",
    )
    p.add_argument(
        "--burst-credits-mb",
        type=float,
        metavar="C",
        help="credits: MB moved at the burst rate before falling to --mb-per-s",
    )
    # the spellings before the unit was named (the same MB/s), kept working but not shown
    p.add_argument("--mbps", dest="mb_per_s", type=float, help=argparse.SUPPRESS)
    p.add_argument("--burst-mbps", dest="burst_mb_per_s", type=float, help=argparse.SUPPRESS)
    p.add_argument(
        "--cache-s",
        type=float,
        metavar="S",
        help="let the kernel trust looked-up names and attributes for S seconds "
        "(default 1, libfuse's own, near an NFS client's attribute cache; "
        "0: every path lookup is a round trip, like NFS with noac)",
    )


#: the flags that set a VolumeOptions field (given beside --preset, they override it)
_FIELD_FLAGS = {
    "latency_ms": "--latency-ms",
    "data_latency_ms": "--data-latency-ms",
    "write_latency_ms": "--write-latency-ms",
    "iops": "--iops",
    "mb_per_s": "--mb-per-s",
    "burst_mb_per_s": "--burst-mb-per-s",
    "burst_credits_mb": "--burst-credits-mb",
    "cache_s": "--cache-s",
}


def options_from_args(args: argparse.Namespace) -> tuple[VolumeOptions, list[str]]:
    """The validated options of ``lab up`` (raises UsageError on a bad number), and which of
    a preset's values the flags given beside it replaced."""
    from dataclasses import replace

    given = {f: getattr(args, f) for f in _FIELD_FLAGS if getattr(args, f, None) is not None}
    name = getattr(args, "preset", None)
    if name:
        from iobench.lab.presets import preset_options

        base = preset_options(name, args.size_gib, args.credits_gib, args.throughput_mib_s)
    else:
        for flag in ("size_gib", "credits_gib", "throughput_mib_s"):
            if getattr(args, flag, None) is not None:
                raise UsageError(f"--{flag.replace('_', '-')} needs --preset")
        base = _options().VolumeOptions()
    changed = [
        f"{_FIELD_FLAGS[f]} {v:g} instead of {getattr(base, f) if getattr(base, f) is not None else 'none'}"
        for f, v in given.items()
        if name and getattr(base, f) != v
    ]
    return replace(base, **given).validate(args.kind), changed


def handle_up(args: argparse.Namespace) -> int:
    from iobench.lab import manage

    options, changed = options_from_args(args)
    if changed:
        print(f"preset {args.preset} with {'; '.join(changed)}")
    lab = manage.up(args.mountpoint, args.kind, options, backing=args.backing, stats=args.stats)
    backing = "tmpfs" if lab.backing_tmpfs else lab.backing
    print(
        f"mounted {lab.mountpoint} ({lab.kind}, {options.describe()}, backing {backing}, pid {lab.pid})"
    )
    print(f"unmount with: iobench lab down {lab.mountpoint}")
    return 0


def handle_down(args: argparse.Namespace) -> int:
    from iobench.lab import manage

    stats = manage.down(args.mountpoint)
    line = f"unmounted {manage.mount_path(args.mountpoint)}"
    if stats:
        line += (
            f" ({stats.get('total_ops', 0)} operations, {stats.get('delayed_s', 0):.1f} s delayed)"
        )
    print(line)
    return 0


def handle_status(args: argparse.Namespace) -> int:
    from iobench.lab import manage

    for line in status_lines(manage.status()):
        print(line)
    return 0


def handle_flush(args: argparse.Namespace) -> int:
    """``iobench lab flush MOUNT``: one line saying what was dropped."""
    from iobench.lab.flush import flush
    from iobench.lab.state import mount_path

    data = flush(args.mountpoint)
    print(
        f"flushed {mount_path(args.mountpoint)}: the kernel forgot {data['dropped']} of "
        f"{data['root_names']} top-level names and everything cached below them "
        f"({data['method']}, {data['seconds'] * 1000:.1f} ms); file data is re-read at every "
        "open; the daemon keeps no cache"
    )
    return 0


def handle_presets(args: argparse.Namespace) -> int:
    """``iobench lab presets``: a table of the named volumes, then their notes and sources."""
    from iobench.lab.presets import PRESETS, preset_rows

    rows = preset_rows()
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    print("MB/s: 10^6 bytes/s (1 MiB/s = 1.049 MB/s); *: an estimate (docs/lab.md)")
    for p in PRESETS.values():
        print(textwrap.fill(f"{p.name}: {p.product}; {p.note}", 78, subsequent_indent="  "))
        source = f"source: {p.source} (as of {p.date})"
        print(textwrap.fill(source, 78, initial_indent="  ", subsequent_indent="  "))
    print("mount one: iobench lab up DIR --preset NAME")
    return 0


def status_lines(entries: list[manage.LabStatus]) -> list[str]:
    """One line per volume: mountpoint, kind, options, pid, health and counters; under it,
    what it delivered since mounting against what its options allow."""
    from iobench.lab.delivered import deliveries

    if not entries:
        return ["no iobench lab volumes"]
    lines = []
    for e in entries:
        opts = _options().VolumeOptions.from_dict(e.options).describe() if e.options else "?"
        health = e.problem or "ok"
        line = f"{e.mountpoint}  {e.kind}  {opts}  pid {e.pid or '-'}  {health}"
        if e.stats:
            line += (
                f"  {e.stats.get('total_ops', 0)} ops, {e.stats.get('delayed_s', 0):.1f} s delayed"
            )
        lines.append(line)
        preset = str(e.options.get("preset") or "")
        for d in deliveries(e.stats or {}).values():
            if d.mb_per_s is not None:
                lines.append(f"  {d.direction}s: {delivery_words(d, preset)}")
    return lines


def delivery_words(d: Delivery, preset: str) -> str:
    """``812 MB/s while busy (the lab gave 812 of the preset's 1,573 MB/s)``, or what its
    options allow, or why nothing is judged."""
    from iobench.lab.delivered import MIN_BYTES
    from iobench.units import fmt_bytes, fmt_mbps, lab_gave

    rate = f"{fmt_mbps(d.mb_per_s)} while busy"
    allowed = d.allowed_mb_per_s
    if short := lab_gave(d.mb_per_s, allowed, preset):
        return f"{rate} ({short})"
    if allowed is not None:
        return f"{rate}, of {fmt_mbps(allowed)} its options allow"
    if d.pipe_s is None:
        return f"{rate} (no rate limit to hold it to)"
    return f"{rate} ({fmt_bytes(d.bytes)} moved: under {fmt_bytes(MIN_BYTES)}, too little to judge)"


def _options() -> Any:
    import iobench.lab.options as options  # not for --help

    return options
