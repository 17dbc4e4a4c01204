"""Read run directories (see results/README.md) into pandas, refusing what is not one.

The report only ever reads: meta.json, trials.csv, stalls.csv and samples/<trial_id>.csv,
and reads the first two through the run directory's own reader (``iobench.rundir.folder.RunDir``,
the same checks as --resume): anything wrong with them becomes a ``RunDirError`` that names
the folder and the file (one line for the user). A trial row cut short by a crash, and a
missing or corrupt *sample* file, are reported as warnings and skipped — a lost time series
must not hide the trials that finished (pytest-benchmark's habit with corrupt result files).

A statistic over every trial's samples (``Run.map_samples``) reads them in worker processes
when there are many (a 2,000-trial run holds 2 million rows): each worker reads its share
and returns only the statistic, so memory stays flat and the cores share the parsing.
Its share is parsed a few megabytes at a time (``read_sample_batches``): the files' rows,
headers cut, go through one ``pandas.read_csv`` per batch, only the columns asked for and as
floats, then are cut back into files by their line counts, and handed over as arrays
(``SampleColumns``), not frames. Per file, pandas' fixed cost per call was half the reading
time of a 1,000-row file, and building and indexing a frame per trial cost five times the
figures computed from it; batched, a 2,000-trial scan takes under half the time. Any file
the batch cannot read exactly as a file on its own would be (another header, quotes, blank
lines, text in a number column) is read on its own, so figures and warnings stay the same.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias, TypeVar

import numpy as np
import pandas as pd

from iobench import reading
from iobench.errors import RunDirError
from iobench.report.parallel import fork_map, workers_for
from iobench.rundir import kinds
from iobench.rundir.fleet import FleetTrial, fleet_rows, fleet_trials, is_fleet_dir, merge_fleet_dir
from iobench.rundir.folder import RunDir, latest_rows
from iobench.rundir.meta import SUPPORTED_SCHEMA_VERSIONS, GpuInfo, RoleInfo, RunMeta
from iobench.rundir.records import PHASES, REQUIRED_TRIAL_COLUMNS, TrialRow

__all__ = [
    "NUMERIC_TRIAL_COLUMNS", "PHASE_COLUMNS", "REQUIRED_TRIAL_COLUMNS", "SUPPORTED_SCHEMA_VERSIONS",
    "TEXT_TRIAL_COLUMNS", "Run", "SampleColumns", "drop_superseded", "load_run", "load_runs",
    "read_sample_batches", "rows_frame", "trials_frame",
]  # fmt: skip

PHASE_COLUMNS = tuple(f"{p}_s" for p in PHASES)
T = TypeVar("T")
#: trials per worker process below which ``map_samples`` reads in this process
PARALLEL_MIN_TRIALS = 64
#: bytes of sample CSV parsed by one ``read_csv`` call in ``read_sample_batches``
BATCH_BYTES = 4 << 20
#: one trial's samples as ``map_samples`` hands them over: column name -> values (numbers as
#: float64, ``phase`` as str objects)
SampleColumns: TypeAlias = Mapping[str, np.ndarray]
_KEY_COLUMNS = ("trial_id", "config", "status")
#: the frame's columns: every kind's (a column the run's kind lacks stays empty)
TRIAL_COLUMNS = kinds.all_columns()
#: text trials.csv columns (empty cells are <NA>), from the rows' fields
TEXT_TRIAL_COLUMNS = tuple(c for c in kinds.all_text_columns() if c not in _KEY_COLUMNS)
#: numeric trials.csv columns (absent ones are NaN so later code stays simple)
NUMERIC_TRIAL_COLUMNS = tuple(
    c for c in TRIAL_COLUMNS if c not in TEXT_TRIAL_COLUMNS and c not in _KEY_COLUMNS
)


@dataclass
class Run:
    """One run directory as read: its meta, its trials, and where its samples are."""

    path: Path
    info: RunMeta  # meta.json, typed and checked
    trials: pd.DataFrame
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # facts worth a line, not problems
    #: a fleet's every worker's rows (``trials`` then holds one row per fleet trial: the
    #: slowest worker's, with the fleet's time-to-ready) and its fleet trials
    workers: pd.DataFrame | None = None
    fleet: list[FleetTrial] = field(default_factory=list)
    _stalls: tuple[pd.DataFrame | None] | None = field(default=None, init=False, repr=False)

    @property
    def run_id(self) -> str:
        """The run id from meta.json, else the folder name."""
        return self.info.run_id or self.path.name

    @property
    def label(self) -> str:
        """A short name for comparisons: the run's label, else its host, else its id."""
        return self.info.label or self.info.hostname or self.run_id

    @property
    def scenario_name(self) -> str:
        """The scenario's name for titles ('?' when unknown)."""
        return self.info.scenario_name

    @property
    def hostname(self) -> str:
        return self.info.hostname

    @property
    def roles(self) -> dict[str, RoleInfo]:
        """Where each role lived: path, filesystem type, mount point, options, sizes."""
        return self.info.roles

    @property
    def gpu(self) -> GpuInfo | None:
        """The GPU the run detected (prices the report when no --gpu is given)."""
        return self.info.gpu_info

    @property
    def started_at(self) -> str:
        return self.info.started_at

    @property
    def status(self) -> str:
        return self.info.status

    def config_order(self) -> list[str]:
        """Configs in the scenario's order, then any others seen in trials.csv."""
        order = self.info.config_names
        seen = list(dict.fromkeys(self.trials["config"].astype(str)))
        return [c for c in order if c in seen] + [c for c in seen if c not in order]

    @functools.cached_property
    def records(self) -> list[dict[str, Any]]:
        """The trials as one dict a row (read once: the verdict, the measure and the sections
        each walk them)."""
        return self.trials.to_dict("records")

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
        df, problem = read_sample_file(self.sample_path(trial_id), trial_id, columns)
        if problem:
            self.warn(problem)
        return df

    def map_samples(
        self,
        trial_ids: Iterable[str],
        columns: Collection[str] | None,
        fn: Callable[[SampleColumns], T],
    ) -> list[T]:
        """``fn`` of each readable trial's samples (as columns of numbers, see
        ``SampleColumns``), in order; in worker processes when there are many trials (``fn``
        must be a module-level function)."""
        return self.map_sample_groups({"": trial_ids}, columns, fn)[""]

    def map_sample_groups(
        self,
        groups: Mapping[str, Iterable[str]],
        columns: Collection[str] | None,
        fn: Callable[[SampleColumns], T],
    ) -> dict[str, list[T]]:
        """``map_samples`` over several groups of trials (e.g. one per config) in one pass:
        one set of worker processes, its shares cut across groups so none waits on another.
        Warnings come in group order, as group by group would give them."""
        keys = [(str(g), str(t)) for g, ids in groups.items() for t in ids]
        ids = [t for _, t in keys]
        workers = workers_for(len(ids), PARALLEL_MIN_TRIALS)
        cols = None if columns is None else tuple(columns)
        size = len(ids) or 1
        if workers > 1:  # a few shares each: one slowed by another program does not hold all
            size = max(PARALLEL_MIN_TRIALS // 2, -(-len(ids) // (4 * workers)))
        starts = range(0, len(ids), size)
        shares = [(self.path, ids[i : i + size], cols, fn) for i in starts]
        out: dict[str, list[T]] = {str(g): [] for g in groups}
        for start, (values, problems) in zip(starts, fork_map(_map_share, shares, workers)):
            for k, value in values:
                out[keys[start + k][0]].append(value)
            for problem in problems:
                self.warn(problem)
        return out

    def stalls(self) -> pd.DataFrame | None:
        """stalls.csv (one row per recorded stall), or None when the run did not write one;
        read once (each timeline asks for its trial's stalls)."""
        if self._stalls is None:
            self._stalls = (self._read_stalls(),)
        return self._stalls[0]

    def _read_stalls(self) -> pd.DataFrame | None:
        path = self.path / "stalls.csv"
        if not path.is_file():
            return None
        try:  # a regular file only: a FIFO at the name would hold the report for good
            df = pd.read_csv(io.BytesIO(reading.read_bytes(path)))
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
            df[col] = df[col].where(np.isfinite(df[col]) & (df[col] >= 0))
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


def read_sample_file(
    path: Path, trial_id: str, columns: Collection[str] | None = None
) -> tuple[pd.DataFrame | None, str]:
    """A sample file as a frame (numbers checked), or None and why not."""
    if not path.exists() and not path.is_symlink():  # a FIFO or a link is said below
        return None, f"{path}: missing; trial {trial_id} has no time series"
    usecols = None if columns is None else (lambda c: c in columns)
    try:  # a regular file only: a FIFO at the name would hold the report for good
        df = pd.read_csv(io.BytesIO(reading.read_bytes(path)), usecols=usecols)
    except (OSError, ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        return None, f"{path}: unreadable ({_one_line(exc)}); skipped"
    if "t" not in df.columns or df.empty:
        return None, f"{path}: no 't' column or no rows; skipped"
    for col in df.columns:
        if col == "phase":
            continue
        if not pd.api.types.is_numeric_dtype(df[col]):
            df[col] = pd.to_numeric(df[col], errors="coerce")
        # read back, a sample file is untrusted: an infinity is no measurement (checked
        # per column with numpy: a DataFrame-wide where() doubled a 2,000-trial report)
        arr = df[col].to_numpy()
        if arr.dtype.kind == "f" and np.isinf(arr).any():
            df[col] = np.where(np.isinf(arr), np.nan, arr)
    if "phase" in df.columns:
        df["phase"] = df["phase"].astype(str)
    return df, ""


def _map_share(
    share: tuple[Path, list[str], Collection[str] | None, Callable[[SampleColumns], T]],
) -> tuple[list[tuple[int, T]], list[str]]:
    """(position in the share, ``fn`` of its samples) for each readable trial (a batch of
    files at a time), and the problems met."""
    run_path, trial_ids, columns, fn = share
    values, problems = [], []
    for k, (_, data, problem) in enumerate(read_sample_batches(run_path, trial_ids, columns)):
        if problem:
            problems.append(problem)
        if data is not None:
            values.append((k, fn(data)))
    return values, problems


def _phase_text(values: np.ndarray) -> np.ndarray:
    """``phase`` as str objects, an empty cell as "nan" (what ``to_numpy(dtype=str)`` gives)."""
    return np.where(pd.isna(values), "nan", values).astype(object)


def _as_columns(df: pd.DataFrame) -> dict[str, np.ndarray]:
    """A checked sample frame (``read_sample_file``) as ``SampleColumns``."""
    return {
        str(c): _phase_text(df[c].to_numpy()) if c == "phase" else df[c].to_numpy(dtype=float)
        for c in df.columns
    }


@dataclass
class _Pending:
    """Sample files waiting for one ``read_csv``: their header and rows, in order."""

    header: bytes
    names: list[str]
    slots: list[int] = field(default_factory=list)  # positions in the caller's order
    bodies: list[bytes] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    size: int = 0


def _batchable(raw: bytes) -> tuple[bytes, bytes, int] | None:
    """(header line, rows, row count) of a file the batch can read as read_csv reads it
    alone; None sends it to ``read_sample_file``. Every row ends at a newline here (no
    quotes, no lone carriage return), so a skipped line, such as a blank one, can only
    shorten the batch, which ``_parse_batch`` then refuses. A first row longer than the
    header (read_csv would take its first cell as the index) goes to ``read_sample_file``."""
    head, sep, body = raw.partition(b"\n")
    if not sep or not body or body.isspace() or b'"' in raw or raw.startswith(b"\xef\xbb\xbf"):
        return None
    if body[: body.find(b"\n")].count(b",") != head.count(b","):
        return None
    if not body.endswith(b"\n"):
        body += b"\n"
    text = np.frombuffer(body, dtype=np.uint8)  # numpy counts bytes ~3x faster than bytes.count
    newline, cr = text == 10, text == 13
    if cr.any() and np.count_nonzero(cr[:-1] & newline[1:]) != np.count_nonzero(cr):
        return None
    return head, body, int(np.count_nonzero(newline))


def _parse_batch(batch: _Pending, columns: Collection[str] | None) -> list[SampleColumns] | None:
    """One ``read_csv`` over a batch, cut back into files; None when the batch as a whole
    does not parse as numbers (then each file is read on its own)."""
    use = [c for c in batch.names if columns is None or c in columns]
    # phase as a category: a few names, not a string object per row
    dtype = {c: ("category" if c == "phase" else "float64") for c in use}
    text = io.BytesIO(batch.header + b"\n" + b"".join(batch.bodies))
    try:
        df = pd.read_csv(text, usecols=use, dtype=dtype)
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError):
        return None
    if len(df) != sum(batch.rows):
        return None
    cols: dict[str, np.ndarray] = {}
    for c in use:
        if c == "phase":
            names = np.append(df[c].cat.categories.to_numpy(dtype=object), "nan")
            cols[c] = names[df[c].cat.codes.to_numpy()]  # code -1 (empty cell): "nan"
            continue
        arr = df[c].to_numpy()
        if np.isinf(arr).any():
            arr = np.where(np.isinf(arr), np.nan, arr)  # an infinity is no measurement
        cols[c] = arr
    ends = np.cumsum(batch.rows)
    return [{c: v[end - n : end] for c, v in cols.items()} for n, end in zip(batch.rows, ends)]


def read_sample_batches(
    run_path: Path, trial_ids: Iterable[str], columns: Collection[str] | None = None
) -> Iterator[tuple[str, SampleColumns | None, str]]:
    """(trial id, its samples or None, the problem or "") for each trial, in order, parsing
    ``BATCH_BYTES`` of CSV per ``read_csv`` (see the module docstring); the same columns,
    values and problems as ``read_sample_file`` file by file."""
    ids = list(trial_ids)
    out: list[tuple[SampleColumns | None, str]] = [(None, "")] * len(ids)
    pending: dict[bytes, _Pending] = {}
    done = 0

    def flush(batch: _Pending) -> None:
        parsed = _parse_batch(batch, columns)
        for k, slot in enumerate(batch.slots):
            if parsed is not None:
                out[slot] = (parsed[k], "")
            else:
                out[slot] = _read_one(run_path, ids[slot], columns)
        del pending[batch.header]

    for slot, trial_id in enumerate(ids):
        path = run_path / "samples" / f"{trial_id}.csv"
        try:
            split = _batchable(reading.read_bytes(path))
        except OSError:
            split = None
        names = split[0].decode("utf-8", "replace").removesuffix("\r").split(",") if split else []
        odd = "t" not in names or (columns is not None and "t" not in columns)
        if split is None or odd or len(set(names)) < len(names):
            out[slot] = _read_one(run_path, trial_id, columns)
        else:
            batch = pending.get(split[0])
            if batch is None:
                batch = pending[split[0]] = _Pending(split[0], names)
            batch.slots.append(slot)
            batch.bodies.append(split[1])
            batch.rows.append(split[2])
            batch.size += len(split[1])
            if batch.size >= BATCH_BYTES:
                flush(batch)
        if not pending:  # everything so far is read: hand it over, keep memory flat
            for k in range(done, slot + 1):
                yield ids[k], *out[k]
                out[k] = (None, "")
            done = slot + 1
    for batch in list(pending.values()):
        flush(batch)
    for k in range(done, len(ids)):
        yield ids[k], *out[k]


def _read_one(
    run_path: Path, trial_id: str, columns: Collection[str] | None
) -> tuple[SampleColumns | None, str]:
    df, problem = read_sample_file(run_path / "samples" / f"{trial_id}.csv", trial_id, columns)
    return (_as_columns(df) if df is not None else None), problem


def _trials_frame(rd: RunDir, run: list[str]) -> pd.DataFrame:
    """trials.csv through the run directory's reader, as a frame with every column."""
    if not rd.trials_csv.is_file():
        raise RunDirError(f"{rd.path}: no trials.csv yet (the run has not finished any trial)")
    if rd.trials_csv.stat().st_size == 0:
        raise RunDirError(f"{rd.trials_csv}: empty (the run has not finished any trial)")
    read = rd.read_trials()
    run.extend(read.skipped)
    if not read.rows:
        raise RunDirError(f"{rd.trials_csv}: no trials (the run has not finished any trial)")
    return rows_frame(read.rows)


def rows_frame(rows: Iterable[TrialRow]) -> pd.DataFrame:
    """Trial rows as a frame with every column (numbers as numbers, empty text as <NA>)."""
    cells = [[getattr(r, c, None) for c in TRIAL_COLUMNS] for r in rows]  # slots: no __dict__
    df = pd.DataFrame.from_records(cells, columns=list(TRIAL_COLUMNS))
    for col in NUMERIC_TRIAL_COLUMNS:
        df[col] = pd.to_numeric(df[col])
    for col in TEXT_TRIAL_COLUMNS:
        df[col] = df[col].astype("string").replace("", pd.NA)
    for col in _KEY_COLUMNS:
        df[col] = df[col].astype(str)
    return df


def drop_superseded(trials: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """One row per trial id, by ``iobench.rundir.folder.latest_rows`` (the one rule, shared with
    --resume and the end-of-run table). Returns the trials (original order) and the ids
    that were resumed."""
    kept, resumed = latest_rows(list(trials["trial_id"]), list(trials["status"]))
    if len(kept) == len(trials):
        return trials, resumed
    return trials.iloc[kept].reset_index(drop=True), resumed


def load_run(path: Path | str) -> Run:
    """Read one run directory; raises RunDirError naming the folder for anything unusable."""
    path = Path(path)
    rd = merge_fleet_dir(path) if is_fleet_dir(path) else RunDir(path)
    info = rd.meta()
    skipped: list[str] = []
    trials, resumed = drop_superseded(_trials_frame(rd, skipped))
    run = Run(path=rd.path, info=info, trials=trials)
    if trials["worker"].notna().any():  # a fleet: compared by its figure (rundir/fleet.py)
        latest = rd.trials(latest_only=True)
        run.workers, run.fleet = trials, fleet_trials(latest)
        run.trials = rows_frame(fleet_rows(latest))
    for line in skipped:
        run.warn(line)
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
