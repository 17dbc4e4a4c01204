"""`iobench run`: its options, the run, and the console table at the end."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from iobench.cli import emphasis
from iobench.cli.common import positive_float, role_spec
from iobench.errors import IOBenchError, UsageError

#: trial statuses that are a result: finished, or ended by --give-up-after with a lower bound
FINISHED = ("ok", "censored")

# ---------------------------------------------------------------- run
RUN_EXAMPLES = """examples:
  iobench run                                          offline smoke test here (about 40 s)
  iobench run --target /workspace --tmp /tmp --gpu H100 --label "runpod H100"
  iobench run --target /workspace --tmp /dev/shm --path local=/root/scratch --scenario my.toml
  iobench run --scenario torch --wheelhouse ./wheels   wheels from `pip download torch -d wheels`
  iobench run --dry-run --scenario torch               the plan only; creates nothing
  iobench run --export-json - --quiet | jq .winner     the summary as JSON on stdout
  iobench run --resume results/RUN_ID                  continue after Ctrl-C

exit status: 0 every trial succeeded; 1 a runtime failure or some trials failed
(--allow-failures: 0 while each config has a successful trial); 2 usage error; 130 interrupted"""


def _add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="measure time-to-ready of throwaway venvs across a storage matrix",
        description="Create throwaway venvs where each config says, install the scenario's packages "
        "while sampling the system, and time each trial from venv creation to first import.",
        epilog=RUN_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_where(p)
    _add_what(p)
    _add_output(p)
    _add_limits(p)
    _add_order(p)
    _add_strategies(p)
    _add_fleet(p)
    from iobench.cli.cost import add_cost_arguments

    add_cost_arguments(p)
    p.set_defaults(func=run_command)


def _add_where(p: argparse.ArgumentParser) -> None:
    """The roles: the volume under test, the local temp folder, extra places."""
    where = p.add_argument_group("where (the roles a config can place things on)")
    where.add_argument(
        "--target",
        type=Path,
        metavar="DIR",
        help="the volume under test (default: /workspace if it is a mount point, else the current folder)",
    )
    where.add_argument(
        "--tmp",
        type=Path,
        metavar="DIR",
        help="the local temp folder (default: the system temp dir, or /dev/shm when that shares "
        "the target's filesystem)",
    )
    where.add_argument(
        "--path",
        type=role_spec,
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="an extra role, e.g. local=/root/scratch (repeatable)",
    )
    where.add_argument(
        "--trust-owner",
        action="append",
        default=[],
        metavar="USER",
        help="use role folders that USER owns, or that lie below one (repeatable; recorded in "
        "meta.json): by default a role and every folder above it must be yours or root's, as "
        "another owner could swap iobench's scratch folder there",
    )


def _add_what(p: argparse.ArgumentParser) -> None:
    """What is installed, from where, by which interpreter, across which axes."""
    what = p.add_argument_group("what to install")
    what.add_argument(
        "--scenario",
        metavar="NAME|FILE",
        help="shipped scenario name or a .toml file (default: smoke)",
    )
    what.add_argument(
        "--configs", metavar="A,B", help="run only these configs, comma-separated, in this order"
    )
    what.add_argument(
        "--package",
        action="append",
        default=[],
        metavar="REQ",
        help="install this requirement instead of the scenario's packages (repeatable), "
        "e.g. --package torch==2.13.0",
    )
    what.add_argument(
        "--repeats",
        type=repeats_arg,
        metavar="N|auto[:N]",
        help="trials per config (default: the scenario's); auto: stop once the ranking and the "
        "headline ratio are settled, at most N rounds (default 5; docs/early-stop.md)",
    )
    what.add_argument(
        "--wheelhouse",
        type=Path,
        metavar="DIR",
        help="serve this folder of wheels from a loopback index (no network)",
    )
    what.add_argument("--index-url", metavar="URL", help="install from this package index instead")
    what.add_argument(
        "--index-mbit",
        dest="index_mbit",
        type=positive_float,
        metavar="MBIT",
        help="cap the loopback index at this many megabits/s (default: none; for packages "
        "downloaded once, that download's rate)",
    )
    what.add_argument(
        "--index-mbps", dest="index_mbit", type=positive_float, help=argparse.SUPPRESS
    )  # deprecated spelling of --index-mbit (same unit)
    what.add_argument(
        "--no-reuse-downloads",
        action="store_true",
        default=None,
        help="real packages: every cold trial downloads from the index (default: downloaded "
        "once into iobench's cache, then served on loopback at that download's rate)",
    )
    what.add_argument(
        "--python",
        metavar="PATH",
        help="interpreter for the venvs (default: the one running iobench)",
    )
    _add_axes(what)


def _add_output(p: argparse.ArgumentParser) -> None:
    """Where results go, what is printed and exported, and what the exit status says."""
    out = p.add_argument_group("results and output")
    out.add_argument(
        "--results", type=Path, metavar="DIR", help="where run folders go (default: ./results)"
    )
    out.add_argument(
        "--resume", type=Path, metavar="RUN_DIR", help="continue a run with the trials not yet done"
    )
    out.add_argument(
        "--label", default="", metavar="TEXT", help="free text kept in meta.json, e.g. the pod type"
    )
    out.add_argument("--no-report", action="store_true", help="skip the report at the end")
    for fmt, what_it_is in (
        ("json", "summary.json's content"),
        ("markdown", "a Markdown table"),
        ("csv", "summary.csv's content"),
    ):
        out.add_argument(
            f"--export-{fmt}",
            metavar="FILE",
            help=f"also write the run's summary as {what_it_is} to FILE ('-': stdout)",
        )
    out.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan (trials, roles and their filesystems, disk needed, downloads); create nothing",
    )
    out.add_argument(
        "--allow-failures",
        action="store_true",
        help="exit 0 even if some trials failed, as long as each config has a successful one",
    )
    loud = out.add_mutually_exclusive_group()
    loud.add_argument(
        "--quiet", "-q", action="store_true", help="only failures and the final table"
    )
    loud.add_argument("--verbose", "-v", action="store_true", help="a line for every phase")


def _add_limits(p: argparse.ArgumentParser) -> None:
    """Sampling, stall and time limits, the trial order and the probe."""
    how = p.add_argument_group("sampling and limits")
    how.add_argument(
        "--sample-hz",
        type=positive_float,
        default=10.0,
        metavar="HZ",
        help="sampling rate (default: 10)",
    )
    how.add_argument(
        "--stall-after",
        type=positive_float,
        default=30.0,
        metavar="S",
        help="seconds without read or write progress that count as a stall (default: 30)",
    )
    how.add_argument(
        "--stall-timeout",
        type=positive_float,
        metavar="S",
        help="kill a trial stalled this long and record it as stalled (default: off)",
    )
    how.add_argument(
        "--trial-timeout",
        type=positive_float,
        metavar="S",
        help="end a trial still running after S seconds (default: 600 + 2 per MB the scenario installs)",
    )
    how.add_argument(
        "--hung-after",
        type=positive_float,
        metavar="S",
        help="a volume on which a removal made no progress for S seconds counts as hung: "
        "iobench says what is left there and stops (default: 20)",
    )
    how.add_argument(
        "--give-up-after",
        type=positive_float,
        metavar="K",
        help="end a trial running past K x the best median so far and record it as censored "
        "(> its bound); K >= 1.5 (default: off)",
    )
    how.add_argument(
        "--lock-wait",
        type=float,
        default=0.0,
        metavar="S",
        help="wait up to S seconds for another iobench run on the same target (default: fail at once)",
    )


def _add_order(p: argparse.ArgumentParser) -> None:
    """The trial order's seed and the probe at the start."""
    order = p.add_argument_group("order and probe")
    order.add_argument(
        "--order-seed",
        type=int,
        metavar="N",
        help="seed of the balanced trial order, to run the same order again (default: random; "
        "kept in meta.json; a resumed run keeps its own)",
    )
    order.add_argument(
        "--no-probe",
        action="store_true",
        help="skip the short probe of the roles at the start (no predicted_s in the rows)",
    )


def _add_strategies(p: argparse.ArgumentParser) -> None:
    """The start-up strategies' options."""
    life = p.add_argument_group(
        "start-up strategies (scenarios with a `strategy` key: docs/strategies.md)"
    )
    life.add_argument(
        "--cache-mode",
        choices=("cold", "warm"),
        default=None,
        help="how a restart finds the caches of what the strategy kept (default: cold; "
        "--resume: the run's)",
    )
    life.add_argument(
        "--pack-method",
        metavar="METHOD[,METHOD]",
        default=None,
        help="packed-venv's and fan-out's archive and restore: auto, squashfs (mounted the best "
        "way here), squashfs-loop, squashfs-fuse, squashfs-extract, tar+zstd, tar; several "
        "compare them as configs (default: auto; --resume: the run's)",
    )


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: worker counts such as 1,2,4") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: worker counts of at least 1, such as 1,2,4")
    return sizes


def _add_fleet(p: argparse.ArgumentParser) -> None:
    """Many workers on one volume (docs/fleet.md)."""
    fleet = p.add_argument_group("fleets: many workers, one volume (docs/fleet.md)")
    fleet.add_argument(
        "--fleet",
        action="store_true",
        help="every MPI rank runs this plan, starting each trial together: "
        "`mpirun -n N iobench run --fleet ...` (mpi4py: pip install 'iobench[fleet]')",
    )
    fleet.add_argument(
        "--ranks",
        type=_sizes,
        default=None,
        metavar="N,N,...",
        help="with --fleet: run each trial on the first N ranks for each N (a scaling sweep, "
        "e.g. 1,2,4 under mpirun -n 4; default: all ranks)",
    )
    fleet.add_argument(
        "--stagger",
        type=float,
        default=0.0,
        metavar="S",
        help="with --fleet: rank k starts k x S seconds after the agreed start (a scale-up)",
    )
    fleet.add_argument(
        "--fleet-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="a worker no launcher reaches: write this run under DIR/workers/<worker id> on "
        "the shared volume; `iobench report DIR` merges the workers",
    )
    fleet.add_argument(
        "--worker-id",
        default=None,
        metavar="NAME",
        help="this worker's name under --fleet-dir (default: <host>-<pid>)",
    )


def _add_axes(what: argparse._ArgumentGroup) -> None:
    """Axes crossed with the scenario's configs, requirement files and extra indexes (iobench.scenario.axes)."""

    def matrix_spec(
        text: str,
    ) -> Any:  # iobench.scenario.axes imports the scenario code: not for --help
        from iobench.errors import UsageError
        from iobench.scenario.axes import matrix_spec as parse

        try:
            return parse(text)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    what.add_argument(
        "--installer", metavar="pip,uv", help="cross every config with these installers"
    )
    what.add_argument(
        "--venv-creator",
        metavar="C1,C2",
        help="cross every config with these venv creators: virtualenv, venv, venv-without-pip, uv",
    )
    what.add_argument(
        "--matrix",
        type=matrix_spec,
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="cross every config with this axis (repeatable), e.g. link_mode=hardlink,copy,symlink",
    )
    what.add_argument(
        "--requirements",
        "-r",
        type=Path,
        metavar="FILE",
        help="install the requirements of this pip -r file instead of the scenario's packages",
    )
    what.add_argument(
        "--extra-index-url",
        action="append",
        default=[],
        metavar="URL",
        help="a further index beside PyPI or --index-url (repeatable), e.g. the torch CUDA index",
    )


def repeats_arg(text: str) -> int | tuple[str, int]:
    """``--repeats``: N >= 1, ``auto`` or ``auto:N`` (iobench.run.earlystop.parse_repeats)."""
    from iobench.run.earlystop import parse_repeats

    try:
        return parse_repeats(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a whole number >= 1, auto or auto:N (N >= 2), got {text!r}"
        ) from None


def _make_progress(args: argparse.Namespace) -> Any:
    from iobench.trial.progress import PlainProgress

    if sys.stdout.isatty() and not args.quiet:
        try:
            from iobench.cli.live import LiveProgress
        except ImportError:
            pass
        else:
            return LiveProgress(verbose=args.verbose)
    return PlainProgress(verbose=args.verbose, quiet=args.quiet)


@contextlib.contextmanager
def _progress(args: argparse.Namespace) -> Iterator[Any]:
    """The run's progress, its live area stopped however the run ends (the line that says
    how to resume must not be wrapped by the live area's capture of stderr)."""
    progress = _make_progress(args)
    try:
        yield progress
    finally:
        close = getattr(progress, "close", None)  # LiveProgress; PlainProgress has nothing to stop
        if close is not None:
            close()


def run_request(args: argparse.Namespace) -> Any:
    """The parsed command line as the typed request the run's checks take (``RunRequest``)."""
    import dataclasses

    from iobench.cli.cost import cost_options_from_args
    from iobench.run.plan import RunRequest

    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(RunRequest)
             if f.name not in ("cost", "command") and getattr(args, f.name, None) is not None}  # fmt: skip
    if isinstance(given.get("repeats"), tuple):  # --repeats auto[:N], parsed as ("auto", N)
        given["repeats"], given["repeats_auto"] = given["repeats"][1], True
    return RunRequest(
        **given, cost=cost_options_from_args(args), command=["iobench", *sys.argv[1:]]
    )


def cmd_run(args: argparse.Namespace) -> int:
    """Check everything, run the trials, then the table, the report and the exports."""
    from iobench.run import overhead
    from iobench.run import plan as run_plan
    from iobench.run.runner import Runner

    overhead.command_started()  # meta.json's overhead.before_start_s counts from here
    plan = run_plan.check(run_request(args))
    if not args.dry_run and plan.resume is None and plan.scenario.installs:
        from iobench.run import facts

        facts.prefetch()  # meta.json's slow facts, while the wheels and the index are made
    if args.dry_run:
        from iobench.cli.plan import plan_lines

        print("\n".join(plan_lines(plan)))
        return 0
    if plan.resume is not None and _nothing_left(plan):
        from iobench.rundir.folder import RunDir

        rows = RunDir(plan.resume).trials(latest_only=True)
        print(f"nothing to do: all {len(rows)} trials of {plan.resume} are done "
              f"(`iobench report {plan.resume}` rebuilds its report)")  # fmt: skip
        return run_exit_code(rows, args.allow_failures)
    if plan.fleet or plan.fleet_dir is not None:
        return _fleet_run(args, plan)
    with _progress(args) as progress:
        run_dir = Runner(plan, progress).run()
    return finish_run(args, run_dir, plan.cost)


def _fleet_run(args: argparse.Namespace, plan: Any) -> int:
    """One worker of a fleet (docs/fleet.md): rank 0 (or a --fleet-dir worker) reports;
    the other ranks say nothing unless something goes wrong, and exit by their own rows."""
    from iobench.fleet.comm import MpiFleet
    from iobench.fleet.volume import DirFleet
    from iobench.run.runner import Runner
    from iobench.trial.progress import PlainProgress

    if plan.fleet:  # the launcher may stop reading a rank's output: it must not block it
        from iobench.cli import outlet

        outlet.install()
    fleet = MpiFleet() if plan.fleet else DirFleet(plan.fleet_dir, plan.worker_id)
    try:
        if plan.fleet_sizes and max(plan.fleet_sizes) > fleet.size:
            raise UsageError(
                f"--ranks {','.join(map(str, plan.fleet_sizes))}: this launch has {fleet.size} "
                f"rank(s) (mpirun -n {max(plan.fleet_sizes)})"
            )
        if fleet.leads:
            with _progress(args) as progress:
                run_dir = Runner(plan, progress, fleet).run()
            rc = finish_run(args, run_dir, plan.cost)
        else:
            with open(os.devnull, "w") as silent:  # rank 0 says it all; errors reach stderr
                run_dir = Runner(plan, PlainProgress(silent, quiet=True), fleet).run()
            rc = run_exit_code(run_dir.trials(latest_only=True), args.allow_failures)
    except BaseException as exc:  # the job ends at this process's exit (MpiFleet.close)
        fleet.close(exc)
        raise
    fleet.close()
    return rc


def _nothing_left(plan: Any) -> bool:
    """True when --resume finds every planned trial already done (the run is left as it is)."""
    from iobench.run.order import plan_trials
    from iobench.rundir.folder import RunDir

    done = RunDir(plan.resume).done_trial_ids()
    return not plan_trials(plan.scenario.configs, plan.repeats, plan.order_seed, done)


# ---------------------------------------------------------------- the end of a run: report, exports, exit status
def run_command(args: argparse.Namespace) -> int:
    """`iobench run`: exports checked first; with ``--export-* -`` the console goes to stderr."""
    from iobench.cli.export import check_exports, requested

    check_exports(args)
    args.export_stdout = sys.stdout
    if "-" not in requested(args).values():
        return cmd_run(args)
    with contextlib.redirect_stdout(sys.stderr):
        return cmd_run(args)


def run_exit_code(rows: list[Any], allow_failures: bool = False) -> int:
    """0: every trial ok; 1: some failed (with allow_failures: only when a config has no ok trial).

    ``rows``: one per trial, its latest (``RunDir.trials(latest_only=True)``).
    """
    if rows and all(r.status in FINISHED for r in rows):
        return 0
    if allow_failures:
        configs = {r.config for r in rows}
        good = {r.config for r in rows if r.status in FINISHED}
        return 0 if configs and configs == good else 1
    return 1


def finish_run(args: argparse.Namespace, run_dir: Any, cost: Any) -> int:
    """The end of a run, answer last (as hyperfine ends): the report's notes, predictions
    and paths, the exports and the results folder; then the table and the verdict; then the
    saving and the start script. Returns the exit status."""
    from iobench.cli.export import requested, write_exports
    from iobench.report import import_report_libraries
    from iobench.rundir.fleet import fleet_rows, is_fleet

    rows = run_dir.trials()
    latest = run_dir.trials(latest_only=True)
    compared = fleet_rows(latest) if is_fleet(latest) else rows  # a fleet: by its figure
    meta = run_dir.meta()
    quiet = bool(getattr(args, "quiet", False))
    answer: list[str] = []
    failed = [r.trial_id for r in latest if r.status not in FINISHED]
    if not args.no_report and any(r.status == "ok" for r in latest):
        try:
            import_report_libraries()
        except IOBenchError as exc:
            if requested(args):
                raise
            print(
                f"iobench: warning: no report ({exc}); then: iobench report {run_dir.path}",
                file=sys.stderr,
            )
        else:
            from iobench.report import build_report
            from iobench.run.overhead import timed_report

            result = timed_report(run_dir, lambda: build_report(run_dir.path, cost))
            for line in result.context_lines:
                if not quiet or line.startswith("warning:"):
                    print(line)
            for line in write_exports(args, result, getattr(args, "export_stdout", None)):
                if not quiet:
                    print(f"export {line}")
            answer = result.answer_lines
    elif requested(args):
        print("iobench: warning: no export written: no trial succeeded", file=sys.stderr)
    if not quiet:
        print(f"results: {run_dir.path}")
    code = run_exit_code(latest, args.allow_failures)
    if failed:
        relaxed = " (--allow-failures)" if code == 0 else ""
        print(
            f"iobench: {len(failed)} trial(s) did not succeed: {', '.join(failed[:5])}{relaxed}",
            file=sys.stderr,
        )
    from iobench.cli.cost import judged_by
    from iobench.report.verdict import verdict_of_rows

    judged = judged_by(meta, compared, cost)
    verdict = verdict_of_rows(compared, meta.roles, order=meta.config_names, measure=judged)
    sys.stderr.flush()
    print()
    table = console_summary(compared, meta.roles, meta.config_names, judged)
    emphasis.print_answer(table + answer, verdict.winner, verdict.headline)
    return code


def console_summary(
    rows: list, roles: dict | None = None, order: Sequence[str] = (), measure: Any = None
) -> list[str]:
    """The short table printed at the end of a run: the report's verdict rule (report/verdict.py)
    over the run's measure; configs in the scenario's ``order``, whose first is the baseline
    when none is named naive."""
    from iobench.report.verdict import TIME, console_lines

    return console_lines(rows, roles, order=order, measure=measure or TIME)
