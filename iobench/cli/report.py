"""The ``report`` and ``compare`` subcommands, registered into the main iobench parser.

``register(sub)`` adds both to an argparse subparsers object without importing pandas or
matplotlib; each handler takes the parsed arguments and returns an exit code (the report
libraries are imported then, and a broken one is one line naming the fix). Every option
is checked before any run directory is read; problems are raised as ``IOBenchError``
subclasses for ``iobench.__main__.main`` to print as one line.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from iobench.cli.cost import add_cost_arguments, cost_options_from_args, stored_options
from iobench.errors import IOBenchError, UsageError

FORMATS = ("table", "markdown", "json")
#: ``compare --fail-slower``: a config slower beyond noise past the bar (the doctor's "it
#: works, but slower than it should" code)
FAIL_SLOWER = 3


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run_dirs",
        nargs="+",
        metavar="RUN_DIR",
        type=Path,
        help="run directory written by `iobench run` (results/<run-id>)",
    )
    add_cost_arguments(parser)
    parser.add_argument(
        "--format",
        default="table",
        metavar="FMT",
        help="console output: table (default), markdown or json",
    )
    parser.add_argument("--out", metavar="DIR", type=Path, help="write the files here instead")


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``report`` and ``compare`` to the main parser's subcommands."""
    report = sub.add_parser(
        "report",
        help="rebuild summary.csv/json, charts and report.html from run directories",
        description="Summarise run directories: medians with spread, speed-up against the naive "
        "config, GPU idle cost, the bottleneck of each config and what to set. Writes "
        "summary.csv, summary.json, PNG charts and a self-contained report.html into each run "
        "directory (or --out).",
    )
    _common(report)
    report.add_argument(
        "--script",
        action="store_true",
        help="print only the run's start script (what `iobench run` saved as start.sh in the "
        "run folder), e.g. > start.sh",
    )
    report.set_defaults(func=report_command)

    compare = sub.add_parser(
        "compare",
        help="merge runs from several pods or storage types into one table and chart",
        description="Compare run directories config by config; ratios are relative to the first "
        "run given, and each row says whether the two runs' trials differ beyond noise (the "
        "verdict's tie rule). Writes compare.csv, compare.json, compare.png and compare.html "
        "into compare-<time>/ of the runs' results folder (the current folder when they lie "
        "in different ones), or --out DIR.",
    )
    _common(compare)
    compare.add_argument(
        "--fail-slower",
        type=float,
        metavar="RATIO",
        help="exit 3 when a config of a later run is slower than on the first run beyond "
        "noise by RATIO or more (1.1: 10%% slower), for a CI job that guards an image or a "
        "volume; each such config is named on stderr",
    )
    compare.set_defaults(func=compare_command)


def _check_format(args: argparse.Namespace) -> str:
    fmt = str(args.format).lower()
    if fmt not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, not {args.format!r}")
    return fmt


def _emit(lines: list[str]) -> None:
    """Print report lines; what a received run folder holds cannot act on the terminal."""
    print("\n".join(printable(line) for line in lines), flush=True)


def check_run_dirs(dirs: list[Path]) -> None:
    """Each folder the user named exists and is a run (meta.json), or a fleet's folder
    (workers/): else one line, exit 2, before anything is read."""
    for d in dirs:
        if not d.exists():
            raise UsageError(f"{d}: no such folder (a run folder is results/<run-id>; "
                             "`iobench list` shows them)")  # fmt: skip
        if not d.is_dir():
            raise UsageError(f"{d}: not a folder (a run folder is results/<run-id>)")
        if not (d / "meta.json").exists() and not (d / "workers").is_dir():
            runs = sorted(c.name for c in d.iterdir() if (c / "meta.json").is_file())
            hint = (f"it contains run folders ({', '.join(runs[:3])}{'...' if len(runs) > 3 else ''}): "
                    "pass one" if runs else "a run folder is results/<run-id>: `iobench list` "
                    "shows them")  # fmt: skip
            raise UsageError(f"{d} is not an iobench run folder (no meta.json; {hint})")


def run_cost(args: argparse.Namespace, run_dir: Path) -> Any:
    """The cost options a run is priced with: the ones it was made with (meta.json), with the
    flags given here on top."""
    from iobench.rundir.folder import RunDir

    try:
        stored = stored_options(RunDir(Path(run_dir)).meta())
    except IOBenchError:  # not a run (the report says so in its own words), or a fleet folder
        stored = None
    return cost_options_from_args(args, stored)


def report_command(args: argparse.Namespace) -> int:
    """``iobench report RUN_DIR...``: one report per run directory."""
    from iobench.report import build_report

    fmt = _check_format(args)
    dirs: list[Path] = list(args.run_dirs)
    cost_options_from_args(args)  # every option checked before any folder
    check_run_dirs(dirs)
    for i, run_dir in enumerate(dirs):
        out = args.out
        if out is not None and len(dirs) > 1:
            out = Path(out) / (run_dir.resolve().name or f"run-{i + 1}")
        result = build_report(run_dir, run_cost(args, run_dir), out)
        if getattr(args, "script", False):
            _emit(_script(result, run_dir))
            continue
        if i and fmt == "table":
            _emit([""])
        _emit(result.format(fmt))
    return 0


def compare_command(args: argparse.Namespace) -> int:
    """``iobench compare RUN_DIR RUN_DIR...``: one merged comparison."""
    from iobench.report import build_compare

    fmt = _check_format(args)
    bar = args.fail_slower
    if bar is not None and not (math.isfinite(bar) and bar >= 1.0):
        raise UsageError(f"--fail-slower must be a ratio of 1 or more (1.1: 10% slower), not {bar}")
    dirs = list(args.run_dirs)
    cost_options_from_args(args)
    check_run_dirs(dirs)
    result = build_compare(dirs, args.out, [run_cost(args, d) for d in dirs])
    _emit(result.format(fmt))
    if bar is None:
        return 0
    found, undecided = result.slower(bar)
    for line in undecided:
        print(printable(f"iobench: note: {line}"), file=sys.stderr)
    if not found:
        return 0
    print(printable(f"iobench: {len(found)} config(s) {bar:g}× or more slower beyond noise: "
                    + "; ".join(found)), file=sys.stderr)  # fmt: skip
    return FAIL_SLOWER


def printable(text: object) -> str:
    """iobench.units.printable, imported when there is something to print (not for --help)."""
    from iobench.units import printable as clean

    return clean(text)


def _script(result: Any, run_dir: Path) -> list[str]:
    """The start script the report advises (the one ``iobench run`` saved), or one line
    saying why there is none."""
    from iobench.cli.finish import script_of

    lines = script_of(result)
    if not lines:
        raise IOBenchError(f"{run_dir}: its verdict advises no start script (no config won "
                           "beyond noise, or its kind of work has none)")  # fmt: skip
    return lines
