"""A trial's second event: persist what the strategy keeps, then restart as a new pod would.

After the first start's ready check (:mod:`iobench.trial.steps`), for a run whose scenario names
start-up strategies (:mod:`iobench.trial.strategies`):

1. **persist** — packed-venv packs the venv into ``<target>/<run>/<trial>/store``, copied-venv
   copies it there; timed as part of the first start (``first_start_s``).
2. **restart** — every local role's trial folder is emptied (as on a new machine; the venv
   of reinstall goes too, wherever it lived), what the strategy kept on the target is made
   cold (:func:`iobench.trial.coldcache.make_cold`, ``--cache-mode``), then: reinstall creates the
   venv and installs again (its cache, when kept on the target, is warm with packages);
   persistent-venv runs the ready check only; packed- and copied-venv restore the venv to
   the path it was built at, the one a start script uses, then run the ready check.

The restart runs under its own sampler, so the first start's row figures and samples stay
the first start's. A failing step makes the trial ``failed`` with ``restart: ...`` as its
error; the first start's figures are kept. Nothing is left mounted: a squashfs restore is
unmounted before the runner removes the trial's folders.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from iobench import redact
from iobench.trial import coldcache
from iobench.trial import installers
from iobench.trial import strategies
from iobench.errors import IOBenchError
from iobench.trial.sampler import Sampler
from iobench.system.scratch import remove
from iobench.trial.strategies import StepResult, StrategyError

if TYPE_CHECKING:
    from iobench.trial.steps import Trial

TARGET = "target"


class RestartFailed(IOBenchError):
    """A persist or restart step failed; the message is the row's error."""


class Restart:
    """Persist, then restart, for one trial whose first start succeeded."""

    def __init__(self, trial: Trial) -> None:
        self.t = trial
        self.ctx, self.cfg, self.row, self.s = trial.ctx, trial.cfg, trial.row, trial.s
        self.strategy = strategies.get(self.cfg.strategy)
        self.store = (
            self.ctx.scratch[TARGET].run_root / trial.tid / "store"
            if TARGET in self.ctx.scratch
            else None
        )
        self.sampler = Sampler(self.ctx.sample_hz, stall_after=self.ctx.stall_after)
        self.restored: StepResult | None = None

    def run(self) -> None:
        """Fill the row's lifecycle columns; on failure mark the trial failed (never raise)."""
        from iobench.trial.steps import fill

        fill(self.row, cache_mode=self.ctx.cache_mode)
        self.sampler.start()
        try:
            self.persist()
            self.restart()
        except KeyboardInterrupt:
            from iobench.trial.steps import INTERRUPTED

            fill(self.row, status="interrupted", error=INTERRUPTED)
        except (IOBenchError, OSError) as exc:
            fill(self.row, status="failed", error=f"restart ({self.cfg.strategy}): {exc}")
        finally:
            try:
                if self.restored is not None:
                    strategies.release(self.restored)
            finally:
                self.sampler.stop()
                self.row.restart_read_bytes = self.sampler.totals().read_bytes

    # ------------------------------------------------------------------ first start
    def persist(self) -> None:
        from iobench.trial.steps import fill

        first = self.row.time_to_ready_s or 0.0
        if not self.strategy.first_start:
            fill(self.row, first_start_s=first, stored_bytes=self.kept_bytes())
            return
        if self.store is None:
            raise RestartFailed(
                f"{self.cfg.strategy} keeps its venv on the target, and this run has no target role"
            )
        self.store.parent.mkdir(
            exist_ok=True
        )  # the trial's target folder, when the config uses no target
        step = strategies.persist(
            self.cfg.strategy,
            self.s.venv,
            self.store,
            self.ctx.pack_method,
            run=self.runner("persist"),
        )
        assert step is not None
        fill(
            self.row,
            first_start_s=first + step.seconds,
            persist_method=step.method,
            persist_tool=step.tool,
            persist_command=step.command,
            persist_s=step.seconds,
            stored_bytes=step.bytes,
        )

    def kept_bytes(self) -> int | None:
        """What reinstall (its cache on the target) or persistent-venv (the venv) keeps."""
        if self.cfg.strategy == "persistent-venv":
            return strategies.tree_size(self.s.venv)[1]
        if self.s.cache is not None and self.cfg.cache == TARGET:
            return strategies.tree_size(self.s.cache)[1]
        return 0

    # ------------------------------------------------------------------ restart
    def restart(self) -> None:
        from iobench.trial.steps import fill

        self.empty_local_roles()
        cold_path = self.cold_path()
        cold = (
            coldcache.make_cold(cold_path, self.ctx.cache_mode)
            if cold_path is not None
            else coldcache.ColdResult("none", "", 0.0, "nothing kept on the target")
        )
        fill(self.row, cold_method=cold.method, cold_warm_left=cold.warm_left)
        before = coldcache.lab_counters(cold_path) if cold_path is not None else None
        t0 = time.monotonic()
        if self.cfg.strategy == "reinstall":
            self.reinstall()
        elif self.store is not None:
            self.restored = strategies.restore(
                self.cfg.strategy, self.store, self.s.venv, run=self.runner("restore")
            )
        r = self.t.phase(
            "restart-import",
            [str(self.s.venv / "bin" / "python"), "-c", self.ctx.ready],
            self.s.env,
            self.sampler,
        )
        self.ok(r, "ready check")
        fill(self.row, restart_s=r.end - t0, restart_import_s=r.seconds)
        if self.restored is not None:
            fill(self.row, restore_s=self.restored.seconds, restore_command=self.restored.command)
        after = (
            coldcache.lab_counters(cold_path)
            if before is not None and cold_path is not None
            else None
        )
        if before is not None and after is not None:
            self.row.restart_target_read_bytes = coldcache.target_reads(before, after)["bytes_read"]

    def empty_local_roles(self) -> None:
        """A new machine: every role but the target starts empty; reinstall's venv goes too."""
        target_root = self.ctx.scratch[TARGET].root if TARGET in self.ctx.scratch else None
        for role in sorted(self.cfg.roles()):
            scratch = self.ctx.scratch[role]
            if role == TARGET or scratch.root == target_root:
                continue
            remove(scratch.run_root / self.t.tid)
            scratch.trial_dir(self.t.tid)
        if self.cfg.strategy == "reinstall" and self.s.venv.exists():
            remove(self.s.venv)
        if self.s.tmpdir.exists():
            remove(self.s.tmpdir)
        self.s.tmpdir.mkdir(parents=True)
        if self.s.cache is not None:
            self.s.cache.mkdir(parents=True, exist_ok=True)

    def cold_path(self) -> Path | None:
        """What the restart reads from the target: the venv, the store, or reinstall's cache."""
        if self.cfg.strategy == "persistent-venv":
            return self.s.venv
        if self.cfg.strategy == "reinstall":
            return self.s.cache if self.cfg.cache == TARGET else None
        return self.store

    def reinstall(self) -> None:
        """reinstall's restart: a new venv and the whole install (bytecode included)."""
        t, venv = self.t, self.s.venv
        self.ok(
            t.phase(
                "restart-venv",
                self.ctx.venv_argv(venv, self.cfg.venv_creator),  # as the first start made it
                self.s.env,
                self.sampler,
            ),
            "venv creation",
        )
        site = installers.site_packages(venv)
        before = {p.name for p in site.iterdir()}
        log = self.ctx.logs / f"{t.tid}.restart.log"
        step = t.installer().command(
            venv, self.ctx.packages, self.ctx.index_spec, self.s.cache, log, self.s.env
        )
        r = t.phase("restart-install", step.argv, step.env, self.sampler)
        redact.redact_file(log)
        self.ok(r, self.cfg.installer)
        added = sorted(
            site / n
            for n in {p.name for p in site.iterdir()} - before
            if not n.endswith(".dist-info")
        )
        if self.cfg.compile == "on" and added:
            argv = installers.compile_command(venv, added, parallel=self.cfg.installer == "uv")
            r = t.phase("restart-compile", argv, self.s.env, self.sampler)
            if r.returncode != 1 or r.stopped:
                self.ok(r, "bytecode compilation")

    # ------------------------------------------------------------------ helpers
    def runner(self, name: str) -> strategies.Runner:
        """A strategies runner that runs each command as a sampled, watched trial phase."""

        def run(argv: Sequence[str]) -> None:
            r = self.t.phase(name, list(argv), self.s.env, self.sampler)
            if not r.ok:
                from iobench.trial.steps import check

                stop = check(r, argv[0])
                if stop is not None and stop.status == "interrupted":
                    raise KeyboardInterrupt
                raise StrategyError(stop.error if stop else f"{argv[0]} failed")

        return run

    def ok(self, r: object, what: str) -> None:
        from iobench.trial.steps import check

        stop = check(r, what)  # type: ignore[arg-type]
        if stop is None:
            return
        if stop.status == "interrupted":
            raise KeyboardInterrupt
        raise RestartFailed(stop.error)


__all__ = ["Restart", "RestartFailed"]
