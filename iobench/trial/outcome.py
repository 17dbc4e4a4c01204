"""How a trial ends: a step returns ``None`` to go on or a ``Stop`` (final status and one-line
error) to end it; a phase's result is read as one by :func:`check`; the trial hands its row
and sampled series to the runner as a ``TrialResult``. No exception carries control."""

from __future__ import annotations

from dataclasses import dataclass

from iobench.rundir.records import TrialRow
from iobench.system import procfs
from iobench.trial.process import PhaseResult
from iobench.trial.sampler import SamplerResult

#: the error of a trial ended by Ctrl-C, SIGTERM or SIGHUP
INTERRUPTED = "interrupted by the user (SIGINT/SIGTERM); trial scratch removed"
#: lines of a failed phase's output kept in the row's error
TAIL_LINES = 12


@dataclass(frozen=True)
class Stop:
    """Why a trial ended early: its final status and the one-line error."""

    status: str  # "failed", "stalled" or "interrupted"
    error: str


@dataclass
class TrialResult:
    """A trial's row and the series to save after it."""

    row: TrialRow
    series: SamplerResult | None = None
    priming_s: float = 0.0  # untimed: filling the warm cache, checking it afterwards


def check(r: PhaseResult, what: str) -> Stop | None:
    """None when the phase succeeded, else why the trial stops."""
    if r.ok:
        return None
    if r.stopped == "stalled":
        return Stop("stalled", f"{r.phase}: {r.error}")
    if r.stopped == "interrupted":
        return Stop("interrupted", INTERRUPTED)
    if r.error:
        return Stop("failed", f"{what}: {r.error}")
    return Stop(
        "failed", f"{what} failed (exit {r.returncode}): {procfs.tail(r.output, TAIL_LINES)}"
    )


__all__ = ["INTERRUPTED", "Stop", "TrialResult", "check"]
