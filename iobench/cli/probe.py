"""`iobench probe`: time-bounded storage micro-probes of folders, as text or JSON."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from iobench.cli.common import positive_int
from iobench.errors import UsageError

if TYPE_CHECKING:  # imported by the handler: `iobench --help` must not pay for it
    from iobench.predict.latency import Latency
    from iobench.predict.probe import ProbeResult
    from iobench.predict.tree import TreeResult

#: the latency percentiles printed (iobench.predict.latency.PERCENTILES, without its import)
PERCENTILES = (50.0, 95.0, 99.0, 99.9)


# ---------------------------------------------------------------- probe
def _add_probe(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "probe",
        help="storage probe of folders: ms per create/stat/open/rename/unlink/mkdir, fsync, MB/s, locks",
        description="Measure what a venv install pays per operation in each folder: small-file create, "
        "stat, cold open+read, cold random 4 KiB read, chmod, rename, unlink, mkdir (each for at most "
        "--seconds), fsync, each with its latency percentiles (p50, p95, p99, p99.9, max); "
        "sequential write over time and cold read, whether flock and fcntl locks exclude a second "
        "process, and free space and inodes; with --tree, mdtest's phase rates over a tree of that "
        "shape by --streams parallel streams. --format json uses fio's field names.",
    )
    p.add_argument("dirs", nargs="+", type=Path, metavar="DIR")
    p.add_argument(
        "--seconds", type=float, default=1.0, help="time limit of each micro-probe (default 1)"
    )
    p.add_argument(
        "--files",
        type=positive_int,
        default=2000,
        help="at most this many files per probe (default 2000)",
    )
    p.add_argument(
        "--profile",
        default="smoke",
        help="small files are this wheel profile's median file size (default smoke)",
    )
    p.add_argument(
        "--write-mb",
        type=float,
        default=None,
        help="at most this many MB written, then removed; 0 skips the write (default: sized to "
        "the folder: 1024 on a local disk, 256 on tmpfs (RAM), 64 on network and FUSE volumes "
        "(metered I/O, burst credits), never over a tenth of the free space)",
    )
    p.add_argument(
        "--write-seconds",
        type=float,
        default=3.0,
        help="time limit of the sequential write (default 3)",
    )
    p.add_argument(
        "--timeline", action="store_true", help="print the write rate of every 0.1 s bucket"
    )
    _add_tree(p)
    p.add_argument(
        "--format", choices=("text", "json"), default="text", help="output format (default text)"
    )
    p.set_defaults(func=cmd_probe)


def _add_tree(p: argparse.ArgumentParser) -> None:
    """mdtest's phases over a tree, and the streams that run them."""
    p.add_argument(
        "--tree",
        metavar="DEPTH,BRANCH,FILES",
        help="also run mdtest's phases (folder create, file create, stat, read, remove, folder "
        "remove) over a tree: DEPTH levels of BRANCH folders, FILES files in every folder "
        "(e.g. 2,3,100); each phase for at most --seconds",
    )
    p.add_argument(
        "--streams",
        type=positive_int,
        default=1,
        help="parallel streams (processes) for --tree, each in a tree of its own (default 1)",
    )
    p.add_argument(
        "--tree-bytes",
        type=int,
        default=0,
        metavar="N",
        help="bytes written into each tree file, and read back (default 0, as mdtest's -w)",
    )


#: what each timed operation is, as the text output names it
OP_WORDS = {
    "create": "create+write+close",
    "stat": "stat",
    "stat_miss": "stat of a missing name",
    "open_read": "cold open+read+close",
    "read4k": "cold random 4 KiB read",
    "chmod": "chmod",
    "rename": "rename",
    "unlink": "unlink",
    "mkdir": "mkdir",
}
_HEAD = (f"  {'operation':<24} {'ops/s':>9} {'p50':>8} {'p95':>8} {'p99':>8} {'p99.9':>8} "
         f"{'max':>8} {'count':>7}   (ms)")  # fmt: skip


def _row(label: str, per_s: float | None, lat: Latency | None) -> str:
    rate = f"{per_s:9,.0f}" if per_s is not None else f"{'-':>9}"
    if lat is None or not lat.count:
        return f"  {label:<24} {rate}   not measured"
    cells = " ".join(f"{lat.ms(q):8.3f}" for q in PERCENTILES)
    return f"  {label:<24} {rate} {cells} {lat.max_ms:8.3f} {lat.count:7,}"


def probe_lines(result: ProbeResult) -> list[str]:
    """Lines describing one probe result (returned, not printed): a table of the timed
    operations (rate and latency percentiles), then the rest."""
    lines = [f"{result.path}:", _HEAD]
    for op, label in OP_WORDS.items():
        r = getattr(result, op)
        if op == "create" and r is not None:
            label = f"create of {result.file_bytes} B"
        lines.append(_row(label, r.per_s if r and r.count else None, r.latency if r else None))
        if op == "create" and r is not None and r.opened is not None and r.opened.count:
            lines.append(_row("  its open(O_CREAT)", None, r.opened))
    if result.fsync and result.fsync.count:
        lines.append(_row("fsync of 4 KiB", None, result.fsync))
    if result.tree is not None:
        lines += tree_lines(result.tree)
    w = result.write
    if w is not None:
        rates = [pt.mbps for pt in w.timeline]
        lines.append(
            f"  write   {w.mean_mbps:9.1f} MB/s mean over {w.total_mb:.0f} MB in {w.seconds:.1f} s"
            + (
                f" (first bucket {rates[0]:.1f}, last {rates[-1]:.1f} MB/s, {len(rates)} buckets)"
                if rates
                else ""
            )
        )
    if result.read_mbps is not None:
        lines.append(f"  read    {result.read_mbps:9.1f} MB/s cold, sequential")
    for kind, verdict in result.locks.items():
        lines.append(f"  {kind} locks: {verdict}")
    if result.space:
        s = result.space
        lines.append(
            f"  free    {s.free_bytes / 1e9:.1f} of {s.total_bytes / 1e9:.1f} GB, "
            f"{s.free_inodes:,} of {s.total_inodes:,} inodes"
        )
    if result.hung:
        lines.append(
            f"  HUNG: the {result.hung} probe did not return; later probes skipped, scratch left"
        )
    return lines


def tree_lines(tree: TreeResult) -> list[str]:
    """mdtest's table: each phase's rate over every stream (the slowest's time), latency."""
    streams = f"{tree.streams} stream{'' if tree.streams == 1 else 's'}"
    lines = [f"  tree: {tree.shape.describe()}, {streams}, files of {tree.file_bytes} B", _HEAD]
    for name, phase in tree.phases.items():
        lines.append(_row(name.replace("_", " "), phase.per_s, phase.latency))
    return lines


#: the sequential write's size by the kind of filesystem (predict.doctor.kind_of), MB
AUTO_WRITE_MB = {"local": 1024.0, "overlay": 256.0, "memory": 256.0, "network": 64.0, "fuse": 64.0}


def auto_write_mb(folder: Path) -> float:
    """The write a probe of ``folder`` makes by default: small where each byte costs (RAM,
    metered network I/O, burst credits), never over a tenth of the free space."""
    from iobench.predict.doctor import kind_of
    from iobench.system import procfs

    mount = procfs.mount_of(folder)
    kind = kind_of(mount.fstype) if mount is not None else "network"
    try:
        st = os.statvfs(folder)
        free_mb = st.f_bavail * st.f_frsize / 1e6
    except OSError:
        free_mb = math.inf
    return round(min(AUTO_WRITE_MB.get(kind, 64.0), free_mb / 10), 1)


def _what_it_writes(
    folder: Path, files: int, size: int, write_mb: float, args: argparse.Namespace
) -> str:
    write = (
        f"a sequential write of up to {write_mb:g} MB (at most {args.write_seconds:g} s)"
        if write_mb
        else "no sequential write"
    )
    tree = ""
    if args.tree:
        streams = f"{args.streams} stream{'' if args.streams == 1 else 's'}"
        tree = f", a tree {args.tree} (depth, branch, files a folder) by {streams}"
    return (
        f"up to {files:,} small files of {size} B per operation (at most {args.seconds:g} s "
        f"each), {write}{tree}; all removed afterwards"
    )


def cmd_probe(args: argparse.Namespace) -> int:
    from iobench.predict.probe import median_file_bytes, probe, results_to_dict
    from iobench.predict.tree import MAX_STREAMS, TreeShape
    from iobench.system.scratch import check_role_dir

    for flag, value, ok, what in (
        ("--seconds", args.seconds, 0 < args.seconds <= 600, "> 0 and at most 600"),
        (
            "--write-seconds",
            args.write_seconds,
            0 < args.write_seconds <= 600,
            "> 0 and at most 600",
        ),
        ("--write-mb", args.write_mb or 0.0, 0 <= (args.write_mb or 0.0) <= 1e6, "0 (skip) to 1e6"),
    ):
        if not (math.isfinite(value) and ok):
            raise UsageError(f"{flag} {value:g}: expected a number {what}")
    if not 0 <= args.tree_bytes <= 1 << 30:
        raise UsageError(f"--tree-bytes {args.tree_bytes}: expected 0 to {1 << 30:,}")
    shape = TreeShape.parse(args.tree) if args.tree else None
    if args.streams > MAX_STREAMS or (args.streams > 1 and shape is None):
        raise UsageError(f"--streams {args.streams}: from 1 to {MAX_STREAMS}, with --tree")
    for d in args.dirs:
        check_role_dir("probe", d)
    size = median_file_bytes(args.profile)
    results = []
    for d in args.dirs:
        write_mb = args.write_mb if args.write_mb is not None else auto_write_mb(d)
        print(f"probe {d}: {_what_it_writes(d, args.files, size, write_mb, args)}", file=sys.stderr)
        res = probe(
            d,
            files=args.files,
            write_mb=write_mb or None,
            seconds=args.seconds,
            file_bytes=size,
            write_seconds=args.write_seconds,
            bucket_s=0.1,
            tree=shape,
            streams=args.streams,
            tree_bytes=args.tree_bytes,
        )
        results.append(res)
        if args.format == "text":
            print("\n".join(probe_lines(res)))
            if args.timeline and res.write is not None:
                for pt in res.write.timeline:
                    print(f"    t={pt.t:6.2f} s  {pt.mbps:8.1f} MB/s")
    if args.format == "json":
        import json

        print(json.dumps(results_to_dict(results), indent=2))
    return 0
