"""The command line: argparse subcommands, each validated before anything runs.

Each subcommand lives in its own module here and is a handler ``(args) -> int``;
``iobench.__main__.main`` is the only place that turns an ``IOBenchError`` into a one-line
message. Building the parser imports no measuring code and no report library, so
``iobench --help`` stays fast.
"""

from __future__ import annotations

import argparse

from iobench import __version__
from iobench.cli.common import (
    ENV_DEFAULTS,
    _Parser,
    apply_env_defaults,
    innermost_parser,
    mention_env,
)
from iobench.cli.completion import _add_completion
from iobench.cli.doctor import _add_doctor
from iobench.cli.fleet import register as _add_fleet
from iobench.cli.lab import register as _add_lab
from iobench.cli.list import _add_list
from iobench.cli.probe import _add_probe
from iobench.cli.report import register as _add_report
from iobench.cli.run_options import _add_run
from iobench.cli.scenarios import _add_clean, _add_scenarios
from iobench.cli.wheels import _add_wheels

__all__ = ["EXIT_CODES", "build_parser", "dispatch"]

EXIT_CODES = """exit status:
  0    every trial succeeded (or the command did what it was asked)
  1    a runtime failure (lock held, lab, run directory, report), or some trials failed
       (iobench run --allow-failures: 0 while at least one trial per config succeeded)
  2    a usage error: a bad option, value, path or scenario
  3    doctor: warnings; compare --fail-slower: a config slower beyond noise past the bar
  4    doctor: something is broken (an unreachable index, almost no space, a hung probe)
  130  interrupted (Ctrl-C); finished trials are kept, continue with --resume RUN_DIR"""

START_HERE = """start here:
  iobench run                                  the offline smoke test (about 40 s, no network)
  iobench run --target /workspace --tmp /tmp   your network volume against local disk
  iobench run --dry-run --scenario torch       what a run would do, creating nothing
  iobench COMMAND --help                       the options of one command"""

# Subcommands in the order `iobench --help` lists them.
REGISTRARS = (
    _add_run,
    _add_report,
    _add_list,
    _add_probe,
    _add_doctor,
    _add_fleet,
    _add_lab,
    _add_wheels,
    _add_scenarios,
    _add_clean,
    _add_completion,
)


# ---------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    """The whole command line (imports no measuring module and no report library)."""
    env = "\n".join(f"  {var:<20} --{dest.replace('_', '-')}" for dest, var in ENV_DEFAULTS.items())
    parser = _Parser(
        prog="iobench",
        description="Where should a Python venv, TMPDIR and package caches live on this machine,\n"
        "and what does the wrong choice cost in idle GPU time?",
        epilog=f"{EXIT_CODES}\n\nenvironment (defaults for the options):\n{env}\n\n{START_HERE}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"iobench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for register in REGISTRARS:
        register(sub)
    for child in sub.choices.values():
        mention_env(child)
    return parser


def dispatch(argv: list[str]) -> int:
    """Parse ``argv`` and run the chosen subcommand; return its exit status."""
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    inner = innermost_parser(parser, args)
    if extras:
        inner.unknown_option_error(extras)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    apply_env_defaults(inner, args)
    return int(args.func(args) or 0)
