"""What `iobench doctor` finds: one thing worth knowing, its level, and the shell lines that
would fix it (the levels set the exit status)."""

from __future__ import annotations

from dataclasses import dataclass

LEVELS = ("ok", "info", "warn", "bad")


#: exit status by the worst finding: 0 nothing to fix, 3 slower than it should be, 4 broken
EXIT_STATUS = {"ok": 0, "info": 0, "warn": 3, "bad": 4}


@dataclass(frozen=True)
class Finding:
    """One thing worth knowing; ``fix`` holds shell lines that would remedy it."""

    level: str
    topic: str
    message: str
    fix: tuple[str, ...] = ()
