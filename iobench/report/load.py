"""Read run directories (see results/README.md) into pandas, refusing what is not one.

The report only ever reads: meta.json, trials.csv and samples/<trial_id>.csv. Everything
that can go wrong with those files becomes a ``RunDirError`` that names the folder and the
file (one line for the user), except a missing or corrupt *sample* file, which is reported
as a warning and skipped — a lost time series must not hide the trials that finished
(pytest-benchmark's habit with corrupt result files).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from iobench.errors import RunDirError
from iobench.gpu import GpuInfo
from iobench.results import PHASES, TRIAL_COLUMNS

#: meta.json schema versions this reader understands.
#: 1: first format (results/README.md).
SUPPORTED_SCHEMA_VERSIONS = (1,)

PHASE_COLUMNS = tuple(f"{p}_s" for p in PHASES)

#: trials.csv columns without which there is nothing to report.
REQUIRED_TRIAL_COLUMNS = ("trial_id", "config", "status", "time_to_ready_s")

TEXT_TRIAL_COLUMNS = (
    "run_id",
    "venv_role",
    "tmpdir_role",
    "cache_role",
    "venv_fstype",
    "tmpdir_fstype",
    "cache_fstype",
    "cache_state",
    "installer",
    "compile",
    "started_at",
    "contended",
    "error",
)
#: numeric trials.csv columns (absent ones are added as NaN so later code stays simple):
#: every column of the format (iobench.results) that is not text
NUMERIC_TRIAL_COLUMNS = tuple(
    c for c in TRIAL_COLUMNS if c not in TEXT_TRIAL_COLUMNS and c not in ("trial_id", "config", "status")
)


@dataclass
class Run:
    """One run directory as read: its meta, its trials, and where its samples are."""

    path: Path
    meta: dict[str, Any]
    trials: pd.DataFrame
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # facts worth a line, not problems

    @property
    def run_id(self) -> str:
        """The run id from meta.json, else the folder name."""
        return str(self.meta.get("run_id") or self.path.name)

    @property
    def label(self) -> str:
        """A short name for comparisons: the run's label, else its host, else its id."""
        host = self.meta.get("host") or {}
        return str(self.meta.get("label") or host.get("hostname") or self.run_id)

    @property
    def scenario_name(self) -> str:
        """The scenario's name for titles."""
        scenario = self.meta.get("scenario") or {}
        return str(scenario.get("name") or "?")

    @property
    def gpu(self) -> GpuInfo | None:
        """The GPU the run detected (prices the report when no --gpu is given)."""
        return GpuInfo.from_meta(self.meta.get("gpu"))

    def config_order(self) -> list[str]:
        """Configs in the scenario's order, then any others seen in trials.csv."""
        scenario = self.meta.get("scenario") or {}
        order = [str(c.get("name")) for c in scenario.get("configs") or [] if isinstance(c, dict)]
        seen = list(dict.fromkeys(self.trials["config"].astype(str)))
        return [c for c in order if c in seen] + [c for c in seen if c not in order]

    def sample_path(self, trial_id: str) -> Path:
        """Where a trial's time series lives."""
        return self.path / "samples" / f"{trial_id}.csv"

    def warn(self, message: str) -> None:
        """Record a problem once (the same file may be read for a statistic and a chart)."""
        if message not in self.warnings:
            self.warnings.append(message)

    def read_samples(
        self, trial_id: str, columns: Collection[str] | None = None
    ) -> pd.DataFrame | None:
        """One trial's time series, or None (with a warning) if missing or unreadable.

        ``columns`` limits what is parsed (absent ones are simply not there): reading only
        what a statistic needs keeps a 2-million-row report fast.
        """
        path = self.sample_path(trial_id)
        if not path.is_file():
            self.warn(f"{path}: missing; trial {trial_id} has no time series")
            return None
        usecols = None if columns is None else (lambda c: c in columns)
        try:
            df = pd.read_csv(path, usecols=usecols)
        except (OSError, ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
            self.warn(f"{path}: unreadable ({_one_line(exc)}); skipped")
            return None
        if "t" not in df.columns or df.empty:
            self.warn(f"{path}: no 't' column or no rows; skipped")
            return None
        for col in df.columns:
            if col != "phase" and not pd.api.types.is_numeric_dtype(df[col]):
                df[col] = pd.to_numeric(df[col], errors="coerce")
        if "phase" in df.columns:
            df["phase"] = df["phase"].astype(str)
        return df

    def stalls(self) -> pd.DataFrame | None:
        """stalls.csv (one row per recorded stall), or None when the run did not write one."""
        path = self.path / "stalls.csv"
        if not path.is_file():
            return None
        try:
            df = pd.read_csv(path)
        except pd.errors.EmptyDataError:
            return None
        except (OSError, ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
            self.warn(f"{path}: unreadable ({_one_line(exc)}); stalls are estimated from samples")
            return None
        if not {"trial_id", "start_s", "length_s"} <= set(df.columns):
            self.warn(
                f"{path}: no trial_id/start_s/length_s columns; stalls are estimated from samples"
            )
            return None
        df["trial_id"] = df["trial_id"].astype(str)
        for col in ("start_s", "length_s"):
            df[col] = pd.to_numeric(df[col], errors="coerce")
        return df

    def trial_stalls(self, trial_id: str) -> list[tuple[float, float]] | None:
        """(start, end) seconds of the stalls the run recorded for one trial; None = unknown."""
        df = self.stalls()
        if df is None:
            return None
        rows = df[(df["trial_id"] == trial_id) & df["start_s"].notna() & df["length_s"].notna()]
        return [
            (float(a), float(a + n)) for a, n in zip(rows["start_s"], rows["length_s"], strict=True)
        ]

    def iter_samples(
        self, trial_ids: Iterable[str], columns: Collection[str] | None = None
    ) -> Iterator[tuple[str, pd.DataFrame]]:
        """Yield (trial_id, samples) one at a time, so 2 million rows never sit in memory."""
        for trial_id in trial_ids:
            df = self.read_samples(trial_id, columns)
            if df is not None:
                yield trial_id, df


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _read_meta(path: Path) -> dict[str, Any]:
    meta_path = path / "meta.json"
    if not meta_path.is_file():
        hint = ""
        if path.is_dir():
            inner = sorted(p.name for p in path.iterdir() if (p / "meta.json").is_file())
            if inner:
                shown = ", ".join(inner[:5]) + (" ..." if len(inner) > 5 else "")
                hint = f"; it contains run directories ({shown}): pass one of those"
        raise RunDirError(f"{path} is not an iobench run directory (no meta.json){hint}")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise RunDirError(f"{meta_path}: cannot be read ({_one_line(exc)})") from None
    except json.JSONDecodeError as exc:
        raise RunDirError(
            f"{meta_path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    if not isinstance(meta, dict):
        raise RunDirError(f"{meta_path}: expected a JSON object, found {type(meta).__name__}")
    version = meta.get("schema_version")
    if version is None:
        raise RunDirError(f"{meta_path}: no schema_version; not written by iobench run")
    if version not in SUPPORTED_SCHEMA_VERSIONS:
        newer = isinstance(version, int) and version > max(SUPPORTED_SCHEMA_VERSIONS)
        why = "written by a newer iobench; upgrade iobench" if newer else "unknown version"
        supported = ", ".join(map(str, SUPPORTED_SCHEMA_VERSIONS))
        raise RunDirError(
            f"{path}: schema_version {version!r} is not supported (this iobench reads "
            f"{supported}): {why}"
        )
    return meta


def _read_trials(path: Path) -> pd.DataFrame:
    trials_path = path / "trials.csv"
    if not trials_path.is_file():
        raise RunDirError(f"{path}: no trials.csv yet (the run has not finished any trial)")
    try:
        df = pd.read_csv(trials_path, dtype={c: "string" for c in TEXT_TRIAL_COLUMNS})
    except pd.errors.EmptyDataError:
        raise RunDirError(f"{trials_path}: empty (the run has not finished any trial)") from None
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise RunDirError(f"{trials_path}: cannot be parsed as CSV ({_one_line(exc)})") from None
    missing = [c for c in REQUIRED_TRIAL_COLUMNS if c not in df.columns]
    if missing:
        raise RunDirError(f"{trials_path}: missing column(s) {', '.join(missing)}")
    if df.empty:
        raise RunDirError(f"{trials_path}: no trials (the run has not finished any trial)")
    for col in NUMERIC_TRIAL_COLUMNS:
        if col in df.columns:
            df[col] = pd.to_numeric(df[col], errors="coerce")
        else:
            df[col] = np.nan
    for col in TEXT_TRIAL_COLUMNS:
        if col not in df.columns:
            df[col] = pd.Series([pd.NA] * len(df), dtype="string")
    df["config"] = df["config"].astype(str)
    df["trial_id"] = df["trial_id"].astype(str)
    df["status"] = df["status"].astype(str).str.strip().str.lower()
    return df


def drop_superseded(trials: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """One row per trial id: the rows a resumed run replaced are dropped.

    ``iobench run --resume`` runs an ``interrupted`` trial again and appends its new row, so
    a trial id can appear twice. The interrupted row of a trial that later got any other
    status is dropped (it is neither a failure nor a result); of what is left, the last row
    per trial id counts. Returns the trials (original order) and the ids that were resumed.
    """
    dup = trials["trial_id"].duplicated(keep=False)
    if not dup.any():
        return trials, []
    interrupted = trials["status"] == "interrupted"
    finished_ids = set(trials.loc[~interrupted, "trial_id"])
    superseded = interrupted & trials["trial_id"].isin(finished_ids)
    kept = trials[~superseded]
    kept = kept[~kept["trial_id"].duplicated(keep="last")]
    resumed = list(dict.fromkeys(trials.loc[superseded, "trial_id"]))
    return kept.reset_index(drop=True), resumed


def load_run(path: Path | str) -> Run:
    """Read one run directory; raises RunDirError naming the folder for anything unusable."""
    path = Path(path)
    if not path.exists():
        raise RunDirError(f"{path}: no such folder")
    if not path.is_dir():
        raise RunDirError(f"{path} is not an iobench run directory (not a folder)")
    meta = _read_meta(path)
    trials, resumed = drop_superseded(_read_trials(path))
    run = Run(path=path, meta=meta, trials=trials)
    if resumed:
        shown = ", ".join(resumed[:5]) + (" ..." if len(resumed) > 5 else "")
        run.notes.append(
            f"{len(resumed)} trial(s) interrupted and run again by --resume ({shown}): "
            "only their later rows in trials.csv count"
        )
    return run


def load_runs(paths: Iterable[Path | str]) -> list[Run]:
    """Read several run directories; the first unusable one stops with its own message."""
    return [load_run(p) for p in paths]


def trials_frame(runs: Iterable[Run]) -> pd.DataFrame:
    """All trials of several runs in one frame, with ``run_label`` and ``run_path`` added."""
    frames = []
    for run in runs:
        df = run.trials.copy()
        df["run_label"] = run.label
        df["run_path"] = str(run.path)
        frames.append(df)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
