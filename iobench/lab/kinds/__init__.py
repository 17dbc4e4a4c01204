"""The lab's kinds of slow volume behind one interface: what ``up``, ``down`` and ``status``
need from each (start, stop, problem, fstype, needles, unavailable).

:mod:`~iobench.lab.manage` mounts and unmounts; a kind only knows how to start and stop its
own daemons and how to tell when they are unwell. The record they work on
(:class:`~iobench.lab.state.LabMount`) is passed in; kinds import neither ``manage`` nor this
registry.
"""

from __future__ import annotations

from typing import Protocol

from iobench.errors import UsageError
from iobench.lab.kinds.fuse import FUSE
from iobench.lab.kinds.sshfs import SSHFS
from iobench.lab.options import KINDS, VolumeOptions
from iobench.lab.state import LabMount


class Kind(Protocol):
    """One kind of emulated volume."""

    name: str
    fstype: str  # as the mount table shows it

    def unavailable(self) -> str | None:
        """What this machine lacks for this kind (one line with the next step), or None."""

    def start(self, lab: LabMount, options: VolumeOptions, timeout_s: float) -> None:
        """Start the daemons and return once ``lab.mountpoint`` is mounted (recording pids in ``lab``)."""

    def needles(self, lab: LabMount) -> list[str]:
        """Strings the daemon's command line must hold before its pid is signalled."""

    def stop(self, lab: LabMount) -> None:
        """End what ``start`` made beyond the mount and the daemon (both handled by manage)."""

    def problem(self, lab: LabMount) -> str | None:
        """What is wrong with a mounted, live volume of this kind, or None."""


_ALL: tuple[Kind, ...] = (FUSE, SSHFS)


def get(name: str) -> Kind:
    """The kind called ``name``; UsageError for an unknown one."""
    for kind in _ALL:
        if kind.name == name:
            return kind
    raise UsageError(f"--kind must be one of {', '.join(KINDS)}, not {name!r}")


def fstype_of(lab: LabMount) -> str:
    """The filesystem type a recorded volume shows in the mount table."""
    return get(lab.kind).fstype


def needles_of(lab: LabMount) -> list[str]:
    """Strings a recorded volume's daemon must have on its command line before we signal it."""
    return get(lab.kind).needles(lab)


__all__ = ["Kind", "fstype_of", "get", "needles_of"]
