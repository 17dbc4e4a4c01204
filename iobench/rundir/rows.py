"""trials.csv's rows as read: which rows count when a trial ran twice (the one "latest row"
rule, shared by --resume, the end-of-run table and the report), the file's content, and the
check that a header is whole."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from iobench.errors import RunDirError
from iobench.rundir.records import TrialRow


def check_widths(records: Sequence[Sequence[str]], where: str, cut_last: bool) -> None:
    """A row wider than the header, or every complete row narrower, means the header is
    damaged (a row cut short is narrower, never wider; and never all of them)."""
    width = len(records[0])
    rows = [(n, len(rec)) for n, rec in enumerate(records[1:], start=2) if rec]
    wide = next(((n, w) for n, w in rows if w > width), None)
    complete = rows[:-1] if cut_last else rows
    if wide is None and complete and all(w < width for _, w in complete):
        wide = complete[0]
    if wide is not None:
        raise RunDirError(
            f"{where}: header is cut short or damaged (row {wide[0]} has {wide[1]} cells, the header {width})"
        )


def latest_rows(trial_ids: Sequence[str], statuses: Sequence[str]) -> tuple[list[int], list[str]]:
    """Which rows count when a trial id appears more than once: the one "latest row" rule.

    ``iobench run --resume`` runs an ``interrupted`` trial again and appends its new row. The
    interrupted row of a trial that has any other row is dropped (it is neither a failure
    nor a result); of what is left, the last row per trial id counts. Returns the indices
    kept (in file order) and the ids that were run again.
    """
    finished = {t for t, s in zip(trial_ids, statuses, strict=True) if s != "interrupted"}
    superseded = [
        s == "interrupted" and t in finished for t, s in zip(trial_ids, statuses, strict=True)
    ]
    last = {t: i for i, t in enumerate(trial_ids) if not superseded[i]}
    kept = sorted(last.values())
    resumed = list(dict.fromkeys(t for t, sup in zip(trial_ids, superseded, strict=True) if sup))
    return kept, resumed


@dataclass(frozen=True)
class TrialsFile:
    """trials.csv as read: its rows, its header, and the rows not trusted (cut short)."""

    rows: tuple[TrialRow, ...] = ()
    columns: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()  # one line per row cut short

    def latest(self) -> tuple[list[TrialRow], list[str]]:
        """The rows that count (``latest_rows``) and the trial ids run again by --resume."""
        kept, resumed = latest_rows([r.trial_id for r in self.rows], [r.status for r in self.rows])
        return [self.rows[i] for i in kept], resumed


__all__ = ["TrialsFile", "check_widths", "latest_rows"]
