"""The run loop: lock the target, start the index, run the planned trials, record each one.

The runner owns what lives as long as the run: the target's lock, the roles' scratch
folders, the loopback index, the run directory and the clean-up. It trusts its plan
(``iobench.run.plan`` checked everything before), runs the trials in the planned order
(``iobench.run.order``), records each row the moment its trial ends — the row first, then its
samples, then the removal of the trial's folders — and never formats a report.

Clean-up finishes whatever signals arrive (they are ignored while it runs), and every part
of it is bounded in time: on a hung volume iobench gives up deleting what it cannot, says
where it is, and exits.

Its own cost is small and on record (meta.json's ``overhead``): warm caches primed once per
placement (``iobench.trial.warmcache``); trial folders trashed, removed in the background only on
volumes no running trial uses (``iobench.system.removal.Reaper``).
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from iobench.errors import IOBenchError, LockLostError, VolumeHungError
from iobench.fleet.comm import Fleet, FleetLost
from iobench.lab.delivered import Gauge
from iobench.run import overhead, start
from iobench.run.fleet import FleetRun
from iobench.run.plan import RunPlan
from iobench.run.policy import RunTrials
from iobench.run.tidy import Tidy
from iobench.rundir.folder import RunDir, new_run_id, utcnow
from iobench.rundir.records import TrialRow
from iobench.system import signals
from iobench.system.lock import TargetLock
from iobench.system.removal import Reaper, Remover
from iobench.system.scratch import Scratch
from iobench.trial import process
from iobench.trial.context import TrialContext, TrialSpec
from iobench.trial.index import LocalIndex
from iobench.trial.installers import IndexSpec
from iobench.trial.outcome import TrialResult
from iobench.trial.progress import PlainProgress, Progress
from iobench.trial.sampler import stall_dicts
from iobench.trial.warmcache import WarmCaches, wanted
from iobench.units import lab_gave


class Runner:
    """One `iobench run` of a checked plan."""

    def __init__(
        self, plan: RunPlan, progress: Progress | None = None, fleet: Fleet | None = None
    ) -> None:
        self.plan = plan
        self.fleet = FleetRun(plan, fleet or Fleet())  # a fleet's rank: iobench.run.fleet
        self.progress: Progress = progress or PlainProgress()
        self.index: LocalIndex | None = None
        self.scratch: dict[str, Scratch] = {}
        self.lock: TargetLock | None = None
        self.run_dir: RunDir | None = None
        self.run_id, self._interrupted = "", False
        self._handlers: dict[int, object] = {}
        self.remover = Remover(quiet_s=plan.hung_after_s)
        self.reaper = Reaper(self.remover, {})  # its volumes are known once scratch exists
        self.tidy = Tidy(self.remover, self.progress)  # iobench.run.tidy: removals, said
        self.clock = overhead.Clock()
        self.warm: WarmCaches | None = None
        self.gauge = Gauge(list(plan.roles.values()))  # the lab volumes among the roles

    def run(self) -> RunDir:
        """Run every planned trial not yet done; the run directory is complete, or says why not."""
        self._handlers = signals.catch()
        process.set_subreaper(True)
        try:
            self.index, index_spec, index_meta = start.start_index(self.plan, self.progress)
            self.clock = overhead.Clock()  # from meta.json's started_at, stamped next
            with self.clock.part("setup"):
                rd, ctx, specs, done = self._set_up(index_spec, index_meta)
            total = len(specs) * max(1, len(self.fleet.sizes)) + done
            for k, spec in enumerate(self.fleet.trials(specs, self.done), start=done + 1):
                self._one_trial(rd, ctx, spec, k, total)
            self._empty_trash()
            self._update_meta(rd, status="complete", ended_at=utcnow(), overhead=self._account())
            self.progress.run_finished()
            return rd
        except (KeyboardInterrupt, IOBenchError, OSError) as exc:
            self._interrupted = isinstance(exc, KeyboardInterrupt)
            self.fleet.stop(str(exc) or "interrupted")  # no rank waits for this one
            exc.run_dir = self.run_dir.path if self.run_dir else None  # type: ignore[union-attr]
            self.fleet.annotate(exc, exc.run_dir)  # type: ignore[union-attr]
            changes = {"status": "interrupted", "ended_at": utcnow(), "overhead": self._account()}
            if isinstance(exc, VolumeHungError) and isinstance(exc.volume, Path):
                self.remover.hung.append(exc.volume)  # the clean-up attempts nothing there
            if not isinstance(exc, KeyboardInterrupt):  # meta.json never stays "running"
                changes.update(status=getattr(exc, "run_status", "failed"), status_reason=str(exc))
            if self.run_dir is not None:
                self._update_meta(self.run_dir, **changes)
                self.fleet.mark_lost(self.run_dir)
            raise
        finally:
            self._cleanup()

    # ------------------------------------------------------------------ set-up
    def _set_up(
        self, index_spec: IndexSpec, index_meta: dict
    ) -> tuple[RunDir, TrialContext, RunTrials, int]:
        """The run folder, the trial context, the probe and the trial order (the warm-up
        venv made beside the probe), meta.json's late facts; the trials and how many are done."""
        rd = self.run_dir = self._open_run_dir(index_meta)
        ctx = start.trial_context(self.plan, rd, self.scratch, index_spec, self.index, self.progress,
                            warm=self.warm, stop=signals.STOP,
                            shared=self.fleet.shared(self.run_id, self.scratch),
                            launcher=os.getppid() if self.fleet.on else None)  # fmt: skip
        done = self.done = self.fleet.agree_done(rd.done_trial_ids())  # rank 0's, for a fleet
        with start.warming_up(ctx, self.scratch["tmp"], self.tidy.remove) as venv:
            with self.clock.part("probe"):  # and the trial order (iobench.run.policy)
                specs = self.trials = RunTrials.start(
                    self.plan, rd, self.scratch, set() if self.fleet.on else done, self.progress
                )
            planned = len(specs) * max(1, len(self.fleet.sizes))  # a fleet's: per size
            self.progress.run_started(str(rd.path), planned + len(done), len(done))
            for note in self.plan.notes:
                self.progress.message(note)
        if changes := start.late_facts(rd, venv):  # what meta.json was first written without
            self._update_meta(rd, **changes)
        return rd, ctx, specs, len(done)

    def _open_run_dir(self, index_meta: dict) -> RunDir:
        """Lock the target first (a refused run leaves nothing), then create or reopen the
        run; a fleet's ranks agree on it once rank 0 has (it locks, the others join)."""
        p, fleet = self.plan, self.fleet
        if p.resume is not None:
            run_id = (p.resume_meta or RunDir.open(p.resume).meta()).run_id
        else:
            run_id = new_run_id(socket.gethostname(), p.scenario.name, p.results_root)
        rd = None
        if fleet.fleet.leads:
            self.lock = start.lock_target(p, run_id, self.progress)
            rd = self.run_dir = start.run_folder(p, fleet, run_id, index_meta)
        run_id = self.run_id = fleet.agree(run_id)
        if rd is None:
            self.lock = start.lock_target(p, run_id, self.progress, join=True)
            rd = start.run_folder(p, fleet, run_id, index_meta)
        elif fleet.on:
            rd.update_meta(fleet=fleet.meta())  # the clocks, measured once every rank was there
        self.scratch = start.claim_scratch(p, fleet.scratch_id(run_id), self.progress)
        self.reaper.watch(s.root for s in self.scratch.values())
        self.warm = WarmCaches(self.scratch, wanted=wanted(p.scenario.configs))
        return rd

    # ------------------------------------------------------------------ trials
    def _one_trial(
        self, rd: RunDir, ctx: TrialContext, spec: TrialSpec, k: int, total: int
    ) -> None:
        """Run a trial, then: its row, its samples, the removal of its folders, in that order;
        nothing is removed on the trial's volumes while it runs (``Reaper.hold``)."""
        self.progress.trial_started(k, total, spec.trial_id)
        with self.clock.part("cleanup"):  # the trash on the trial's volumes goes first
            self.tidy.could_not_remove(
                self.reaper.hold(self.scratch[r].root for r in spec.config.roles())
            )
        if not self.fleet.start(spec):  # a smaller fleet's trial: this rank waits it out
            return
        t = time.monotonic()
        before = self.gauge.snapshot() if self.gauge.mounts else None
        result = self.trials.run(ctx, spec)  # under --give-up-after; predicted_s (runpolicy)
        if before is not None:
            self._lab_delivered(result.row, before)
        self.fleet.stamp(result.row, spec)
        self.clock.trial(result.row, result.priming_s, time.monotonic() - t)
        with self.clock.part("records"):
            for each in self.fleet.collect(spec, result, t):  # rank 0: every rank's
                try:
                    rd.append_trial(each.row)
                except OSError as exc:
                    raise IOBenchError(
                        f"cannot append to {rd.trials_csv}: {exc.strerror or exc}"
                    ) from None
                if each is result:
                    self.progress.trial_finished(k, total, each.row)
                else:  # another rank's share of it
                    self.progress.rank_finished(k, total, each.row)
                self._save_series(rd, each)
        self.progress.phase(spec.trial_id, "cleanup")
        with self.clock.part("cleanup"):
            for scratch in self.scratch.values():
                self.tidy.defer(scratch.run_root / spec.trial_id, scratch)
                for path in self.fleet.shared_slot(spec, scratch):
                    self.tidy.defer(path, scratch)
            self.reaper.release()
        if lost := self.fleet.fleet.lost:
            raise FleetLost(
                "; ".join(f"rank {r} {why}" for r, why in sorted(lost.items()))
                + f"; the run stopped after {spec.slot} (rows kept)"
            )
        if self.remover.hung:
            raise VolumeHungError(
                f"{', '.join(map(str, self.remover.hung))} stopped answering; the run stopped after trial "
                f"{spec.trial_id} (rows kept); left behind: {', '.join(map(str, self.remover.left))}"
            )
        if result.row.status == "interrupted" or signals.STOP.is_set():
            raise KeyboardInterrupt
        if self.lock is not None and self.lock.lost:
            raise LockLostError(
                f"{self.lock.lost}; the run stopped after trial {spec.trial_id} (rows kept)"
            )

    def _lab_delivered(self, row: TrialRow, before: dict) -> None:
        """What the trial's lab volume delivered, against what its options allow
        (iobench.lab.delivered), on its row; where the lab held a rate below them, a note
        under the trial's line says so."""
        got = self.gauge.since(before)
        if got is None:
            return
        row.lab_volume, row.lab_preset = got.mountpoint, got.preset
        for d in (got.read, got.write):
            if d is None or d.mb_per_s is None:
                continue
            allowed = d.allowed_mb_per_s
            setattr(row, f"lab_{d.direction}_mb_s", round(d.mb_per_s, 1))
            setattr(
                row,
                f"lab_{d.direction}_allowed_mb_s",
                None if allowed is None else round(allowed, 1),
            )
            if said := lab_gave(d.mb_per_s, allowed, got.preset):
                self.progress.message(f"  {row.trial_id}: {said} to its {d.direction}s")

    def _account(self) -> dict:
        """meta.json's ``overhead`` (iobench.run.overhead)."""
        if self.warm is not None:
            self.clock.counts.update(self.warm.counts())
        return self.clock.account(overhead.since_command_start(self.clock.start))

    def _save_series(self, rd: RunDir, result: TrialResult) -> None:
        """Samples and stalls; a full results disk costs them, never the trial's row."""
        s, row = result.series, result.row
        stalls = [] if s is None else stall_dicts(s.stalls)
        if s is not None and (why := rd.try_save_series(row.trial_id, s.rows, stalls, row.run_id)):
            self.progress.message(f"warning: {why}")

    def _update_meta(self, rd: RunDir, **changes: object) -> None:
        """Change meta.json; a full results disk costs the change (said), never the run or its rows."""
        if why := rd.try_update_meta(**changes):
            self.progress.message(f"warning: {why}")

    # ------------------------------------------------------------------ clean-up
    def _cleanup(self) -> None:
        """Remove what the run made and free the lock; no signal cuts this short, and no
        step waits on a volume that stopped answering."""
        signals.cleaning()
        try:
            if self.index is not None:
                self.index.stop()
            self.reaper.close()  # its trash goes with the run's folders
            for scratch in self.scratch.values():
                self.tidy.remove(scratch.run_root, scratch.root)
            for path, volume in self.fleet.leftovers(self.scratch):  # a dead rank's
                self.tidy.remove(path, volume)
            if self.lock is not None:
                target = Scratch(self.plan.roles["target"])
                self.tidy.free_lock(self.lock, target.root)
                if "target" not in self.scratch:  # stopped before claiming it (a full disk)
                    self.remover.run(target.drop_if_empty, target.root)
            for scratch in self.scratch.values():  # a clean run leaves no empty scratch behind
                self.remover.run(scratch.drop_if_empty, scratch.root)
            process.set_subreaper(False)
        finally:
            if not self._interrupted:  # an interrupted iobench is on its way out: keep ignoring
                signals.restore(self._handlers)

    def _empty_trash(self) -> None:
        """Remove what waits in the trash, before the run's end is stamped (it is part of it)."""
        with self.clock.part("cleanup"):
            self.tidy.could_not_remove(self.reaper.drain())


__all__ = ["Runner"]
