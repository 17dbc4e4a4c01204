"""One trial as a straight list of steps, returning its row and its sampled series.

The steps: make the trial's folders -> prime the cache (warm configs, untimed) -> start
measuring -> create the venv -> install -> compile -> ready check. Each step returns None
to go on, or a ``Stop`` (status and error) that ends the trial; no exception carries
control. Time-to-ready runs from the start of venv creation to the ready check's exit.

The trial writes nothing into the run directory but its phase logs: the runner records
the row first and then the samples, so that a full results disk costs the samples, never
the row. Its folders are ``<role scratch>/<run>/<trial id>``; the runner removes them.
"""

from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iobench import redact
from iobench.trial import installers
from iobench.run import facts
from iobench.system import procfs
from iobench.trial.contention import ContentionWatch, format_contended
from iobench.trial.index import IndexCounters, LocalIndex
from iobench.trial.installers import IndexSpec
from iobench.trial.process import Limits, PhaseResult, run_phase
from iobench.trial.progress import Progress
from iobench.rundir.records import PHASES, TrialRow
from iobench.rundir.folder import utcnow
from iobench.trial.sampler import Sampler, SamplerResult
from iobench.scenario.load import Config
from iobench.system.scratch import Scratch, remove
from iobench.stats import percentile

if TYPE_CHECKING:
    from iobench.run.plan import RunPlan
    from iobench.trial.warmcache import WarmCaches

_TAIL_LINES = 12
INTERRUPTED = "interrupted by the user (SIGINT/SIGTERM); trial scratch removed"


@dataclass(frozen=True)
class TrialSpec:
    """Which trial: a config, its repeat, and where it falls in the run's order."""

    config: Config
    repeat: int
    round: int = 1
    position: int = 0  # place of this config within its round (0: first)

    @property
    def trial_id(self) -> str:
        return f"{self.config.name}-r{self.repeat}"


@dataclass
class TrialContext:
    """What a trial takes from its run (the runner builds it once)."""

    run_id: str
    packages: list[str]
    ready: str
    roles: dict[str, Path]
    scratch: dict[str, Scratch]
    logs: Path
    cwd: Path  # an empty local folder: every phase's working directory
    index_spec: IndexSpec
    index: LocalIndex | None
    progress: Progress
    sample_hz: float
    stall_after: float
    stall_timeout: float | None
    trial_timeout_s: float
    python: str | None = None
    stop: threading.Event | None = None  # set when the run was interrupted
    lifecycle: bool = False  # after the first start, persist and measure a restart
    cache_mode: str = "cold"  # how the restart finds the caches (iobench.trial.coldcache)
    pack_method: str = "auto"  # packed-venv's archive (iobench.trial.strategies.PACK_METHODS)
    warm: WarmCaches | None = None  # primed caches shared by repeats (None: prime every trial)
    give_up_s: float | None = None  # --give-up-after's bound for this trial (iobench.run.policy)

    def venv_argv(self, venv: Path, creator: str = "virtualenv") -> list[str]:
        return installers.venv_command(venv, self.python, creator)

    @classmethod
    def of_plan(cls, plan: RunPlan, **run_parts: Any) -> TrialContext:
        """The context a run's trials share: the plan's settings plus what the run made
        (``run_id``, ``scratch``, ``logs``, ``cwd``, ``index_spec``, ``index``, ``progress``,
        ``stop``)."""
        return cls(
            packages=list(plan.scenario.packages),
            ready=plan.scenario.ready,
            roles=plan.roles,
            sample_hz=plan.sample_hz,
            stall_after=plan.stall_after,
            stall_timeout=plan.stall_timeout,
            trial_timeout_s=plan.trial_timeout_s,
            python=plan.python,
            lifecycle=plan.scenario.lifecycle,
            cache_mode=plan.cache_mode,
            pack_method=plan.pack_method,
            **run_parts,
        )


@dataclass(frozen=True)
class Stop:
    """Why a trial ended early: its final status and the one-line error."""

    status: str  # "failed", "stalled" or "interrupted"
    error: str


@dataclass
class TrialResult:
    """A trial's row and the series to save after it."""

    row: TrialRow
    series: SamplerResult | None = None
    priming_s: float = 0.0  # untimed: filling the warm cache, checking it afterwards


@dataclass
class _State:
    """What the steps hand on to each other."""

    venv: Path = Path()
    tmpdir: Path = Path()
    cache: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    sampler: Sampler | None = None
    watch: ContentionWatch | None = None
    t0: float = 0.0
    deadline: float | None = None
    phases: dict[str, float | None] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    site: Path = Path()
    before: set[str] = field(default_factory=set)
    seeded: set[str] = field(default_factory=set)
    download_end: float | None = None
    used0: dict[str, int | None] = field(default_factory=dict)
    index0: IndexCounters | None = None
    t_ready: float = 0.0


def run_trial(ctx: TrialContext, spec: TrialSpec) -> TrialResult:
    """Run one trial; a failing installer, a stall or Ctrl-C end it with a row, never an exception."""
    trial = Trial(ctx, spec)
    return trial.run()


class Trial:
    """The steps of one trial, in order."""

    def __init__(self, ctx: TrialContext, spec: TrialSpec) -> None:
        self.ctx = ctx
        self.spec = spec
        self.cfg = spec.config
        self.tid = spec.trial_id
        self.s = _State()
        self.row = identity_row(ctx, spec)
        self.priming_s = 0.0

    def run(self) -> TrialResult:
        steps = (
            self.make_dirs,
            self.prime_cache,
            self.start_measuring,
            self.create_venv,
            self.install,
            self.compile,
            self.ready_check,
        )
        stop: Stop | None = None
        try:
            for step in steps:
                stop = step()
                if stop is not None:
                    break
        except KeyboardInterrupt:
            stop = Stop("interrupted", INTERRUPTED)
        except OSError as exc:
            stop = Stop(
                "failed", f"{exc.strerror or exc} ({exc.filename})" if exc.filename else str(exc)
            )
        result = self.stopped(stop) if stop is not None else self.measured()
        self.note_contention()
        self.row.strategy = self.cfg.strategy
        if stop is None and self.ctx.lifecycle:
            from iobench.trial.restart import Restart

            Restart(self).run()
        if self.ctx.warm is not None and stop is None and self.cfg.cache_state != "warm":
            t = time.monotonic()  # a cold trial's filled cache may save a priming install
            if self.s.cache is not None and self.ctx.warm.adopt(self.cfg, self.s.cache):
                self.ctx.progress.message(
                    f"  {self.tid}: its filled cache becomes the warm one (no priming install)"
                )
            self.priming_s += time.monotonic() - t
        if self.ctx.warm is not None and self.cfg.cache_state == "warm":
            t = time.monotonic()
            if not self.ctx.warm.check(self.cfg):
                self.ctx.progress.message(
                    f"  {self.tid}: the trial changed its warm cache; the next one primes afresh"
                )
            self.priming_s += time.monotonic() - t
        result.priming_s = self.priming_s
        return result

    # ------------------------------------------------------------------ steps
    def make_dirs(self) -> Stop | None:
        dirs = {
            role: self.ctx.scratch[role].trial_dir(self.tid) for role in sorted(self.cfg.roles())
        }
        self.s.venv = dirs[self.cfg.venv] / "venv"
        self.s.tmpdir = dirs[self.cfg.tmpdir] / "tmp"
        self.s.tmpdir.mkdir(exist_ok=True)
        if self.cfg.cache != "off" and self.cfg.cache_state == "warm" and self.ctx.warm:
            self.s.cache = self.ctx.warm.path(self.cfg)  # shared by the placement's repeats
        elif self.cfg.cache != "off":
            self.s.cache = dirs[self.cfg.cache] / "cache"
            self.s.cache.mkdir(exist_ok=True)
        self.s.env = installers.base_environment(self.s.tmpdir, isolated=self.ctx.index_spec.local)
        return None

    def prime_cache(self) -> Stop | None:
        """Fill the cache through an untimed install into a separate venv (once per
        placement when the run shares primed caches: ``iobench.trial.warmcache``)."""
        if self.cfg.cache_state != "warm":
            return None
        t = time.monotonic()
        try:
            if self.ctx.warm is not None and self.ctx.warm.ready(self.cfg):
                return None
            if self.ctx.warm is not None:
                self.s.cache = self.ctx.warm.reset(self.cfg)
            stop = self.prime()
            if stop is None and self.ctx.warm is not None:
                self.ctx.warm.mark_primed(self.cfg)
            return stop
        finally:
            self.priming_s += time.monotonic() - t

    def prime(self) -> Stop | None:
        """The priming install: run like a timed phase (own session, watchdog, time limit)
        but measured by nobody."""
        self.ctx.progress.phase(self.tid, "priming cache (untimed)")
        venv = self.s.venv.parent / "prime-venv"
        log = self.ctx.logs / f"{self.tid}.prime.log"
        sampler = Sampler(self.ctx.sample_hz, stall_after=self.ctx.stall_after).start()
        deadline = time.monotonic() + self.ctx.trial_timeout_s
        try:
            r = self.phase(
                "prime-venv",
                self.ctx.venv_argv(venv, self.cfg.venv_creator),
                self.s.env,
                sampler,
                deadline,
            )
            stop = check(r, "priming venv")
            if stop is None:
                step = self.installer().command(
                    venv, self.ctx.packages, self.ctx.index_spec, self.s.cache, log, self.s.env
                )
                r = self.phase("prime-install", step.argv, step.env, sampler, deadline)
                stop = check(r, "priming install")
        finally:
            sampler.stop()
            redact.redact_file(log)
        if stop is not None:
            return Stop(stop.status, f"priming the cache: {stop.error}")
        remove(venv)
        _unlink(log)
        return None

    def start_measuring(self) -> Stop | None:
        s = self.s
        s.used0 = {
            "venv": used_bytes(s.venv.parent),
            "tmpdir": used_bytes(s.tmpdir),
            "cache": used_bytes(s.cache),
        }
        s.index0 = self.ctx.index.snapshot() if self.ctx.index else None
        s.watch = ContentionWatch().start()  # its scans stay outside the timed interval
        fs = {"venv": s.venv.parent, "tmpdir": s.tmpdir, **({"cache": s.cache} if s.cache else {})}
        s.sampler = Sampler(self.ctx.sample_hz, stall_after=self.ctx.stall_after, fs_paths=fs)
        # the timed interval opens with venv creation: a tick before its process starts (a
        # busy machine, another thread holding the interpreter) belongs to it, not to "setup"
        s.sampler.phase = "venv"
        s.sampler.start()
        s.t0 = time.monotonic()
        s.deadline = s.t0 + min(self.ctx.trial_timeout_s, self.ctx.give_up_s or math.inf)
        return None

    def create_venv(self) -> Stop | None:
        r = self.phase("venv", self.ctx.venv_argv(self.s.venv, self.cfg.venv_creator), self.s.env)
        self.s.phases["venv"] = r.seconds
        stop = check(r, "venv creation")
        if stop is None:
            self.s.site = installers.site_packages(self.s.venv)
            self.s.before = {p.name for p in self.s.site.iterdir()}
            self.s.seeded = {p.name for p in self.s.site.glob("*.dist-info")}
        return stop

    def install(self) -> Stop | None:
        """The install, its time split into download and install from the installer's log."""
        log = self.ctx.logs / f"{self.tid}.log"
        step = self.installer().command(
            self.s.venv, self.ctx.packages, self.ctx.index_spec, self.s.cache, log, self.s.env
        )
        r = self.phase("install", step.argv, step.env)
        dl, inst = self.installer().split(log, r.start_wall, r.start_wall + r.seconds, r.output)
        redact.redact_file(log)  # kept under results/…/logs: a direct URL may carry credentials
        self.s.phases["download"], self.s.phases["install"] = dl, inst
        if (
            r.ok
        ):  # what the installer did with the files: hard links, copies, symlinks (uv's link mode)
            fill(
                self.row,
                **installers.link_columns(
                    r.output, self.s.site, self.s.seeded, self.s.cache, self.cfg.link_mode
                ),
            )
        self.s.download_end = None if dl is None else (r.start - self.s.t0) + dl
        if dl is None and r.ok:
            self.ctx.progress.message(
                f"  {self.tid}: {self.cfg.installer}'s log has no phase marks; "
                "download_s and install_s left empty (unknown)"
            )
        return check(r, self.cfg.installer)

    def compile(self) -> Stop | None:
        """Bytecode of what the install added; like pip, files that do not compile (torch
        ships py312-only modules) are not an install failure: the ready check decides."""
        site = self.s.site
        added = sorted(
            site / n
            for n in {p.name for p in site.iterdir()} - self.s.before
            if not n.endswith(".dist-info")
        )
        if self.cfg.compile != "on" or not added:
            return None
        argv = installers.compile_command(self.s.venv, added, parallel=self.cfg.installer == "uv")
        r = self.phase("compile", argv, self.s.env)
        self.s.phases["compile"] = r.seconds
        if r.returncode == 1 and not r.stopped:
            return None
        return check(r, "bytecode compilation")

    def ready_check(self) -> Stop | None:
        argv = [str(self.s.venv / "bin" / "python"), "-c", self.ctx.ready]
        r = self.phase("import", argv, self.s.env)
        self.s.phases["import"] = r.seconds
        self.s.t_ready = r.end
        return check(r, "ready check")

    # ------------------------------------------------------------------ helpers
    def installer(self) -> installers.Pip | installers.Uv:
        return installers.get_installer(self.cfg.installer, self.cfg.link_mode)

    def phase(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str],
        sampler: Sampler | None = None,
        deadline: float | None = None,
    ) -> PhaseResult:
        """Run one phase under the trial's sampler, watchdog and deadline."""
        sampler = sampler or self.s.sampler
        assert sampler is not None
        self.ctx.progress.phase(self.tid, name)
        limits = Limits(self.ctx.stall_timeout, deadline or self.s.deadline, self.ctx.stop)

        def tick(elapsed: float) -> None:
            self.ctx.progress.tick(
                self.tid, name, elapsed, sampler.latest(), sampler.current_stall_s()
            )

        # output goes to the run's logs (local disk), not the volume under test; kept on failure
        out = self.ctx.logs / f"{self.tid}.{name}.out"
        return run_phase(name, argv, env, self.ctx.cwd, sampler, out, limits, tick)

    # ------------------------------------------------------------------ endings
    def measured(self) -> TrialResult:
        assert self.s.sampler is not None
        result = self.s.sampler.stop()
        label_download(result, self.s.download_end)
        fill(
            self.row,
            status="ok",
            time_to_ready_s=self.s.t_ready - self.s.t0,
            files_installed=installers.record_file_count(self.s.site, self.s.seeded),
            **{f"{p}_s": v for p, v in self.s.phases.items()},
            **tree_fields(self.s.sampler, result),
        )
        fill(self.row, **derived_fields(self.row, result), **self.space_fields(result))
        return TrialResult(self.row, result)

    def stopped(self, stop: Stop) -> TrialResult:
        error = stop.error
        if "No space left" in error and "ENOSPC" not in error:
            error = "ENOSPC: " + error
        fill(self.row, status=stop.status, error=error)
        if self.s.sampler is None:
            return TrialResult(self.row)
        result = self.s.sampler.stop()
        fill(self.row, **tree_fields(self.s.sampler, result))
        return TrialResult(self.row, result)

    def space_fields(self, result: SamplerResult) -> dict:
        s, out = self.s, {}
        if s.index0 is not None and self.ctx.index is not None:
            out["index_bytes"] = self.ctx.index.snapshot().file_bytes - s.index0.file_bytes
        tmp0 = s.used0.get("tmpdir")
        if tmp0 is not None and "tmpdir" in result.fs_peak:
            out["tmpdir_peak_bytes"] = max(0, result.fs_peak["tmpdir"] - tmp0)
        last = result.rows[-1] if result.rows else {}
        for label, col in (("cache", "cache_bytes"), ("venv", "venv_bytes")):
            now, before = last.get(f"fs_used_{label}"), s.used0.get(label)
            if now is not None and before is not None:
                out[col] = max(0, now - before)
        return out

    def note_contention(self) -> None:
        if self.s.watch is None:
            return
        found = self.s.watch.stop()
        self.row.contended = format_contended(found)
        if found:
            self.ctx.progress.message(
                f"  {self.tid}: other processes did disk I/O meanwhile (MB): {self.row.contended}"
            )


def identity_row(ctx: TrialContext, spec: TrialSpec) -> TrialRow:
    """A row holding the columns that say which trial this is and where its things lived."""
    cfg = spec.config
    return TrialRow(
        run_id=ctx.run_id,
        trial_id=spec.trial_id,
        config=cfg.name,
        repeat=spec.repeat,
        position=spec.position,
        status="running",
        venv_role=cfg.venv,
        tmpdir_role=cfg.tmpdir,
        cache_role=cfg.cache,
        venv_fstype=facts.fstype_of(ctx.roles[cfg.venv]),
        tmpdir_fstype=facts.fstype_of(ctx.roles[cfg.tmpdir]),
        cache_fstype=facts.fstype_of(ctx.roles[cfg.cache]) if cfg.cache != "off" else "",
        cache_state=cfg.cache_state,
        installer=cfg.installer,
        compile=cfg.compile,
        venv_creator=cfg.venv_creator,
        link_mode=cfg.link_mode,
        started_at=utcnow(),
    )


def fill(row: TrialRow, **columns: object) -> None:
    """Set columns of ``row`` (names checked: a misspelt column is an error, not a new key)."""
    for name, value in columns.items():
        if not hasattr(row, name):
            raise AttributeError(f"TrialRow has no column {name!r}")
        setattr(row, name, value)


def check(r: PhaseResult, what: str) -> Stop | None:
    """None when the phase succeeded, else why the trial stops."""
    if r.ok:
        return None
    if r.stopped == "stalled":
        return Stop("stalled", f"{r.phase}: {r.error}")
    if r.stopped == "interrupted":
        return Stop("interrupted", INTERRUPTED)
    if r.error:
        return Stop("failed", f"{what}: {r.error}")
    return Stop(
        "failed", f"{what} failed (exit {r.returncode}): {procfs.tail(r.output, _TAIL_LINES)}"
    )


def label_download(result: SamplerResult, download_end: float | None) -> None:
    """Label the install process's first part as download (when the split is known)."""
    if download_end is None:
        return
    for s in result.rows:
        if s["phase"] == "install" and s["t"] <= download_end:
            s["phase"] = "download"


def tree_fields(sampler: Sampler, result: SamplerResult) -> dict:
    """The trial-row figures of the installer trees and their stalls (ok or not)."""
    t = sampler.totals()
    return {
        "read_bytes": t.read_bytes,
        "write_bytes": t.write_bytes,
        "read_calls": t.read_calls,
        "write_calls": t.write_calls,
        "disk_write_bytes": t.disk_write_bytes,
        "cpu_s": round(t.cpu_s, 3),
        "stalls": len(result.stalls),
        "stall_longest_s": max((st.length_s for st in result.stalls), default=0.0),
    }


def derived_fields(row: TrialRow, result: SamplerResult) -> dict:
    """Figures derived from the samples of an ok trial: off-CPU share, iowait, D state, RSS."""
    rows = result.rows
    ttr = row.time_to_ready_s or 0.0
    iow = [s["iowait_pct"] for s in rows]
    return {
        "offcpu_frac": min(1.0, max(0.0, 1.0 - (row.cpu_s or 0.0) / ttr)) if ttr > 0 else None,
        "iowait_mean_pct": sum(iow) / len(iow) if iow else None,
        "iowait_p95_pct": percentile(iow, 95) if iow else None,
        "blocked_max": max((s["procs_blocked"] for s in rows), default=None),
        "dstate_max": max((s["tree_dstate"] for s in rows), default=None),
        "fswait_frac": (sum(1 for s in rows if s["tree_fswait"]) / len(rows)) if rows else None,
        "rss_max_bytes": max((s["tree_rss_bytes"] for s in rows), default=None),
        "sampler_cpu_s": round(result.self_cpu_s, 4),
    }


def used_bytes(path: Path | None) -> int | None:
    """Used bytes of the filesystem holding ``path`` (None if unknown)."""
    if path is None:
        return None
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


__all__ = ["Stop", "TrialContext", "TrialResult", "TrialSpec", "run_trial"]
