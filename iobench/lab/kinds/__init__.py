"""The lab's kinds of slow volume behind one interface: what ``up``, ``down`` and ``status``
need from each (start, stop, problem, fstype, needles, unavailable).

:mod:`~iobench.lab.manage` records, mounts and unmounts; a kind only knows how to start and
stop its own daemons and how to tell when they are unwell. Kinds import nothing from
``manage`` (no import cycle): the record they work on is passed in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from iobench.errors import UsageError

if TYPE_CHECKING:
    from iobench.lab.manage import LabMount
    from iobench.lab.options import VolumeOptions


NAMES = ("fuse", "sshfs")  # in the order `--kind` lists them; the first is the default


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


def get(name: str) -> Kind:
    """The kind called ``name``; UsageError for an unknown one."""
    from iobench.lab.kinds.fuse import FUSE
    from iobench.lab.kinds.sshfs import SSHFS

    for kind in (FUSE, SSHFS):
        if kind.name == name:
            return kind
    raise UsageError(f"--kind must be one of {', '.join(NAMES)}, not {name!r}")


def by_fstype(fstype: str) -> Kind | None:
    """The kind whose mounts carry ``fstype`` (orphan mounts in the mount table)."""
    for name in NAMES:
        if get(name).fstype == fstype:
            return get(name)
    return None
