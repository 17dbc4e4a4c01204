"""The command line: argparse subcommands, each validated before anything runs.

Each subcommand lives in its own module here and is a handler ``(args) -> int``;
``iobench.__main__.main`` is the only place that turns an ``IOBenchError`` into a one-line
message.
"""

from __future__ import annotations

import argparse

from iobench import __version__
from iobench.cli.common import _Parser
from iobench.cli.probe import _add_probe
from iobench.cli.run import _add_run, console_summary
from iobench.cli.scenarios import _add_clean, _add_scenarios
from iobench.cli.wheels import _add_wheels

__all__ = ["build_parser", "console_summary", "dispatch"]


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
