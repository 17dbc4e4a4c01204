"""`iobench run`: its options, the run, and the console table at the end."""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
from pathlib import Path

from iobench.cli.common import positive_float, positive_int, role_spec
from iobench.errors import RunDirError, UsageError


# ---------------------------------------------------------------- run
def _add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="measure time-to-ready of throwaway venvs across a storage matrix",
        description="Create throwaway venvs where each config says, install the scenario's packages "
        "while sampling the system, and time each trial from venv creation to first import.",
    )
    p.add_argument("--target", type=Path, help="the volume under test (default: the current folder)")
    p.add_argument("--tmp", type=Path, help="the local temp folder (default: the system temp dir)")
    p.add_argument("--path", type=role_spec, action="append", default=[], metavar="NAME=DIR",
                   help="an extra role, e.g. local=/root/scratch (repeatable)")
    p.add_argument("--scenario", help="shipped scenario name or a .toml file (default: smoke)")
    p.add_argument("--configs", help="run only these configs, comma-separated, in this order")
    p.add_argument("--package", action="append", default=[], metavar="REQ",
                   help="install this requirement instead of the scenario's packages (repeatable), "
                   "e.g. --package torch==2.13.0")
    p.add_argument("--repeats", type=positive_int, help="trials per config (default: the scenario's)")
    p.add_argument("--results", type=Path, default=Path("results"), help="where run folders go (default: ./results)")
    p.add_argument("--resume", type=Path, metavar="RUN_DIR", help="continue a run with the trials not yet done")
    p.add_argument("--wheelhouse", type=Path, help="serve this folder of wheels from a loopback index (no network)")
    p.add_argument("--index-url", help="install from this package index instead")
    p.add_argument("--index-mbps", type=positive_float, help="cap the loopback index at this many megabits/s")
    p.add_argument("--python", help="interpreter for the venvs (default: the one running iobench)")
    p.add_argument("--label", default="", help="free text kept in meta.json, e.g. the pod type")
    p.add_argument("--sample-hz", type=positive_float, default=10.0, help="sampling rate (default: 10)")
    p.add_argument("--stall-after", type=positive_float, default=30.0,
                   help="seconds without write progress that count as a stall (default: 30)")
    p.add_argument("--stall-timeout", type=positive_float,
                   help="kill a trial stalled this long and record it as stalled (default: off)")
    p.add_argument("--lock-wait", type=float, default=0.0, metavar="S",
                   help="wait up to S seconds for another iobench run on the same target (default: fail at once)")
    p.add_argument("--no-report", action="store_true", help="skip the report at the end")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--quiet", "-q", action="store_true", help="only failures and the final table")
    out.add_argument("--verbose", "-v", action="store_true", help="a line for every phase")
    try:
        from iobench.report.cli import add_cost_arguments
    except ImportError:
        pass
    else:
        add_cost_arguments(p)
    p.set_defaults(func=cmd_run)


def _roles_from_args(args: argparse.Namespace) -> dict[str, Path]:
    from iobench.scratch import check_role_dir

    roles: dict[str, Path] = {}
    target = args.target if args.target is not None else Path.cwd()
    roles["target"] = check_role_dir("target", target)
    roles["tmp"] = check_role_dir("tmp", args.tmp if args.tmp is not None else Path(tempfile.gettempdir()))
    for name, path in args.path:
        if name in roles:
            raise UsageError(f"--path {name}=...: role '{name}' given twice")
        roles[name] = check_role_dir(f"path {name}", path)
    return roles


def _make_progress(args: argparse.Namespace):  # noqa: ANN202
    from iobench.progress import PlainProgress

    if sys.stdout.isatty() and not args.quiet:
        try:
            from iobench.live import LiveProgress
        except ImportError:
            pass
        else:
            return LiveProgress(verbose=args.verbose)
    return PlainProgress(verbose=args.verbose, quiet=args.quiet)


def cmd_run(args: argparse.Namespace) -> int:
    from iobench.results import RunDir
    from iobench.runner import Runner, RunOptions
    from iobench.scenario import load_scenario, scenario_from_meta

    if args.wheelhouse is not None and not args.wheelhouse.is_dir():
        raise UsageError(f"--wheelhouse: {args.wheelhouse} is not a folder")
    if args.sample_hz > 100:
        raise UsageError(f"--sample-hz {args.sample_hz:g}: at most 100 (each tick reads /proc; more measures the sampler)")
    if not math.isfinite(args.lock_wait) or args.lock_wait < 0:
        raise UsageError(f"--lock-wait must be a number of seconds >= 0, not {args.lock_wait}")
    if args.python is not None:
        import shutil

        found = shutil.which(args.python)
        if found is None:
            raise UsageError(f"--python {args.python}: no such interpreter")
        args.python = found
    if args.resume is not None and args.scenario is not None:
        raise UsageError("--resume continues a run with its own scenario; drop --scenario")
    cost = None
    if hasattr(args, "gpu"):
        from iobench.report.cli import cost_options_from_args

        cost = cost_options_from_args(args)
    if args.resume is not None:
        meta = RunDir.open(args.resume).load_meta()
        try:
            scenario = scenario_from_meta(meta["scenario"])
            if args.target is None:
                args.target = Path(meta["roles"]["target"]["path"])
            if args.tmp is None:
                args.tmp = Path(meta["roles"]["tmp"]["path"])
            if not args.path:
                args.path = [(k, Path(v["path"])) for k, v in meta["roles"].items() if k not in ("target", "tmp")]
        except (KeyError, TypeError, AttributeError) as exc:
            raise RunDirError(f"{args.resume}/meta.json lacks what --resume needs ({exc})") from None
        repeats = args.repeats or meta.get("repeats") or scenario.repeats
    else:
        scenario = load_scenario(args.scenario or "smoke")
        repeats = args.repeats or scenario.repeats
        if scenario.wheels and not args.package and (args.index_url or args.wheelhouse):
            # the synthetic names (smoke-core, ...) must never be fetched from a real index
            raise UsageError(
                f"scenario {scenario.name} installs synthetic wheels served by iobench; "
                "--index-url and --wheelhouse need real packages (a scenario such as torch, or --package REQ)"
            )
    if args.package:
        scenario = scenario.with_packages(args.package)
    if args.configs:
        scenario = scenario.select([c.strip() for c in args.configs.split(",") if c.strip()])
    roles = _roles_from_args(args)
    progress = _make_progress(args)
    opts = RunOptions(
        scenario=scenario,
        roles=roles,
        results_root=args.results.resolve(),  # phases run in other folders: no relative paths
        repeats=repeats,
        sample_hz=args.sample_hz,
        stall_after=args.stall_after,
        stall_timeout=args.stall_timeout,
        label=args.label,
        wheelhouse=args.wheelhouse,
        index_url=args.index_url,
        index_mbps=args.index_mbps,
        python=args.python,
        resume=args.resume.resolve() if args.resume else None,
        lock_wait=args.lock_wait,
        command=["iobench", *sys.argv[1:]],
        progress=progress,
    )
    runner = Runner(opts)
    run_dir = runner.run()
    rows = run_dir.trials()
    for line in console_summary(rows):
        print(line)
    if not args.no_report and any(r["status"] == "ok" for r in rows):
        try:
            from iobench.report import build_report
        except ImportError:
            build_report = None
        if build_report is not None:
            result = build_report(run_dir.path, cost)
            for line in getattr(result, "console_lines", []) or []:
                print(line)
    print(f"results: {run_dir.path}")
    return 0 if any(r["status"] == "ok" for r in rows) else 1


def console_summary(rows: list[dict]) -> list[str]:
    """The short table printed at the end of a run: median time-to-ready per config."""
    by: dict[str, list[float]] = {}
    failed: dict[str, int] = {}
    rerun = {r["trial_id"] for r in rows if r["status"] != "interrupted"}
    # a trial interrupted and run again by --resume counts once, by its later row
    rows = [r for r in rows if not (r["status"] == "interrupted" and r["trial_id"] in rerun)]
    for r in rows:
        by.setdefault(r["config"], [])
        if r["status"] == "ok" and r.get("time_to_ready_s"):
            by[r["config"]].append(float(r["time_to_ready_s"]))
        else:
            failed[r["config"]] = failed.get(r["config"], 0) + 1
    contended = [r for r in rows if r.get("contended")]
    medians = {c: statistics.median(v) for c, v in by.items() if v}
    best = min(medians.values()) if medians else None
    lines = [f"{'config':<26} {'n':>3} {'median s':>9} {'min-max s':>15} {'vs fastest':>10}  failed"]
    for c, v in by.items():
        if v:
            med = medians[c]
            lines.append(
                f"{c:<26} {len(v):>3} {med:>9.2f} {min(v):>7.2f}-{max(v):<7.2f} "
                f"{med / best:>9.2f}x  {failed.get(c, 0) or ''}"
            )
        else:
            lines.append(f"{c:<26} {0:>3} {'-':>9} {'-':>15} {'-':>10}  {failed.get(c, 0)}")
    if contended:
        names = sorted({part.split(":")[0] for r in contended for part in r["contended"].split(";") if part})
        lines.append(
            f"warning: {len(contended)} trial(s) ran while other processes did disk I/O "
            f"({', '.join(names[:5])}); see the contended column"
        )
    return lines
