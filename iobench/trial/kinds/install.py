"""The install workload: a fresh venv, the scenario's packages installed with pip or uv, their
bytecode compiled, and the ready check — the time from the start of venv creation to the
ready check's exit is the trial's time-to-ready.

Untimed around it: a warm config's cache is primed by an install into a separate venv (once
per placement when the run shares primed caches: ``iobench.trial.warmcache``), and after the
row, a cold trial's filled cache may become the warm one; a run with start-up strategies
persists the venv and measures a restart (``iobench.trial.restart``), whose reinstall is
:meth:`Install.rebuild`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from iobench import files, redact
from iobench.rundir.kinds import install as rows
from iobench.scenario.vocab import STRATEGIES
from iobench.system.scratch import remove
from iobench.trial import fanout, installers
from iobench.trial.outcome import Stop, check
from iobench.trial.restart import Restart
from iobench.trial.sampler import Sampler, SamplerResult
from iobench.trial.steps import Step, Trial, used_bytes

#: a line of an installer's output about a lock: uv's "Waiting to acquire lock", a failed
#: flock on NFS, pip's lockfile retries (a cache shared by a fleet)
#: marks a layered-venv image venv as made (the run's trials share it)
IMAGE_DONE = ".iobench-image-complete"
#: the .pth a layered venv reads the image's site-packages through
IMAGE_PTH = "_iobench_image.pth"
LOCK_LINE = re.compile(r"^.*\block(?:s|ed|ing|file)?\b.*$", re.IGNORECASE | re.MULTILINE)
NAME = rows.NAME


def placed(t: Trial) -> None:
    """The row's columns that say where the venv, TMPDIR and the cache lived and how the
    install was done (the stand-in's rows hold them too: it fakes an install)."""
    cfg, row, fstypes = t.cfg, t.row, t.ctx.fstypes
    row.venv_role, row.tmpdir_role, row.cache_role = cfg.venv, cfg.tmpdir, cfg.cache
    row.venv_fstype, row.tmpdir_fstype = fstypes.get(cfg.venv, ""), fstypes.get(cfg.tmpdir, "")
    row.cache_fstype = fstypes.get(cfg.cache, "") if cfg.cache != "off" else ""
    row.cache_state, row.installer, row.compile = cfg.cache_state, cfg.installer, cfg.compile
    row.venv_creator, row.link_mode, row.pycache = cfg.venv_creator, cfg.link_mode, cfg.pycache
    row.strategy = cfg.strategy


class Install:
    """One install trial's steps and what they hand on to each other."""

    kind: ClassVar[str] = NAME

    def __init__(self) -> None:
        self.built = Path()  # the venv
        self.tmpdir = Path()
        self.cache: Path | None = None
        self.site = Path()
        self.before: set[str] = set()
        self.seeded: set[str] = set()
        self.download_end: float | None = None
        self.used0: dict[str, int | None] = {}
        self.index0: int | None = None
        self.waiter: fanout.Waiter | None = None  # a fan-out's worker that restores rank 0's venv
        self.pycache: Path | None = None  # PYTHONPYCACHEPREFIX (pycache "local")
        self.image_site: Path | None = None  # layered-venv: the image's site-packages

    # ------------------------------------------------------------------ untimed
    def prepare(self, t: Trial) -> Stop | None:
        """The venv's, TMPDIR's and the cache's paths; then, for a warm config, its priming."""
        cfg, ctx = t.cfg, t.ctx
        placed(t)
        self.built = t.dirs[cfg.venv] / "venv"
        self.tmpdir = t.dirs[cfg.tmpdir] / "tmp"
        self.tmpdir.mkdir(exist_ok=True)
        if cfg.cache != "off" and cfg.cache_state == "warm" and ctx.warm:
            self.cache = ctx.warm.path(cfg)  # shared by the placement's repeats
        elif cfg.cache != "off" and cfg.cache_state == "shared" and cfg.cache in ctx.shared:
            # one cache for every worker of this fleet trial, empty at its start
            self.cache = ctx.shared[cfg.cache] / t.spec.slot / "cache"
            self.cache.mkdir(parents=True, exist_ok=True)
        elif cfg.cache != "off":
            self.cache = t.dirs[cfg.cache] / "cache"
            self.cache.mkdir(exist_ok=True)
        t.env = installers.base_environment(self.tmpdir, isolated=ctx.index_spec.local)
        if cfg.pycache == "local":  # every phase's Python writes its bytecode there, as the
            self.pycache = t.dirs[cfg.tmpdir] / "pycache"  # start script's export would
            t.env["PYTHONPYCACHEPREFIX"] = str(self.pycache)
        if fanout.waits(t):  # it restores rank 0's venv, at rank 0's path on a host of its own
            self.waiter = fanout.Waiter(t, self.built)
            self.built = self.waiter.built
        stop = self.prime_cache(t) or self.build_image(t)
        self.used0 = {
            "venv": used_bytes(self.built.parent),
            "tmpdir": used_bytes(self.tmpdir),
            "cache": used_bytes(self.cache),
        }
        self.index0 = ctx.index.snapshot().file_bytes if ctx.index else None
        return stop

    def prime_cache(self, t: Trial) -> Stop | None:
        """Fill the cache through an untimed install into a separate venv."""
        if t.cfg.cache_state != "warm" or self.waiter is not None:  # a waiter installs nothing
            return None
        warm, started = t.ctx.warm, time.monotonic()
        try:
            if warm is not None and warm.ready(t.cfg):
                return None
            if warm is not None:
                self.cache = warm.reset(t.cfg)
            stop = self.prime(t)
            if stop is None and warm is not None:
                warm.mark_primed(t.cfg)
            return stop
        finally:
            t.priming_s += time.monotonic() - started

    def build_image(self, t: Trial) -> Stop | None:
        """layered-venv's base: the scenario's ``image`` packages in a venv on the config's
        TMPDIR role (local disk, as a container image's are), made once per run, untimed
        (it stands in for the image build); the trial's venv reads them through a .pth."""
        if not STRATEGIES[t.cfg.strategy].layered:
            return None
        image = t.ctx.scratch[t.cfg.tmpdir].run_root / "image"
        if (image / IMAGE_DONE).is_file():
            self.image_site = installers.site_packages(image)
            return None
        started = time.monotonic()
        t.ctx.progress.phase(t.tid, "building the image's packages (untimed)")
        if image.exists():
            remove(image)  # a half-made one (an earlier trial stopped in it)
        try:
            stop = self.untimed_install(t, image, list(t.ctx.image), None, "image", "the image's")
        finally:
            t.priming_s += time.monotonic() - started
        if stop is not None:
            return Stop(stop.status, f"building the image: {stop.error}")
        files.write(image / IMAGE_DONE, "")
        self.image_site = installers.site_packages(image)
        return None

    def untimed_install(
        self, t: Trial, venv: Path, packages: list[str], cache: Path | None, name: str, what: str
    ) -> Stop | None:
        """A venv and an install into it, run like timed phases (own session, watchdog, the
        trial's time limit) but measured by nobody: the priming install, the image's."""
        log = files.fresh(t.ctx.logs / f"{t.tid}.{name}.log")  # pip --log follows links
        sampler = Sampler(t.ctx.sample_hz, stall_after=t.ctx.stall_after).start()
        deadline = time.monotonic() + t.ctx.trial_timeout_s
        try:
            r = t.phase(f"{name}-venv", self.venv_argv(t, venv), None, sampler, deadline)
            stop = check(r, f"{what} venv")
            if stop is None:
                step = self.installer(t).command(
                    venv, packages, t.ctx.index_spec, cache, log, t.env
                )
                r = t.phase(f"{name}-install", step.argv, step.env, sampler, deadline)
                stop = check(r, f"{what} install")
        finally:
            sampler.stop()
            redact.redact_file(log)
        return stop

    def prime(self, t: Trial) -> Stop | None:
        """The priming install: run like a timed phase (own session, watchdog, time limit)
        but measured by nobody."""
        t.ctx.progress.phase(t.tid, "priming cache (untimed)")
        venv = self.built.parent / "prime-venv"
        stop = self.untimed_install(t, venv, t.ctx.packages, self.cache, "prime", "priming")
        if stop is not None:
            return Stop(stop.status, f"priming the cache: {stop.error}")
        remove(venv)
        (t.ctx.logs / f"{t.tid}.prime.log").unlink(missing_ok=True)
        return None

    def fs_paths(self, t: Trial) -> dict[str, Path]:
        return {
            "venv": self.built.parent,
            "tmpdir": self.tmpdir,
            **({"cache": self.cache} if self.cache else {}),
        }

    # ------------------------------------------------------------------ timed
    def timed(self) -> Sequence[Step]:
        if self.waiter is not None:  # fan-out: rank 0's archive instead of an install
            return (self.waiter.wait, self.restored, self.ready_check)
        return (self.create_venv, self.install, self.compile, self.ready_check)

    def restored(self, t: Trial) -> Stop | None:
        assert self.waiter is not None
        stop = self.waiter.restore(t)
        if stop is None:
            self.site = installers.site_packages(self.built)
        return stop

    def create_venv(self, t: Trial) -> Stop | None:
        r = t.phase("venv", self.venv_argv(t, self.built))
        t.phases["venv"] = r.seconds
        stop = check(r, "venv creation")
        if stop is None:
            self.site = installers.site_packages(self.built)
            if self.image_site is not None:  # what --system-site-packages gives over an image
                files.write(self.site / IMAGE_PTH, f"{self.image_site}\n")
            self.before = {p.name for p in self.site.iterdir()}
            self.seeded = {p.name for p in self.site.glob("*.dist-info")}
        return stop

    def install(self, t: Trial) -> Stop | None:
        """The install, its time split into download and install from the installer's log."""
        log = files.fresh(t.ctx.logs / f"{t.tid}.log")  # pip --log follows links
        step = self.installer(t).command(
            self.built, t.ctx.packages, t.ctx.index_spec, self.cache, log, t.env
        )
        r = t.phase("install", step.argv, step.env)
        dl, inst = self.installer(t).split(log, r.start_wall, r.start_wall + r.seconds, r.output)
        redact.redact_file(log)  # kept under results/…/logs: a direct URL may carry credentials
        t.phases["download"], t.phases["install"] = dl, inst
        t.row.lock_lines = len(LOCK_LINE.findall(r.output))
        if r.ok:  # what the installer did with the files: hard links, copies, symlinks
            seen = installers.link_columns(
                r.output, self.site, self.seeded, self.cache, t.cfg.link_mode
            )
            t.row.link_observed, t.row.link_fallback = seen["link_observed"], seen["link_fallback"]
        self.download_end = None if dl is None else (r.start - t.t0) + dl
        if dl is None and r.ok:
            t.message(
                f"{t.cfg.installer}'s log has no phase marks; "
                "download_s and install_s left empty (unknown)"
            )
        return check(r, t.cfg.installer)

    def compile(self, t: Trial) -> Stop | None:
        """Bytecode of what the install added; like pip, files that do not compile (torch
        ships py312-only modules) are not an install failure: the ready check decides."""
        added = self.added()
        if t.cfg.compile != "on" or not added:
            return None
        argv = installers.compile_command(self.built, added, parallel=t.cfg.installer == "uv")
        r = t.phase("compile", argv)
        t.phases["compile"] = r.seconds
        if r.returncode == 1 and not r.stopped:
            return None
        return check(r, "bytecode compilation")

    def ready_check(self, t: Trial) -> Stop | None:
        r = t.phase("import", self.ready_argv(t))
        t.phases["import"] = r.seconds
        t.mark_ready(r.end)
        return check(r, "ready check")

    # ------------------------------------------------------------------ the row
    def measured(self, t: Trial, result: SamplerResult) -> None:
        label_download(result, self.download_end)
        t.row.files_installed = installers.record_file_count(self.site, self.seeded)
        if self.index0 is not None and t.ctx.index is not None:
            t.row.index_bytes = t.ctx.index.snapshot().file_bytes - self.index0
        tmp0 = self.used0.get("tmpdir")
        if tmp0 is not None and "tmpdir" in result.fs_peak:
            t.row.tmpdir_peak_bytes = max(0, result.fs_peak["tmpdir"] - tmp0)
        last = result.rows[-1] if result.rows else {}
        for label in ("cache", "venv"):
            now, before = last.get(f"fs_used_{label}"), self.used0.get(label)
            if now is not None and before is not None:
                setattr(t.row, f"{label}_bytes", max(0, now - before))

    def after(self, t: Trial, stop: Stop | None) -> None:
        """The strategy's restart, then the warm cache's bookkeeping (untimed)."""
        if self.waiter is not None:
            self.waiter.release()
        if stop is None and t.ctx.lifecycle:
            Restart(t, self).run()
        if self.waiter is not None:
            self.waiter.finish()
        fanout.builder_done(t)
        warm, cfg = t.ctx.warm, t.cfg
        if warm is None:
            return
        started = time.monotonic()
        if stop is None and cfg.cache_state != "warm":  # its filled cache may save a priming
            if self.cache is not None and warm.adopt(cfg, self.cache):
                t.message("its filled cache becomes the warm one (no priming install)")
        if cfg.cache_state == "warm" and not warm.check(cfg):
            t.message("the trial changed its warm cache; the next one primes afresh")
        t.priming_s += time.monotonic() - started

    # ------------------------------------------------------------------ the restart's hooks
    def ready_argv(self, t: Trial) -> list[str]:
        return [str(self.built / "bin" / "python"), "-c", t.ctx.ready]

    def rebuild(self, t: Trial, sampler: Sampler) -> Stop | None:
        """reinstall's restart: a new venv and the whole install (bytecode included)."""
        venv = self.built
        r = t.phase("restart-venv", self.venv_argv(t, venv), None, sampler)
        if stop := check(r, "venv creation"):
            return stop
        site = installers.site_packages(venv)
        before = {p.name for p in site.iterdir()}
        log = files.fresh(t.ctx.logs / f"{t.tid}.restart.log")  # pip --log follows links
        step = self.installer(t).command(
            venv, t.ctx.packages, t.ctx.index_spec, self.cache, log, t.env
        )
        index0 = t.ctx.index.snapshot().file_bytes if t.ctx.index is not None else None
        r = t.phase("restart-install", step.argv, step.env, sampler)
        if index0 is not None and t.ctx.index is not None:
            t.row.restart_index_bytes = t.ctx.index.snapshot().file_bytes - index0
        redact.redact_file(log)
        if stop := check(r, t.cfg.installer):
            return stop
        added = sorted(site / n for n in {p.name for p in site.iterdir()} - before
                       if not n.endswith(".dist-info"))  # fmt: skip
        if t.cfg.compile == "on" and added:
            argv = installers.compile_command(venv, added, parallel=t.cfg.installer == "uv")
            r = t.phase("restart-compile", argv, None, sampler)
            if r.returncode != 1 or r.stopped:
                return check(r, "bytecode compilation")
        return None

    # ------------------------------------------------------------------ helpers
    def added(self) -> list[Path]:
        """What the install put into site-packages, besides its dist-info folders."""
        now = {p.name for p in self.site.iterdir()}
        return sorted(self.site / n for n in now - self.before if not n.endswith(".dist-info"))

    @staticmethod
    def installer(t: Trial) -> installers.Pip | installers.Uv:
        return installers.get_installer(t.cfg.installer, t.cfg.link_mode)

    @staticmethod
    def venv_argv(t: Trial, venv: Path) -> list[str]:
        return installers.venv_command(venv, t.ctx.python, t.cfg.venv_creator)


def label_download(result: SamplerResult, download_end: float | None) -> None:
    """Label the install process's first part as download (when the split is known)."""
    if download_end is None:
        return
    for s in result.rows:
        if s["phase"] == "install" and s["t"] <= download_end:
            s["phase"] = "download"


__all__ = ["Install", "label_download"]
