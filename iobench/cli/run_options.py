"""`iobench run`'s options: where (the roles), what to install, output, limits, order,
strategies, fleets and the axes. Building them imports no measuring code (`--help` stays
fast); the command itself is iobench.cli.run, imported when a run is asked for.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from iobench.cli.common import positive_float, role_spec


def run_command(args: argparse.Namespace) -> int:
    """`iobench run` (iobench.cli.run.run_command, imported only now)."""
    from iobench.cli.run import run_command as command

    return command(args)


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
        "--quiet",
        "-q",
        action="store_true",
        help="the verdict alone on stdout; warnings and failures on stderr",
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
