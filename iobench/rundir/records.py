"""The rows of a run directory's CSV files, as typed records: one field per column.

``TrialRow`` is a line of trials.csv, ``Sample`` a line of samples/<trial_id>.csv and
``Stall`` a line of stalls.csv. Each field carries a one-line doc and its unit
(``field(metadata=...)``); the column lists, the CSV codec, the range checks applied when a
file is read back, and the column tables of results/README.md all derive from the fields.
Adding a column is adding a field (and computing it).

Everything read back is untrusted: ``from_cells`` accepts a number only when it is finite and
in the range its unit allows, and a name only when it is safe as a path component.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from iobench.errors import RunDirError
from iobench.units import fmt_bytes

#: a trial's phases, in order; each has a ``<phase>_s`` column
PHASES = ("venv", "download", "install", "compile", "import")
#: what a stall is, in the words every output uses (the sampler opens one after --stall-after s)
STALL_WORDS = "no read or write progress"
#: trial statuses; a trial with a final status is not run again by --resume
FINAL_STATUSES = ("ok", "failed", "stalled", "censored")
#: ``lost``: a fleet's worker that sent no row (it died or stopped answering); run again by --resume
STATUSES = (*FINAL_STATUSES, "interrupted", "lost")

#: units, and the range a value read back must lie in (inclusive)
_LIMIT = 2**63 - 1
UNIT_RANGES: dict[str, tuple[float, float]] = {
    "s": (0.0, 1e7),  # 115 days: more is a damaged file, not a trial
    "±s": (-1e7, 1e7),  # a difference between two clocks
    "bytes": (0, _LIMIT),
    "B/s": (0, _LIMIT),
    "MB/s": (0.0, 1e9),  # 10^6 bytes per second
    "MB": (0.0, 1e12),
    "count": (0, _LIMIT),
    "%": (0.0, 100.0),
    "fraction": (0.0, 1.0),
}
# names that become path components (trial_id -> samples/<trial_id>.csv): as scenario.py's
# NAME_RE, plus '=' which runs made before names were checked may hold
SAFE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._=-]*$")
SAFE_NAME_MAX = 200
_COLUMN_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


def seconds(value: float | None) -> str:
    """A figure of a progress line: ``1.23``, or ``?`` when unknown (an installer's log
    without its mark)."""
    return "?" if value is None else f"{value:.2f}"


def rate(mb_per_s: float | None) -> str:
    return f"{mb_per_s:,.0f} MB/s" if mb_per_s is not None else "? MB/s"


def column(doc: str, unit: str = "", default: Any = None) -> Any:
    """A numeric record field with its one-line doc and unit (the README's column tables)."""
    return field(default=default, metadata={"doc": doc, "unit": unit})


def text(doc: str, default: str = "") -> Any:
    """A text record field with its one-line doc."""
    return field(default=default, metadata={"doc": doc, "unit": ""})


def required(doc: str, unit: str = "", name: bool = False) -> Any:
    """A field every record has; ``name``: a path component, checked when read back."""
    return field(metadata={"doc": doc, "unit": unit, "name": name})


def safe_name_problem(value: str) -> str | None:
    """Why ``value`` cannot be a path component read from disk, or None."""
    if not value or len(value) > SAFE_NAME_MAX:
        return f"must be 1-{SAFE_NAME_MAX} characters"
    if not SAFE_NAME_RE.match(value):
        return "must be letters, digits, '.', '_', '=', '-' (no path separators, no '..')"
    return None


@dataclass(kw_only=True, slots=True)
class TrialRow:
    """One trial (one config x one repeat): the core of a line of trials.csv, the columns every
    kind has. A kind's own columns are its ``Row`` (``iobench.rundir.kinds``), which adds its
    group to these; a run's trials.csv holds its kind's row."""

    run_id: str = required("the run this trial belongs to", name=True)
    trial_id: str = required(
        "`<config>-r<repeat>`; names `samples/<trial_id>.csv` and `logs/<trial_id>.*`", name=True
    )
    config: str = required("the scenario's config this trial ran", name=True)
    repeat: int = required(
        "the round this trial ran in (1 = first); round r runs repeat r of every config", "count"
    )
    position: int | None = column(
        "this trial's place within its round (0 = first); the order is shuffled per round "
        "(meta.json `order_seed`); empty in runs written before schema 2",
        "count",
    )
    status: str = required(
        "`ok`, `failed`, `stalled`, `censored` (ended by `--give-up-after`) or `interrupted`"
    )
    started_at: str = text("when the trial started, ISO 8601 UTC")
    venv_s: float | None = column("venv creation", "s")
    download_s: float | None = column("the installer's download part (split from its log)", "s")
    install_s: float | None = column("the installer's install part", "s")
    compile_s: float | None = column("bytecode compilation", "s")
    import_s: float | None = column("the ready check (first import)", "s")
    time_to_ready_s: float | None = column(
        "from venv creation start to ready-check success (phases plus gaps); empty unless ok", "s"
    )
    predicted_s: float | None = column(
        "time-to-ready predicted from the run's probe (probe.json; docs/prediction.md); empty "
        "when the config cannot be predicted (uv, an untraced installer) or the run was not probed",
        "s",
    )
    censored_after_s: float | None = column(
        "a `censored` trial's lower bound of its time-to-ready: the `--give-up-after` bound it ran "
        "past before it was ended",
        "s",
    )
    read_bytes: int | None = column(
        "bytes the installer trees passed to read() (`rchar`, children included)", "bytes"
    )
    write_bytes: int | None = column("bytes the trees passed to write() (`wchar`)", "bytes")
    read_calls: int | None = column("read()-like calls of the trees (`syscr`)", "count")
    write_calls: int | None = column("write()-like calls of the trees (`syscw`)", "count")
    disk_write_bytes: int | None = column(
        "block-device bytes the trees caused to be written (`write_bytes`; 0 on tmpfs/FUSE)",
        "bytes",
    )
    cpu_s: float | None = column("user+system CPU time of the trees", "s")
    offcpu_frac: float | None = column(
        "1 - cpu_s / time_to_ready_s, clipped; 0 = at least one core busy throughout", "fraction"
    )
    iowait_mean_pct: float | None = column("system-wide CPU iowait, mean over the trial", "%")
    iowait_p95_pct: float | None = column("system-wide CPU iowait, 95th percentile", "%")
    blocked_max: int | None = column("max of /proc/stat procs_blocked during the trial", "count")
    dstate_max: int | None = column("max tree threads in uninterruptible sleep (D)", "count")
    fswait_frac: float | None = column(
        "share of samples with a tree thread in a filesystem or block-layer wait (wait channel: "
        "FUSE, NFS/RPC, page I/O), which neither iowait nor D state shows for FUSE",
        "fraction",
    )
    rss_max_bytes: int | None = column("max resident memory of the tree", "bytes")
    stalls: int | None = column(
        f"stalls the sampler recorded ({STALL_WORDS} for `--stall-after` s)", "count"
    )
    stall_longest_s: float | None = column("the longest of those stalls", "s")
    contended: str = text("other processes doing disk I/O meanwhile (`name:MB;...`)")
    sampler_cpu_s: float | None = column("CPU time of iobench's own sampler during the trial", "s")
    lab_volume: str = text(
        "the iobench lab volume that moved the most bytes during the trial (empty off the lab)"
    )
    lab_preset: str = text("that volume's preset (empty: its options were given by hand)")
    lab_read_mb_s: float | None = column(
        "what that volume delivered to reads while they were in it (iobench.lab.delivered)", "MB/s"
    )
    lab_read_allowed_mb_s: float | None = column(
        "what its options allow those reads: rate limit, latency, requests in flight (empty: "
        "no rate limit)",
        "MB/s",
    )
    lab_write_mb_s: float | None = column("what that volume delivered to writes", "MB/s")
    lab_write_allowed_mb_s: float | None = column("what its options allow those writes", "MB/s")
    cache_mode: str = text("`cold` or `warm`: how the restart found the caches (`--cache-mode`)")
    cold_method: str = text(
        "how the caches were dropped before the restart: `lab-flush`, `drop_caches`, `fadvise`, "
        "`none` (warm)"
    )
    cold_warm_left: str = text("what stayed warm after that method")
    worker: str = text(
        "a fleet's worker (docs/fleet.md): `w<rank>` under MPI, the `--worker-id` under "
        "`--fleet-dir`; empty in a run of one"
    )
    host: str = text("the host the worker ran on (fleet runs)")
    rank: int | None = column(
        "the worker's MPI rank (0 gathers the rows); empty otherwise", "count"
    )
    fleet_size: int | None = column(
        "workers that started this trial together (the sweep's size with `--ranks`)", "count"
    )
    clock_offset_s: float | None = column(
        "this worker's clock minus the fleet's reference clock (rank 0's, or the shared "
        "volume's file times), measured at the start; subtracted from its times",
        "±s",
    )
    fleet_start_s: float | None = column(
        "when this worker's trial started, after the first start of its fleet trial "
        "(clock offsets applied)",
        "s",
    )
    fleet_ready_s: float | None = column(
        "fleet_start_s + time_to_ready_s: when this worker was ready, from the fleet's first "
        "start; the fleet's time-to-ready is the largest",
        "s",
    )
    error: str = text("one line: why the trial failed, with the last lines of the output")

    def details(self) -> list[str]:
        """This ok trial in a few words for its progress line: the phases, what it wrote (a
        kind's row says its own)."""
        phases = " + ".join(f"{p} {seconds(getattr(self, f'{p}_s'))}" for p in PHASES)
        return [
            f"({phases})",
            f"wrote {fmt_bytes(self.write_bytes)} in {self.write_calls or 0} calls",
        ]

    # transition: callers that still index rows by column name (``row["status"]``) while
    # they move to attributes; removed once none is left
    def __getitem__(self, name: str) -> Any:
        return getattr(self, name)

    def get(self, name: str, default: Any = None) -> Any:
        return getattr(self, name, default)


@dataclass(kw_only=True)
class Sample:
    """One sampler tick of one trial: a line of samples/<trial_id>.csv.

    System figures are rates over the tick; ``tree_*`` figures are cumulative since the
    trial started.
    """

    t: float = column("time since the trial started", "s", 0.0)
    phase: str = text("the phase running (`download` is the install's first part)")
    cpu_user_pct: float = column("system-wide user+nice CPU", "%", 0.0)
    cpu_system_pct: float = column("system-wide system+irq+softirq CPU", "%", 0.0)
    iowait_pct: float = column("system-wide CPU iowait", "%", 0.0)
    procs_blocked: int = column("processes blocked in the kernel (/proc/stat)", "count", 0)
    disk_read_bps: int = column("all block devices, read", "B/s", 0)
    disk_write_bps: int = column("all block devices, written", "B/s", 0)
    net_recv_bps: int = column("all interfaces, received", "B/s", 0)
    net_sent_bps: int = column("all interfaces, sent", "B/s", 0)
    tree_procs: int = column("live processes in the watched tree", "count", 0)
    tree_cpu_s: float = column("CPU time of the trees", "s", 0.0)
    tree_read_bytes: int = column("bytes passed to read() by the trees", "bytes", 0)
    tree_write_bytes: int = column("bytes passed to write() by the trees", "bytes", 0)
    tree_write_calls: int = column("write()-like calls of the trees", "count", 0)
    tree_dstate: int = column("tree threads in uninterruptible sleep (D)", "count", 0)
    tree_fswait: int = column("tree threads in a filesystem wait (see `fswait_frac`)", "count", 0)
    tree_rss_bytes: int = column("resident memory of the tree", "bytes", 0)
    fs_used_venv: int | None = column(
        "used bytes of the filesystem holding the venv (statvfs)", "bytes"
    )
    fs_used_tmpdir: int | None = column("used bytes of the filesystem holding TMPDIR", "bytes")
    fs_used_cache: int | None = column("used bytes of the filesystem holding the cache", "bytes")
    target_credits_mb: float | None = column(
        "the volume a trial reads (its kind's: the data, the checkpoint, the weights), when it is "
        "an iobench lab volume with burst credits: its credit balance (10^6 bytes), read from the "
        "volume's live statistics",
        "MB",
    )

    def as_dict(self) -> dict[str, Any]:
        """The tick as a plain dict keyed by column (for consumers that index by name)."""
        return {f: getattr(self, f) for f in SAMPLE_COLUMNS}


@dataclass(kw_only=True)
class Stall:
    """A no-progress interval of a trial's watched tree: a line of stalls.csv."""

    run_id: str = text("the run")
    trial_id: str = text("the trial")
    phase: str = text("the phase the stall began in")
    start_s: float = column("when it began, since the trial started", "s", 0.0)
    length_s: float = column("how long no read or write advanced", "s", 0.0)
    dstate_max: int = column("max tree threads in D state meanwhile", "count", 0)
    iowait_mean_pct: float = column("mean system-wide iowait meanwhile", "%", 0.0)


@functools.cache
def columns_of(record: type) -> tuple[str, ...]:
    """A record's CSV columns, in order: its field names (computed once per record type)."""
    return tuple(f.name for f in dataclasses.fields(record))


#: the core's columns (every kind's row starts with them)
TRIAL_COLUMNS = columns_of(TrialRow)
SAMPLE_COLUMNS = columns_of(Sample)
STALL_COLUMNS = columns_of(Stall)
#: trials.csv columns without which there is nothing to read
REQUIRED_TRIAL_COLUMNS = ("trial_id", "config", "status", "time_to_ready_s")


def _kind(hint: object) -> type:
    """int, float or str: what a field's annotation holds besides None."""
    args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    for kind in (int, float, str):
        if kind in args:
            return kind
    raise TypeError(f"unsupported column type {hint!r}")


_TYPES: dict[type, dict[str, type]] = {}


def _types(record: type) -> dict[str, type]:
    """Each column's type (int, float or str) of a record type (a kind's row included)."""
    if record not in _TYPES:
        _TYPES[record] = {name: _kind(h) for name, h in typing.get_type_hints(record).items()}
    return _TYPES[record]


def text_columns(record: type) -> tuple[str, ...]:
    """The columns that hold text (the others hold numbers)."""
    return tuple(n for n, k in _types(record).items() if k is str)


def cell(value: object) -> object:
    """A value as written to a CSV cell: None empty, floats to 4 places, one line of text."""
    if value is None:
        return ""
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, str):
        return value.replace("\r", " ").replace("\n", " | ")
    return value


def to_cells(record: object) -> dict[str, object]:
    """A record as the cells of its CSV line, keyed by column."""
    kind: type = type(record)
    return {name: cell(getattr(record, name)) for name in columns_of(kind)}


R = TypeVar("R", TrialRow, Sample, Stall)


def from_cells(record: type[R], cells: Mapping[str, str | None], where: str) -> R:
    """Parse one CSV line read back from disk; a bad value is a RunDirError naming ``where``.

    Absent columns (older runs) take the field's default; columns the record does not know
    are ignored here (the header check refuses them).
    """
    kinds = _types(record)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(record):
        text = cells.get(f.name)
        if text is None:
            continue
        values[f.name] = _parse(text, kinds[f.name], f, where)
    if issubclass(record, TrialRow):
        status = values.get("status", "")
        if status not in STATUSES:
            raise RunDirError(f"{where}: status: {status!r} is not one of {', '.join(STATUSES)}")
    try:
        return record(**values)
    except TypeError as exc:  # a required column without a value
        raise RunDirError(f"{where}: {exc}") from None


def _parse(raw: str, kind: type, f: dataclasses.Field, where: str) -> object:
    text = raw.strip()
    unit = f.metadata.get("unit", "")
    if kind is str:
        if f.metadata.get("name"):
            problem = safe_name_problem(text)
            if problem:
                raise RunDirError(f"{where}: {f.name}: {text[:40]!r} {problem}")
        return text
    if not text:
        return None
    try:
        value: float = float(text) if kind is float else _int(text)
    except ValueError:
        raise RunDirError(f"{where}: {f.name}: {text[:40]!r} is not a number") from None
    lo, hi = UNIT_RANGES.get(unit, (-_LIMIT, _LIMIT))
    if not math.isfinite(value) or not lo <= value <= hi:
        raise RunDirError(
            f"{where}: {f.name}: {text[:40]!r} is not a number in [{lo:g}, {hi:g}] ({unit})"
        )
    return value


def _int(text: str) -> int:
    """An integer cell; '12.0' (pandas writes ints with NaN neighbours so) is 12."""
    try:
        return int(text)
    except ValueError:
        value = float(text)
        if not math.isfinite(value) or value != int(value):
            raise
        return int(value)


def check_header(
    header: Sequence[str], record: type, where: str, needed: Sequence[str] = ()
) -> None:
    """Refuse a header that is cut, damaged or duplicated, or lacks ``needed`` columns.

    A column this version does not know is ignored when it looks like a column name (a
    newer iobench's, so adding a column needs no new schema version), unless it is the
    start of a known column the header lacks (``err`` for ``error``: a cut header).
    """
    known = columns_of(record)
    for c in header:
        if c in known:
            continue
        if not _COLUMN_NAME.match(c) or any(k.startswith(c) and k not in header for k in known):
            raise RunDirError(f"{where}: header is cut short or damaged (column {c[:40]!r})")
    dup = sorted({c for c in header if list(header).count(c) > 1})
    if dup:
        raise RunDirError(f"{where}: header names column(s) twice: {', '.join(dup)}")
    missing = [c for c in needed if c not in header]
    if missing:
        raise RunDirError(f"{where}: missing column(s) {', '.join(missing)}")


def markdown_table(record: type, only: Sequence[str] = ()) -> str:
    """The README table of a record's columns (``only`` those): name, unit, meaning (from the
    field docs)."""
    lines = ["| column | unit | meaning |", "|---|---|---|"]
    for f in dataclasses.fields(record):
        if not only or f.name in only:
            lines.append(f"| `{f.name}` | {f.metadata.get('unit', '')} | {f.metadata['doc']} |")
    return "\n".join(lines)
