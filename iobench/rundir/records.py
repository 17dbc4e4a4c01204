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
    """One trial (one config x one repeat): a line of trials.csv."""

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
    venv_role: str = text("the role (folder) the venv lived in")
    tmpdir_role: str = text("the role TMPDIR pointed into")
    cache_role: str = text("the role of the installer's cache, or `off`")
    venv_fstype: str = text("filesystem type of the venv's role")
    tmpdir_fstype: str = text("filesystem type of TMPDIR's role")
    cache_fstype: str = text("filesystem type of the cache's role (empty when `off`)")
    cache_state: str = text("`cold` (empty cache) or `warm` (primed by an untimed install)")
    installer: str = text("`pip` or `uv`")
    compile: str = text("`on`/`off`: bytecode compiled after the install")
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
    index_bytes: int | None = column(
        "bytes the local index served during the trial (empty for a remote index)", "bytes"
    )
    tmpdir_peak_bytes: int | None = column(
        "peak growth of TMPDIR's filesystem (statvfs, no walking)", "bytes"
    )
    cache_bytes: int | None = column("growth of the cache's filesystem at the end", "bytes")
    venv_bytes: int | None = column("growth of the venv's filesystem at the end", "bytes")
    files_installed: int | None = column("files in the installed distributions' RECORDs", "count")
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
    strategy: str = text(
        "start-up strategy (docs/strategies.md): `reinstall`, `persistent-venv`, `packed-venv`, "
        "`copied-venv`, `fan-out`; empty in runs written before strategies"
    )
    first_start_s: float | None = column(
        "first start: time_to_ready_s plus the strategy's persist step (pack, copy-out); empty unless "
        "the run measured restarts",
        "s",
    )
    persist_method: str = text(
        "how the first start kept the venv: `tar`, `tar+zstd`, `squashfs`, `copy`"
    )
    persist_tool: str = text("what ran the persist step (e.g. `zstd binary`, `squashfuse`, `cp`)")
    persist_command: str = text("the persist step's shell line, as a start script would run it")
    persist_s: float | None = column("the persist step (pack or copy-out)", "s")
    stored_bytes: int | None = column(
        "bytes the strategy keeps on the target between starts (archive, tree or venv)", "bytes"
    )
    restart_s: float | None = column(
        "restart: from the first step after the caches were dropped (restore, copy-in, venv "
        "creation for reinstall) to ready-check success; empty unless ok",
        "s",
    )
    restore_s: float | None = column("the restart's restore step (unpack, mount or copy-in)", "s")
    restore_command: str = text("the restart's restore line, as a start script would run it")
    restore_method: str = text(
        "how the restart restored what was kept: `squashfs-loop`, `squashfs-fuse`, "
        "`squashfs-extract` (a squashfs image loop-mounted, mounted by squashfuse, unpacked by "
        "unsquashfs), `tar+zstd`, `tar`, `copy`; empty when nothing was restored"
    )
    restore_tool: str = text(
        "what ran the restore (e.g. `mount -t squashfs`, `squashfuse`, `unsquashfs`, `zstd binary`)"
    )
    restart_import_s: float | None = column("the restart's ready check", "s")
    cache_mode: str = text("`cold` or `warm`: how the restart found the caches (`--cache-mode`)")
    cold_method: str = text(
        "how the caches were dropped before the restart: `lab-flush`, `drop_caches`, `fadvise`, "
        "`none` (warm)"
    )
    cold_warm_left: str = text("what stayed warm after that method")
    restart_read_bytes: int | None = column(
        "bytes the restart's processes passed to read() (`rchar`, page cache hits included)",
        "bytes",
    )
    restart_target_read_bytes: int | None = column(
        "bytes the lab volume's daemon served during the restart (empty when the target is not "
        "an iobench lab volume): proof the restart read from the target",
        "bytes",
    )
    restart_target_creates: int | None = column(
        "files the restart created on the lab volume (its daemon's count; empty off the lab): "
        "bytecode an import wrote there",
        "count",
    )
    restart_pyc_local: int | None = column(
        "bytecode files in the `PYTHONPYCACHEPREFIX` folder after the restart (pycache `local`: "
        "what its imports compiled again on the new machine)",
        "count",
    )
    restart_index_bytes: int | None = column(
        "wheel bytes the loopback index served during a restart's install (reinstall, "
        "packed-cache): 0 when its cache held every package",
        "bytes",
    )
    venv_creator: str = text(
        "how the venv was made: `virtualenv`, `venv` (`python -m venv`, pip via ensurepip), "
        "`venv-without-pip` or `uv` (`uv venv`)"
    )
    link_mode: str = text("uv's link mode asked for (`UV_LINK_MODE`; `default`: uv's choice)")
    pycache: str = text(
        "where imports wrote bytecode: `beside` the source (the venv's `__pycache__`) or `local` "
        "(`PYTHONPYCACHEPREFIX` in the TMPDIR role's folder)"
    )
    link_observed: str = text(
        "what the installed files are, read from disk: `hardlink` (the cache's inode), `symlink`, "
        "`clone` (own inode, no fall-back reported), `copy`, or `mixed`"
    )
    link_fallback: str = text(
        "uv's fall-back warning, when it printed one (e.g. failed to hardlink)"
    )
    data_role: str = text("a `dataset` trial's role holding the training data")
    stage_role: str = text(
        "the role the data was copied to before the epochs (`off`: read where it lies)"
    )
    data_fstype: str = text("filesystem type of the data's role")
    stage_fstype: str = text("filesystem type of the stage role (empty when `off`)")
    loader: str = text(
        "what read the data: `plain` (worker processes) or `torch` (a real "
        "torch.utils.data.DataLoader)"
    )
    workers: int | None = column("loader worker processes (0: the training loop reads)", "count")
    epochs: int | None = column("passes over the data", "count")
    batches: int | None = column("batches the loop took, all epochs", "count")
    files_read: int | None = column("files the loader read, all epochs", "count")
    data_bytes: int | None = column("bytes the loader read, all epochs", "bytes")
    stage_s: float | None = column(
        "the copy of the data to the stage role before the first epoch (part of time_to_ready_s)",
        "s",
    )
    read_s: float | None = column(
        "the timed read: a `dataset` trial's epochs, from the loader's start (its listing "
        "included) to the last batch computed; a `checkpoint` trial's cold restore, from the "
        "first reader's start to the last shard read",
        "s",
    )
    compute_s: float | None = column(
        "the emulated accelerator's compute, summed over every batch (sleeps, as DLIO's)", "s"
    )
    io_wait_s: float | None = column(
        "time the loop waited for batches (the accelerator idle for want of data), all epochs",
        "s",
    )
    au: float | None = column(
        "accelerator utilisation, as MLPerf Storage defines it: compute / wall time of the "
        "epochs, each epoch's first batch left out (docs/dataset.md)",
        "fraction",
    )
    read_mb_per_s: float | None = column(
        "bytes read / read_s (10^6 bytes per second, as the lab's flags)", "MB/s"
    )
    data_cached: str = text(
        "why some reads may have come from the page cache (empty when every epoch read cold)"
    )
    save_role: str = text("a `checkpoint` trial's role the checkpoint was saved to")
    copy_role: str = text(
        "the role the saved checkpoint was copied to in the background (`off`: none)"
    )
    save_fstype: str = text("filesystem type of the save role")
    copy_fstype: str = text("filesystem type of the copy's role (empty when `off`)")
    ckpt_format: str = text(
        "how the checkpoint was written: `torch` and its version (torch.save of tensors) or "
        "`raw` (the same bytes)"
    )
    shards: int | None = column(
        "files the checkpoint was saved as, one writer process each", "count"
    )
    ckpt_bytes: int | None = column("bytes of the checkpoint's files, all shards", "bytes")
    write_s: float | None = column(
        "the save (the GPU's pause): from the first writer's start to the last shard's fsync "
        "and the folders' fsync",
        "s",
    )
    write_mb_per_s: float | None = column("ckpt_bytes / write_s (10^6 bytes per second)", "MB/s")
    fsync_share: float | None = column(
        "the share of the writers' time spent in fsync (every shard's and the folders')",
        "fraction",
    )
    fsync_calls: int | None = column(
        "fsync calls the save issued (each file, two folders)", "count"
    )
    copy_s: float | None = column(
        "the background copy to copy_role, each file and folder fsynced (the GPU does not wait)",
        "s",
    )
    exposed_s: float | None = column(
        "from the save's end until the checkpoint was durable where a restarted pod finds it: "
        "a crash in this window loses the save (0 when saved there directly)",
        "s",
    )
    verified: str = text("how the bytes read back were checked against those written")
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
    lock_lines: int | None = column(
        "lines of the installer's output that name a lock (waits, retries, failures: a cache "
        "shared by a fleet)",
        "count",
    )
    fanout_wait_s: float | None = column(
        "fan-out (docs/fleet.md): this worker's wait for the first worker's archive on the "
        "target, part of its time-to-ready; empty for the worker that built it",
        "s",
    )
    fanout_restore_s: float | None = column(
        "fan-out: restoring that archive onto this worker's tmp (a relocation included)", "s"
    )
    fanout_relocated: int | None = column(
        "fan-out: files rewritten because this worker restored the venv at another path than "
        "it was built at (workers sharing a host); 0 on hosts of their own",
        "count",
    )
    error: str = text("one line: why the trial failed, with the last lines of the output")

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
        "a `dataset` trial's data volume or a `checkpoint` trial's restore volume, when it is an "
        "iobench lab volume with burst credits: "
        "its credit balance (10^6 bytes), read from the volume's live statistics",
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


_KINDS: dict[type, dict[str, type]] = {
    rec: {name: _kind(h) for name, h in typing.get_type_hints(rec).items()}
    for rec in (TrialRow, Sample, Stall)
}


def text_columns(record: type) -> tuple[str, ...]:
    """The columns that hold text (the others hold numbers)."""
    return tuple(n for n, k in _KINDS[record].items() if k is str)


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
    kinds = _KINDS[record]
    values: dict[str, Any] = {}
    for f in dataclasses.fields(record):
        text = cells.get(f.name)
        if text is None:
            continue
        values[f.name] = _parse(text, kinds[f.name], f, where)
    if record is TrialRow:
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


def markdown_table(record: type) -> str:
    """The README table of a record's columns: name, unit, meaning (from the field docs)."""
    lines = ["| column | unit | meaning |", "|---|---|---|"]
    for f in dataclasses.fields(record):
        lines.append(f"| `{f.name}` | {f.metadata.get('unit', '')} | {f.metadata['doc']} |")
    return "\n".join(lines)
