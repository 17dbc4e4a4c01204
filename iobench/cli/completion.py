"""`iobench completion bash|zsh|tcsh`: a shell completion script generated from the parser.

shtab writes the script from the same argparse tree that parses the command line, so it
cannot drift from the options; options whose metavar names a folder or a file complete
paths. Nothing is imported at start-up: shtab is loaded only by this command.
"""

from __future__ import annotations

import argparse

SHELLS = ("bash", "zsh", "tcsh")
_DIR_METAVARS = {"DIR", "RUN_DIR", "RESULTS", "NAME=DIR"}
_FILE_METAVARS = {"FILE", "PATH", "NAME|FILE", "WHEEL", "PROFILE"}


def _add_completion(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh or tcsh)",
        description="Print a completion script for your shell. For example:\n"
        "  iobench completion bash > ~/.local/share/bash-completion/completions/iobench\n"
        '  iobench completion zsh > "${fpath[1]}/_iobench"',
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("shell", choices=SHELLS, metavar="SHELL", help="bash, zsh or tcsh")
    p.set_defaults(func=cmd_completion)


def _mark_paths(parser: argparse.ArgumentParser, shtab: object) -> None:
    """Tell shtab which arguments take folders or files (from their metavars), recursively."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _mark_paths(child, shtab)
            continue
        metavar = action.metavar if isinstance(action.metavar, str) else ""
        if metavar in _DIR_METAVARS:
            action.complete = shtab.DIRECTORY  # type: ignore[attr-defined]
        elif metavar in _FILE_METAVARS:
            action.complete = shtab.FILE  # type: ignore[attr-defined]


def completion_script(shell: str) -> str:
    """The completion script for ``shell`` (raises IOBenchError when shtab is missing)."""
    from iobench.cli import build_parser
    from iobench.errors import IOBenchError

    try:
        import shtab
    except ImportError:
        raise IOBenchError("shell completion needs shtab: pip install shtab") from None
    parser = build_parser()
    _mark_paths(parser, shtab)
    return str(shtab.complete(parser, shell=shell))


def cmd_completion(args: argparse.Namespace) -> int:
    print(completion_script(args.shell))
    return 0
