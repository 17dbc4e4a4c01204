"""The registry of the kinds of work, at the bottom: one line a kind (``iobench.rundir.kind``).

The wings above keep registries of their own files of each kind by these names (the scenario's
settings, the trial's workload, the report's section); this one is the list they are checked
against, and what a run directory is read by: a run's kind (meta.json) says which row its
trials.csv holds.
"""

from __future__ import annotations

import dataclasses
import functools

from iobench.errors import RunDirError
from iobench.rundir.kind import Kind
from iobench.rundir.kinds import checkpoint, dataset, install, standin, weights
from iobench.rundir.records import TrialRow, text_columns

#: every kind, by name, in the order the tables list them
KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        install.KIND,
        dataset.KIND,
        checkpoint.KIND,
        weights.KIND,
        standin.KIND,
    )
}
#: the kind of a scenario that names none, and of runs made before there were others
DEFAULT = install.NAME


def kind(name: str) -> Kind:
    """The kind called ``name``; a RunDirError for a name no kind has (a damaged meta.json)."""
    try:
        return KINDS[name]
    except KeyError:
        raise RunDirError(
            f"unknown kind of work {name[:40]!r} (known: {', '.join(KINDS)})"
        ) from None


def of_row(row: TrialRow) -> Kind:
    """The kind whose row ``row`` is (the first registered: the stand-in shares install's)."""
    return next((k for k in KINDS.values() if type(row) is k.row), KINDS[DEFAULT])


def row_type(name: str) -> type[TrialRow]:
    """The row of trials.csv for a run of kind ``name``."""
    return kind(name).row


@functools.cache
def all_columns() -> tuple[str, ...]:
    """Every kind's columns, the core's first, each group once, in the registry's order: the
    report's frame of trials, whatever the run's kind (a column a kind lacks stays empty)."""
    out: dict[str, None] = dict.fromkeys(f.name for f in dataclasses.fields(TrialRow))
    for k in KINDS.values():
        out.update(dict.fromkeys(k.columns))
    return tuple(out)


@functools.cache
def all_text_columns() -> tuple[str, ...]:
    """The columns of ``all_columns`` that hold text (the others hold numbers)."""
    text = {c for k in KINDS.values() for c in text_columns(k.row)}
    return tuple(c for c in all_columns() if c in text)


def all_places() -> tuple:
    """Every kind's places, each once (the verdict's and the start script's "what moved")."""
    return tuple(dict.fromkeys(p for k in KINDS.values() for p in k.places))


def all_choices() -> tuple:
    """Every kind's choices, each once."""
    return tuple(dict.fromkeys(c for k in KINDS.values() for c in k.choices))


def renamed_before(version: int, name: str) -> dict[str, str]:
    """{old column: new column} for a trials.csv of kind ``name`` written at schema
    ``version``: every rename of a later version, applied in order."""
    out: dict[str, str] = {}
    for v, table in sorted(kind(name).renamed.items()):
        if version < v:
            out.update(table)
    return out


__all__ = ["DEFAULT", "KINDS", "all_choices", "all_columns", "all_places", "all_text_columns", "kind", "of_row",
           "renamed_before", "row_type"]  # fmt: skip
