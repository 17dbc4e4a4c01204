"""The command line: argparse subcommands, each validated before anything runs.

Each subcommand is a handler ``(args) -> int``; ``iobench.__main__.main`` is the only place
that turns an ``IOBenchError`` into a one-line message.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
from pathlib import Path

from iobench import __version__
from iobench.errors import RunDirError, UsageError


# ---------------------------------------------------------------- validators
def positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return v


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return v


def role_spec(text: str) -> tuple[str, Path]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=DIR, got {text!r}")
    if not name.replace("-", "").replace("_", "").isalnum() or name in ("off",):
        raise argparse.ArgumentTypeError(f"role name {name!r} must be letters, digits, - or _")
    return name, Path(path)


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError (one line, exit 2) instead of printing usage."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


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
    from iobench.venvs import check_role_dir

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


# ---------------------------------------------------------------- wheels
def _add_wheels(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("wheels", help="synthetic wheels: measure a real wheel's shape, or generate from a profile")
    wsub = p.add_subparsers(dest="wheels_cmd", required=True, parser_class=_Parser)
    prof = wsub.add_parser("profile", help="print a real wheel's shape as a profile (TOML)")
    prof.add_argument("wheels", nargs="+", type=Path, metavar="WHEEL")
    prof.add_argument("--name", default="measured", help="profile name (default: measured)")
    prof.add_argument("--seed", type=int, default=1)
    prof.add_argument("--out", type=Path, help="write the TOML here instead of stdout")
    prof.set_defaults(func=cmd_wheels_profile)
    syn = wsub.add_parser("synth", help="generate the wheels of a profile")
    syn.add_argument("profile", help="shipped profile name (smoke, torch-cpu-like) or a .toml path")
    syn.add_argument("--out", type=Path, required=True, help="folder for the wheels")
    syn.set_defaults(func=cmd_wheels_synth)


def cmd_wheels_profile(args: argparse.Namespace) -> int:
    from iobench.wheels import describe, profile_of_wheels, profile_to_toml

    for w in args.wheels:
        if not w.is_file():
            raise UsageError(f"{w}: no such wheel file")
    prof = profile_of_wheels(args.wheels, args.name, args.seed)
    text = profile_to_toml(prof)
    if args.out:
        args.out.write_text(text)
        print("\n".join(describe(prof)))
        print(f"profile written to {args.out}")
    else:
        sys.stdout.write(text)
    return 0


def cmd_wheels_synth(args: argparse.Namespace) -> int:
    from iobench.wheels import describe, load_profile, synthesize

    prof = load_profile(args.profile)
    paths = synthesize(prof, args.out)
    print("\n".join(describe(prof)))
    for p in paths:
        print(f"wrote {p} ({p.stat().st_size / 1e6:.1f} MB)")
    return 0


# ---------------------------------------------------------------- scenarios, clean
def _add_scenarios(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scenarios", help="list the shipped scenarios and their configs")
    p.set_defaults(func=cmd_scenarios)


def cmd_scenarios(args: argparse.Namespace) -> int:
    from iobench.scenario import load_scenario, shipped

    for name in shipped():
        s = load_scenario(name)
        print(f"{name}: {s.description} (repeats {s.repeats})")
        for c in s.configs:
            print(
                f"  {c.name:<24} venv={c.venv} tmpdir={c.tmpdir} cache={c.cache} "
                f"{c.cache_state} {c.installer} compile={c.compile}"
            )
    return 0


def _add_clean(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("clean", help="report or remove scratch left by a crashed run")
    p.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="a role folder (e.g. the target)")
    p.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    p.set_defaults(func=cmd_clean)


def cmd_clean(args: argparse.Namespace) -> int:
    from iobench.venvs import SCRATCH_NAME, Scratch, is_scratch, remove_scratch

    for d in args.dirs:
        if not d.is_dir():
            raise UsageError(f"{d} is not a directory")
        root = d / SCRATCH_NAME
        if not root.exists():
            print(f"{d}: no iobench scratch")
            continue
        if not is_scratch(root):
            raise UsageError(f"{root} has no iobench sentinel; not touching it")
        from iobench.venvs import live_owner

        left = Scratch(d).leftovers()
        if args.dry_run:
            names = [p.name + (" (in use)" if p.is_dir() and live_owner(p) else "") for p in left]
            print(f"{root}: {len(left)} leftover item(s): " + ", ".join(names))
            continue
        from iobench.lock import read_lock

        holder = read_lock(root)
        if holder is not None and holder.stale_reason() is None:
            raise UsageError(f"{root} is in use by a running iobench ({holder.describe()}); not cleaning")
        n, kept = remove_scratch(root)
        if kept:
            print(f"{root}: removed {n} item(s); kept what live runs use: {', '.join(kept)}")
        else:
            print(f"{root}: removed ({n} item(s))")
    return 0


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


def probe_lines(result) -> list[str]:  # noqa: ANN001 - iobench.lab.probe.ProbeResult
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
    from iobench.lab.probe import probe
    from iobench.venvs import check_role_dir

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


# ---------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="iobench",
        description="Where should a Python venv, TMPDIR and package caches live on this machine, "
        "and what does the wrong choice cost in idle GPU time?",
    )
    parser.add_argument("--version", action="version", version=f"iobench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    _add_run(sub)
    for module in ("iobench.report.cli", "iobench.lab.cli"):
        try:
            mod = __import__(module, fromlist=["register"])
        except ImportError:
            continue
        mod.register(sub)
    _add_probe(sub)
    _add_wheels(sub)
    _add_scenarios(sub)
    _add_clean(sub)
    return parser


def dispatch(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)



