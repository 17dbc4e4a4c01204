"""What `iobench doctor` finds: one thing worth knowing, its level, and the shell lines that
would fix it (the levels set the exit status)."""

from __future__ import annotations

from dataclasses import dataclass

LEVELS = ("ok", "info", "warn", "bad")


#: exit status by the worst finding: 0 nothing to fix, 3 slower than it should be, 4 broken
EXIT_STATUS = {"ok": 0, "info": 0, "warn": 3, "bad": 4}


@dataclass(frozen=True)
class Finding:
    """One thing worth knowing; ``fix`` holds the "set" lines that would remedy it (variables
    and folders, to paste into a start script); ``measure`` the run that would measure it."""

    level: str
    topic: str
    message: str
    fix: tuple[str, ...] = ()
    #: the run that would measure it, with its cost (not a line to paste into a start script)
    measure: tuple[str, ...] = ()
