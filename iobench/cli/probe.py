"""`iobench probe`: time-bounded storage micro-probes of folders, as text or JSON."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from iobench.cli.common import positive_int
from iobench.errors import UsageError

if TYPE_CHECKING:  # imported by the handler: `iobench --help` must not pay for it
    from iobench.predict.probe import ProbeResult


# ---------------------------------------------------------------- probe
def _add_probe(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "probe",
        help="storage probe of folders: ms per create/stat/open/rename/unlink/mkdir, fsync, MB/s, locks",
        description="Measure what a venv install pays per operation in each folder: small-file create, "
        "stat, cold open+read, chmod, rename, unlink, mkdir (each for at most --seconds), fsync p50/p99, "
        "sequential write over time and cold read, whether flock and fcntl locks exclude a second "
        "process, and free space and inodes.",
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
    p.add_argument(
        "--format", choices=("text", "json"), default="text", help="output format (default text)"
    )
    p.set_defaults(func=cmd_probe)


def _ms(result: ProbeResult, op: str) -> str:
    r = getattr(result, op)
    if r is None or not r.count:
        return "   not measured"
    return f"{r.ms_each:8.3f} ms   ({r.per_s:9.0f}/s, {r.count} in {r.seconds:.2f} s)"


def probe_lines(result: ProbeResult) -> list[str]:
    """Lines describing one probe result (returned, not printed)."""
    lines = [
        f"{result.path}:",
        f"  create  {result.create.per_s:9.0f} files/s   ({result.create.ms_each:.3f} ms per "
        f"create+write+close of {result.file_bytes} B)",
        f"  stat    {result.stat.per_s:9.0f} stats/s   ({result.stat.ms_each:.3f} ms each)",
    ]
    for op, label in (
        ("stat_miss", "stat of a missing name"),
        ("open_read", "cold open+read+close"),
        ("chmod", "chmod"),
        ("rename", "rename"),
        ("unlink", "unlink"),
        ("mkdir", "mkdir"),
    ):
        lines.append(f"  {label:<22} {_ms(result, op)}")
    if result.fsync and result.fsync.count:
        f = result.fsync
        lines.append(
            f"  fsync of 4 KiB         p50 {f.p50_ms:.3f} ms, p99 {f.p99_ms:.3f} ms ({f.count} fsyncs)"
        )
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
    return (
        f"up to {files:,} small files of {size} B per operation (at most {args.seconds:g} s "
        f"each), {write}; all removed afterwards"
    )


def cmd_probe(args: argparse.Namespace) -> int:
    from iobench.predict.probe import median_file_bytes, probe, results_to_dict
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
        )
        results.append(res)
        if args.format == "text":
            print("\n".join(probe_lines(res)))
            if args.timeline and res.write is not None:
                for pt in res.write.timeline:
                    print(f"    t={pt.t:6.2f} s  {pt.mbps:8.1f} MB/s")
    if args.format == "json":
        print(json.dumps(results_to_dict(results), indent=2))
    return 0
