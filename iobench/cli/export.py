"""`iobench run --export-json/--export-markdown/--export-csv FILE`: the run's summary, as hyperfine exports.

Each export is the report's own summary (``iobench.report``'s functions, so it says what
summary.json, the console and report.html say) written to FILE, or to stdout for ``-``.
With ``-`` the run's own console output moves to stderr so that stdout is the export alone.
This module imports no report library itself: ``write_exports`` receives a built report.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import IO, Any

from iobench import files
from iobench.errors import IOBenchError, SafetyError, UsageError

FORMATS = ("json", "markdown", "csv")


def requested(args: argparse.Namespace) -> dict[str, str]:
    """``{format: FILE}`` for each export asked for on the command line."""
    return {fmt: value for fmt in FORMATS if (value := getattr(args, f"export_{fmt}", None))}


def check_exports(args: argparse.Namespace) -> None:
    """Refuse exports that cannot be written, before the run starts (UsageError)."""
    wanted = requested(args)
    if [fmt for fmt, f in wanted.items() if f == "-"][1:]:
        raise UsageError("only one --export-* can go to stdout ('-')")
    if wanted and getattr(args, "no_report", False):
        raise UsageError("--export-* writes the report's summary; drop --no-report")
    if wanted:
        _check_report_libraries()
    for fmt, target in wanted.items():
        if target == "-":
            continue
        # the folder (a link at the export's own name is replaced, never written through)
        folder = os.path.dirname(os.path.join(os.getcwd(), target))
        if refused := files.problem_on_the_way(folder):  # the folder's rule, as the write's
            raise SafetyError(f"--export-{fmt} {target}: {refused}")
        parent = Path(target).resolve().parent
        if not parent.is_dir():
            raise UsageError(f"--export-{fmt} {target}: folder {parent} does not exist")
        if not os.access(parent, os.W_OK):
            raise UsageError(f"--export-{fmt} {target}: folder {parent} is not writable")


def _check_report_libraries() -> None:
    """Exports need the report: a missing library is said before any trial runs.

    Only looked up (``find_spec``), not imported: the trials must not share the process
    with pandas' import; a library that is present but broken is caught when reporting.
    """
    import importlib.util

    from iobench.report import FIX

    for name in ("numpy", "pandas", "matplotlib"):
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise IOBenchError(f"--export-* needs the report, which needs {name}: {FIX}")


def export_text(result: Any, fmt: str) -> str:
    """The text of one export of a built report (``iobench.report.ReportResult``)."""
    if fmt == "csv":
        # the same call and format as summary.csv (report/build.py)
        return str(
            result.summary.table.to_csv(index=False, float_format="%.6g", lineterminator="\n")
        )
    return "\n".join(result.format(fmt)) + "\n"


def write_exports(
    args: argparse.Namespace, result: Any, stdout: IO[str] | None = None
) -> list[str]:
    """Write every requested export; return ``"json: FILE"`` lines for the files written."""
    written = []
    for fmt, target in requested(args).items():
        text = export_text(result, fmt)
        if target == "-":
            out = stdout or sys.stdout
            out.write(text)
            out.flush()
            continue
        try:
            files.write(target, text)
        except OSError as exc:
            raise IOBenchError(
                f"--export-{fmt} {target}: cannot write ({exc.strerror or exc})"
            ) from None
        written.append(f"{fmt}: {target}")
    return written
