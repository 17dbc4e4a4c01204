"""What a kind of work is, at the bottom of every wing: its name, its column group, the
columns that say where its configs put things, and the few traits the wings above ask of it.

A kind (docs/design.md, "kind") is one file in each wing it touches, under one name:
``rundir/kinds/<name>.py`` declares this record — its ``Row`` (the core ``TrialRow`` plus the
kind's own column group, one line of trials.csv), its places and choices (what the verdict
and the start script compare between configs) and the columns it renamed; the wings above
register their own file of the kind by that name. No other file names a kind (a test holds
it, as the layering test holds imports): the wings dispatch on the record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from iobench.rundir.records import TrialRow


@dataclass(frozen=True)
class Place:
    """A column that names the role a config puts something on (trials.csv)."""

    what: str  # in words: "venv", "data copied"
    role: str  # the role column: ``venv_role``
    fstype: str  # its filesystem-type column: ``venv_fstype``
    off: str = ""  # what ``off`` means there ("data read in place"); "" when it cannot be off


@dataclass(frozen=True)
class Choice:
    """A column that says how a config does its work (an installer, loader workers)."""

    what: str  # in words: "installer"
    column: str


@dataclass(frozen=True)
class Kind:
    """One kind of work as the run directory knows it (see the module docstring)."""

    name: str
    doc: str  # one line: what a trial of this kind does
    row: type[TrialRow]  # the core columns plus this kind's group
    places: tuple[Place, ...] = ()
    choices: tuple[Choice, ...] = ()
    #: the trials can install packages into venvs: the run serves them an index, warms up a
    #: venv creator, records the installers' versions and predicts their time from a probe
    installs: bool = False
    #: columns renamed in a schema version: {version: {old name: new name}} (rundir/meta.py)
    renamed: Mapping[int, Mapping[str, str]] = field(default_factory=dict)
    #: a fleet trial's columns that are its builder's (the worker that built what the others
    #: restored, fan-out's rank 0: its persist step), the first column marking the builder
    built: tuple[str, ...] = ()

    @property
    def columns(self) -> tuple[str, ...]:
        """trials.csv's columns for a run of this kind, in order: the core's, then the kind's
        own, then ``error`` last (the one long cell, where a reader's eye ends)."""
        names = [f.name for f in dataclasses.fields(self.row) if f.name != "error"]
        return (*names, "error")

    @property
    def group(self) -> tuple[str, ...]:
        """The kind's own columns (the core's left out)."""
        core = {f.name for f in dataclasses.fields(TrialRow)}
        return tuple(c for c in self.columns if c not in core)


__all__ = ["Choice", "Kind", "Place"]
