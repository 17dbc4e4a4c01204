"""Argument types and the parser class shared by every subcommand."""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NoReturn, cast

from iobench.errors import UsageError


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


class ArgumentUsageError(UsageError):
    """A command line argparse refused: one error line, ending with where the options are
    (``usage`` keeps the subcommand's usage line for a caller that wants it)."""

    def __init__(self, message: str, usage: str) -> None:
        super().__init__(message)
        self.usage = usage


def suggest(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'run'?"`` for a near miss among ``choices`` (difflib), else ``""``."""
    from iobench.units import did_you_mean  # not for --help

    hint = did_you_mean(word, choices)
    return f"; {hint}" if hint else ""


def terminal_columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size`` finds it: ``COLUMNS`` when set,
    else the terminal on standard output, else 80."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Parser(argparse.ArgumentParser):
    """argparse that raises ArgumentUsageError (exit 2) instead of printing and exiting.

    The message carries no program prefix (``iobench.__main__.main`` adds the one
    ``iobench: error:``); invalid choices get a "did you mean" from difflib, which argparse
    itself only offers from Python 3.14 on.
    """

    def _get_formatter(self) -> argparse.HelpFormatter:
        # argparse asks shutil for the width, and importing shutil (with zlib, bz2 and lzma)
        # is a tenth of --help's time: the same rule (COLUMNS, then the terminal, then 80)
        formatter = cast(Any, self.formatter_class)  # typeshed knows prog= alone
        return cast(argparse.HelpFormatter, formatter(prog=self.prog, width=terminal_columns() - 2))

    def error(self, message: str) -> NoReturn:
        raise ArgumentUsageError(f"{message} (options: {self.prog} --help)", self.short_usage())

    def short_usage(self) -> str:
        """``usage: iobench run [OPTIONS]`` (argparse's own when it fits on one line)."""
        usage = " ".join(self.format_usage().split())
        if len(usage) <= 100:
            return usage
        positionals = [
            a.metavar if isinstance(a.metavar, str) else a.dest
            for a in self._actions
            if not a.option_strings and not isinstance(a, argparse._SubParsersAction)
        ]
        tail = " ".join(["[OPTIONS]", *positionals])
        return f"usage: {self.prog} {tail}  (all options: {self.prog} --help)"

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is not None and value not in choices:
            names = ", ".join(map(repr, choices))
            hint = suggest(str(value), [str(c) for c in choices])
            raise argparse.ArgumentError(
                action, f"invalid choice {value!r}{hint} (choose from {names})"
            )

    def unknown_option_error(self, extras: list[str]) -> NoReturn:
        """Refuse arguments nobody took, suggesting the nearest option of this parser."""
        first = next((e for e in extras if e.startswith("-")), extras[0])
        hint = (
            suggest(first.split("=", 1)[0], self._option_string_actions)
            if first.startswith("-")
            else ""
        )
        self.error(f"unrecognized arguments: {' '.join(extras)}{hint}")


class Later:
    """A help text made when it is shown, so that building the parser (``--help``) imports
    only the cli wing: ``Later(lambda: f"... {a_constant_of_another_wing}")``. argparse
    formats help with ``%``; ``mention_env`` appends with ``+`` and asks ``in`` (of what
    it appended: the made text names no variable)."""

    def __init__(self, make: Any, extra: str = "") -> None:
        self.make, self.extra = make, extra

    def __str__(self) -> str:
        return str(self.make()) + self.extra

    def __mod__(self, params: Any) -> str:
        return str(self) % params

    def __add__(self, more: str) -> Later:
        return Later(self.make, self.extra + more)

    def __contains__(self, text: str) -> bool:
        return text in self.extra

    def __getattr__(self, name: str) -> Any:  # what a formatter asks of a str (strip...)
        return getattr(str(self), name)


class LaterChoices:
    """An option's choices, listed when first asked for (``choices=LaterChoices(lambda:
    KINDS)``): the wing that owns the names is imported only when the option is used."""

    def __init__(self, make: Any) -> None:
        self.make = make

    def __iter__(self) -> Any:
        return iter(self.make())

    def __contains__(self, value: object) -> bool:
        return value in self.make()


def later(make: Any) -> str:
    """A help text ``make()`` returns when shown (``Later``), typed as the str argparse takes."""
    return cast(str, Later(make))


# ---------------------------------------------------------------- environment defaults
# option dest -> the variable that gives its default (the command line wins)
ENV_DEFAULTS = {
    "target": "IOBENCH_TARGET",
    "tmp": "IOBENCH_TMP",
    "results": "IOBENCH_RESULTS",
    "scenario": "IOBENCH_SCENARIO",
    "python": "IOBENCH_PYTHON",
    "wheelhouse": "IOBENCH_WHEELHOUSE",
    "index_url": "IOBENCH_INDEX_URL",
    "gpu": "IOBENCH_GPU",
}
# what an option falls back to when neither the command line nor the environment gives it
FALLBACKS: dict[str, object] = {"results": Path("results")}
# what --resume takes from the run it continues: the environment must not override it
_RESUME_KEEPS = ("target", "tmp", "scenario", "python", "wheelhouse", "index_url")


def innermost_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> _Parser:
    """The parser of the (sub)subcommand ``args`` chose, e.g. ``iobench wheels synth``'s."""
    while True:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        chosen = getattr(args, subs[0].dest, None) if subs else None
        if not subs or chosen is None or chosen not in subs[0].choices:
            assert isinstance(parser, _Parser)
            return parser
        parser = subs[0].choices[chosen]


def apply_env_defaults(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Fill options left unset from ``IOBENCH_*`` variables, converted as on the command line."""
    import os

    for action in parser._actions:
        var = ENV_DEFAULTS.get(action.dest)
        value = os.environ.get(var or "", "")
        if not var or not value or getattr(args, action.dest, None) is not None:
            continue
        if getattr(args, "resume", None) is not None and action.dest in _RESUME_KEEPS:
            continue
        try:
            converted = action.type(value) if callable(action.type) else value
        except (argparse.ArgumentTypeError, ValueError) as exc:
            raise UsageError(f"{var}={value!r}: {exc}") from None
        setattr(args, action.dest, converted)
    for dest, fallback in FALLBACKS.items():
        if hasattr(args, dest) and getattr(args, dest) is None:
            setattr(args, dest, fallback)


def mention_env(parser: argparse.ArgumentParser) -> None:
    """Append ``[env IOBENCH_X]`` to the help of each option an environment variable sets."""
    for action in parser._actions:
        var = ENV_DEFAULTS.get(action.dest)
        if var and action.help and action.help is not argparse.SUPPRESS and var not in action.help:
            action.help += f" [env {var}]"
