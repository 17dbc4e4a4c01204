"""The run loop: lock the target, start the index, run the planned trials, record each one.

The runner owns what lives as long as the run: the target's lock, the roles' scratch
folders, the loopback index, the run directory and the clean-up. It trusts its plan
(``iobench.preflight`` checked everything before), runs the trials in the planned order
(``iobench.order``), records each row the moment its trial ends — the row first, then its
samples, then the removal of the trial's folders — and never formats a report.

Clean-up finishes whatever signals arrive (they are ignored while it runs), and every part
of it is bounded in time: on a hung volume iobench gives up deleting what it cannot, says
where it is, and exits.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from iobench import axes, installers, process, redact, signals
from iobench.errors import IOBenchError, LockLostError, VolumeHungError
from iobench.index import LocalIndex
from iobench.installers import IndexSpec
from iobench.lock import TargetLock
from iobench.preflight import RunPlan, run_meta
from iobench.progress import PlainProgress, Progress
from iobench.removal import Remover
from iobench.results import SAMPLE_COLUMNS, RunDir, new_run_id, utcnow
from iobench.runpolicy import RunTrials
from iobench.sampler import stall_dicts
from iobench.scratch import Scratch
from iobench.trial import TrialContext, TrialResult, TrialSpec


class Runner:
    """One `iobench run` of a checked plan."""

    def __init__(self, plan: RunPlan, progress: Progress | None = None) -> None:
        self.plan = plan
        self.progress: Progress = progress or PlainProgress()
        self.index: LocalIndex | None = None
        self.scratch: dict[str, Scratch] = {}
        self.lock: TargetLock | None = None
        self.run_dir: RunDir | None = None
        self.run_id = ""
        self._handlers: dict[int, object] = {}
        self._interrupted = False
        self.remover = Remover()

    def run(self) -> RunDir:
        """Run every planned trial not yet done; the run directory is complete, or says why not."""
        self._handlers = signals.catch()
        process.set_subreaper(True)
        try:
            index_spec, index_meta = self._start_index()
            rd = self.run_dir = self._open_run_dir(index_meta)
            ctx = self._context(rd, index_spec)
            done = rd.done_trial_ids()
            specs = self.trials = RunTrials.start(self.plan, rd, self.scratch, done, self.progress)
            total = len(specs) + len(done)
            self.progress.run_started(str(rd.path), total, len(done))
            for note in self.plan.notes:
                self.progress.message(note)
            self._warm_up(rd, ctx)
            for k, spec in enumerate(specs, start=len(done) + 1):
                self._one_trial(rd, ctx, spec, k, total)
            self._update_meta(rd, status="complete", ended_at=utcnow())
            self.progress.run_finished()
            return rd
        except (KeyboardInterrupt, LockLostError, VolumeHungError) as exc:
            self._interrupted = isinstance(exc, KeyboardInterrupt)
            exc.run_dir = self.run_dir.path if self.run_dir else None  # type: ignore[union-attr]
            changes = {"status": "interrupted", "ended_at": utcnow()}
            if not isinstance(exc, KeyboardInterrupt):
                status = "lock-lost" if isinstance(exc, LockLostError) else "volume-hung"
                changes.update(status=status, status_reason=str(exc))
            if self.run_dir is not None:
                self._update_meta(self.run_dir, **changes)
            raise
        finally:
            self._cleanup()

    # ------------------------------------------------------------------ set-up
    def _start_index(self) -> tuple[IndexSpec, dict]:
        """The loopback index over --wheelhouse or the scenario's synthetic wheels, if any."""
        p = self.plan
        folder, source = p.wheelhouse, str(p.wheelhouse)
        if folder is None and p.scenario.wheels and p.local_index:
            from iobench.wheels import cached_wheels, load_profile

            profile = load_profile(p.scenario.wheels)
            self.progress.message(f"wheels: profile {profile.name} ({profile.file_count} files)")
            folder = cached_wheels(profile)
            source = f"synthetic profile {profile.name} ({profile.fingerprint()})"
        if folder is None:
            remote = IndexSpec(
                p.index_url, local=False, extra_args=axes.index_args(p.extra_index_urls)
            )
            return remote, {
                "kind": "remote",
                "url": redact.redact(p.index_url or "(pip configuration)"),
            }
        self.index = LocalIndex(folder, p.index_mbps).start()
        url = self.index.url
        return IndexSpec(url, local=True), {
            "kind": "local",
            "source": source,
            "url": url,
            "mbps": p.index_mbps,
        }

    def _open_run_dir(self, index_meta: dict) -> RunDir:
        """Lock the target first (a refused run leaves nothing), then create or reopen the run."""
        p = self.plan
        if p.resume is not None:
            rd = RunDir.open(p.resume)
            run_id = self.run_id = (p.resume_meta or rd.meta()).run_id
            self._lock_target(run_id)
            rd.update_meta(status="running", resumed_at=utcnow(), order_seed=p.order_seed)
            rd.ensure_folders()  # a copied run folder may have lost its empty logs/
        else:
            run_id = self.run_id = new_run_id(socket.gethostname(), p.scenario.name)
            self._lock_target(run_id)
            rd = RunDir.create(p.results_root, run_id, run_meta(p, run_id, index_meta))
        kept = {"target"} if p.scenario.lifecycle else set()  # where strategies keep their venv
        for role in sorted(set().union(*(c.roles() for c in p.scenario.configs)) | {"tmp"} | kept):
            self.scratch[role] = Scratch(p.roles[role], run_id).ensure().claim()
            left = [q.name for q in self.scratch[role].leftovers() if q.name != run_id]
            if left:
                self.progress.message(
                    f"note: {self.scratch[role].root} holds scratch of other or crashed runs "
                    f"({', '.join(left[:3])}{'...' if len(left) > 3 else ''}); "
                    f"`iobench clean {p.roles[role]}` removes it once no run uses it"
                )
        return rd

    def _lock_target(self, run_id: str) -> None:
        """One iobench run per target at a time: two would spoil each other's figures."""
        scratch = Scratch(self.plan.roles["target"], run_id).ensure()
        self.lock = TargetLock(scratch.root, run_id, wait_s=self.plan.lock_wait).acquire()
        if self.lock.took_over:
            self.progress.message(
                f"warning: took over a stale lock on {self.plan.roles['target']}: {self.lock.took_over}"
            )

    def _context(self, rd: RunDir, index_spec: IndexSpec) -> TrialContext:
        cwd = self.scratch["tmp"].run_root / "cwd"  # empty, local: `python -c` puts it on sys.path
        cwd.mkdir(exist_ok=True)
        return TrialContext.of_plan(
            self.plan, run_id=self.run_id, scratch=self.scratch, logs=rd.logs_dir, cwd=cwd,
            index_spec=index_spec, index=self.index, progress=self.progress, stop=signals.STOP,
        )  # fmt: skip

    def _warm_up(self, rd: RunDir, ctx: TrialContext) -> None:
        """Create and remove one venv, untimed, so the first trial does not pay virtualenv's
        one-time app-data extraction; record what the venvs are made of (Python, seeded pip)."""
        d = self.scratch["tmp"].trial_dir("warm-up")
        try:
            subprocess.run(ctx.venv_argv(d / "venv"), capture_output=True, timeout=600, check=False)
            found = installers.venv_contents(d / "venv")
        finally:
            self._remove(d, self.scratch["tmp"].root)
        if found:
            self._update_meta(rd, versions={**rd.meta().versions, "venv": found})

    # ------------------------------------------------------------------ trials
    def _one_trial(
        self, rd: RunDir, ctx: TrialContext, spec: TrialSpec, k: int, total: int
    ) -> None:
        """Run a trial, then: its row, its samples, the removal of its folders, in that order."""
        self.progress.trial_started(k, total, spec.trial_id)
        result = self.trials.run(ctx, spec)  # under --give-up-after; predicted_s (runpolicy)
        try:
            rd.append_trial(result.row)
        except OSError as exc:
            raise IOBenchError(f"cannot append to {rd.trials_csv}: {exc.strerror or exc}") from None
        self.progress.trial_finished(k, total, result.row)
        self._save_series(rd, result)
        self.progress.phase(spec.trial_id, "cleanup")
        for scratch in self.scratch.values():
            self._remove(scratch.run_root / spec.trial_id, scratch.root)
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

    def _save_series(self, rd: RunDir, result: TrialResult) -> None:
        """Samples and stalls; a full results disk costs them, never the trial's row."""
        if result.series is None:
            return
        tid = result.row.trial_id
        try:
            if result.series.rows:
                rd.write_samples(tid, result.series.rows, SAMPLE_COLUMNS)
            rd.append_stalls(result.row.run_id, tid, stall_dicts(result.series.stalls))
        except OSError as exc:
            self.progress.message(f"warning: samples of {tid} not saved: {exc.strerror or exc}")

    def _update_meta(self, rd: RunDir, **changes: object) -> None:
        """Change meta.json; a full results disk costs the change (said), never the run or its rows."""
        try:
            rd.update_meta(**changes)
        except (OSError, IOBenchError) as exc:
            self.progress.message(f"warning: meta.json not updated ({', '.join(changes)}): {exc}")

    # ------------------------------------------------------------------ clean-up
    def _cleanup(self) -> None:
        """Remove what the run made and free the lock; no signal cuts this short, and no
        step waits on a volume that stopped answering."""
        signals.cleaning()
        try:
            if self.index is not None:
                self.index.stop()
            for scratch in self.scratch.values():
                self._remove(scratch.run_root, scratch.root)
            if self.lock is not None:
                lock, where = self.lock, self.scratch_root("target")
                error = self.remover.run(lock.release, where)
                if error:
                    self.progress.message(
                        f"warning: lock in {where} not freed ({error}); it is stale once we exit"
                    )
            for scratch in self.scratch.values():  # a clean run leaves no empty scratch behind
                self.remover.run(scratch.drop_if_empty, scratch.root)
            process.set_subreaper(False)
        finally:
            if not self._interrupted:  # an interrupted iobench is on its way out: keep ignoring
                signals.restore(self._handlers)

    def scratch_root(self, role: str) -> Path:
        return Scratch(self.plan.roles[role]).root

    def _remove(self, path: Path, volume: Path) -> None:
        """Remove a scratch path while the removal progresses; say where it stays if not."""
        if error := self.remover.remove(path, volume):
            self.progress.message(
                f"warning: could not remove {path}: {error}; `iobench clean` removes it later"
            )


__all__ = ["Runner"]
