"""The fleet's part of one `iobench run` (docs/fleet.md): what every worker agrees on, the
start of each trial, and rank 0's gathering of the rows.

Every rank runs the same plan. Rank 0 picks the run id and the trial order and shares them;
each rank claims its own scratch inside each role (``<run id>.w<rank>``) and writes its own
rows into its own run folder (``<run>/workers/w<rank>``, on its host: what it did, whatever
happens to rank 0); rank 0 writes every rank's row and samples into the run's folder, with the
fleet's times (``iobench.rundir.fleet``). Before each trial every rank reports at the start;
with ``--ranks`` the trial runs on the first N ranks while the rest wait for the next one
(one launch split by size: the sizes share the machine's state and the balanced order).

Deadlines: a rank has ``trial_timeout_s`` plus ``GRACE_S`` for its trial, and
``START_WAIT_S`` to reach the next start; one that misses either is *lost*: its row says so
(status ``lost``) and the run stops, every rank cleaning up its own folders.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from iobench.errors import IOBenchError, RunDirError
from iobench.fleet.comm import INTERRUPTED_WAIT_S, Fleet, FleetLost, fields
from iobench.run.plan import RunPlan
from iobench.rundir import kinds
from iobench.rundir.fleet import WORKERS, set_fleet_times
from iobench.rundir.folder import RunDir, utcnow
from iobench.rundir.records import (
    SAMPLE_COLUMNS,
    Stall,
    TrialRow,
    from_cells,
    safe_name_problem,
    to_cells,
)  # fmt: skip
from iobench.system.scratch import Scratch
from iobench.trial.context import TrialSpec
from iobench.trial.outcome import TrialResult
from iobench.trial.sampler import SamplerResult

#: the folder in rank 0's scratch that holds a fleet's shared caches, one per fleet trial
SHARED = "shared"
#: a rank's time past the trial limit to send its row (its clean-up, a slow volume)
GRACE_S = 60.0
#: how long a rank may take from its row to the next start (trash, samples, a slow disk)
START_WAIT_S = 300.0


class FleetRun:
    """One rank's view of a fleet run; a run of one when ``fleet`` is the plain ``Fleet``."""

    def __init__(self, plan: RunPlan, fleet: Fleet) -> None:
        self.plan, self.fleet = plan, fleet
        self.sizes = plan.fleet_sizes or ([fleet.size] if fleet.engine == "mpi" else [])

    @property
    def on(self) -> bool:
        """MPI ranks that run each trial together (a ``--fleet-dir`` worker runs alone)."""
        return self.fleet.engine == "mpi"

    def scratch_id(self, run_id: str) -> str:
        """The name of this rank's scratch folder in each role."""
        return f"{run_id}.{self.fleet.worker}" if self.on else run_id

    def agree(self, run_id: str) -> str:
        """Rank 0's run id and trial order on every rank; the clocks and hosts measured."""
        if not self.on:
            return run_id
        said = fields(self.fleet.share((run_id, self.plan.order_seed)), 2, str, int)
        if said is None or safe_name_problem(said[0]):  # it names this rank's folders
            raise FleetLost("rank 0 sent a run id and order this rank cannot read")
        run_id, self.plan.order_seed = said
        self.fleet.measure_clocks()
        return str(run_id)

    def agree_done(self, done: set[str]) -> set[str]:
        """Rank 0's finished trials (a --resume) on every rank."""
        said = self.fleet.share(sorted(done))
        if not isinstance(said, list) or not all(isinstance(t, str) for t in said):
            raise FleetLost("rank 0 sent a list of finished trials this rank cannot read")
        return set(said)

    def meta(self) -> dict[str, Any] | None:
        """meta.json's ``fleet``: rank 0's for the run, each worker's for its own folder."""
        f = self.fleet
        if not f.engine:
            return None
        if not f.leads or f.engine != "mpi":
            return {"engine": f.engine, "worker": f.worker, "rank": f.rank if self.on else None,
                    "host": f.host, "clock_offset_s": round(f.offset_s, 6),
                    **({"clock": f.clock} if hasattr(f, "clock") else {})}  # fmt: skip
        return {
            "engine": f.engine,
            "size": f.size,
            "library": getattr(f, "library", ""),
            "sizes": self.sizes,
            "stagger_s": self.plan.stagger_s,
            "workers": [
                {"rank": r, "worker": f"w{r}", "host": f.hosts.get(r, ""),
                 **f.offsets.get(r, {})}
                for r in range(f.size)
            ],
        }  # fmt: skip

    def trials(self, specs: Iterable[TrialSpec], done: set[str]) -> Iterator[TrialSpec]:
        """Each planned trial once per fleet size, as this rank's share of it; a fleet
        trial every rank of which has a final row (``done``) is not run again."""
        for spec in specs:
            if not self.on:
                yield spec
                continue
            for size in self.sizes:
                mine = replace(spec, fleet_size=size, rank=self.fleet.rank)
                ids = {replace(mine, rank=r).trial_id for r in range(size)}
                if not ids <= done:
                    yield mine

    def start(self, spec: TrialSpec) -> bool:
        """Wait for the fleet at the trial's start; whether this rank runs it."""
        if not self.on:
            return True
        ranks = range(spec.fleet_size)
        self.fleet.start(spec.slot, ranks, START_WAIT_S, self.plan.stagger_s)
        return self.fleet.rank in ranks

    def stamp(self, row: TrialRow, spec: TrialSpec) -> None:
        """The row's fleet columns this worker knows."""
        if self.fleet.engine:
            row.worker, row.host = self.fleet.worker, self.fleet.host
            row.clock_offset_s = round(self.fleet.offset_s, 6)
        if self.on:
            row.rank, row.fleet_size = self.fleet.rank, spec.fleet_size

    def collect(self, spec: TrialSpec, mine: TrialResult, started: float) -> list[TrialResult]:
        """Rank 0: every rank's result of this trial, its own first, with the fleet's times;
        a rank that sent nothing by the deadline gets a ``lost`` row. Another rank: sends
        its own and returns it alone."""
        if not self.on:
            return [mine]
        f = self.fleet
        if not f.leads:
            f.send(spec.slot, _payload(mine))
            return [mine]
        if mine.row.status == "interrupted":
            wait = INTERRUPTED_WAIT_S
        else:
            wait = max(self.plan.trial_timeout_s - (time.monotonic() - started), 0.0) + GRACE_S
        lost_before = set(f.lost)
        got = f.gather(spec.slot, range(spec.fleet_size), wait)
        results = [mine]
        for rank, payload in sorted(got.items()):
            try:  # a rank's word is checked: it names files and rows of rank 0's run
                results.append(_result(payload, replace(spec, rank=rank), type(mine.row)))
            except RunDirError as exc:
                f.lost[rank] = f"sent a row rank 0 cannot trust ({exc})"
        for r in sorted(set(f.lost) - lost_before):
            if r < spec.fleet_size:
                results.append(TrialResult(self._lost_row(mine.row, spec, r, f.lost[r])))
        set_fleet_times([x.row for x in results])
        return results

    def _lost_row(self, like: TrialRow, spec: TrialSpec, rank: int, why: str) -> TrialRow:
        """A lost rank's row: the trial's identity, no figures."""
        kind = kinds.of_row(like)  # the same kind's row: its identity and its places
        keep = (*_IDENTITY, *(c for p in kind.places for c in (p.role, p.fstype)),
                *(c.column for c in kind.choices))  # fmt: skip
        row = kind.row(**{name: getattr(like, name) for name in keep})
        row.trial_id, row.worker, row.rank = replace(spec, rank=rank).trial_id, f"w{rank}", rank
        row.host, row.fleet_size = self.fleet.hosts.get(rank, ""), spec.fleet_size
        row.status = "lost"
        row.error = f"rank {rank} {why}" + (
            ""
            if self.fleet.gone(rank) or why.startswith("sent a")  # it answered, unreadably
            else (": it died or stopped answering (its scratch stays until `iobench clean`)")
        )
        return row

    def shared(self, run_id: str, scratch: Mapping[str, Scratch]) -> dict[str, Path]:
        """Where a fleet's ``shared`` caches live: rank 0's scratch of each role."""
        if not self.on:
            return {}
        return {role: s.root / f"{run_id}.w0" / SHARED for role, s in scratch.items()}

    def shared_slot(self, spec: TrialSpec, scratch: Scratch) -> list[Path]:
        """The shared caches' folder of a finished fleet trial in this role (rank 0
        removes it: every rank's row is in)."""
        if not (self.on and self.fleet.leads):
            return []
        path = scratch.run_root / SHARED / spec.slot
        return [path] if path.exists() else []

    def leftovers(self, scratch: Mapping[str, Scratch]) -> list[tuple[Path, Path]]:
        """Rank 0: the scratch folders of lost ranks of this host whose processes are gone
        (nothing of theirs can still be running), with their volumes, to remove."""
        f = self.fleet
        if not (self.on and f.leads):
            return []
        out = []
        for rank in sorted(r for r in f.lost if f.gone(r)):
            for s in scratch.values():
                theirs = s.run_root.with_name(f"{s.run_root.name.rsplit('.', 1)[0]}.w{rank}")
                if theirs.exists():
                    out.append((theirs, s.root))
        return out

    def mark_lost(self, run_dir: RunDir) -> None:
        """Rank 0, as the run ends: the folder of a lost rank of this host whose process is
        gone says so (it died before it could write its own end)."""
        f = self.fleet
        for rank in sorted(r for r in f.lost if self.on and f.leads and f.gone(r)):
            folder = run_dir.path / WORKERS / f"w{rank}"
            try:
                theirs = RunDir.open(folder)
                if theirs.meta().status == "running":
                    theirs.update_meta(status="failed", ended_at=utcnow(),
                                       status_reason=f"rank {rank} {f.lost[rank]} (said by rank 0)")  # fmt: skip
            except (IOBenchError, OSError):
                continue  # not on this host's disk, or unreadable: left as it is

    def annotate(self, exc: BaseException, run_dir: Path | None) -> None:
        """How the user goes on after an interrupt: rank 0 names the launch that resumes
        the fleet; the other ranks say nothing (their folder is rank 0's run's part)."""
        if not self.on:
            return
        exc.quiet = not self.fleet.leads  # type: ignore[attr-defined]
        exc.resume_command = (  # type: ignore[attr-defined]
            f"mpirun -n {self.fleet.size} iobench run --fleet --resume {run_dir or 'RUN_DIR'}"
        )

    def stop(self, why: str) -> None:
        """On the way out: rank 0 stops the others, another rank tells rank 0 it goes."""
        if self.on:
            self.fleet.stop(why)


#: the columns a lost rank's row takes from rank 0's (which trial, where things lived)
_IDENTITY = ("run_id", "trial_id", "config", "repeat", "position", "status", "started_at")


def _payload(result: TrialResult) -> dict[str, Any]:
    """What a rank sends rank 0: its row's cells and its series (plain data: JSON)."""
    series = result.series
    return {
        "row": to_cells(result.row),
        "samples": list(series.rows) if series is not None else None,
        "stalls": [to_cells(s) for s in series.stalls] if series is not None else [],
    }


#: samples a rank may send for one trial: its trial limit at 100 Hz, and then some
MAX_SAMPLES = 2_000_000


def _result(payload: Any, spec: TrialSpec, row_type: type[TrialRow] = TrialRow) -> TrialResult:
    """A rank's result as rank 0 reads it: every cell checked as trials.csv's are, the row
    this very rank's row of this very trial, the samples and stalls plain numbers and text
    in their known columns (RunDirError otherwise). ``row_type``: rank 0's own row's, the
    run's kind's (the core alone would drop the kind's columns of every other rank)."""
    where = f"rank {spec.rank}'s row of {spec.slot}"
    if not isinstance(payload, dict) or not isinstance(payload.get("row"), dict):
        raise RunDirError(f"{where}: not a row")
    row = from_cells(row_type, _texts(payload["row"], where), where)
    if (row.trial_id, row.rank, row.config, row.repeat) != (
        spec.trial_id, spec.rank, spec.config.name, spec.repeat,
    ):  # fmt: skip
        raise RunDirError(f"{where}: it is the row of {row.trial_id!r} (rank {row.rank})")
    samples, stalls = payload.get("samples"), payload.get("stalls") or []
    if samples is None:
        return TrialResult(row)
    if not isinstance(samples, list) or len(samples) > MAX_SAMPLES or not isinstance(stalls, list):
        raise RunDirError(f"{where}: its samples are not a list of rows")
    rows = [{c: v for c, v in _values(s, where).items() if c in SAMPLE_COLUMNS} for s in samples]
    found = [from_cells(Stall, _texts(s, where), where) for s in stalls]
    return TrialResult(row, SamplerResult(rows, found, 0.0, len(rows)))


def _values(cells: Any, where: str) -> dict[str, Any]:
    """A record's cells as sent: a mapping of names to numbers, text or nothing."""
    if not isinstance(cells, dict) or not all(
        isinstance(v, (int, float, str)) or v is None for v in cells.values()
    ):
        raise RunDirError(f"{where}: not a record of plain values")
    return cells


def _texts(cells: Any, where: str) -> dict[str, str]:
    """The cells as a CSV line holds them (``from_cells`` checks each)."""
    return {str(k): "" if v is None else str(v) for k, v in _values(cells, where).items()}


__all__ = ["FleetRun"]
