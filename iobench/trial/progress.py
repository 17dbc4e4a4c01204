"""How a run shows itself while it works: the runner calls these hooks, nothing else prints.

``PlainProgress`` writes one line per event (for logs, CI, pipes); a live terminal display
can implement the same hooks. Formatting helpers return strings so they can be tested.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from typing import Protocol, TextIO

from iobench.rundir.records import STALL_WORDS, TrialRow


def trial_line(k: int, n: int, row: TrialRow, width: int | None = None) -> str:
    """One line for a finished trial; with ``width`` (a terminal's columns) the details go
    first, then the phases, so that the line never wraps (the row keeps them all)."""
    ttr = row.time_to_ready_s
    parts = [
        f"[{k}/{n}]",
        f"{row.trial_id:<24}",
        f"{row.status:<8}",
        f"ready {ttr:7.2f} s" if ttr is not None else "ready       - ",
    ]
    full = _details(row, parts)
    if width is None:
        return " ".join(full)
    for keep in (len(full), len(full) - 1, len(parts)):
        line = " ".join(full[:keep])
        if len(line) < width:
            return line
    return line[: max(width - 2, 10)] + "…"


#: messages that are the run's internals, not its answer: a trial's own notes (contention,
#: the warm cache it filled, what the lab gave), the probe, the wheels' profile, what was not
#: predicted, scratch left by others. Counted and kept (``notes.txt``, the report); printed
#: whole with ``--verbose``.
INTERNAL = ("  ", "wheels: profile", "probe: ", "not predicted before", "note: ")


def is_internal(text: str) -> bool:
    """True for a message that goes to the run's notes rather than the screen."""
    return text.startswith(INTERNAL)


def fit(text: str, width: int | None) -> str:
    """``text`` wrapped to ``width`` columns, its later lines indented (paths never broken)."""
    if width is None or len(text) <= width:
        return text
    return "\n".join(textwrap.wrap(text, width, subsequent_indent="  ", break_long_words=False,
                                    break_on_hyphens=False))  # fmt: skip


def stream_width(stream: TextIO) -> int | None:
    """The columns lines must fit: the terminal's, or ``COLUMNS`` where the environment
    gives it (a pipe read by a terminal, a test); None: a log keeps every detail."""
    if stream.isatty():
        return shutil.get_terminal_size().columns
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 20 else None


def shown(path: object) -> str:
    """``path`` as the user reads it: relative to the current folder when below it."""
    from pathlib import Path

    p = Path(str(path))
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(p)


def _details(row: TrialRow, parts: list[str]) -> list[str]:
    """An ok row's own words (its kind's: ``TrialRow.details``), or the error of another."""
    if row.status == "ok":
        return [*parts, *row.details()]
    return [*parts, row.error[:160]] if row.error else parts


class Progress(Protocol):
    """Hooks the runner calls; implementations must be cheap (they run on the main thread)."""

    def run_started(self, run_dir: str, n_trials: int, done: int) -> None: ...
    def trial_started(self, k: int, n: int, trial_id: str) -> None: ...
    def phase(self, trial_id: str, phase: str) -> None: ...
    def tick(
        self, trial_id: str, phase: str, elapsed: float, sample: dict | None, stall_s: float
    ) -> None: ...
    def trial_finished(self, k: int, n: int, row: TrialRow) -> None: ...
    def rank_finished(self, k: int, n: int, row: TrialRow) -> None: ...
    def message(self, text: str) -> None: ...
    def run_finished(self) -> None: ...


class PlainProgress:
    """Line-oriented output: one line per trial, nothing animated."""

    def __init__(
        self, stream: TextIO | None = None, verbose: bool = False, quiet: bool = False
    ) -> None:
        self.stream = stream or sys.stdout
        self.verbose = verbose
        self.quiet = quiet
        # where its lines go: --quiet keeps stdout for the verdict alone, what went wrong
        # goes to stderr
        self.out = sys.stderr if quiet and stream is None else self.stream
        self._warned_stall: set[str] = set()
        self._in_trial = False
        self._notes: list[str] = []  # a trial's notes, printed under its line (--verbose)
        self.notes: list[str] = []  # the run's internals, for its notes line and notes.txt
        # a terminal's width: lines fit it; piped output keeps every detail
        self.width = stream_width(self.stream)

    def _print(self, text: str) -> None:
        print(fit(text, self.width), file=self.out, flush=True)

    def run_started(self, run_dir: str, n_trials: int, done: int) -> None:
        if not self.quiet:
            extra = f" ({done} already done)" if done else ""
            trials = f"{n_trials} trial{'' if n_trials == 1 else 's'}"
            self._print(f"iobench: {trials}{extra} -> {shown(run_dir)}")

    def trial_started(self, k: int, n: int, trial_id: str) -> None:
        self._in_trial = True
        if self.verbose:
            self._print(f"[{k}/{n}] {trial_id}: started")

    def phase(self, trial_id: str, phase: str) -> None:
        if self.verbose:
            self._print(f"  {trial_id}: {phase}")

    def tick(
        self, trial_id: str, phase: str, elapsed: float, sample: dict | None, stall_s: float
    ) -> None:
        if stall_s > 0 and trial_id not in self._warned_stall:
            self._warned_stall.add(trial_id)
            self._print(f"  {trial_id}: {STALL_WORDS} for {stall_s:.0f} s in {phase} (stall)")

    def trial_finished(self, k: int, n: int, row: TrialRow) -> None:
        if not self.quiet or row.get("status") != "ok":
            print(trial_line(k, n, row, self.width), file=self.out, flush=True)
        for note in self._notes:  # a trial's notes after its line, where they belong
            self._print(note)
        self._notes, self._in_trial = [], False

    def rank_finished(self, k: int, n: int, row: TrialRow) -> None:
        """Another fleet rank's share of trial k, gathered by rank 0: its line, as wide as ours."""
        if not self.quiet or row.get("status") != "ok":
            print(trial_line(k, n, row, self.width), file=self.out, flush=True)

    def message(self, text: str) -> None:
        if self.quiet and not text.lstrip().startswith(("warning:", "iobench:")):
            return  # --quiet: the table and the verdict, and what went wrong
        if is_internal(text):
            self.notes.append(text.strip())
            if not self.verbose:
                return
        if self._in_trial and text.startswith("  "):
            self._notes.append(text)  # said during a trial: printed under its line
        else:
            self._print(text)

    def run_finished(self) -> None:
        return
