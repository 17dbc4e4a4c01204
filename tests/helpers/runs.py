"""Synthetic run directories, written through the real writer, for report tests and benchmarks.

Rows are ``TrialRow``/``Sample``/``Stall`` records and the folder is made by ``RunDir``, so a
fixture cannot drift from the format. The numbers mimic a CUDA-torch-sized install (15k
files, ~2.6 GB written) on a GPU pod whose ``/workspace`` is a network volume: on the volume
the install is latency-bound and slow (and the ``naive`` config's volume runs out of burst
credits mid-install); on local disk it is CPU-bound. Every figure is derived from a seeded
generator, so tests can recompute them.
"""

from __future__ import annotations

import atexit
import csv
import io
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from iobench.rundir.folder import RunDir
from iobench.rundir.kinds.install import Row as InstallRow
from iobench.rundir.meta import HostInfo, IndexInfo, RoleInfo, RunMeta
from iobench.rundir.records import PHASES, SAMPLE_COLUMNS, TRIAL_COLUMNS, Sample, Stall, TrialRow

__all__ = [
    "DEFAULT_CONFIGS", "FILES", "FSTYPE", "FSWAIT_COLUMNS", "PHASES", "ROLES", "SAMPLE_COLUMNS",
    "TRIAL_COLUMNS", "WHEEL_BYTES", "WRITE_BYTES", "ConfigSpec", "make_all_failed", "make_big_run",
    "make_not_a_run", "make_run_dir", "resume_rows",
]  # fmt: skip
#: columns that runs written before filesystem-wait sampling lack (``make_run_dir(fswait=False)``)
FSWAIT_COLUMNS = ("fswait_frac", "tree_fswait")

ROLES = {
    "target": {"path": "/workspace", "fstype": "nfs4", "device": "10.0.0.5:/vol",
               "mountpoint": "/workspace", "mount_options": "rw,relatime,vers=4.1",
               "total_bytes": 107374182400, "free_bytes": 96636764160},
    "tmp": {"path": "/tmp", "fstype": "overlay", "device": "overlay", "mountpoint": "/",
            "mount_options": "rw,relatime", "total_bytes": 53687091200,
            "free_bytes": 40265318400},
    "local": {"path": "/root/scratch", "fstype": "ext4", "device": "/dev/nvme0n1p1",
              "mountpoint": "/root", "mount_options": "rw,relatime",
              "total_bytes": 214748364800, "free_bytes": 193273528320},
}  # fmt: skip
FSTYPE = {role: v["fstype"] for role, v in ROLES.items()} | {"off": ""}


@dataclass(frozen=True)
class ConfigSpec:
    """How one synthetic config behaves (seconds are medians before noise)."""

    name: str
    venv: str = "target"
    tmpdir: str = "tmp"
    cache: str = "off"
    installer: str = "pip"
    cache_state: str = "cold"
    compile: str = "on"
    link_mode: str = "default"  # uv's UV_LINK_MODE
    phases: dict[str, float] = field(
        default_factory=lambda: {"venv": 3.0, "download": 20.0, "install": 300.0,
                                 "compile": 40.0, "import": 25.0}
    )  # fmt: skip
    profile: str = "latency"  # latency | bandwidth | cpu | network
    drop_at: float | None = None  # fraction of install after which writes slow to 20 %
    stall_s: float = 0.0  # a no-progress stretch inside install
    fail: int = 0  # how many repeats (the last ones) fail


DEFAULT_CONFIGS = (
    ConfigSpec("naive", venv="target", tmpdir="tmp", cache="local", profile="latency",
               drop_at=0.45, stall_s=25.0),
    ConfigSpec("tmp-cache-advice", venv="target", tmpdir="tmp", cache="tmp", profile="latency",
               phases={"venv": 3.0, "download": 19.0, "install": 280.0, "compile": 38.0,
                       "import": 24.0}),
    ConfigSpec("venv-local", venv="local", tmpdir="tmp", cache="off", profile="cpu",
               phases={"venv": 1.2, "download": 9.0, "install": 38.0, "compile": 12.0,
                       "import": 4.0}),
    ConfigSpec("uv-local", venv="local", tmpdir="local", cache="local", installer="uv",
               profile="bandwidth", compile="off",
               phases={"venv": 0.2, "download": 8.0, "install": 14.0, "compile": 0.0,
                       "import": 4.0}),
)  # fmt: skip

WRITE_BYTES = 2.6e9
WHEEL_BYTES = 2.4e9
FILES = 15_000


def _trial_figures(spec: ConfigSpec, rng: np.random.Generator) -> dict[str, float]:
    """Phase times and counters of one trial, with ~5 % log-normal noise."""
    phases = {p: spec.phases.get(p, 0.0) * float(rng.lognormal(0.0, 0.05)) for p in PHASES}
    phases["install"] += spec.stall_s
    ttr = sum(phases.values()) + 0.4
    on_cpu = {"latency": 0.12, "bandwidth": 0.35, "cpu": 0.9, "network": 0.1}[spec.profile]
    cpu_s = on_cpu * ttr * float(rng.uniform(0.95, 1.05))
    avg_write = {"latency": 11_000, "bandwidth": 256_000, "cpu": 48_000, "network": 48_000}
    write_bytes = WHEEL_BYTES + WRITE_BYTES * float(rng.uniform(0.99, 1.01))
    return {
        **{f"{p}_s": round(v, 3) for p, v in phases.items()},
        "time_to_ready_s": round(ttr, 3),
        "cpu_s": round(cpu_s, 3),
        "offcpu_frac": round(min(max(1 - cpu_s / ttr, 0.0), 1.0), 4),
        "write_bytes": int(write_bytes),
        "write_calls": int(write_bytes / avg_write[spec.profile]),
    }


def _install_rate(
    spec: ConfigSpec,
    t: np.ndarray,
    install: np.ndarray,
    start_i: float,
    dur_i: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """The write rate during install, shaped by the profile (scaled to bytes by the caller)."""
    rate = np.zeros(len(t))
    if spec.profile == "bandwidth":
        rate[install] = 1.0 + rng.normal(0, 0.04, install.sum())
    else:
        rate[install] = rng.gamma(2.0, 0.5, install.sum())
    if spec.drop_at is not None:
        late = install & (t > start_i + spec.drop_at * dur_i)
        rate[late] *= 0.2
    if spec.stall_s:
        s0 = start_i + 0.3 * dur_i
        rate[(t >= s0) & (t < s0 + spec.stall_s)] = 0.0
    return rate.clip(0)


def _samples(
    spec: ConfigSpec, fig: dict[str, float], hz: float, rng: np.random.Generator
) -> list[Sample]:
    """A time series consistent with the trial's phases and counters."""
    ttr = fig["time_to_ready_s"]
    n = max(int(ttr * hz), 4)
    t = np.arange(n) / hz
    bounds = np.cumsum([fig[f"{p}_s"] for p in PHASES])
    idx = np.searchsorted(bounds, t, side="right").clip(0, len(PHASES) - 1)
    phase = np.array(PHASES)[idx]
    install = phase == "install"
    download = phase == "download"
    rate = _install_rate(spec, t, install, bounds[1], fig["install_s"], rng)
    install_bytes = fig["write_bytes"] - WHEEL_BYTES
    cum = np.cumsum(rate)
    cum = cum / cum[-1] * install_bytes if cum[-1] > 0 else cum
    dl_frac = np.clip((t - bounds[0]) / max(fig["download_s"], 1e-9), 0, 1)
    tree_write = cum + dl_frac * WHEEL_BYTES
    write_bps = np.diff(tree_write, prepend=0.0) * hz
    on_target = spec.venv == "target"
    cpu_share = fig["cpu_s"] / ttr
    lat = spec.profile == "latency"
    iowait = np.where(
        install, rng.uniform(25, 45, n) if lat else rng.uniform(0, 4, n), rng.uniform(0, 3, n)
    )
    blocked = np.where(install & lat, rng.integers(0, 5, n), 0)
    dstate = np.where(install & lat, rng.integers(0, 3, n), 0)
    # a network volume's client waits interruptibly: most install ticks on the target
    fswait_p = np.where(install & on_target, 0.85, np.where(on_target, 0.3, 0.02))
    fswait = (rng.uniform(0, 1, n) < fswait_p).astype(int)
    net_recv = np.where(download, WHEEL_BYTES / max(fig["download_s"], 1e-9), 0.0)
    net_recv = net_recv * rng.uniform(0.8, 1.2, n)
    cols = {
        "t": np.round(t, 3),
        "phase": phase,
        "cpu_user_pct": np.round(rng.uniform(0.8, 1.0, n) * 100 * cpu_share / 2, 2),
        "cpu_system_pct": np.round(rng.uniform(0.8, 1.0, n) * 100 * cpu_share / 4, 2),
        "iowait_pct": np.round(iowait, 2),
        "procs_blocked": blocked,
        "disk_read_bps": np.zeros(n, dtype=int),
        "disk_write_bps": np.round(np.zeros(n) if on_target else write_bps).astype(np.int64),
        "net_recv_bps": np.round(net_recv).astype(np.int64),
        "net_sent_bps": np.round(write_bps if on_target else np.zeros(n)).astype(np.int64),
        "tree_procs": np.where(install | download, 2, 1),
        "tree_cpu_s": np.round(np.linspace(0, fig["cpu_s"], n), 3),
        "tree_read_bytes": np.round(np.linspace(0, 3e8, n)).astype(np.int64),
        "tree_write_bytes": np.round(tree_write).astype(np.int64),
        "tree_write_calls": np.round(
            tree_write / max(fig["write_bytes"], 1) * fig["write_calls"]
        ).astype(np.int64),
        "tree_dstate": dstate,
        "tree_fswait": fswait,
        "tree_rss_bytes": np.full(n, 180_000_000, dtype=np.int64),
        # statvfs of each role's filesystem: the venv's grows by what the tree writes
        "fs_used_venv": np.round(40e9 + tree_write).astype(np.int64),
        "fs_used_tmpdir": np.full(n, 12_000_000_000, dtype=np.int64),
    }
    if spec.cache != "off":
        cols["fs_used_cache"] = np.round(20e9 + dl_frac * WHEEL_BYTES).astype(np.int64)
    names = [c for c in SAMPLE_COLUMNS if c in cols]
    arrays = [cols[c].tolist() for c in names]
    return [Sample(**dict(zip(names, values, strict=True))) for values in zip(*arrays, strict=True)]


def _summary_from_samples(samples: list[Sample]) -> dict[str, float]:
    """Trial-level iowait/D-state figures derived from the samples just made."""
    iow = np.array([s.iowait_pct for s in samples])
    return {
        "iowait_mean_pct": round(float(iow.mean()), 2),
        "iowait_p95_pct": round(float(np.percentile(iow, 95)), 2),
        "blocked_max": max(s.procs_blocked for s in samples),
        "dstate_max": max(s.tree_dstate for s in samples),
        "fswait_frac": round(sum(s.tree_fswait > 0 for s in samples) / len(samples), 4),
    }


def _meta(run_id: str, configs: tuple[ConfigSpec, ...], repeats: int, hz: float, label: str | None,
          hostname: str, gpu: dict | None, roles: dict) -> RunMeta:  # fmt: skip
    return RunMeta(
        iobench_version="0.1.0",
        run_id=run_id,
        command=["iobench", "run", "--target", roles["target"]["path"]],
        label=label or "",
        started_at="2026-11-30T12:00:00Z",
        ended_at="2026-11-30T13:10:00Z",
        status="complete",
        scenario={
            "name": "torch", "source": "scenarios/torch.toml", "kind": "install",
            "packages": ["torch==2.9.1"], "wheels": None, "ready": "import torch",
            "repeats": repeats,
            "configs": [
                {"name": c.name, "venv": c.venv, "tmpdir": c.tmpdir, "cache": c.cache,
                 "cache_state": c.cache_state, "installer": c.installer, "compile": c.compile,
                 "description": ""}
                for c in configs
            ],
            "description": "", "size_mb": None, "extra": {},
        },
        repeats=repeats,
        roles={name: RoleInfo(**r) for name, r in roles.items()},
        host=HostInfo(hostname=hostname, platform="Linux-6.8.0-x86_64", kernel="6.8.0",
                      machine="x86_64", cpu_count=16, cpu_model="AMD EPYC 9354",
                      memory_bytes=270000000000),
        versions={"python": "3.11.7", "iobench": "0.1.0", "pip": "25.3",
                  "virtualenv": "20.35.4", "uv": "0.9.10"},
        pip_config={"files": [], "env": {}, "isolated": True},
        index=IndexInfo(kind="local", url="http://127.0.0.1:8765/simple"),
        gpu=gpu,
        sample_hz=hz,
        stall_after_s=30.0,
        venv_python="/usr/bin/python3",
        env={"HF_TOKEN": "***"},
    )  # fmt: skip


def _row(run_id: str, spec: ConfigSpec, r: int, fig: dict, derived: dict, failed: bool) -> TrialRow:
    return InstallRow(
        run_id=run_id, trial_id=f"{spec.name}-r{r}", config=spec.name, repeat=r,
        venv_role=spec.venv, tmpdir_role=spec.tmpdir, cache_role=spec.cache,
        venv_fstype=FSTYPE.get(spec.venv, ""), tmpdir_fstype=FSTYPE.get(spec.tmpdir, ""),
        cache_fstype=FSTYPE.get(spec.cache, ""),
        cache_state=spec.cache_state, installer=spec.installer,
        compile=spec.compile, link_mode=spec.link_mode, status="failed" if failed else "ok",
        started_at=f"2026-11-30T12:{r % 60:02d}:00Z",
        read_bytes=300_000_000, read_calls=90_000,
        disk_write_bytes=0 if spec.venv == "target" else fig["write_bytes"],
        rss_max_bytes=180_000_000, index_bytes=int(WHEEL_BYTES),
        tmpdir_peak_bytes=int(WHEEL_BYTES),
        cache_bytes=0 if spec.cache == "off" else int(WHEEL_BYTES),
        venv_bytes=int(fig["write_bytes"] - WHEEL_BYTES),
        files_installed=FILES,
        stalls=1 if spec.stall_s else 0,
        stall_longest_s=spec.stall_s if spec.stall_s else None,
        error="ERROR: Could not install packages due to an OSError: [Errno 28] "
        "No space left on device" if failed else "",
        **{**fig, **derived, **({"time_to_ready_s": None} if failed else {})},
    )  # fmt: skip


#: run directories already written in this test process, by their arguments: a later call
#: with the same arguments copies one (a run with its samples takes ~1 s to write; a copy, ms)
_WRITTEN: dict[str, Path] = {}


def make_run_dir(root: Path, **kwargs: Any) -> Path:
    """Write a complete run directory under ``root`` through ``RunDir`` (see
    :func:`write_run_dir`), or copy the one an earlier call with the same arguments wrote."""
    key = repr(sorted(kwargs.items()))
    if key not in _WRITTEN:
        store = Path(tempfile.mkdtemp(prefix="iobench-test-runs-"))
        atexit.register(shutil.rmtree, store, True)
        _WRITTEN[key] = write_run_dir(store, **kwargs)
    source = _WRITTEN[key]
    root.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copytree(source, root / source.name))


def write_run_dir(
    root: Path,
    *,
    run_id: str = "20261130-120000-pod-a-torch",
    configs: tuple[ConfigSpec, ...] = DEFAULT_CONFIGS,
    repeats: int = 3,
    seed: int = 0,
    hz: float = 10.0,
    label: str | None = None,
    hostname: str = "pod-a",
    gpu: dict | None = None,
    samples: bool = True,
    sample_variants: int | None = None,
    roles: dict | None = None,
    fswait: bool = True,
) -> Path:
    """Write a complete run directory under ``root`` through ``RunDir`` and return its path.

    ``sample_variants``: write only this many distinct sample files per config and copy
    them for the other repeats (fast enough for benchmark-sized runs). ``fswait=False``
    then removes ``fswait_frac`` from trials.csv and ``tree_fswait`` from the samples, as
    iobench wrote runs before it sampled filesystem waits.
    """
    rng = np.random.default_rng(seed)
    meta = _meta(run_id, configs, repeats, hz, label, hostname, gpu, roles or ROLES)
    rd = RunDir.create(root, run_id, meta)
    for spec in configs:
        written: list[tuple[Path, dict]] = []
        for r in range(1, repeats + 1):
            trial_id = f"{spec.name}-r{r}"
            fig = _trial_figures(spec, rng)
            failed = r > repeats - spec.fail
            if samples and not failed:
                if sample_variants is None or len(written) < sample_variants:
                    series = _samples(spec, fig, hz, rng)
                    written.append(
                        (rd.write_samples(trial_id, series), _summary_from_samples(series))
                    )
                    derived = written[-1][1]
                else:
                    source, derived = written[r % len(written)]
                    shutil.copyfile(source, rd.sample_path(trial_id))
            else:
                derived = {"iowait_mean_pct": 1.0, "iowait_p95_pct": 2.0,
                           "blocked_max": 0, "dstate_max": 0, "fswait_frac": 0.0}  # fmt: skip
            rd.append_trial(_row(run_id, spec, r, fig, derived, failed))
            if spec.stall_s and not failed:
                start = fig["venv_s"] + fig["download_s"] + 0.3 * fig["install_s"]
                stall = Stall(phase="install", start_s=round(start, 2), length_s=spec.stall_s,
                              dstate_max=2, iowait_mean_pct=35.0)  # fmt: skip
                rd.append_stalls(run_id, trial_id, [stall])
    if not fswait:
        _drop_csv_column(rd.trials_csv, "fswait_frac")
        for path in rd.samples_dir.iterdir():
            _drop_csv_column(path, "tree_fswait")
    return rd.path


def _drop_csv_column(path: Path, name: str) -> None:
    rows = list(csv.reader(io.StringIO(path.read_text())))
    i = rows[0].index(name)
    path.write_text("".join(",".join(r[:i] + r[i + 1 :]) + "\n" for r in rows))


def resume_rows(run_dir: Path, trial_ids: tuple[str, ...]) -> None:
    """Rewrite trials.csv as ``iobench run --resume`` leaves it: for each of ``trial_ids``, an
    ``interrupted`` row (no time-to-ready, no counters) before its finished row."""
    rd = RunDir(run_dir)
    rows = rd.trials()
    rd.trials_csv.unlink()
    for row in rows:
        if row.trial_id in trial_ids:
            keep = ("run_id", "trial_id", "config", "repeat", "venv_role", "tmpdir_role",
                    "cache_role", "venv_fstype", "tmpdir_fstype", "cache_fstype",
                    "cache_state", "installer", "compile", "started_at")  # fmt: skip
            rd.append_trial(InstallRow(
                **{k: getattr(row, k) for k in keep}, status="interrupted", venv_s=2.1,
                error="interrupted by the user (SIGINT/SIGTERM); trial scratch removed",
            ))  # fmt: skip
        rd.append_trial(row)


def make_not_a_run(root: Path) -> Path:
    """A folder with some files but no meta.json."""
    d = root / "not-a-run"
    d.mkdir(parents=True, exist_ok=True)
    (d / "notes.txt").write_text("hello\n")
    return d


def make_all_failed(root: Path) -> Path:
    """A run directory whose every trial failed."""
    specs = tuple(ConfigSpec(c.name, venv=c.venv, tmpdir=c.tmpdir, cache=c.cache, fail=2)
                  for c in DEFAULT_CONFIGS[:2])  # fmt: skip
    return make_run_dir(root, run_id="20261130-130000-pod-a-failed", configs=specs, repeats=2)


def make_big_run(root: Path, trials: int = 2000, rows: int = 2_000_000, configs: int = 8) -> Path:
    """A benchmark-sized run: ``trials`` trials and about ``rows`` sample rows in total."""
    base = DEFAULT_CONFIGS
    specs = []
    per_trial_s = rows / trials / 10.0  # seconds of samples per trial at 10 Hz
    for i in range(configs):
        b = base[i % len(base)]
        scale = per_trial_s / (sum(b.phases.values()) + b.stall_s + 0.4)
        specs.append(ConfigSpec(
            f"{b.name}-{i}", venv=b.venv, tmpdir=b.tmpdir, cache=b.cache, installer=b.installer,
            compile=b.compile, profile=b.profile, drop_at=b.drop_at, stall_s=b.stall_s * scale,
            phases={p: v * scale for p, v in b.phases.items()},
        ))  # fmt: skip
    return make_run_dir(
        root, run_id="20261130-140000-pod-big-torch", configs=tuple(specs),
        repeats=trials // configs, sample_variants=3,
    )  # fmt: skip
