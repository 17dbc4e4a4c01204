"""The kinds of work a trial can do, and the one function that runs a trial of any kind.

Each kind is one module on the seam of :mod:`iobench.trial.steps` (``Workload``): ``install``
(a venv, pip or uv, bytecode, the ready check), ``dataset`` (a training loop's reads of its
data), ``checkpoint`` (a trainer's saves and restores) and ``standin`` (iobench's own tests' fast stand-in). A scenario names its kind (``[scenario] kind``, ``iobench.scenario.vocab.WORKLOADS``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from iobench.errors import ScenarioError
from iobench.trial import checkpoint, dataset, standin
from iobench.trial.checkpoint import Checkpoint
from iobench.trial.context import TrialContext, TrialSpec
from iobench.trial.dataset import Dataset
from iobench.trial.install import Install
from iobench.trial.outcome import TrialResult
from iobench.trial.standin import StandIn
from iobench.trial.steps import Trial, Workload

#: each kind's workload, made afresh for every trial (it holds that trial's state)
KINDS: dict[str, Callable[[], Workload]] = {
    Install.kind: Install,
    Dataset.kind: Dataset,
    Checkpoint.kind: Checkpoint,
    StandIn.kind: StandIn,
}
#: each kind's check of its [workload] table (a kind without one takes no settings)
_CHECKS = {
    Dataset.kind: dataset.check_params,
    Checkpoint.kind: checkpoint.check_params,
    StandIn.kind: standin.check_params,
}
#: the kinds that install packages into venvs: the run serves them an index, warms up a venv
#: creator, records the installers' versions and predicts their time from a probe
INSTALLS = frozenset({Install.kind})


def workload_of(kind: str) -> Workload:
    try:
        return KINDS[kind]()
    except KeyError:
        raise ScenarioError(f"unknown workload kind {kind!r} (known: {', '.join(KINDS)})") from None


def check_settings(kind: str, table: Mapping[str, Any], configs: Sequence[str], where: str) -> None:
    """A scenario's ``[workload]`` table holds what its kind takes (before anything runs)."""
    if kind in _CHECKS:
        _CHECKS[kind](table, configs, where)
    elif table:
        raise ScenarioError(f"{where}: the {kind} workload takes no [workload] settings")


def run_trial(ctx: TrialContext, spec: TrialSpec) -> TrialResult:
    """Run one trial; a failing step, a stall or Ctrl-C end it with a row, never an exception."""
    return Trial(ctx, spec, workload_of(ctx.kind)).run()


__all__ = ["INSTALLS", "KINDS", "check_settings", "run_trial", "workload_of"]
