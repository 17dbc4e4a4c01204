"""The last lines of `iobench run` on a terminal: the winner's row and the verdict in bold —
plain text when the output is not a terminal (a log, a pipe, a launcher's capture).

rich (a chosen dependency) knows the terminal; it is imported only when the output is one.
The lines come wrapped already (iobench.cli.finish), so rich prints them as they are.
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
    verdict: Sequence[str] = (),
    stream: TextIO | None = None,
) -> None:
    """Print the final table, then the verdict's lines (bold on a terminal) and ``lines``'
    rest; ``verdict``: the verdict's lines among ``lines`` (or printed first when absent)."""
    out = stream if stream is not None else sys.stdout
    lines = list(lines) if any(v in lines for v in verdict) else [*verdict, *lines]
    if not out.isatty() or plain():
        for line in lines:
            print(line, file=out)
        return
    from rich.console import Console
    from rich.text import Text

    console = Console(file=out, highlight=False, emoji=False, markup=False)
    for line in lines:
        style = "bold" if line in verdict else "bold green" if _is_row_of(line, winner) else ""
        console.print(Text(line, style=style), soft_wrap=True)  # wrapped already


def plain() -> bool:
    """True for a rank of a launched job whose launcher's output is not a person's terminal:
    Open MPI gives each rank a pty even when ``mpirun ... > log`` captures it, so the rank's
    own isatty() says yes; the launcher's standard output (the nearest ancestor that is one
    of LAUNCHERS, read in /proc) tells. Such lines carry no terminal escapes."""
    import os

    if not any(v in os.environ for v in LAUNCHER_RANK):
        return False
    pid = os.getppid()
    for _ in range(8):  # rank <- orted/prted <- mpirun (on one host), a few more across hosts
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            return True
        name = stat[stat.find("(") + 1 : stat.rfind(")")]
        if name in LAUNCHERS:
            try:
                out = os.readlink(f"/proc/{pid}/fd/1")
            except OSError:
                return True
            return not out.startswith(("/dev/pts/", "/dev/tty"))
        pid = int(stat[stat.rfind(")") + 2 :].split()[1])
        if pid <= 1:
            break
    return True  # no launcher of ours in sight (another host's daemon): a log, most likely


#: the launchers' process names, whose own output says whether a person watches
LAUNCHERS = ("mpirun", "mpiexec", "orterun", "prterun", "srun")


#: the environment variables a launcher sets in each rank (Open MPI's, PMIx's, Slurm's)
LAUNCHER_RANK = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK")


__all__ = ["LAUNCHER_RANK", "SCRIPT_INDENT", "plain", "print_answer"]
