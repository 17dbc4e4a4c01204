"""``docs/cli.md``'s tables, generated from the parser itself: every subcommand, its
arguments grouped as ``--help`` groups them, each with what it takes and its help line — so
the reference cannot drift from the command line (a test holds the file equal to this).

    python -m iobench.cli.reference > docs/cli.md
"""

from __future__ import annotations

import argparse
import sys

from iobench.cli import EXIT_CODES, build_parser
from iobench.cli.common import ENV_DEFAULTS

HEADER = """# The command line

Every subcommand and option of `iobench`, generated from the parser
(`python -m iobench.cli.reference > docs/cli.md`; a test holds this file equal to it).
`iobench COMMAND --help` prints the same with examples. Options that an environment variable
can set say so (`[env IOBENCH_X]`); the command line wins.
"""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _takes(action: argparse.Action) -> str:
    """What an option is written as: ``--target DIR``, ``--no-probe``, ``SHELL``."""
    if action.choices and not isinstance(action, argparse._SubParsersAction):
        value = "{" + ",".join(map(str, action.choices)) + "}"
    elif action.metavar:
        value = action.metavar if isinstance(action.metavar, str) else " ".join(action.metavar)
    elif action.nargs == 0:
        value = ""
    else:
        value = action.dest.upper()
    value = value.replace("|", "\\|")  # a table cell: a pipe would end it
    if not action.option_strings:
        return f"`{value}`"
    names = ", ".join(f"`{o}`" for o in action.option_strings)
    return f"{names} `{value}`" if value else names


def _help(action: argparse.Action) -> str:
    text = action.help or ""
    if "%(default)" in text:
        text = text % {"default": action.default}
    return _cell(text)


def _groups(parser: argparse.ArgumentParser) -> list[tuple[str, list[argparse.Action]]]:
    out = []
    for group in parser._action_groups:
        actions = [
            a
            for a in group._group_actions
            if a.help is not argparse.SUPPRESS
            and not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
        ]
        if actions:
            out.append((group.title or "options", actions))
    return out


def _command_lines(name: str, parser: argparse.ArgumentParser, level: int) -> list[str]:
    lines = [f"{'#' * level} `iobench {name}`", ""]
    if parser.description:
        lines += [_cell(parser.description.split("\n\n")[0]), ""]
    for title, actions in _groups(parser):
        lines += [f"**{title}**", "", "| argument | what it does |", "|---|---|"]
        lines += [f"| {_takes(a)} | {_help(a)} |" for a in actions]
        lines.append("")
    for sub in parser._actions:
        if isinstance(sub, argparse._SubParsersAction):
            for child, child_parser in sub.choices.items():
                lines += _command_lines(f"{name} {child}", child_parser, level + 1)
    return lines


def _environment() -> list[str]:
    lines = ["## Environment", "", "Defaults that the command line overrides (`--resume` keeps the "
             "roles, scenario and index of the run it continues):", "",
             "| variable | option |", "|---|---|"]  # fmt: skip
    lines += [f"| `{var}` | `--{dest.replace('_', '-')}` |" for dest, var in ENV_DEFAULTS.items()]
    return [*lines, "", "Shell completion, generated from the same parser: `iobench completion "
            "bash > ~/.local/share/bash-completion/completions/iobench` (zsh: `iobench completion "
            'zsh > "${fpath[1]}/_iobench"`).', ""]  # fmt: skip


def markdown() -> str:
    """The whole of docs/cli.md."""
    parser = build_parser()
    lines = [HEADER, "## Exit status", "", "```", EXIT_CODES, "```", "",
             "`iobench doctor` has its own: 3 for warnings, 4 when something is broken.", "",
             *_environment()]  # fmt: skip
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                lines += _command_lines(name, sub, 2)
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    sys.stdout.write(markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
