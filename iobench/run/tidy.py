"""The run's removals and what it says when one fails: a trial's folder moved into the trash,
a scratch path removed while its removal progresses, the target's lock freed — each bounded
in time by the ``Remover`` (:mod:`iobench.system.removal`), each failure one warning naming
the path and how it goes later (`iobench clean`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from iobench.system.lock import TargetLock
from iobench.system.removal import TRASH, Remover
from iobench.system.scratch import Scratch
from iobench.trial.progress import Progress


class Tidy:
    """The runner's removals, said through its progress."""

    def __init__(self, remover: Remover, progress: Progress) -> None:
        self.remover, self.progress = remover, progress

    def defer(self, path: Path, scratch: Scratch) -> None:
        """Move a trial's folder into the run's trash (removed later by the Reaper)."""
        self.left(path, self.remover.defer(path, scratch.run_root / TRASH, scratch.root))

    def remove(self, path: Path, volume: Path) -> None:
        """Remove a scratch path while the removal progresses; say where it stays if not."""
        self.left(path, self.remover.remove(path, volume))

    def free_lock(self, lock: TargetLock, where: Path) -> None:
        lock.stop_heartbeat()  # here; the file's removal in a child, bounded
        if error := self.remover.run(lock.remove_file, where):
            self.progress.message(
                f"warning: lock in {where} not freed ({error}); stale once we exit"
            )

    def could_not_remove(self, errors: Iterable[str]) -> None:
        for error in errors:
            self.progress.message(f"warning: could not remove {error}")

    def left(self, path: Path, error: str | None) -> None:
        if error:
            self.progress.message(
                f"warning: could not remove {path}: {error}; `iobench clean` removes it later"
            )


__all__ = ["Tidy"]
