"""iobench's own cost: where a run's wall time goes outside its trials' measured intervals.

Every second a run spends outside a timed trial is machine time its user pays to learn
something, so the runner keeps a ``Clock`` and meta.json keeps its account (``overhead``):
the run's wall time from ``started_at`` to ``ended_at``, the trials' measured time
(time-to-ready, plus a strategy's persist and restart steps), and the rest by cause:

- ``setup``: the warm-up venv, scratch folders, meta.json's first writes;
- ``probe``: the storage micro-probes at the start (``iobench.run.policy``, not ``--no-probe``);
- ``priming``: untimed installs that fill warm caches, and the check that a cache is unchanged;
- ``cleanup``: removing the trials' folders;
- ``records``: writing rows, samples and stalls;
- ``trial``: a trial's own steps outside its timed interval (folders, sampler start and stop);
- ``other``: what the clock did not attribute (the wall minus everything above).

Two figures lie outside the run's wall and are kept beside it: ``before_start_s`` (from the
command's start to ``started_at``: pre-flight checks, the probe, wheels, the index) and
``report_s`` (the report built after the run). The one ratio is ``wall_s / trials_s``.

Pure bookkeeping: no measuring module is imported, so the report reads these figures too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from iobench.errors import IOBenchError
from iobench.rundir.meta import OVERHEAD_CAUSES

T = TypeVar("T")

#: a trial row's timed intervals (trials.csv columns)
MEASURED_COLUMNS = ("time_to_ready_s", "persist_s", "restart_s")
_COMMAND_START: list[float] = []


def command_started() -> None:
    """Mark the start of the command (``iobench run``): before_start_s counts from here."""
    _COMMAND_START[:] = [time.monotonic()]


def since_command_start(t: float) -> float | None:
    """Seconds from the command's start to monotonic time ``t`` (None: not marked)."""
    return t - _COMMAND_START[0] if _COMMAND_START else None


class Clock:
    """Seconds spent per cause since the run's start; the rest of the wall is ``other``."""

    def __init__(self, start: float | None = None) -> None:
        self.start = time.monotonic() if start is None else start
        self.parts: dict[str, float] = dict.fromkeys(OVERHEAD_CAUSES, 0.0)
        self.measured_s = 0.0
        self.counts: dict[str, int] = {}
        self._inner: list[float] = []  # per open ``part``: seconds of the parts inside it

    @contextmanager
    def part(self, cause: str) -> Iterator[None]:
        """Count the time of the ``with`` block as ``cause`` (less the parts nested in it)."""
        t = time.monotonic()
        self._inner.append(0.0)
        try:
            yield
        finally:
            elapsed = time.monotonic() - t
            self.add(cause, elapsed - self._inner.pop())
            if self._inner:
                self._inner[-1] += elapsed

    def add(self, cause: str, seconds: float) -> None:
        if cause not in self.parts:
            raise KeyError(f"unknown overhead cause {cause!r}")
        self.parts[cause] += max(0.0, seconds)

    def trial(self, row: Any, priming_s: float, seconds: float) -> None:
        """One trial that took ``seconds``: its measured time (time-to-ready, a strategy's
        persist and restart steps; a trial given up: its bound, the time it ran to learn
        "> bound"), its priming, and the rest of its own steps."""
        measured = sum(getattr(row, c, None) or 0.0 for c in MEASURED_COLUMNS)
        if getattr(row, "status", "") == "censored":
            measured += getattr(row, "censored_after_s", None) or 0.0
        self.measured_s += measured
        self.add("priming", priming_s)
        self.add("trial", seconds - measured - priming_s)

    def count(self, name: str, n: int = 1) -> None:
        """Count an event (``primes``, ``primes_reused``) kept beside the seconds."""
        self.counts[name] = self.counts.get(name, 0) + n

    def account(self, before_start_s: float | None = None) -> dict[str, Any]:
        """meta.json's ``overhead``: wall, measured, parts (``other`` the remainder), counts."""
        wall = time.monotonic() - self.start
        parts = {c: round(s, 3) for c, s in self.parts.items() if c != "other"}
        parts["other"] = round(max(0.0, wall - self.measured_s - sum(parts.values())), 3)
        out: dict[str, Any] = {
            "wall_s": round(wall, 3),
            "trials_s": round(self.measured_s, 3),
            "parts_s": parts,
            **self.counts,
        }
        if before_start_s is not None:
            out["before_start_s"] = round(max(0.0, before_start_s), 3)
        return out


def timed_report(run_dir: Any, build: Callable[[], T]) -> T:
    """Build the report and add its seconds to meta.json's overhead (``report_s``) of
    ``run_dir`` (an ``iobench.rundir.folder.RunDir``); a meta.json that cannot take it keeps none."""
    t = time.monotonic()
    result = build()
    try:
        account = run_dir.meta().overhead
        if account is not None:
            run_dir.update_meta(overhead={**account, "report_s": round(time.monotonic() - t, 3)})
    except (OSError, IOBenchError):
        pass
    return result


__all__ = ["MEASURED_COLUMNS", "Clock", "command_started", "since_command_start", "timed_report"]
