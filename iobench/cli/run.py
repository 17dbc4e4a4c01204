"""`iobench run`: the run itself (its options are iobench.cli.run_options, its end
iobench.cli.finish): check the plan, start the progress, run, then finish."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

from iobench.cli import emphasis
from iobench.cli.finish import console_summary, finish_run, run_exit_code
from iobench.errors import UsageError

__all__ = ["console_summary", "finish_run", "run_command", "run_exit_code"]


def _make_progress(args: argparse.Namespace) -> Any:
    from iobench.trial.progress import PlainProgress

    if sys.stdout.isatty() and not args.quiet and not emphasis.plain():
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
    return finish_run(args, run_dir, plan.cost, progress.notes)


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
            rc = finish_run(args, run_dir, plan.cost, progress.notes)
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
