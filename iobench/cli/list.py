"""`iobench list [RESULTS]`: the stored runs of a results folder, one line each.

Each line: run id, label, scenario, status, trials (ok/all) and the winner: the config the
verdict names (advised, or the baseline kept because it is fastest beyond noise), "-" when
it names none (no difference beyond noise, too few trials). It is the report's
(summary.json) when one was built, else the same rule on trials.csv, marked ``*``. Only
meta.json, trials.csv and summary.json are read: pandas and matplotlib are not imported.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, NamedTuple

from iobench.cli.common import FALLBACKS
from iobench.errors import RunDirError, UsageError


class StoredRun(NamedTuple):
    """One run directory as `iobench list` shows it."""

    path: Path
    run_id: str
    label: str
    scenario: str
    status: str
    ok: int
    trials: int
    winner: str  # "" when no trial succeeded; ends in "*" when taken from trials.csv
    host: str = ""  # the host that ran it (meta.json)
    target: str = ""  # the target role's filesystem type (meta.json's roles)


def _add_list(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "list",
        help="list the stored runs of a results folder (label, scenario, target, status, winner)",
        description="List the run directories in RESULTS (default ./results), oldest first. "
        "A winner marked * comes from trials.csv because no report was built yet.",
    )
    p.add_argument(
        "results",
        nargs="?",
        type=Path,
        metavar="RESULTS",
        help="a results folder (default: ./results)",
    )
    p.add_argument(
        "--format", choices=("table", "json"), default="table", help="table (default) or json"
    )
    p.set_defaults(func=cmd_list)


def _winner_from_trials(rows: list[Any], meta: Any) -> str:
    """The verdict's winner from trials.csv (marked ``*``), "" when the verdict names none."""
    from iobench.cli.cost import judged_by
    from iobench.report.verdict import verdict_of_rows  # the report's rule, loaded on use
    from iobench.rundir.fleet import fleet_rows, is_fleet

    compared = fleet_rows(rows) if is_fleet(rows) else rows  # a fleet: by its figure
    judged = judged_by(meta, compared)
    winner = verdict_of_rows(compared, meta.roles, order=meta.config_names, measure=judged).winner
    return f"{winner}*" if winner else ""


def read_run(path: Path) -> StoredRun:
    """Read one run directory (raises RunDirError when it is not one)."""
    from iobench.rundir.folder import RunDir

    rd = RunDir.open(path)
    meta = rd.meta()
    rows = rd.trials(latest_only=True)
    winner = _winner_from_trials(rows, meta)
    summary = path / "summary.json"
    if summary.is_file():
        try:
            import json

            from iobench import reading

            data = json.loads(reading.read_text(summary))  # a FIFO there held `list` for good
            # a report from before "winner" meant the verdict's (its verdict has no
            # fastest_measured) named the fastest measured: the verdict from trials.csv instead
            if "fastest_measured" in data["verdict"]:
                winner = str(data.get("winner") or "")
        except (OSError, ValueError, AttributeError, KeyError, TypeError):
            pass  # a damaged summary: keep the winner from trials.csv
    return StoredRun(
        path=path,
        run_id=meta.run_id or path.name,
        label=meta.label or "",
        scenario=meta.scenario_name or "",
        status=meta.status or "?",
        host=meta.hostname or "",
        ok=sum(1 for r in rows if r.status == "ok"),
        trials=len(rows),
        winner=winner,
        target=(meta.roles["target"].fstype or "") if "target" in meta.roles else "",
    )


def stored_runs(results: Path) -> tuple[list[StoredRun], list[str]]:
    """Every run directory under ``results`` (oldest first), and the folders skipped."""
    if not results.exists():
        raise UsageError(f"{results}: no such folder (give the results folder of `iobench run`)")
    if not results.is_dir():
        raise UsageError(f"{results} is not a folder (give the results folder of `iobench run`)")
    runs: list[StoredRun] = []
    skipped: list[str] = []
    for d in sorted(p for p in results.iterdir() if p.is_dir()):
        if not (d / "meta.json").exists():
            continue
        try:
            runs.append(read_run(d))
        except RunDirError as exc:
            skipped.append(str(exc))
    runs.sort(key=lambda r: (r.run_id, r.path.name))
    return runs, skipped


def _status(run: StoredRun) -> str:
    """meta.json's status; a run of this host still "running" whose process is gone (killed,
    out of memory, its results disk full at the end) says so."""
    if run.status != "running" or not run.run_id.rsplit("-", 1)[-1].isdigit():
        return run.status
    pid = int(run.run_id.rsplit("-", 1)[-1])  # the run id ends with the run's pid
    import socket

    from iobench.system import procfs

    if run.host and run.host == socket.gethostname() and not procfs.alive(pid):
        return "running (gone)"
    return run.status


def list_lines(runs: list[StoredRun]) -> list[str]:
    """The table `iobench list` prints."""
    head = ("run", "label", "scenario", "target", "status", "ok/all", "winner")
    body = [
        tuple(printable(cell) for cell in (r.path.name, r.label or "-", r.scenario, r.target or "?",
                                           _status(r), f"{r.ok}/{r.trials}", r.winner or "-"))
        for r in runs
    ]  # fmt: skip
    widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [head, *body]
    ]


def cmd_list(args: argparse.Namespace) -> int:
    results = args.results if args.results is not None else Path("results")
    given = results != FALLBACKS["results"]  # a folder of one's own, or the default ./results
    # the default folder before the first run: no runs yet, not an error
    runs, skipped = stored_runs(results) if given or results.exists() else ([], [])
    if args.format == "json":
        import json

        data = [{**r._asdict(), "path": str(r.path), "winner": r.winner or None} for r in runs]
        print(json.dumps(data, indent=2))
    elif runs:
        print("\n".join(list_lines(runs)))
    else:
        hint = f"iobench run --results {results}" if given else "iobench run"
        print(f"no runs in {results}/ yet (start one with: {hint})")
    for line in skipped:
        print(f"iobench: warning: skipped {printable(line)}", file=sys.stderr)  # a received name
    return 0


def printable(text: object) -> str:
    """iobench.units.printable, imported when there is something to print (not for --help)."""
    from iobench.units import printable as clean

    return clean(text)
