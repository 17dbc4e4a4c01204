"""Fan-out: one worker of a fleet installs and packs, the others wait for its archive and
restore it (docs/fleet.md).

Rank 0 (the *builder*) runs the install as the config says (venv on tmp), then packs the venv
into the fleet trial's shared folder on the target (``<w0 scratch>/shared/<slot>/store``:
packed-venv's step, :mod:`iobench.trial.restart`). Every other rank (a *waiter*) starts its
timed interval with the fleet, waits until the archive's manifest appears on the volume (a
``stat`` every ``POLL_S``, what a start script's ``until [ -e … ]`` loop does), restores it onto
its own tmp and runs the ready check: its time-to-ready is the builder's install and pack plus
its own restore. Workers sharing one host restore at their own path, so the restore rewrites
the venv's absolute path (:func:`iobench.trial.strategies.relocate`). On a host of its own
(where rank 0's run folder on the venv's role is not to be seen: its tmp is its own) a
worker restores at the path rank 0 built at, as a fleet's start script restores at one
fixed path on every pod: it makes that folder in its own scratch, marked as its own, and
removes it when its trial ends.

A builder that fails leaves ``fanout-failed`` beside the store with its error, and the waiters
stop at once with it instead of waiting out the trial's limit. At the restart every worker
restores the one archive at once (the same steps as packed-venv's restart). In a run of one
(no fleet) fan-out is packed-venv.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from iobench import files
from iobench.scenario.vocab import FAN_OUT
from iobench.system import procfs
from iobench.system.scratch import OWNER, remove
from iobench.trial import strategies
from iobench.trial.outcome import INTERRUPTED, Stop, check
from iobench.trial.strategies import MANIFEST, StepResult, StrategyError

if TYPE_CHECKING:
    from iobench.trial.steps import Trial

#: how often a waiter looks for the archive (a stat on the volume each time)
POLL_S = 0.05
#: the file a failed builder leaves beside the store (its one-line error)
FAILED = "fanout-failed"
TARGET = "target"


def store(t: Trial) -> Path | None:
    """A fleet's fan-out trial: where the builder's archive goes (rank 0's shared folder on
    the target, which every rank reaches); None otherwise (the trial's own store)."""
    shared = t.ctx.shared.get(TARGET)
    if t.cfg.strategy != FAN_OUT or shared is None or t.spec.rank is None:
        return None
    return shared / t.spec.slot / "store"


def waits(t: Trial) -> bool:
    """Whether this worker waits for another's archive instead of installing."""
    return store(t) is not None and t.spec.rank != 0


class Waiter:
    """A waiting worker's timed steps: the wait, the restore; the ready check is the
    workload's."""

    def __init__(self, t: Trial, built: Path) -> None:
        kept = store(t)
        assert kept is not None
        self.store, self.built = kept, built
        self.restored: StepResult | None = None
        #: rank 0's run folder, made on this host to restore at rank 0's path (None: this
        #: worker restores at its own path)
        self.made = _builders_folder(t, built)
        if self.made is not None:
            self.built = self.made / dataclasses.replace(t.spec, rank=0).trial_id / built.name

    def wait(self, t: Trial) -> Stop | None:
        """Until the builder's manifest is on the volume, its failure is, or the limit."""
        t.phases.update(venv=None, download=None, install=None, compile=None)
        if t.sampler is not None:
            t.sampler.phase = "fanout-wait"
        t.ctx.progress.phase(t.tid, "fanout-wait")
        manifest, failed = self.store / MANIFEST, self.store.parent / FAILED
        t0 = time.monotonic()
        while not manifest.exists():
            if failed.exists():
                why = failed.read_text(errors="replace").strip() or "its first start failed"
                return Stop("failed", f"fan-out: rank 0 made no archive: {why}")
            if t.ctx.stop is not None and t.ctx.stop.is_set():
                return Stop("interrupted", INTERRUPTED)
            if t.deadline is not None and time.monotonic() >= t.deadline:
                return Stop(
                    "failed",
                    f"fan-out: no archive from rank 0 within the trial's limit "
                    f"({t.ctx.trial_timeout_s:g} s, --trial-timeout)",
                )
            time.sleep(POLL_S)
        t.row.fanout_wait_s = round(time.monotonic() - t0, 4)
        return None

    def restore(self, t: Trial) -> Stop | None:
        """The builder's archive onto this worker's tmp, at its own path."""

        def run(argv: Sequence[str]) -> None:  # strategies.Runner: a sampled, watched phase
            r = t.phase("fanout-restore", list(argv))
            stop = check(r, argv[0])
            if stop is not None:
                raise _Stopped(stop)

        try:
            self.restored = strategies.unpack(self.store, self.built, run, elsewhere=True)
        except _Stopped as s:
            return s.stop
        except StrategyError as exc:
            return Stop("failed", f"fan-out restore: {exc}")
        t.row.fanout_restore_s = round(self.restored.seconds, 4)
        t.row.fanout_relocated = self.restored.relocated
        t.row.restore_command = self.restored.command
        t.row.restore_method, t.row.restore_tool = self.restored.method, self.restored.tool
        return None

    def release(self) -> None:
        """Unmount a squashfs restore before the trial's folders go (or the restart's); at
        rank 0's path, the restored venv goes too (the restart restores there again)."""
        if self.restored is not None:
            strategies.release(self.restored)
            self.restored = None
        if self.made is not None and os.path.lexists(self.built):
            remove(self.built)

    def finish(self) -> None:
        """Once the trial (and its restart) is done: what it made at rank 0's path goes."""
        self.release()
        if self.made is not None:
            remove(self.made)
            self.made = None


def _builders_folder(t: Trial, built: Path) -> Path | None:
    """Rank 0's run folder in this worker's scratch of the venv's role, made here (marked as
    this process's, as a run's own folder is) when that role is this host's own: rank 0's
    folder is not to be seen, and no other worker of this host made it first. None: the
    worker restores at its own path."""
    own_run = built.parent.parent  # <scratch>/<run id>.w<rank>/<trial id>/venv
    builders = own_run.with_name(f"{own_run.name.rsplit('.', 1)[0]}.w0")
    if t.spec.rank in (None, 0) or builders == own_run or os.path.lexists(builders):
        return None
    try:
        os.mkdir(builders, 0o700)
    except FileExistsError:  # another worker of this host restores there
        return None
    files.write(builders / OWNER, json.dumps(procfs.ProcessStamp.current().to_dict()) + "\n")
    (builders / dataclasses.replace(t.spec, rank=0).trial_id).mkdir(0o700)
    return builders


def builder_done(t: Trial) -> None:
    """The builder, after its first start (and pack): when no archive came of it, say why
    beside the store so that the waiters stop now."""
    kept = store(t)
    if kept is None or t.spec.rank != 0 or (kept / MANIFEST).exists():
        return
    kept.parent.mkdir(parents=True, exist_ok=True)
    why = t.row.error or f"its trial ended {t.row.status or 'early'}"
    files.write(kept.parent / FAILED, why.splitlines()[0] + "\n")


class _Stopped(Exception):
    def __init__(self, stop: Stop) -> None:
        super().__init__(stop.error)
        self.stop = stop


__all__ = ["FAILED", "POLL_S", "Waiter", "builder_done", "store", "waits"]
