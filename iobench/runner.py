"""Run trials: cache state -> throwaway venv -> install under the sampler -> ready check -> cleanup.

The runner owns the order of phases and nothing else: it measures, hands each finished
trial to the run directory at once (so nothing measured is lost), and never formats a
report. Trials are interleaved (repeat 1 of every config, then repeat 2, ...) so that drift
in the machine's background load spreads over all configs instead of biasing one.

Time-to-ready runs from the start of venv creation to the ready check's exit; every phase
is its own child process, started in a new session so that a stall or Ctrl-C can end the
whole tree. A phase's exact counters are read from its zombie (children folded in by the
kernel) before it is reaped.
"""

from __future__ import annotations

import math
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from iobench import installers, metadata
from iobench.contention import ContentionWatch, format_contended
from iobench.errors import IOBenchError, UsageError
from iobench.index import LocalIndex
from iobench.installers import IndexSpec
from iobench.lock import TargetLock
from iobench.progress import PlainProgress, Progress
from iobench.results import PHASES, SAMPLE_COLUMNS, RunDir, new_run_id, utcnow
from iobench.sampler import Sampler, TreeCounters, read_process, stall_dicts
from iobench.scenario import Config, Scenario
from iobench.scratch import Scratch, remove

_TAIL_LINES = 12


@dataclass
class RunOptions:
    """Everything a run needs, validated by the CLI before anything runs."""

    scenario: Scenario
    roles: dict[str, Path]
    results_root: Path
    repeats: int
    sample_hz: float = 10.0
    stall_after: float = 30.0
    stall_timeout: float | None = None
    label: str = ""
    wheelhouse: Path | None = None
    index_url: str | None = None
    index_mbps: float | None = None
    python: str | None = None  # interpreter for the venvs (default: the one running iobench)
    resume: Path | None = None
    lock_wait: float = 0.0
    command: list[str] = field(default_factory=list)
    progress: Progress | None = None


@dataclass
class TrialPlan:
    config: Config
    repeat: int

    @property
    def trial_id(self) -> str:
        return f"{self.config.name}-r{self.repeat}"


class TrialInterrupted(Exception):
    """Raised inside a trial when the user interrupts; carries the partial row."""


class _Stalled(Exception):
    pass


@dataclass
class PhaseResult:
    start_wall: float
    start: float
    end: float
    returncode: int
    output: str


def plan_trials(scenario: Scenario, repeats: int, done: set[str]) -> list[TrialPlan]:
    """Interleaved trials, minus those already done (for --resume)."""
    plans = [TrialPlan(c, r) for r in range(1, repeats + 1) for c in scenario.configs]
    return [p for p in plans if p.trial_id not in done]


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default), q in [0, 100]."""
    if not values:
        return math.nan
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _tail(text: str, n: int = _TAIL_LINES) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-n:])


def _used_bytes(path: Path | None) -> int | None:
    if path is None:
        return None
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def _kill_tree(pid: int) -> None:
    """End a phase's whole process tree (it runs in its own session / process group).

    The root is our child and is left unreaped (a zombie), so that its counters can still
    be read; its descendants are waited for here.
    """
    import psutil

    try:
        others = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        others = []
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        for p in others:  # also those that left the process group
            try:
                p.send_signal(sig)
            except psutil.Error:
                pass
        deadline = time.monotonic() + 2.0
        root_done = False
        while time.monotonic() < deadline:
            res = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
            if res is not None and res.si_pid == pid:
                root_done = True
                break
            time.sleep(0.02)
        _, others = psutil.wait_procs(others, timeout=max(0.0, deadline - time.monotonic()))
        if root_done and not others:
            return


def _end_group(pid: int) -> None:
    """Kill what a finished phase left running in its process group (e.g. a background
    process started by a ready check); the group id is safe to use while the root is an
    unreaped zombie."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class Runner:
    """One `iobench run`: owns the index, the scratch folders and the run directory."""

    def __init__(self, opts: RunOptions) -> None:
        self.opts = opts
        self.progress: Progress = opts.progress or PlainProgress()
        self.index: LocalIndex | None = None
        self.index_spec: IndexSpec | None = None
        self.scratch: dict[str, Scratch] = {}
        self.run_dir: RunDir | None = None
        self.lock: TargetLock | None = None
        self._pending: dict[str, Path] = {}
        self._cwd: Path | None = None

    # ------------------------------------------------------------------ set-up
    def _start_index(self) -> dict:
        o = self.opts
        sc = o.scenario
        if o.index_url and o.wheelhouse:
            raise UsageError("give --wheelhouse or --index-url, not both")
        if o.wheelhouse is not None:
            self.index = LocalIndex(o.wheelhouse, o.index_mbps).start()
            self.index_spec = IndexSpec(self.index.url, local=True)
            return {"kind": "local", "source": str(o.wheelhouse), "url": self.index.url, "mbps": o.index_mbps}
        if sc.wheels and not o.index_url:  # (the CLI refuses a remote index for synthetic names)
            from iobench.wheels import cached_wheels, load_profile

            profile = load_profile(sc.wheels)
            self.progress.message(f"wheels: profile {profile.name} ({profile.file_count} files)")
            house = cached_wheels(profile)
            self.index = LocalIndex(house, o.index_mbps).start()
            self.index_spec = IndexSpec(self.index.url, local=True)
            return {
                "kind": "local",
                "source": f"synthetic profile {profile.name} ({profile.fingerprint()})",
                "url": self.index.url,
                "mbps": o.index_mbps,
            }
        if o.index_mbps is not None:
            raise UsageError("--index-mbps needs the local index (--wheelhouse or a synthetic scenario)")
        if o.index_url:
            _check_reachable(o.index_url)
        self.index_spec = IndexSpec(o.index_url, local=False)
        return {"kind": "remote", "url": metadata.redact_value(o.index_url or "(pip configuration)")}

    def _check_space(self) -> None:
        sc = self.opts.scenario
        size_mb = sc.size_mb or 50.0
        need: dict[str, float] = {}
        for c in sc.configs:
            need[c.venv] = max(need.get(c.venv, 0.0), size_mb)
            need[c.tmpdir] = max(need.get(c.tmpdir, 0.0), size_mb * 0.4)
            if c.cache != "off":
                need[c.cache] = max(need.get(c.cache, 0.0), size_mb * 0.4)
        shared: dict[int, float] = {}
        for role, mb in need.items():
            st = os.stat(self.opts.roles[role])
            shared[st.st_dev] = shared.get(st.st_dev, 0.0) + mb
        for role, path in self.opts.roles.items():
            if role not in need:
                continue
            dev = os.stat(path).st_dev
            st = os.statvfs(path)
            free_mb = st.f_bavail * st.f_frsize / 1e6
            if free_mb < shared[dev]:
                raise UsageError(
                    f"--{role if role in ('target', 'tmp') else 'path ' + role}: {path} has "
                    f"{free_mb:.0f} MB free; scenario {sc.name} needs about {shared[dev]:.0f} MB there"
                )

    def _meta(self, run_id: str, index_meta: dict) -> dict:
        o = self.opts
        return {
            "iobench_version": metadata.__version__,
            "run_id": run_id,
            "command": [metadata.redact_value(a) for a in o.command],
            "label": o.label,
            "started_at": utcnow(),
            "ended_at": None,
            "status": "running",
            "scenario": {
                **o.scenario.to_dict(),
                "packages": [metadata.redact_value(p) for p in o.scenario.packages],
            },
            "repeats": o.repeats,
            "roles": {name: metadata.mount_of(p) for name, p in o.roles.items()},
            "host": metadata.host_info(),
            "versions": metadata.versions(),
            "pip_config": metadata.pip_config(isolated=bool(self.index_spec and self.index_spec.local)),
            "index": index_meta,
            "gpu": metadata.gpu_info(),
            "sample_hz": o.sample_hz,
            "stall_after_s": o.stall_after,
            "stall_timeout_s": o.stall_timeout,
            "venv_python": o.python or sys.executable,
            "env": metadata.redact_env(dict(os.environ)),
        }

    # ------------------------------------------------------------------ the run
    def run(self) -> RunDir:
        o = self.opts
        used_roles = set().union(*(c.roles() for c in o.scenario.configs))
        for role in sorted(used_roles):
            if role not in o.roles:
                raise UsageError(
                    f"scenario {o.scenario.name} uses role '{role}' but no --path {role}=DIR was given"
                )
        if o.resume is None:
            self._check_space()
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
        if previous[signal.SIGHUP] == signal.SIG_IGN:  # under nohup: a hangup must not stop us
            del previous[signal.SIGHUP]
        for sig in previous:
            signal.signal(sig, _sigterm)
        rd: RunDir | None = None
        try:
            index_meta = self._start_index()
            if o.resume is not None:
                rd = RunDir.open(o.resume)
                meta = rd.load_meta()
                _check_resume(meta, o)
                run_id = meta["run_id"]
                self._lock_target(run_id)
                rd.update_meta(status="running", resumed_at=utcnow())
            else:
                run_id = new_run_id(socket.gethostname(), o.scenario.name)
                self._lock_target(run_id)  # before the run folder: a refused run leaves nothing
                rd = RunDir.create(o.results_root, run_id, self._meta(run_id, index_meta))
            self.run_dir = rd
            self._warn_results_on_target(rd)
            for role in sorted(used_roles):
                self.scratch[role] = Scratch(o.roles[role], run_id).ensure().claim()
                left = [p.name for p in self.scratch[role].leftovers() if p.name != run_id]
                if left:
                    self.progress.message(
                        f"note: {self.scratch[role].root} holds scratch of other or crashed runs "
                        f"({', '.join(left[:3])}{'...' if len(left) > 3 else ''}); "
                        f"`iobench clean {o.roles[role]}` removes it once no run uses it"
                    )
            done = rd.done_trial_ids()
            plans = plan_trials(o.scenario, o.repeats, done)
            total = len(plans) + len(done)
            self.progress.run_started(str(rd.path), total, len(done))
            seeded = self._warm_up()
            if seeded:
                meta = rd.load_meta()
                rd.update_meta(versions={**meta.get("versions", {}), "venv": seeded})
            k = len(done)
            for plan in plans:
                k += 1
                self.progress.trial_started(k, total, plan.trial_id)
                try:
                    row = self.run_trial(plan, run_id)
                except TrialInterrupted as exc:
                    row = exc.args[0]
                    self._record(rd, row, k, total)
                    raise KeyboardInterrupt from None
                # the row is durable before the (possibly long) removal of the trial's venv
                self._record(rd, row, k, total)
                self._cleanup(self._pending, plan.trial_id)
                if self.lock is not None and self.lock.lost:
                    self.progress.message("warning: " + self.lock.lost)
            rd.update_meta(status="complete", ended_at=utcnow())
            self.progress.run_finished()
            return rd
        except KeyboardInterrupt:
            if rd is not None:
                self._quietly(lambda: rd.update_meta(status="interrupted", ended_at=utcnow()))
            raise
        finally:
            # a second Ctrl-C must not cut the clean-up short: removing our venvs, freeing the lock
            sigint = signal.signal(signal.SIGINT, signal.SIG_IGN)
            if self._pending:
                self._cleanup(self._pending, "interrupted trial")
            if self.index is not None:
                self.index.stop()
            if self._cwd is not None:
                self._quietly(lambda: os.rmdir(self._cwd))  # made by mkdtemp, left empty
            for scratch in self.scratch.values():
                try:
                    scratch.finish()
                except OSError as exc:
                    self.progress.message(f"warning: could not remove {scratch.run_root}: {exc}")
            if self.lock is not None:
                self.lock.release()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            signal.signal(signal.SIGINT, sigint)

    def _warn_results_on_target(self, rd: RunDir) -> None:
        """The run's logs are written during trials: on a network volume under test they
        would add its latency to what is measured."""
        target = self.opts.roles["target"]
        fstype = metadata.fstype_of(target)
        remote = fstype.startswith(("nfs", "fuse", "cifs", "smb", "9p", "ceph", "lustre", "gluster", "virtiofs"))
        if remote and os.stat(rd.path).st_dev == os.stat(target).st_dev:
            self.progress.message(
                f"note: the results folder is on the target ({fstype}); give --results a local folder "
                "so that iobench's own logs do not share the volume under test"
            )

    def _record(self, rd: RunDir, row: dict, k: int, total: int) -> None:
        try:
            rd.append_trial(row)
        except OSError as exc:
            raise IOBenchError(f"cannot append to {rd.trials_csv}: {exc.strerror or exc}") from None
        self.progress.trial_finished(k, total, row)

    def _quietly(self, fn) -> None:  # noqa: ANN001
        try:
            fn()
        except OSError:
            pass

    def _lock_target(self, run_id: str) -> None:
        """One iobench run per target at a time: two would spoil each other's figures."""
        scratch = Scratch(self.opts.roles["target"], run_id).ensure()
        self.lock = TargetLock(scratch.root, run_id, wait_s=self.opts.lock_wait).acquire()
        if self.lock.took_over:
            self.progress.message(
                f"warning: took over a stale lock on {self.opts.roles['target']}: {self.lock.took_over}"
            )

    def _warm_up(self) -> dict:
        """Create and remove one venv, untimed, so the first trial does not pay virtualenv's
        one-time app-data extraction; return what the venvs are made of (Python, seeded pip),
        which is what every trial's installer really is."""
        role = "tmp" if "tmp" in self.scratch else next(iter(sorted(self.scratch)))
        d = self.scratch[role].trial_dir("warm-up")
        found: dict = {}
        try:
            subprocess.run(self._venv_argv(d / "venv"), capture_output=True, timeout=600, check=False)
            cfg = d / "venv" / "pyvenv.cfg"
            if cfg.is_file():
                for line in cfg.read_text().splitlines():
                    key, _, value = line.partition("=")
                    if key.strip() in ("version", "version_info", "virtualenv"):
                        found["python" if key.strip().startswith("version") else "virtualenv"] = value.strip()
            for dist in (d / "venv").glob("lib/python*/site-packages/*.dist-info"):
                name, _, version = dist.name[: -len(".dist-info")].partition("-")
                found[name.lower()] = version
        finally:
            remove(d)
        return found

    def _venv_argv(self, venv: Path) -> list[str]:
        argv = [sys.executable, "-m", "virtualenv", "--quiet", "--no-periodic-update", "--no-setuptools"]
        if self.opts.python:
            argv += ["--python", self.opts.python]
        return argv + [str(venv)]

    # ------------------------------------------------------------------ one trial
    def run_trial(self, plan: TrialPlan, run_id: str) -> dict:
        """Run one trial and return its row; never raises for a failing installer."""
        o = self.opts
        cfg = plan.config
        tid = plan.trial_id
        assert self.run_dir is not None and self.index_spec is not None
        installer = installers.get_installer(cfg.installer)
        log_path = self.run_dir.logs_dir / f"{tid}.log"
        dirs: dict[str, Path] = {}
        self._pending = dirs  # removed by run() once the row is saved, or on interruption
        row: dict = {
            "run_id": run_id,
            "trial_id": tid,
            "config": cfg.name,
            "repeat": plan.repeat,
            "venv_role": cfg.venv,
            "tmpdir_role": cfg.tmpdir,
            "cache_role": cfg.cache,
            "venv_fstype": metadata.fstype_of(o.roles[cfg.venv]),
            "tmpdir_fstype": metadata.fstype_of(o.roles[cfg.tmpdir]),
            "cache_fstype": metadata.fstype_of(o.roles[cfg.cache]) if cfg.cache != "off" else "",
            "cache_state": cfg.cache_state,
            "installer": cfg.installer,
            "compile": cfg.compile,
            "started_at": utcnow(),
        }
        sampler: Sampler | None = None
        watch: ContentionWatch | None = None
        try:
            for role in cfg.roles():
                dirs[role] = self.scratch[role].trial_dir(tid)
            venv = dirs[cfg.venv] / "venv"
            tmpdir = dirs[cfg.tmpdir] / "tmp"
            tmpdir.mkdir(exist_ok=True)
            cache = None
            if cfg.cache != "off":
                cache = dirs[cfg.cache] / "cache"
                cache.mkdir(exist_ok=True)
            workdir = self._neutral_cwd()
            env = installers.base_environment(tmpdir, isolated=self.index_spec.local)
            if cfg.cache_state == "warm":
                self.progress.phase(tid, "priming cache (untimed)")
                self._prime(installer, dirs[cfg.venv] / "prime-venv", cache, env, workdir, tid)
            used0 = {"venv": _used_bytes(venv.parent), "tmpdir": _used_bytes(tmpdir), "cache": _used_bytes(cache)}
            index0 = self.index.snapshot() if self.index else None
            watch = ContentionWatch().start()  # its scans stay outside the timed interval
            sampler = Sampler(
                o.sample_hz,
                stall_after=o.stall_after,
                fs_paths={"venv": venv.parent, "tmpdir": tmpdir, **({"cache": cache} if cache else {})},
            ).start()
            t0 = time.monotonic()
            phases: dict[str, float] = dict.fromkeys(PHASES, 0.0)
            # venv
            r = self._phase(tid, "venv", self._venv_argv(venv), env, workdir, sampler)
            phases["venv"] = r.end - r.start
            if r.returncode != 0:
                raise _Failed(f"venv creation failed (exit {r.returncode}): {_tail(r.output)}")
            site = installers.site_packages(venv)
            before = {p.name for p in site.iterdir()}
            seeded = {p.name for p in site.glob("*.dist-info")}
            # install (download + install split from the installer's log)
            step = installer.command(venv, list(o.scenario.packages), self.index_spec, cache, log_path, env)
            r = self._phase(tid, "install", step.argv, step.env, workdir, sampler)
            dl, inst = installer.split(log_path, r.start_wall, r.start_wall + (r.end - r.start), r.output)
            phases["download"], phases["install"] = dl, inst
            install_download_end = (r.start - t0) + dl
            if r.returncode != 0:
                raise _Failed(f"{cfg.installer} failed (exit {r.returncode}): {_tail(r.output)}")
            # compile
            added = sorted(site / n for n in {p.name for p in site.iterdir()} - before if not n.endswith(".dist-info"))
            if cfg.compile == "on" and added:
                argv = installers.compile_command(venv, added, parallel=cfg.installer == "uv")
                r = self._phase(tid, "compile", argv, env, workdir, sampler)
                phases["compile"] = r.end - r.start
                # like pip, files that do not compile (torch ships py312-only modules) are not
                # an install failure; the ready check decides
                if r.returncode not in (0, 1):
                    raise _Failed(f"bytecode compilation failed (exit {r.returncode}): {_tail(r.output)}")
            # first import: the ready check
            argv = [str(venv / "bin" / "python"), "-c", o.scenario.ready]
            r = self._phase(tid, "import", argv, env, workdir, sampler)
            phases["import"] = r.end - r.start
            if r.returncode != 0:
                raise _Failed(f"ready check failed (exit {r.returncode}): {_tail(r.output)}")
            t_ready = r.end
            result = sampler.stop()
            row["status"] = "ok"
            row["time_to_ready_s"] = t_ready - t0
            row.update({f"{p}_s": phases[p] for p in PHASES})
            row["files_installed"] = installers.record_file_count(site, seeded)
            self._fill_measurements(row, sampler, result, used0, index0, install_download_end)
        except _Failed as exc:
            row["status"] = "failed"
            row["error"] = str(exc)
            self._after_failure(row, sampler)
        except _Stalled as exc:
            row["status"] = "stalled"
            row["error"] = str(exc)
            self._after_failure(row, sampler)
        except KeyboardInterrupt:
            row["status"] = "interrupted"
            row["error"] = "interrupted by the user (SIGINT/SIGTERM); trial scratch removed"
            self._after_failure(row, sampler)
            self._note_contention(row, watch)
            raise TrialInterrupted(row) from None
        except OSError as exc:
            row["status"] = "failed"
            row["error"] = f"{exc.strerror or exc} ({exc.filename})" if exc.filename else str(exc)
            self._after_failure(row, sampler)
        self._note_contention(row, watch)
        return row

    def _note_contention(self, row: dict, watch: ContentionWatch | None) -> None:
        if watch is None:
            return
        found = watch.stop()
        row["contended"] = format_contended(found)
        if found:
            self.progress.message(
                f"  {row['trial_id']}: other processes did disk I/O meanwhile (MB): {row['contended']}"
            )

    def _after_failure(self, row: dict, sampler: Sampler | None) -> None:
        if sampler is not None:
            result = sampler.stop()
            self._save_series(row, result)
            row.update(_tree_fields(sampler, result))
        if "error" in row and row["error"] and "No space left" in row["error"] and "ENOSPC" not in row["error"]:
            row["error"] = "ENOSPC: " + row["error"]

    def _cleanup(self, dirs: dict[str, Path], tid: str) -> None:
        self.progress.phase(tid, "cleanup")
        for d in list(dirs.values()):
            try:
                remove(d)
            except OSError as exc:
                self.progress.message(f"warning: could not remove {d}: {exc}")
        dirs.clear()

    def _fill_measurements(self, row, sampler, result, used0, index0, download_end) -> None:  # noqa: ANN001
        rows = result.rows
        for s in rows:  # label the install process's first part as download
            if s["phase"] == "install" and s["t"] <= download_end:
                s["phase"] = "download"
        fields = _tree_fields(sampler, result)
        row.update(fields)
        ttr = row["time_to_ready_s"]
        iow = [s["iowait_pct"] for s in rows]
        row.update(
            offcpu_frac=min(1.0, max(0.0, 1.0 - fields["cpu_s"] / ttr)) if ttr > 0 else None,
            iowait_mean_pct=sum(iow) / len(iow) if iow else None,
            iowait_p95_pct=percentile(iow, 95) if iow else None,
            blocked_max=max((s["procs_blocked"] for s in rows), default=None),
            dstate_max=max((s["tree_dstate"] for s in rows), default=None),
            fswait_frac=(sum(1 for s in rows if s["tree_fswait"]) / len(rows)) if rows else None,
            rss_max_bytes=max((s["tree_rss_bytes"] for s in rows), default=None),
            sampler_cpu_s=round(result.self_cpu_s, 4),
        )
        if index0 is not None and self.index is not None:
            row["index_bytes"] = self.index.snapshot().file_bytes - index0.file_bytes
        if used0.get("tmpdir") is not None and "tmpdir" in result.fs_peak:
            row["tmpdir_peak_bytes"] = max(0, result.fs_peak["tmpdir"] - used0["tmpdir"])
        last = rows[-1] if rows else {}
        for label, col in (("cache", "cache_bytes"), ("venv", "venv_bytes")):
            now = last.get(f"fs_used_{label}")
            if now is not None and used0.get(label) is not None:
                row[col] = max(0, now - used0[label])
        self._save_series(row, result)

    def _save_series(self, row: dict, result) -> None:  # noqa: ANN001 - SamplerResult
        """Samples and stalls; a full results disk costs them, never the trial's row."""
        try:
            if result.rows:
                self.run_dir.write_samples(row["trial_id"], result.rows, SAMPLE_COLUMNS)
            self.run_dir.append_stalls(row["run_id"], row["trial_id"], stall_dicts(result.stalls))
        except OSError as exc:
            self.progress.message(f"warning: samples of {row['trial_id']} not saved: {exc.strerror or exc}")

    def _logs(self) -> Path:
        assert self.run_dir is not None
        return self.run_dir.logs_dir

    def _neutral_cwd(self) -> Path:
        """An empty local folder as every phase's working directory: `python -c` puts the
        cwd first on sys.path, so a cwd on the volume under test would add lookups to
        every import, and files in it could shadow modules."""
        if self._cwd is None:
            self._cwd = Path(tempfile.mkdtemp(prefix="iobench-cwd-"))
        return self._cwd

    def _prime(self, installer, venv: Path, cache: Path | None, env: dict, cwd: Path, tid: str) -> None:  # noqa: ANN001
        """Fill the cache through an untimed install into a separate venv; run like a timed
        phase (own session, watchdog, Ctrl-C ends the tree) but measured by nobody."""
        sampler = Sampler(self.opts.sample_hz, stall_after=self.opts.stall_after).start()
        log = self._logs() / f"{tid}.prime.log"
        try:
            r = self._phase(tid, "prime-venv", self._venv_argv(venv), env, cwd, sampler)
            if r.returncode != 0:
                raise _Failed(f"priming venv failed: {_tail(r.output)}")
            step = installer.command(venv, list(self.opts.scenario.packages), self.index_spec, cache, log, env)
            r = self._phase(tid, "prime-install", step.argv, step.env, cwd, sampler)
            if r.returncode != 0:
                raise _Failed(f"priming install failed (exit {r.returncode}): {_tail(r.output)}")
        except _Stalled as exc:
            raise _Stalled(f"priming the cache: {exc}") from None
        finally:
            sampler.stop()
        remove(venv)
        try:
            log.unlink()
        except OSError:
            pass

    def _phase(self, tid: str, phase: str, argv: list[str], env: dict, cwd: Path, sampler: Sampler) -> PhaseResult:
        """Run one phase's process under the sampler; exact counters from its zombie."""
        self.progress.phase(tid, phase)
        # the phase's output goes to the run's logs (local disk), not to the volume under test;
        # it is kept only when the phase fails
        out_path = self._logs() / f"{tid}.{phase}.out"
        with open(out_path, "w+b") as out:
            start_wall = time.time()
            start = time.monotonic()
            try:
                proc = subprocess.Popen(
                    argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, start_new_session=True,
                )
            except OSError as exc:
                raise _Failed(f"cannot start {argv[0]}: {exc.strerror}") from None
            sampler.watch(proc.pid, phase)
            try:
                self._wait(proc, tid, phase, start, sampler)
            except BaseException:
                _kill_tree(proc.pid)
                sampler.finish(self._zombie_counters(proc.pid, sampler))  # the killed phase counts too
                proc.wait()
                raise
            end = time.monotonic()
            counters = self._zombie_counters(proc.pid, sampler)
            _end_group(proc.pid)
            proc.wait()
            sampler.finish(counters)
            out.seek(0)
            output = out.read()[-20000:].decode(errors="replace")
        if proc.returncode == 0:
            try:
                out_path.unlink()
            except OSError:
                pass
        return PhaseResult(start_wall, start, end, proc.returncode, output)

    @staticmethod
    def _zombie_counters(pid: int, sampler: Sampler) -> TreeCounters:
        try:
            return read_process(pid)[0]
        except (OSError, ValueError, IndexError):
            return sampler.live()  # the last sample of this phase, not the trial's total

    def _wait(self, proc: subprocess.Popen, tid: str, phase: str, start: float, sampler: Sampler) -> None:
        """Block until the process exits (not reaped), ticking progress and the watchdog."""
        o = self.opts
        try:
            pidfd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            pidfd = None
        try:
            while True:
                if pidfd is not None:
                    ready, _, _ = select.select([pidfd], [], [], 0.25)
                    exited = bool(ready)
                else:
                    time.sleep(0.02)
                    exited = False
                if exited or pidfd is None:
                    res = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
                    if res is not None and res.si_pid == proc.pid:
                        return
                    if exited:
                        continue
                stall = sampler.current_stall_s()
                self.progress.tick(tid, phase, time.monotonic() - start, sampler.latest(), stall)
                if o.stall_timeout is not None and sampler.since_progress_s() >= o.stall_timeout:
                    raise _Stalled(
                        f"no write progress for {sampler.since_progress_s():.0f} s in {phase} "
                        f"(--stall-timeout {o.stall_timeout:g}); installer tree killed"
                    )
        finally:
            if pidfd is not None:
                os.close(pidfd)


class _Failed(Exception):
    pass


def _tree_fields(sampler: Sampler, result) -> dict:  # noqa: ANN001 - SamplerResult
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


def _sigterm(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _check_reachable(url: str) -> None:
    """Fail the run early, once, if the index cannot be reached at all. Any HTTP answer
    (even 401 or 404 at the root) counts as reachable: pip may still work with it.
    Credentials in the URL are sent as Basic auth, never as part of the host."""
    import base64
    import urllib.error
    import urllib.parse
    import urllib.request

    parts = urllib.parse.urlsplit(url)
    headers = {}
    if parts.username is not None:
        token = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(token.encode()).decode()
        netloc = parts.hostname or ""
        if parts.port:
            netloc += f":{parts.port}"
        url = urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=15) as resp:  # noqa: S310
            resp.read(1)
    except urllib.error.HTTPError:
        return
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise IOBenchError(f"package index {metadata.redact_value(url)} cannot be reached: {reason}") from None


def _check_resume(meta: dict, o: RunOptions) -> None:
    """Refuse to resume when the scenario or roles changed since the run started."""
    old = meta.get("scenario", {})
    if old.get("name") != o.scenario.name or [c["name"] for c in old.get("configs", [])] != [
        c.name for c in o.scenario.configs
    ]:
        raise UsageError(
            f"cannot resume {meta.get('run_id')}: scenario/configs changed "
            f"(was {old.get('name')} {[c['name'] for c in old.get('configs', [])]})"
        )
    old_roles = {k: v.get("path") for k, v in meta.get("roles", {}).items()}
    new_roles = {k: str(Path(v).resolve()) for k, v in o.roles.items()}
    if old_roles != new_roles:
        raise UsageError(f"cannot resume {meta.get('run_id')}: roles changed (was {old_roles}, now {new_roles})")
    if meta.get("repeats") not in (None, o.repeats):
        raise UsageError(f"cannot resume {meta.get('run_id')}: repeats changed (was {meta.get('repeats')})")
    packages = [metadata.redact_value(p) for p in o.scenario.packages]
    if list(old.get("packages", [])) != packages:
        raise UsageError(f"cannot resume {meta.get('run_id')}: packages changed (was {old.get('packages')})")
    if meta.get("venv_python") not in (None, o.python or sys.executable):
        raise UsageError(f"cannot resume {meta.get('run_id')}: --python changed (was {meta.get('venv_python')})")
    kind = "local" if (o.wheelhouse or (o.scenario.wheels and not o.index_url)) else "remote"
    if (meta.get("index") or {}).get("kind") not in (None, kind):
        raise UsageError(f"cannot resume {meta.get('run_id')}: the package index changed (was {meta['index'].get('kind')})")
