"""One trial as a straight list of steps, returning its row and its sampled series.

The steps: make the trial's folders -> the workload's untimed preparation (a warm cache's
priming install) -> start measuring -> the workload's timed steps (for an install: create the
venv, install, compile, ready check) -> the row. Each step returns None to go on, or a
``Stop`` (status and error) that ends the trial; no exception carries control. The timed
interval runs from the start of the first timed step to the moment the last one marks ready.

What a trial *does* is its workload (the seam, :class:`Workload`): this module owns what
every kind shares — folders, the sampler, the contention watch, phases run under the
watchdog and deadline, the row's identity, status and process-tree figures, a path's
filesystem type and a lab volume's credit gauge. A new kind of work is one module of
``iobench.trial.kinds`` that implements the seam; its row is its kind's
(``iobench.rundir.kinds``), whose own columns the workload fills.

The trial writes nothing into the run directory but its phase logs: the runner records
the row first and then the samples, so that a full results disk costs the samples, never
the row. Its folders are ``<role scratch>/<run>/<trial id>``; the runner removes them.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol

from iobench.lab.state import read_stats
from iobench.rundir import kinds
from iobench.rundir.folder import utcnow
from iobench.rundir.records import PHASES, TrialRow
from iobench.stats import percentile
from iobench.system.procfs import mount_of
from iobench.trial.coldcache import LAB_FSTYPE
from iobench.trial.contention import ContentionWatch, format_contended
from iobench.trial.context import TrialContext, TrialSpec
from iobench.trial.outcome import INTERRUPTED, Stop, TrialResult
from iobench.trial.process import Limits, PhaseResult, run_phase
from iobench.trial.sampler import Sampler, SamplerResult

#: one step of a trial: None to go on, or why it stops
Step = Callable[["Trial"], "Stop | None"]


class Workload(Protocol):
    """What a trial does between its folders and its row: one module per kind."""

    kind: ClassVar[str]

    def prepare(self, trial: Trial) -> Stop | None:
        """Untimed, before measuring starts (its seconds go to ``trial.priming_s``): paths,
        the phases' environment, a warm cache's priming install."""

    def fs_paths(self, trial: Trial) -> dict[str, Path]:
        """Folders whose filesystems the sampler watches (label -> path)."""

    def timed(self) -> Sequence[Step]:
        """The timed steps, in order, asked for after :meth:`prepare`; the last calls
        ``trial.mark_ready``."""

    def measured(self, trial: Trial, result: SamplerResult) -> None:
        """Row fields of an ok trial that only this kind knows."""

    def after(self, trial: Trial, stop: Stop | None) -> None:
        """Once the first start's row is complete: a start-up strategy's restart, a warm
        cache's bookkeeping (untimed parts go to ``trial.priming_s``)."""


class Trial:
    """The steps of one trial, in order, around a workload."""

    def __init__(self, ctx: TrialContext, spec: TrialSpec, workload: Workload) -> None:
        self.ctx = ctx
        self.spec = spec
        #: the config, of the run's kind (``iobench.scenario.kinds``): its workload reads it
        self.cfg: Any = spec.config
        self.tid = spec.trial_id
        self.work = workload
        #: the row, of the run's kind: the core columns are this module's, the kind's group
        #: its workload's to fill (typed Any: the workload knows its own row's columns)
        self.row: Any = identity_row(ctx, spec)
        self.dirs: dict[str, Path] = {}  # role -> this trial's folder there
        self.env: dict[str, str] = {}  # the phases' environment (the workload sets it)
        self.phases: dict[str, float | None] = dict.fromkeys(PHASES, 0.0)
        self.sampler: Sampler | None = None
        self.watch: ContentionWatch | None = None
        self.t0 = 0.0
        self.ready_at = 0.0
        self.deadline: float | None = None
        self.priming_s = 0.0
        #: a gauge the sampler records with every tick (a lab volume's credits; the workload sets it)
        self.credits: Callable[[], float | None] | None = None

    def run(self) -> TrialResult:
        stop: Stop | None = None
        try:
            stop = self._steps((Trial.make_dirs, self.work.prepare, Trial.start_measuring))
            if stop is None:  # asked for once prepared (a fan-out's worker restores instead)
                stop = self._steps(self.work.timed())
        except KeyboardInterrupt:
            stop = Stop("interrupted", INTERRUPTED)
        except OSError as exc:
            stop = Stop(
                "failed", f"{exc.strerror or exc} ({exc.filename})" if exc.filename else str(exc)
            )
        result = self.stopped(stop) if stop is not None else self.measured()
        self.note_contention()
        self.work.after(self, stop)
        result.priming_s = self.priming_s
        return result

    # ------------------------------------------------------------------ steps
    def _steps(self, steps: Sequence[Step]) -> Stop | None:
        for step in steps:
            if (stop := step(self)) is not None:
                return stop
        return None

    def make_dirs(self) -> Stop | None:
        self.dirs = {
            role: self.ctx.scratch[role].trial_dir(self.tid) for role in sorted(self.cfg.roles())
        }
        return None

    def start_measuring(self) -> Stop | None:
        # its scans stay outside the timed interval; a fleet's ranks on this host are the run
        self.watch = ContentionWatch(tree_of=self.ctx.launcher).start()
        self.sampler = Sampler(
            self.ctx.sample_hz,
            stall_after=self.ctx.stall_after,
            fs_paths=self.work.fs_paths(self),
            credits=self.credits,
        )
        # the timed interval opens with the first timed step: a tick before its process
        # starts (a busy machine, another thread holding the interpreter) belongs to it
        self.sampler.phase = PHASES[0]
        self.t0 = time.monotonic()
        self.sampler.start(self.t0)  # one origin: a sample's t and the row's times
        self.row.started_at = utcnow(precise=True)  # the timed interval's start (fleet figures)
        self.deadline = self.t0 + min(self.ctx.trial_timeout_s, self.ctx.give_up_s or math.inf)
        return None

    def mark_ready(self, at: float) -> None:
        """The timed interval ends here (monotonic time)."""
        self.ready_at = at

    # ------------------------------------------------------------------ phases
    def phase(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str] | None = None,
        sampler: Sampler | None = None,
        deadline: float | None = None,
    ) -> PhaseResult:
        """Run one phase under the trial's sampler, watchdog and deadline."""
        sampler = sampler or self.sampler
        assert sampler is not None
        self.ctx.progress.phase(self.tid, name)
        limits = Limits(self.ctx.stall_timeout, deadline or self.deadline, self.ctx.stop)

        def tick(elapsed: float) -> None:
            self.ctx.progress.tick(
                self.tid, name, elapsed, sampler.latest(), sampler.current_stall_s()
            )

        # output goes to the run's logs (local disk), not the volume under test; kept on failure
        out = self.ctx.logs / f"{self.tid}.{name}.out"
        return run_phase(
            name, argv, self.env if env is None else env, self.ctx.cwd, sampler, out, limits, tick
        )

    def fstype(self, path: Path | str) -> str:
        """The filesystem type of the mount holding ``path`` ('' when unknown)."""
        mount = mount_of(str(path))
        return mount.fstype if mount is not None else ""

    def watch_credits(self, path: Path | str) -> None:
        """Record the burst-credit balance of the lab volume holding ``path`` with every
        sample (a volume whose rate falls when its credits run out: docs/lab.md); nothing
        off the lab."""
        mount = mount_of(str(path))
        if mount is not None and mount.fstype == LAB_FSTYPE:
            point = mount.mountpoint
            self.credits = lambda: _credits_mb(point)

    def message(self, text: str) -> None:
        """A line about this trial, said beside its progress."""
        self.ctx.progress.message(f"  {self.tid}: {text}")

    # ------------------------------------------------------------------ endings
    def measured(self) -> TrialResult:
        assert self.sampler is not None
        result = self.sampler.stop()
        row = self.row
        row.status = "ok"
        row.time_to_ready_s = self.ready_at - self.t0
        row.venv_s, row.download_s, row.install_s, row.compile_s, row.import_s = (
            self.phases[p] for p in PHASES
        )
        set_tree_fields(row, self.sampler, result)
        set_derived_fields(row, result)
        self.work.measured(self, result)
        return TrialResult(row, result)

    def stopped(self, stop: Stop) -> TrialResult:
        error = stop.error
        if "No space left" in error and "ENOSPC" not in error:
            error = "ENOSPC: " + error
        self.row.status, self.row.error = stop.status, error
        if self.sampler is None:
            return TrialResult(self.row)
        result = self.sampler.stop()
        set_tree_fields(self.row, self.sampler, result)
        return TrialResult(self.row, result)

    def note_contention(self) -> None:
        if self.watch is None:
            return
        found = self.watch.stop()
        self.row.contended = format_contended(found)
        if found:
            self.message(f"other processes did disk I/O meanwhile (MB): {self.row.contended}")


def _credits_mb(mountpoint: str) -> float | None:
    value = (read_stats(mountpoint) or {}).get("link_credits_mb")
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def identity_row(ctx: TrialContext, spec: TrialSpec) -> TrialRow:
    """A row of the run's kind holding the columns that say which trial this is (where its
    things lived is its workload's to say: its places are the kind's columns)."""
    return kinds.row_type(ctx.kind)(
        run_id=ctx.run_id,
        trial_id=spec.trial_id,
        config=spec.config.name,
        repeat=spec.repeat,
        position=spec.position,
        status="running",
        started_at=utcnow(),
    )


def set_tree_fields(row: TrialRow, sampler: Sampler, result: SamplerResult) -> None:
    """The row's figures of the watched process trees and their stalls (ok or not)."""
    t = sampler.totals()
    row.read_bytes, row.write_bytes = t.read_bytes, t.write_bytes
    row.read_calls, row.write_calls = t.read_calls, t.write_calls
    row.disk_write_bytes = t.disk_write_bytes
    row.cpu_s = round(t.cpu_s, 3)
    row.stalls = len(result.stalls)
    row.stall_longest_s = max((st.length_s for st in result.stalls), default=0.0)


def set_derived_fields(row: TrialRow, result: SamplerResult) -> None:
    """Figures derived from the samples of an ok trial: off-CPU share, iowait, D state, RSS."""
    rows = result.rows
    ttr = row.time_to_ready_s or 0.0
    iow = [s["iowait_pct"] for s in rows]
    row.offcpu_frac = min(1.0, max(0.0, 1.0 - (row.cpu_s or 0.0) / ttr)) if ttr > 0 else None
    row.iowait_mean_pct = sum(iow) / len(iow) if iow else None
    row.iowait_p95_pct = percentile(iow, 95) if iow else None
    row.blocked_max = max((s["procs_blocked"] for s in rows), default=None)
    row.dstate_max = max((s["tree_dstate"] for s in rows), default=None)
    row.fswait_frac = (sum(1 for s in rows if s["tree_fswait"]) / len(rows)) if rows else None
    row.rss_max_bytes = max((s["tree_rss_bytes"] for s in rows), default=None)
    row.sampler_cpu_s = round(result.self_cpu_s, 4)


def used_bytes(path: Path | None) -> int | None:
    """Used bytes of the filesystem holding ``path`` (None if unknown)."""
    if path is None:
        return None
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return (st.f_blocks - st.f_bfree) * st.f_frsize


__all__ = ["Step", "Trial", "Workload", "identity_row", "set_derived_fields", "used_bytes"]
