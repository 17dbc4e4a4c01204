"""Which trial, and what it takes from its run: a ``TrialSpec`` (a config, its repeat, its
place in the run's order) and the ``TrialContext`` the runner builds once for all trials."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iobench.scenario.config import Config
from iobench.system.scratch import Scratch
from iobench.trial.index import LocalIndex
from iobench.trial.installers import IndexSpec
from iobench.trial.progress import Progress
from iobench.trial.warmcache import WarmCaches


@dataclass(frozen=True)
class TrialSpec:
    """Which trial: a config, its repeat, and where it falls in the run's order."""

    config: Config
    repeat: int
    round: int = 1
    position: int = 0  # place of this config within its round (0: first)
    fleet_size: int = 0  # workers starting this trial together (0: a run of one)
    rank: int | None = None  # this worker's MPI rank in a fleet run

    @property
    def slot(self) -> str:
        """The fleet trial this is one worker's share of (every worker's trial of it)."""
        size = f"-n{self.fleet_size}" if self.rank is not None else ""
        return f"{self.config.name}-r{self.repeat}{size}"

    @property
    def trial_id(self) -> str:
        return self.slot if self.rank is None else f"{self.slot}-w{self.rank}"


@dataclass
class TrialContext:
    """What a trial takes from its run (the runner builds it once)."""

    run_id: str
    packages: list[str]
    ready: str
    roles: dict[str, Path]
    scratch: dict[str, Scratch]
    logs: Path
    cwd: Path  # an empty local folder: every phase's working directory
    index_spec: IndexSpec
    index: LocalIndex | None
    progress: Progress
    sample_hz: float
    stall_after: float
    stall_timeout: float | None
    trial_timeout_s: float
    python: str | None = None
    stop: threading.Event | None = None  # set when the run was interrupted
    lifecycle: bool = False  # after the first start, persist and measure a restart
    cache_mode: str = "cold"  # how the restart finds the caches (iobench.trial.coldcache)
    pack_method: str = "auto"  # --pack-method (vocab.PACK_METHODS); a config's own pack_method wins
    image: tuple[str, ...] = ()  # what the pod's image holds: layered-venv's base
    warm: WarmCaches | None = None  # primed caches shared by repeats (None: prime every trial)
    give_up_s: float | None = None  # --give-up-after's bound for this trial (iobench.run.policy)
    kind: str = "install"  # the scenario's workload (iobench.trial.workloads)
    params: Mapping[str, Any] = field(default_factory=dict)  # its [workload] table
    fstypes: Mapping[str, str] = field(default_factory=dict)  # each role's filesystem type
    #: role -> the folder a fleet's ``shared`` caches live in (rank 0's scratch; every rank
    #: reaches it on a shared volume); empty in a run of one: a shared cache is the trial's own
    shared: Mapping[str, Path] = field(default_factory=dict)
    launcher: int | None = None  # a fleet's launcher (mpirun, orted): its ranks are this run


__all__ = ["TrialContext", "TrialSpec"]
