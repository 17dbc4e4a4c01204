"""`iobench probe`: storage micro-probes of folders."""

from __future__ import annotations

import argparse
from pathlib import Path

from iobench.cli.common import positive_int
from iobench.errors import UsageError


# ---------------------------------------------------------------- probe
def _add_probe(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "probe",
        help="quick storage probe of a folder: small-file creates/s, stats/s, sequential write over time",
        description="Measure a folder's small-file create and stat rates (what a venv install pays per "
        "file) and its sequential write rate over time (a burst-credit volume shows its drop).",
    )
    p.add_argument("dirs", nargs="+", type=Path, metavar="DIR")
    p.add_argument("--files", type=positive_int, default=300, help="files to create and stat (default 300)")
    p.add_argument("--write-mb", type=float, default=64.0, help="MB for the sequential write; 0 skips it (default 64)")
    p.add_argument("--timeline", action="store_true", help="print the write rate of every 0.25 s bucket")
    p.set_defaults(func=cmd_probe)


def probe_lines(result) -> list[str]:  # noqa: ANN001 - iobench.probe.ProbeResult
    """Lines describing one probe result (returned, not printed)."""
    lines = [
        f"{result.path}:",
        f"  create  {result.create.per_s:9.0f} files/s   ({result.create.ms_each:.3f} ms per create+write+close)",
        f"  stat    {result.stat.per_s:9.0f} stats/s   ({result.stat.ms_each:.3f} ms each)",
    ]
    w = result.write
    if w is not None:
        rates = [pt.mbps for pt in w.timeline]
        lines.append(
            f"  write   {w.mean_mbps:9.1f} MB/s mean over {w.total_mb:.0f} MB in {w.seconds:.1f} s"
            + (f" (first bucket {rates[0]:.1f}, last {rates[-1]:.1f} MB/s)" if rates else "")
        )
    return lines


def cmd_probe(args: argparse.Namespace) -> int:
    from iobench.probe import probe
    from iobench.scratch import check_role_dir

    if args.write_mb < 0:
        raise UsageError("--write-mb must be >= 0")
    for d in args.dirs:
        check_role_dir("probe", d)
    for d in args.dirs:
        res = probe(d, files=args.files, write_mb=args.write_mb or None)
        print("\n".join(probe_lines(res)))
        if args.timeline and res.write is not None:
            for pt in res.write.timeline:
                print(f"    t={pt.t:6.2f} s  {pt.mbps:8.1f} MB/s")
    return 0
