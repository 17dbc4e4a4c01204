"""The last lines of `iobench run` on a terminal: the winner's row and the verdict in bold,
prose wrapped to the terminal's width — plain text, unwrapped, when piped.

rich (a chosen dependency) knows the terminal and its width; it is imported only when the
output is a terminal. The start script's lines (indented by four spaces) are never wrapped:
a line broken by the printer would break the script when pasted.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

#: the start script's lines, as report/formats.answer_lines indents them
SCRIPT_INDENT = "    "


def _is_row_of(line: str, config: str | None) -> bool:
    words = line.split()
    return bool(config) and bool(words) and words[0] == config and len(words) > 2


def print_answer(
    lines: Sequence[str],
    winner: str | None = None,
    verdict: str | None = None,
    stream: TextIO | None = None,
) -> None:
    """Print the final table, the verdict and the start script."""
    out = stream if stream is not None else sys.stdout
    if not out.isatty():
        for line in lines:
            print(line, file=out)
        return
    from rich.console import Console
    from rich.text import Text

    console = Console(file=out, highlight=False, emoji=False, markup=False)
    for line in lines:
        if line.startswith(SCRIPT_INDENT) or line.startswith("#"):
            console.print(Text(line), soft_wrap=True)  # never broken: it is pasted
        elif verdict is not None and line == verdict:
            console.print(Text(line, style="bold"))
        elif _is_row_of(line, winner):
            console.print(Text(line, style="bold green"), soft_wrap=True)
        else:
            console.print(Text(line))


__all__ = ["print_answer"]
