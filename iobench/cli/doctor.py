"""`iobench doctor`: a one-minute check of this machine's folders, index and GPUs, with a
verdict, the export lines that fix what it found, and an exit status to gate a start script on."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from iobench.cli.common import positive_float
from iobench.errors import UsageError

if TYPE_CHECKING:  # the parser is built without importing measuring code
    from iobench.predict.doctor import DoctorReport

_MARK = {"ok": "ok  ", "info": "info", "warn": "WARN", "bad": "BAD "}


def _add_doctor(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor",
        help="one-minute check: where TMPDIR, caches and the venv live, index, GPUs, predicted install times",
        description="Check where TMPDIR, the pip/uv/HF/torch caches, HOME, the venv and the interpreter live "
        "(network and FUSE volumes flagged), /dev/shm, free space and inodes, the package index, busy GPUs "
        "and peer-to-peer support; probe the target and tmp folders and predict the time-to-ready of the "
        "torch-like and diffusers-like installs per config. Exit status: 0 nothing to fix, 3 warnings "
        "(slower than it should be), 4 something is broken.",
    )
    p.add_argument(
        "--target",
        type=Path,
        metavar="DIR",
        help="the volume to check (default: /workspace if it is a mount point, else the current folder)",
    )
    p.add_argument(
        "--tmp",
        type=Path,
        metavar="DIR",
        help="the local fast folder (default: /dev/shm, else the system temp dir)",
    )
    p.add_argument(
        "--seconds",
        type=positive_float,
        default=0.4,
        help="time limit of each storage micro-probe (default 0.4)",
    )
    p.add_argument(
        "--index-url",
        metavar="URL",
        help="the index to check (default: PIP_INDEX_URL, pip's config, PyPI)",
    )
    p.add_argument("--offline", action="store_true", help="do not contact the index")
    p.add_argument(
        "--timeout",
        type=positive_float,
        default=10.0,
        help="limit for each network and nvidia-smi call (default 10 s)",
    )
    p.add_argument(
        "--format", choices=("text", "json"), default="text", help="output format (default text)"
    )
    p.set_defaults(func=cmd_doctor)


def _default_target() -> Path:
    ws = Path("/workspace")
    return ws if ws.is_dir() and os.path.ismount(ws) else Path.cwd()


def _default_tmp() -> Path:
    shm = Path("/dev/shm")
    import tempfile

    return shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())


def doctor_lines(report: DoctorReport) -> list[str]:
    """The text report (returned, not printed)."""
    lines = [
        f"iobench doctor: {report.verdict.upper()} (exit {report.exit_status}) in {report.elapsed_s:.1f} s",
        "",
        "where things live:",
    ]
    for loc in report.locations:
        free = f", {loc.free_bytes / 1e9:.1f} GB free" if loc.free_bytes is not None else ""
        lines.append(
            f"  {loc.name:<17} {loc.path}  [{loc.fstype or '?'} {loc.kind}, {loc.mountpoint}{free}]"
        )
    for scen, preds in report.predictions.items():
        lines += ["", f"predicted time-to-ready, {scen}:"]
        for p in sorted(preds, key=lambda p: p["predicted_s"]):
            ph = " + ".join(f"{k} {v:.1f}" for k, v in p["phases"].items())
            lines.append(f"  {p['config']:<22} {p['predicted_s']:7.1f} s   ({ph})")
    lines += ["", "findings:"]
    lines += [
        f"  {_MARK[f.level]} {f.message}"
        for f in sorted(
            report.findings, key=lambda f: -["ok", "info", "warn", "bad"].index(f.level)
        )
    ]
    fix = report.fix_script()
    if fix:
        lines += ["", "set (paste into your start script):", *(f"  {line}" for line in fix)]
    measure = report.measure_block()
    if measure:
        lines += ["", "to measure (a benchmark run, not for a start script):",
                  *(f"  {line}" for line in measure)]  # fmt: skip
    return lines


def cmd_doctor(args: argparse.Namespace) -> int:
    from iobench.predict.doctor import run_doctor

    target = args.target or _default_target()
    tmp = args.tmp or _default_tmp()
    for name, d in (("--target", target), ("--tmp", tmp)):
        if not d.is_dir():
            raise UsageError(f"{name} {d}: not an existing folder")
        if not os.access(d, os.W_OK):
            raise UsageError(f"{name} {d}: not writable (the probe writes a scratch folder there)")
    report = run_doctor(target, tmp, args.seconds, args.index_url, args.offline, args.timeout)
    if args.format == "json":
        import json

        print(json.dumps(report.to_dict(), indent=2))
    else:
        print("\n".join(doctor_lines(report)))
    return report.exit_status
