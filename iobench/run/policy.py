"""What a run decides from its own measurements: the probe and predictions at its start, the
give-up bound of each trial, and when to stop repeating.

The runner hands its trials through ``RunTrials``: iterating it yields the planned trials
(``iobench.run.order``) until ``--repeats auto``'s rule (``iobench.run.earlystop.settled``) says the
answer is known; ``RunTrials.run`` runs one trial under ``--give-up-after``'s bound, marks
a trial ended by that bound ``censored`` with the bound as its lower bound, and records the
config's ``predicted_s`` beside its time-to-ready (``iobench.predict.model``, from probe.json).
"""

from __future__ import annotations

import os
import statistics
import subprocess
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from iobench.cost.kinds import run_measure
from iobench.errors import IOBenchError
from iobench.predict.model import (
    PHASES,
    cpu_contended,
    fast_from_trials,
    predicted_by_config,
    unpredictable,
)
from iobench.predict.probe import cpu_seconds, probe_roles
from iobench.run import earlystop
from iobench.run.order import plan_trials
from iobench.rundir.folder import RunDir
from iobench.trial.context import TrialContext, TrialSpec
from iobench.trial.kinds import run_trial
from iobench.trial.outcome import TrialResult
from iobench.trial.progress import Progress

if TYPE_CHECKING:
    from iobench.run.plan import RunPlan
    from iobench.system.scratch import Scratch

#: each micro-probe of the start-of-run probe runs this long at most (~1 s a filesystem)
PROBE_SECONDS = 0.1
#: the start-of-run probe's sequential write, at most (MB)
PROBE_WRITE_MB = 32.0
#: the start-of-run probe's small-file probes stop at this many items, its fsync probe at
#: this many calls, or after PROBE_SECONDS: on a slow volume the time ends them (100 items
#: at 1 ms), on a local disk the count (200 creates on ext4 here: ~50 ms), whose rate it
#: gives as well as 0.1 s of them did
PROBE_FILES = 200
PROBE_FSYNCS = 20
#: predictions use the median of this many latest CPU-speed samples
CPU_WINDOW = 3
#: process.py's sentence for a phase ended at the trial's deadline
_DEADLINE_SENTENCE = "past the trial's time limit"


def probe_run(
    plan: RunPlan, rd: RunDir, scratch: Mapping[str, Scratch], progress: Progress
) -> dict[str, Any] | None:
    """The run's probe document: probe.json as kept (a resumed run), else a short probe of
    each role's scratch folder, kept in the run directory; None with ``--no-probe``."""
    if not plan.probe:
        return None
    kept = rd.probe()
    if kept is not None:
        return kept

    progress.message(f"probe: {', '.join(sorted(scratch))} (~{PROBE_SECONDS:g} s per operation)")
    try:
        folders: dict[str, str | os.PathLike[str]] = {r: s.run_root for r, s in scratch.items()}
        # no lock test: predictions need none; three CPU samples after a warm-up (~1 s: one
        # alone put a figure at +44 %); a 32 MB write at most, not 256: a page cache full of
        # dirty data would be written back during the first trial
        doc = probe_roles(
            folders,
            PROBE_SECONDS,
            locks=False,
            cpu_runs=3,
            write_mb=PROBE_WRITE_MB,
            files=PROBE_FILES,
            fsyncs=PROBE_FSYNCS,
        )
        rd.write_probe(doc)
    except (OSError, IOBenchError, subprocess.SubprocessError) as exc:
        progress.message(f"warning: probe failed ({exc}); predicted_s left empty")
        return None
    return doc


def predictions(
    plan: RunPlan, doc: dict[str, Any] | None, fast: dict[str, dict[str, float]] | None = None
) -> dict[str, float | None]:
    """Each config's predicted time-to-ready (None: not probed, or not predictable); a
    prediction that cannot be made leaves ``predicted_s`` empty, never stops the run.
    ``fast``: the model's fast part from the run's own trials (:func:`run_fast`)."""
    if doc is None:
        return {}

    try:
        return predicted_by_config(plan.scenario, doc, fast or None, hold_back_when_busy=True)
    except (IOBenchError, KeyError, ValueError, TypeError, ZeroDivisionError):
        return {}


def run_fast(
    plan: RunPlan, doc: dict[str, Any], rows: list[Any] | None
) -> dict[str, dict[str, float]]:
    """The model's fast part from the run's own trials (``predict.fast_from_trials``); empty
    while no finished trial can give it (none yet, or only ones mostly made of storage)."""

    measured = measured_phases(rows or [])
    try:
        return fast_from_trials(plan.scenario, doc, measured) if measured else {}
    except (IOBenchError, KeyError, ValueError, TypeError, ZeroDivisionError):
        return {}


def measured_phases(rows: list[Any]) -> dict[str, dict[str, float]]:
    """Per config, the median of each phase over its latest ``CPU_WINDOW`` ok trials (the
    load of a shared machine moves by the minute: recent trials see the next one's)."""

    seen: dict[str, list[Any]] = {}
    for r in rows:
        if getattr(r, "status", "") == "ok":
            seen.setdefault(r.config, []).append(r)
    out: dict[str, dict[str, float]] = {}
    for config, ok in seen.items():
        recent = ok[-CPU_WINDOW:]
        phases = {}
        for p in PHASES:
            values = [
                float(v)
                for r in recent
                if isinstance(v := getattr(r, f"{p}_s", None), (int, float))
            ]
            if len(values) == len(recent):
                phases[p] = statistics.median(values)
        if len(phases) == len(PHASES):
            out[config] = phases
    return out


class RunTrials:
    """The run's trials in order, stopped once settled; each run under its give-up bound."""

    def __init__(
        self,
        plan: RunPlan,
        rd: RunDir,
        specs: list[TrialSpec],
        predicted: dict[str, float | None],
        progress: Progress,
        doc: dict[str, Any] | None = None,
    ) -> None:
        self.plan, self.rd, self.specs, self.predicted = plan, rd, specs, predicted
        self.doc = doc  # the probe: costs per folder, and the CPU speed at the start
        self.cpu_samples: list[float] = [doc["cpu_s"]] if doc and doc.get("cpu_s") else []
        self.progress = progress
        names = [c.name for c in plan.scenario.configs]
        self.baseline = "naive" if "naive" in names else (names[0] if names else "")
        self.rounds_run = 0
        self.skipped: list[str] = []  # trials of configs given up in every trial so far

    @classmethod
    def start(
        cls,
        plan: RunPlan,
        rd: RunDir,
        scratch: Mapping[str, Scratch],
        done: set[str],
        progress: Progress,
    ) -> RunTrials:
        """Probe, predict, plan, and say what was predicted and how the run may stop."""
        if plan.resume is not None and plan.give_up_after is None:  # a resumed run keeps its K
            plan.give_up_after = rd.meta().give_up_after
        doc = probe_run(plan, rd, scratch, progress)
        predicted = predictions(plan, doc)
        known = {c: round(v, 1) for c, v in predicted.items() if v is not None}
        if known:
            said = ", ".join(f"{c} {v} s" for c, v in known.items())
            progress.message(f"predicted time-to-ready: {said}")
        if doc is not None and (busy := cpu_contended(doc)):
            held = [
                c.name
                for c in plan.scenario.configs
                if predicted.get(c.name) is None and not unpredictable(c, plan.scenario)
            ]
            if held:
                progress.message(
                    f"not predicted before they run: {', '.join(held)} (mostly CPU time, and "
                    f"other processes used {busy:.1f} CPUs while iobench timed the CPU)"
                )
        specs = plan_trials(plan.scenario.configs, plan.repeats, plan.order_seed, done)
        rules: dict[str, Any] = {"give_up_after": plan.give_up_after}
        if plan.repeats_auto:
            rules["repeats_auto"] = {"max": plan.repeats, "rule": "docs/early-stop.md"}
        if (
            known and not rd.meta().predicted_s
        ):  # the run's one figure per config (a resume keeps it)
            rules["predicted_s"] = known
        if why := rd.try_update_meta(**rules):
            progress.message(f"warning: {why}")
        return cls(plan, rd, specs, predicted, progress, doc)

    def __len__(self) -> int:
        return len(self.specs)

    def __iter__(self) -> Iterator[TrialSpec]:
        for spec in self.specs:
            if self.plan.repeats_auto and spec.position == 0 and spec.round > 1:
                why = self._settled()
                if why is not None:
                    self.progress.message(f"--repeats auto: stopped, {why}")
                    self._record(why)
                    return
            if self.plan.repeats_auto and earlystop.given_up(
                self._outcomes().get(spec.config.name, [])
            ):  # no candidate: its next trial would be given up at K x best again
                self.skipped.append(spec.trial_id)
                continue
            self.rounds_run = max(self.rounds_run, spec.round)
            yield spec
        if self.plan.repeats_auto:  # the last round may have settled it too: say which
            why = self._settled()
            self._record(
                f"{why} (the maximum)" if why else f"maximum reached ({self.plan.repeats} rounds)"
            )

    def run(self, ctx: TrialContext, spec: TrialSpec) -> TrialResult:
        """One trial under the give-up bound; its row gets ``predicted_s`` and, when the
        bound ended it, status ``censored`` and ``censored_after_s``."""
        self._recalibrate()
        k, seen = self.plan.give_up_after or 0.0, self._outcomes()
        bound = earlystop.give_up_bound(seen, k, self.predicted, spec.config.name) if k else None
        limit = bound if bound is not None and bound < ctx.trial_timeout_s else None
        ctx.give_up_s = limit
        try:
            result = run_trial(ctx, spec)
        finally:
            ctx.give_up_s = None
        row = result.row
        row.predicted_s = self.predicted.get(spec.config.name)
        if limit is not None and row.status == "failed" and _DEADLINE_SENTENCE in row.error:
            where = row.error.split(":", 1)[0]
            basis = "median" if earlystop.best_median(seen) is not None else "prediction"
            row.status, row.censored_after_s = "censored", limit
            row.error = (
                f"given up in {where} after {limit:.1f} s ({k:g} x the best {basis}, "
                f"{limit / k:.1f} s)"
            )
        return result

    def _recalibrate(self) -> None:
        """Predict again with what the run knows now. Once a trial that is mostly not
        storage finished, its phase times give the model its fast part
        (``predict.fast_from_trials``): measured minutes ago, under the load the next trial
        sees. Before that, the CPU speed of this moment:
        the median of the last ``CPU_WINDOW`` samples of ``probe.cpu_seconds`` (one run,
        ~0.25 s; the probe's own first): on a shared machine the load moves by the minute,
        and one sample alone jumps with every burst of another process (docs/prediction.md)."""
        if self.doc is None or not any(v is not None for v in self.predicted.values()):
            return
        fast = run_fast(self.plan, self.doc, self.rd.trials(latest_only=True))
        if fast:
            self.predicted = predictions(self.plan, self.doc, fast) or self.predicted
            return

        try:
            cpu = cpu_seconds(runs=1)
        except (OSError, subprocess.SubprocessError):
            return
        self.cpu_samples.append(cpu)
        recent = self.cpu_samples[-CPU_WINDOW:]
        self.predicted = predictions(self.plan, {**self.doc, "cpu_s": statistics.median(recent)})

    def _outcomes(self) -> dict[str, list[earlystop.Outcome]]:
        """Each config's times so far (what the give-up bound is a multiple of)."""
        return earlystop.outcomes(self.rd.trials(latest_only=True))

    def _settled(self) -> str | None:
        """Why the run may stop repeating now, judged by the run's measure (its kind's
        question, as the verdict judges), or None."""
        rows = self.rd.trials(latest_only=True)
        judged = run_measure(self.plan.scenario.kind, rows, self.plan.cost, self.rd.meta().gpu_info)
        return earlystop.settled(earlystop.outcomes(rows, judged), self.baseline, best=judged.best)

    def _record(self, why: str) -> None:
        auto = {"max": self.plan.repeats, "rounds_run": self.rounds_run,
                "rule": "docs/early-stop.md", "stopped_because": why,
                "not_repeated": self.skipped}  # fmt: skip
        if why := self.rd.try_update_meta(repeats_auto=auto):
            self.progress.message(f"warning: {why}")


__all__ = ["RunTrials", "measured_phases", "predictions", "probe_run", "run_fast"]
