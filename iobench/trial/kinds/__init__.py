"""The trial wing's registry of the kinds of work, and the one function that runs a trial of
any kind.

Each kind is one module on the seam of :mod:`iobench.trial.steps` (``Workload``), registered
here by the name the run directory gives it (``iobench.rundir.kinds``): what its trials do
between their folders and their row. Its settings come from its scenario file
(``iobench.scenario.kinds``); what only the machine that runs it can check (a folder that must
exist, an interpreter that must run) is its ``check`` here, asked before anything runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from iobench.errors import ScenarioError
from iobench.trial.context import TrialContext, TrialSpec
from iobench.trial.kinds import checkpoint, dataset, install, standin, weights
from iobench.trial.outcome import TrialResult
from iobench.trial.steps import Trial, Workload

#: each kind's workload, made afresh for every trial (it holds that trial's state)
KINDS: dict[str, Callable[[], Workload]] = {
    install.NAME: install.Install,
    dataset.NAME: dataset.Dataset,
    checkpoint.NAME: checkpoint.Checkpoint,
    weights.NAME: weights.Weights,
    standin.NAME: standin.StandIn,
}
#: each kind's checks of its settings on this machine, before anything runs
_CHECKS: dict[str, Callable[[Mapping[str, Any], Sequence[str], str], None]] = {
    dataset.NAME: dataset.check_here,
    checkpoint.NAME: checkpoint.check_here,
    weights.NAME: weights.check_here,
}


def workload_of(kind: str) -> Workload:
    try:
        return KINDS[kind]()
    except KeyError:
        raise ScenarioError(f"unknown workload kind {kind!r} (known: {', '.join(KINDS)})") from None


def check_here(kind: str, table: Mapping[str, Any], configs: Sequence[str], where: str) -> None:
    """What the scenario's ``[workload]`` table names exists and runs on this machine."""
    if kind in _CHECKS:
        _CHECKS[kind](table, configs, where)


def run_trial(ctx: TrialContext, spec: TrialSpec) -> TrialResult:
    """Run one trial; a failing step, a stall or Ctrl-C end it with a row, never an exception."""
    return Trial(ctx, spec, workload_of(ctx.kind)).run()


__all__ = ["KINDS", "check_here", "run_trial", "workload_of"]
