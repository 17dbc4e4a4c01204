"""The run directory: meta.json, trials.csv (appended and flushed per trial), samples/.

Format in results/README.md. Schema versions (bump on any incompatible change, and say
what changed here; ``load_meta`` upgrades older versions or refuses with a clear line):

- 1: first version.
"""

from __future__ import annotations

import csv
import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path

from iobench.errors import RunDirError

SCHEMA_VERSION = 1

#: a trial's phases, in order; each has a ``<phase>_s`` column
PHASES = ("venv", "download", "install", "compile", "import")

TRIAL_COLUMNS = (
    "run_id",
    "trial_id",
    "config",
    "repeat",
    "venv_role",
    "tmpdir_role",
    "cache_role",
    "venv_fstype",
    "tmpdir_fstype",
    "cache_fstype",
    "cache_state",
    "installer",
    "compile",
    "status",
    "started_at",
    "venv_s",
    "download_s",
    "install_s",
    "compile_s",
    "import_s",
    "time_to_ready_s",
    "read_bytes",
    "write_bytes",
    "read_calls",
    "write_calls",
    "disk_write_bytes",
    "cpu_s",
    "offcpu_frac",
    "iowait_mean_pct",
    "iowait_p95_pct",
    "blocked_max",
    "dstate_max",
    "fswait_frac",
    "rss_max_bytes",
    "index_bytes",
    "tmpdir_peak_bytes",
    "cache_bytes",
    "venv_bytes",
    "files_installed",
    "stalls",
    "stall_longest_s",
    "contended",
    "sampler_cpu_s",
    "error",
)
#: samples/<trial_id>.csv, one row per sampler tick
SAMPLE_COLUMNS = (
    "t",
    "phase",
    "cpu_user_pct",
    "cpu_system_pct",
    "iowait_pct",
    "procs_blocked",
    "disk_read_bps",
    "disk_write_bps",
    "net_recv_bps",
    "net_sent_bps",
    "tree_procs",
    "tree_cpu_s",
    "tree_read_bytes",
    "tree_write_bytes",
    "tree_write_calls",
    "tree_dstate",
    "tree_fswait",
    "tree_rss_bytes",
    "fs_used_venv",
    "fs_used_tmpdir",
    "fs_used_cache",
)
FINAL_STATUSES = ("ok", "failed", "stalled")
STALL_COLUMNS = ("run_id", "trial_id", "phase", "start_s", "length_s", "dstate_max", "iowait_mean_pct")


def utcnow() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _atomic_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    os.replace(tmp, path)


class RunDir:
    """One run's folder."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def trials_csv(self) -> Path:
        return self.path / "trials.csv"

    @property
    def meta_json(self) -> Path:
        return self.path / "meta.json"

    @property
    def samples_dir(self) -> Path:
        return self.path / "samples"

    @property
    def logs_dir(self) -> Path:
        return self.path / "logs"

    @classmethod
    def create(cls, results_root: Path, run_id: str, meta: dict) -> RunDir:
        path = results_root / run_id
        try:
            path.mkdir(parents=True, exist_ok=False)
            (path / "samples").mkdir()
            (path / "logs").mkdir()
        except FileExistsError:
            raise RunDirError(f"run directory {path} already exists") from None
        except OSError as exc:
            raise RunDirError(f"cannot create run directory {path}: {exc.strerror}") from None
        rd = cls(path)
        rd.write_meta({"schema_version": SCHEMA_VERSION, **meta})
        return rd

    @classmethod
    def open(cls, path: Path) -> RunDir:
        rd = cls(path)
        rd.load_meta()
        return rd

    def write_meta(self, meta: dict) -> None:
        _atomic_json(self.meta_json, meta)

    def update_meta(self, **changes: object) -> dict:
        meta = self.load_meta()
        meta.update(changes)
        self.write_meta(meta)
        return meta

    def load_meta(self) -> dict:
        if not self.path.is_dir():
            raise RunDirError(f"{self.path} is not a folder")
        if not self.meta_json.is_file():
            raise RunDirError(f"{self.path} is not an iobench run directory (no meta.json)")
        try:
            meta = json.loads(self.meta_json.read_text())
        except (OSError, ValueError) as exc:
            raise RunDirError(f"{self.meta_json}: unreadable ({exc})") from None
        if not isinstance(meta, dict):
            raise RunDirError(f"{self.meta_json}: not an iobench meta.json (expected an object)")
        version = meta.get("schema_version")
        if version != SCHEMA_VERSION:
            raise RunDirError(
                f"{self.path}: run directory schema {version!r}, this iobench reads {SCHEMA_VERSION}"
            )
        return meta

    def append_trial(self, row: dict) -> None:
        """Append one trial row and make it durable before the next trial starts."""
        size = self.trials_csv.stat().st_size if self.trials_csv.exists() else 0
        with open(self.trials_csv, "a+", newline="") as fh:
            if size:  # a row cut off by a crash or a full disk must not swallow this one
                fh.seek(size - 1)
                if fh.read(1) != "\n":
                    fh.write("\n")
            writer = csv.DictWriter(fh, fieldnames=TRIAL_COLUMNS, extrasaction="ignore")
            if not size:  # new, or left empty by a crash
                writer.writeheader()
            writer.writerow({k: _cell(row.get(k)) for k in TRIAL_COLUMNS})
            fh.flush()
            os.fsync(fh.fileno())

    def append_stalls(self, run_id: str, trial_id: str, stalls: list[dict]) -> None:
        """Every no-progress interval of a trial: when, how long, D state and iowait meanwhile."""
        if not stalls:
            return
        path = self.path / "stalls.csv"
        new = not path.exists()
        with open(path, "a", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=STALL_COLUMNS, extrasaction="ignore")
            if new:
                writer.writeheader()
            for st in stalls:
                writer.writerow({**st, "run_id": run_id, "trial_id": trial_id})
            fh.flush()
            os.fsync(fh.fileno())

    def trials(self) -> list[dict]:
        if not self.trials_csv.exists():
            return []
        with open(self.trials_csv, newline="") as fh:
            return list(csv.DictReader(fh))

    def done_trial_ids(self) -> set[str]:
        """Trials with a final status (``interrupted`` ones are run again on resume)."""
        return {r["trial_id"] for r in self.trials() if r.get("status") in FINAL_STATUSES}

    def write_samples(self, trial_id: str, rows: list[dict], columns: tuple[str, ...]) -> Path:
        path = self.samples_dir / f"{trial_id}.csv"
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
            writer.writeheader()
            for r in rows:
                writer.writerow({k: _cell(r.get(k)) for k in columns})
        os.replace(tmp, path)
        return path


def _cell(v: object) -> object:
    if v is None:
        return ""
    if isinstance(v, float):
        return round(v, 4)
    if isinstance(v, str):
        return v.replace("\r", " ").replace("\n", " | ")
    return v


def new_run_id(host: str, scenario: str) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in host)[:30]
    # the pid keeps two runs started in the same second apart (they may share a tmp role)
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + f"-{safe}-{scenario}-{os.getpid()}"
