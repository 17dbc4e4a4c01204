"""What ``--resume`` continues: a run folder read back and checked once — its meta.json, the
scenario it stored (through the scenario's own validator), its roles, and which trials are done.

The run directory holds the files (``iobench.rundir``); what they mean for continuing a run
needs the scenario, so it lives here, above both."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from iobench.errors import RunDirError
from iobench.rundir.folder import RunDir
from iobench.rundir.meta import RunMeta
from iobench.rundir.records import FINAL_STATUSES, TrialRow
from iobench.scenario.load import Scenario
from iobench.scenario.stored import scenario_from_meta


@dataclass(frozen=True)
class ResumeState:
    """What --resume continues: the run's meta, scenario, roles, and the trials already done."""

    meta: RunMeta
    scenario: Scenario
    roles: dict[str, Path]
    repeats: int
    done: frozenset[str]  # trial ids whose latest row has a final status
    skipped: tuple[str, ...] = ()  # rows cut short (their trials run again)
    rows: tuple[TrialRow, ...] = field(default=(), repr=False)


def resume_state(rd: RunDir) -> ResumeState:
    """Everything --resume needs, read and checked once; a RunDirError line otherwise."""
    meta = rd.meta()
    read = rd.read_trials()
    scenario = scenario_from_meta(meta.scenario, f"{rd.meta_json}: scenario")
    for name in ("target", "tmp"):
        if name not in meta.roles:
            raise RunDirError(
                f"{rd.meta_json}: roles: no '{name}' role; --resume cannot tell where it ran"
            )
    latest, _ = read.latest()
    names = {c.name for c in scenario.configs}
    strange = sorted({r.config for r in latest} - names)
    if strange:
        raise RunDirError(
            f"{rd.trials_csv}: config(s) {', '.join(strange[:3])} are not in meta.json's scenario"
        )
    return ResumeState(
        meta=meta,
        scenario=scenario,
        roles=meta.role_paths,
        repeats=meta.repeats or scenario.repeats,
        done=frozenset(r.trial_id for r in latest if r.status in FINAL_STATUSES),
        skipped=read.skipped,
        rows=read.rows,
    )


__all__ = ["ResumeState", "resume_state"]
