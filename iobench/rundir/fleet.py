"""A fleet's rows: when each worker was ready after the fleet's first start, the figure a
fleet is compared by, and a ``--fleet-dir`` of worker folders merged into one run folder.

One definition serves both engines. A *fleet trial* is every worker's trial of one config,
repeat and fleet size (its ``slot``). Each worker's start is its ``started_at`` in the
reference clock (its ``clock_offset_s`` subtracted); ``fleet_start_s`` is that start after
the slot's first, ``fleet_ready_s`` adds the worker's time-to-ready. The **fleet's
time-to-ready** is the largest ``fleet_ready_s``: the moment the last worker is ready, from
the moment the first one started (IOR's rule: the last end minus the first start; the
slowest rank, as MLPerf Storage asks, not rank 0's alone). *First done* and *last done* are
the smallest and largest ``fleet_ready_s`` (elbencho's words); the gap is the tail.

A fleet trial counts as ``ok`` only when every worker's did: a fleet is ready when all of
it is. ``fleet_rows`` turns each slot into one row, the slowest worker's, with the fleet's
time-to-ready in ``time_to_ready_s``, so that the verdict, the tables and the charts compare
configs by the fleet figure with the code that compares single trials.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import stat
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from iobench import files
from iobench.errors import RunDirError
from iobench.rundir import kinds
from iobench.rundir.folder import RunDir
from iobench.rundir.meta import RunMeta
from iobench.rundir.records import TrialRow, safe_name_problem

#: the folder of a ``--fleet-dir`` that holds one run folder per worker
WORKERS = "workers"
#: the run folder ``merge_fleet_dir`` builds from them (iobench's own: rebuilt each time)
MERGED = "fleet"
_MERGED_MARK = ".iobench-merged"


def slot(row: TrialRow) -> tuple[str, int, int]:
    """Which fleet trial a row belongs to: its config, repeat and fleet size."""
    return row.config, row.repeat, row.fleet_size or 1


def is_fleet(rows: Iterable[TrialRow]) -> bool:
    return any(r.worker for r in rows)


def _start(row: TrialRow) -> float | None:
    try:
        t = datetime.fromisoformat(row.started_at).timestamp()
    except (TypeError, ValueError):
        return None
    return t - (row.clock_offset_s or 0.0)


def set_fleet_times(rows: list[TrialRow]) -> None:
    """``fleet_start_s`` and ``fleet_ready_s`` of every row, slot by slot (in place)."""
    by_slot: dict[tuple[str, int, int], list[TrialRow]] = {}
    for r in rows:
        by_slot.setdefault(slot(r), []).append(r)
    for group in by_slot.values():
        starts = {id(r): _start(r) for r in group}
        known = [t for t in starts.values() if t is not None]
        if not known:
            continue
        first = min(known)
        for r in group:
            t = starts[id(r)]
            r.fleet_start_s = None if t is None else round(t - first, 6)
            r.fleet_ready_s = (
                None
                if r.fleet_start_s is None or r.time_to_ready_s is None
                else round(r.fleet_start_s + r.time_to_ready_s, 6)
            )


@dataclasses.dataclass(frozen=True)
class FleetTrial:
    """One fleet trial's figures."""

    config: str
    repeat: int
    size: int  # workers planned (fleet_size)
    workers: int  # rows seen
    ok: int  # workers ready
    fleet_s: float | None  # the last worker ready, from the first start; None unless all ok
    first_done_s: float | None
    last_done_s: float | None
    slowest: str  # trial_id of the slowest worker (or of the first one not ok)

    @property
    def tail_s(self) -> float | None:
        if self.first_done_s is None or self.last_done_s is None:
            return None
        return self.last_done_s - self.first_done_s


#: the columns of a fleet trial's row that come from the worker that persisted the venv
#: (a fan-out's rank 0) when the slowest worker is one that restored it
def fleet_trials(rows: Iterable[TrialRow]) -> list[FleetTrial]:
    """Every slot's figures, in the order the slots first appear."""
    by_slot: dict[tuple[str, int, int], list[TrialRow]] = {}
    for r in rows:
        by_slot.setdefault(slot(r), []).append(r)
    out = []
    for (config, repeat, size), group in by_slot.items():
        ready = [r for r in group if r.status == "ok" and r.fleet_ready_s is not None]
        whole = len(ready) == len(group) and len(group) >= size
        done = [r.fleet_ready_s for r in ready if r.fleet_ready_s is not None]
        not_ok = [r for r in group if r.status != "ok"]
        slowest = max(ready, key=lambda r: r.fleet_ready_s or 0.0) if ready else group[0]
        out.append(FleetTrial(
            config=config, repeat=repeat, size=size, workers=len(group), ok=len(ready),
            fleet_s=max(done) if whole and done else None,
            first_done_s=min(done) if done else None, last_done_s=max(done) if done else None,
            slowest=(not_ok[0] if not_ok else slowest).trial_id,
        ))  # fmt: skip
    return out


def fleet_rows(rows: list[TrialRow], size: int | None = None) -> list[TrialRow]:
    """One row per fleet trial of ``size`` workers (default: the largest size run): the
    slowest worker's, its ``time_to_ready_s`` the fleet's, ``ok`` only when every worker
    was; rows of a run of one are returned as they are."""
    if not is_fleet(rows):
        return rows
    size = size or max((r.fleet_size or 1) for r in rows)
    by_id = {r.trial_id: r for r in rows}
    # a fan-out's archive is its builder's: the fleet trial keeps what rank 0 packed
    built = kinds.of_row(rows[0]).built if rows else ()
    builders = {slot(r): r for r in rows if built and getattr(r, built[0])}
    out = []
    for ft in fleet_trials(r for r in rows if (r.fleet_size or 1) == size):
        row = dataclasses.replace(by_id[ft.slowest])
        row.trial_id = ft.slowest
        builder = builders.get(slot(row))
        if builder is not None and not getattr(row, built[0]):
            for name in built:
                setattr(row, name, getattr(builder, name))
        if ft.fleet_s is not None:
            row.status, row.time_to_ready_s = "ok", ft.fleet_s
        elif row.status == "ok":  # its own trial was fine, its fleet's was not
            row.status, row.time_to_ready_s = "failed", None
            row.error = f"{ft.workers - ft.ok} of {ft.size} workers were not ready"
        out.append(row)
    return out


# ---------------------------------------------------------------- --fleet-dir
def is_fleet_dir(path: Path) -> bool:
    """A ``--fleet-dir``: a ``workers/`` folder of run folders, no meta.json of its own."""
    return (path / WORKERS).is_dir() and not (path / "meta.json").exists()


def merge_fleet_dir(path: Path) -> RunDir:
    """The workers' run folders under ``path/workers`` as one run folder ``path/fleet``
    (rebuilt each time: iobench made it), each row's trial id prefixed by its worker so
    that samples stay apart; the first worker's meta.json, with every worker's host, id and
    clock offset under ``fleet``."""
    workers = sorted(
        d for d in (path / WORKERS).iterdir() if d.is_dir() and (d / "meta.json").is_file()
    )
    if not workers:
        raise RunDirError(f"{path / WORKERS} holds no worker's run folder (meta.json)")
    rows: list[TrialRow] = []
    metas: list[tuple[Path, RunMeta]] = []
    for d in workers:
        rd = RunDir.open(d)
        meta = rd.meta()
        metas.append((d, meta))
        for r in rd.trials(latest_only=True):
            r = dataclasses.replace(r, worker=r.worker or d.name)
            r.trial_id = f"{r.trial_id}-{r.worker}"
            if problem := safe_name_problem(r.trial_id):
                raise RunDirError(f"{d}: trial id {r.trial_id!r} {problem}")
            rows.append(r)
    sizes: dict[tuple[str, int], int] = {}
    for r in rows:
        sizes[(r.config, r.repeat)] = sizes.get((r.config, r.repeat), 0) + 1
    for r in rows:
        r.fleet_size = sizes[(r.config, r.repeat)]
    set_fleet_times(rows)
    out = path / MERGED
    files.open_folder(path).close()  # judged (iobench.files) before anything is removed or made
    if out.exists():
        if not (out / _MERGED_MARK).is_file():
            raise RunDirError(f"{out} exists and was not merged by iobench; move it away")
        shutil.rmtree(out)
    first = metas[0][1]
    fleet = {
        "engine": "fleet-dir",
        "size": len(workers),
        "workers": [
            {"worker": d.name, "host": m.hostname, "run_id": m.run_id,
             "clock_offset_s": (m.fleet or {}).get("clock_offset_s")}
            for d, m in metas
        ],
    }  # fmt: skip
    rd = RunDir.create(path, first.run_id, dataclasses.replace(first, fleet=fleet), MERGED)
    rd.held().write(_MERGED_MARK, "merged from workers/ by `iobench report`; rebuilt each time\n")
    for r in rows:
        rd.append_trial(r)
        src = path / WORKERS / r.worker / "samples" / f"{r.trial_id[: -len(r.worker) - 1]}.csv"
        data = _regular_file(src)  # a worker's link is not followed (to a file of root's)
        if data is not None:
            rd.held("samples").write(f"{r.trial_id}.csv", data)
    return rd


def _regular_file(path: Path) -> bytes | None:
    """The bytes of ``path`` when it is a regular file (opened without following a link,
    judged on its descriptor), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        return fh.read() if stat.S_ISREG(os.fstat(fd).st_mode) else None


__all__ = [
    "MERGED", "WORKERS", "FleetTrial", "fleet_rows", "fleet_trials", "is_fleet", "is_fleet_dir",
    "merge_fleet_dir", "set_fleet_times", "slot",
]  # fmt: skip
