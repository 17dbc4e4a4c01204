"""A trial's second event: persist what the strategy keeps, then restart as a new pod would.

After the first start's ready check, for a run whose scenario names start-up strategies
(:mod:`iobench.scenario.vocab`, carried out by :mod:`iobench.trial.strategies`):

1. **persist** — packed-venv packs the built tree (the venv) into
   ``<target>/<run>/<trial>/store``, copied-venv copies it there; timed as part of the first
   start (``first_start_s``).
2. **restart** — every local role's trial folder is emptied (as on a new machine; the tree
   of reinstall goes too, wherever it lived), what the strategy kept on the target is made
   cold (:func:`iobench.trial.coldcache.make_cold`, ``--cache-mode``), then: reinstall builds
   it again (the workload's :meth:`Rebuild.rebuild`; its cache, when kept on the target, is
   warm with packages); persistent-venv runs the ready check only; packed- and copied-venv
   restore the tree to the path it was built at, the one a start script uses, then run the
   ready check; packed-cache packs the installer's cache (on tmp) at the first start and at
   the restart unpacks it there and installs from it; prewarm is persistent-venv whose first
   start records the venv's files the
   ready check opened (``prewarm.list`` in the store) and whose restart reads them, 32 at
   once, before the ready check. fan-out (:mod:`iobench.trial.fanout`) is packed-venv with one archive for the
   fleet: rank 0 packs it into the fleet trial's shared folder, and at the restart every
   worker restores it.

The restart runs under its own sampler, so the first start's row figures and samples stay
the first start's. A failing step makes the trial ``failed`` with ``restart: ...`` as its
error; the first start's figures are kept. Nothing is left mounted: a squashfs restore is
unmounted before the runner removes the trial's folders. A packed venv's restore is the one
its config's ``pack_method`` asks for (else the run's ``--pack-method``): a squashfs image
loop-mounted, mounted by squashfuse or extracted (:mod:`iobench.trial.squashfs`), recorded in
the row's ``restore_method`` and ``restore_tool``.

What is restarted is the workload's (:class:`Rebuild`): the install's venv, or the stand-in's
folder of files in iobench's own tests; this module knows only the strategy's steps.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from iobench.errors import IOBenchError
from iobench.scenario.vocab import FAN_OUT, STRATEGIES
from iobench.system.scratch import remove
from iobench.trial import coldcache, fanout, prewarm, strategies
from iobench.trial.outcome import INTERRUPTED, Stop, check
from iobench.trial.process import PhaseResult
from iobench.trial.sampler import Sampler
from iobench.trial.steps import Trial
from iobench.trial.strategies import StepResult, StrategyError

TARGET = "target"


class Rebuild(Protocol):
    """What a workload hands the restart: what its first start built, and how to build it
    again (reinstall's restart)."""

    built: Path  # the tree the first start made (the venv)
    cache: Path | None  # the installer's cache, when the config has one
    tmpdir: Path  # TMPDIR, emptied at the restart

    def ready_argv(self, trial: Trial) -> list[str]:
        """The ready check, run in the restored or rebuilt tree."""

    def rebuild(self, trial: Trial, sampler: Sampler) -> Stop | None:
        """Build the tree again from nothing (reinstall), under ``sampler``."""


class RestartFailed(IOBenchError):
    """A persist or restart step failed; the message is the row's error."""


class Restart:
    """Persist, then restart, for one trial whose first start succeeded."""

    def __init__(self, trial: Trial, work: Rebuild) -> None:
        self.t, self.work = trial, work
        self.ctx, self.cfg, self.row = trial.ctx, trial.cfg, trial.row
        self.strategy = STRATEGIES[self.cfg.strategy]
        self.store = fanout.store(trial) or (
            self.ctx.scratch[TARGET].run_root / trial.tid / "store"
            if TARGET in self.ctx.scratch
            else None
        )
        self.waiter = fanout.waits(trial)  # fan-out: rank 0 packs, this worker restored it
        self.sampler = Sampler(self.ctx.sample_hz, stall_after=self.ctx.stall_after)
        self.restored: StepResult | None = None

    def run(self) -> None:
        """Fill the row's lifecycle columns; on failure mark the trial failed (never raise)."""
        self.row.cache_mode = self.ctx.cache_mode
        self.sampler.start()
        try:
            self.persist()
            self.restart()
        except KeyboardInterrupt:
            self.row.status, self.row.error = "interrupted", INTERRUPTED
        except (IOBenchError, OSError) as exc:
            self.row.status, self.row.error = "failed", f"restart ({self.cfg.strategy}): {exc}"
        finally:
            try:
                if self.restored is not None:
                    strategies.release(self.restored)
            finally:
                self.sampler.stop()
                self.row.restart_read_bytes = self.sampler.totals().read_bytes

    # ------------------------------------------------------------------ first start
    def persist(self) -> None:
        row, first = self.row, self.row.time_to_ready_s or 0.0
        if self.waiter:  # its first start was the restore; what is kept is rank 0's archive
            row.first_start_s = first
            return
        if self.strategy.first_start == ("record",):
            self.record(first)
            return
        if not self.strategy.first_start:
            row.first_start_s, row.stored_bytes = first, self.kept_bytes()
            return
        if self.store is None:
            raise RestartFailed(
                f"{self.cfg.strategy} keeps its venv on the target, and this run has no target role"
            )
        # the trial's target folder, when the config uses none (a fan-out's shared one)
        self.store.parent.mkdir(parents=True, exist_ok=True)
        step = strategies.persist(
            self.cfg.strategy,
            self.work.built,
            self.store,
            self.cfg.pack_method or self.ctx.pack_method,  # the config's own, else the run's
            run=self.runner("persist"),
            cache=self.work.cache,
        )
        assert step is not None
        row.first_start_s = first + step.seconds
        row.persist_method, row.persist_tool, row.persist_command = (
            step.method,
            step.tool,
            step.command,
        )
        row.persist_s, row.stored_bytes = step.seconds, step.bytes

    def record(self, first: float) -> None:
        """prewarm's first start: list the venv's files its ready check opened (the list
        stays on the target, beside nothing else: the venv is there already)."""
        if self.store is None:
            raise RestartFailed(
                "prewarm keeps its list on the target, and this run has no target role"
            )
        self.store.mkdir(parents=True)
        listing = self.store / prewarm.PREWARM_LIST
        argv = prewarm.record_argv(self.work.built, self.ctx.ready, listing)
        r = self.t.phase("record", argv, None, self.sampler)
        self.ok(r, "recording the import set")
        files, _ = prewarm.listed(listing)
        row = self.row
        row.first_start_s, row.persist_s = first + r.seconds, r.seconds
        row.persist_method, row.persist_tool = "record", f"python ({files} files)"
        row.stored_bytes = strategies.tree_size(self.work.built)[1] + listing.stat().st_size

    def kept_bytes(self) -> int | None:
        """What reinstall (its cache on the target) or persistent-venv (the tree) keeps."""
        if self.strategy.venv_role == TARGET:
            return strategies.tree_size(self.work.built)[1]
        if self.work.cache is not None and self.cfg.cache == TARGET:
            return strategies.tree_size(self.work.cache)[1]
        return 0

    # ------------------------------------------------------------------ restart
    def restart(self) -> None:
        self.empty_local_roles()
        cold_path = self.cold_path()
        cold = (
            coldcache.make_cold(cold_path, self.ctx.cache_mode)
            if cold_path is not None
            else coldcache.ColdResult("none", "", 0.0, "nothing kept on the target")
        )
        self.row.cold_method, self.row.cold_warm_left = cold.method, cold.warm_left
        before = coldcache.lab_counters(cold_path) if cold_path is not None else None
        t0 = time.monotonic()
        if self.cfg.strategy == "reinstall":
            self.ok_stop(self.work.rebuild(self.t, self.sampler))
        elif "restore-cache" in self.strategy.restart and self.store is not None:
            self.restore_cache()
        elif self.strategy.restart == ("prewarm",) and self.store is not None:
            listing = self.store / prewarm.PREWARM_LIST
            r = self.t.phase("prewarm", prewarm.prewarm_argv(listing), None, self.sampler)
            self.ok(r, "prewarm")
            self.row.restore_s = r.seconds
            self.row.restore_command = prewarm.prewarm_command(str(listing))
        elif self.store is not None:
            self.restored = strategies.restore(
                self.cfg.strategy,
                self.store,
                self.work.built,
                run=self.runner("restore"),
                elsewhere=self.cfg.strategy == FAN_OUT,  # a waiter on rank 0's host
            )
        r = self.t.phase("restart-import", self.work.ready_argv(self.t), None, self.sampler)
        self.ok(r, "ready check")
        self.row.restart_s, self.row.restart_import_s = r.end - t0, r.seconds
        if self.restored is not None:
            self.row.restore_s = self.restored.seconds
            self.row.restore_command = self.restored.command
            self.row.restore_method, self.row.restore_tool = (
                self.restored.method,
                self.restored.tool,
            )
        after = coldcache.lab_counters(cold_path) if before is not None and cold_path else None
        if before is not None and after is not None:
            asked = coldcache.target_reads(before, after)
            self.row.restart_target_read_bytes = asked["bytes_read"]
            self.row.restart_target_creates = asked["create"]
        prefix = getattr(self.work, "pycache", None)  # pycache "local": compiled again here
        if prefix is not None:
            self.row.restart_pyc_local = sum(1 for _ in Path(prefix).rglob("*.pyc"))

    def restore_cache(self) -> None:
        """packed-cache's restart: the cache's archive unpacked where the install finds it
        (an empty folder there now: the new machine's), then the install from it."""
        cache = self.work.cache
        if cache is None:
            raise RestartFailed(f"{self.cfg.strategy} needs the config's installer cache")
        if cache.is_dir() and not any(cache.iterdir()):
            cache.rmdir()
        self.restored = strategies.restore(
            self.cfg.strategy, self.store or cache, self.work.built,
            run=self.runner("restore"), cache=cache,
        )  # fmt: skip
        self.ok_stop(self.work.rebuild(self.t, self.sampler))

    def empty_local_roles(self) -> None:
        """A new machine: every role but the target starts empty; reinstall's tree goes too."""
        target_root = self.ctx.scratch[TARGET].root if TARGET in self.ctx.scratch else None
        for role in sorted(self.cfg.roles()):
            scratch = self.ctx.scratch[role]
            if role == TARGET or scratch.root == target_root:
                continue
            remove(scratch.run_root / self.t.tid)
            scratch.trial_dir(self.t.tid)
        if self.cfg.strategy == "reinstall" and self.work.built.exists():
            remove(self.work.built)
        if self.work.tmpdir.exists():
            remove(self.work.tmpdir)
        self.work.tmpdir.mkdir(parents=True)
        if self.work.cache is not None:
            self.work.cache.mkdir(parents=True, exist_ok=True)

    def cold_path(self) -> Path | None:
        """What the restart reads from the target: the tree, the store, or reinstall's cache."""
        if self.strategy.venv_role == TARGET:  # persistent-venv, prewarm: the venv is there
            return self.work.built
        if self.cfg.strategy == "reinstall":
            return self.work.cache if self.cfg.cache == TARGET else None
        return self.store

    # ------------------------------------------------------------------ helpers
    def runner(self, name: str) -> strategies.Runner:
        """A strategies runner that runs each command as a sampled, watched trial phase."""

        def run(argv: Sequence[str]) -> None:
            r = self.t.phase(name, list(argv), None, self.sampler)
            if not r.ok:
                stop = check(r, argv[0])
                if stop is not None and stop.status == "interrupted":
                    raise KeyboardInterrupt
                raise StrategyError(stop.error if stop else f"{argv[0]} failed")

        return run

    def ok(self, r: PhaseResult, what: str) -> None:
        self.ok_stop(check(r, what))

    @staticmethod
    def ok_stop(stop: Stop | None) -> None:
        """Go on, or end the restart as the step says (Ctrl-C stays Ctrl-C)."""
        if stop is None:
            return
        if stop.status == "interrupted":
            raise KeyboardInterrupt
        raise RestartFailed(stop.error)


__all__ = ["Rebuild", "Restart", "RestartFailed"]
