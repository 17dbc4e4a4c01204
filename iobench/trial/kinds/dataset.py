"""The ``dataset`` workload: what a training loop's reads of its data cost on a role.

A trial reads a set of files the way a data loader does (``iobench.trial.loader``, a process
of its own): shuffled batches, worker processes reading ahead, an accelerator emulated by a
time per batch, one or more epochs. Its row says how busy that accelerator was (``au``,
MLPerf Storage's accelerator utilisation), how long it waited for data, and the read rate.

Untimed, before measuring: the data is generated once per run and role (JSONL text shards
or binary records, ``files`` of ``file_mb`` MB each, sizes drawn from a lognormal of
relative spread ``size_sd``; deterministic for a ``seed``) — or ``source`` names an existing
folder, which is only ever read — and then made cold as a restart is
(``iobench.trial.coldcache``: lab flush, drop_caches or fadvise; the row records which).
Timed: the copy of the data to the config's ``stage`` role when it has one (``cp -r``, what
a start script does), then the loader over the data where the config reads it.

A config says where the data lives (``data``) and where it is copied first (``stage``, or
``off``); the ``[workload]`` table sets the rest, and ``[workload.by_config.NAME]`` changes
any of it for one config (more loader workers, say): ``files`` (256), ``file_mb`` (1),
``size_sd`` (0), ``format`` (``jsonl`` or ``binary``), ``source`` (""), ``batch`` (8 files),
``workers`` (2), ``prefetch`` (2 batches per worker), ``epochs`` (1), ``compute_ms`` (25 per
batch), ``compute_sd_ms`` (0), ``loader`` (``auto``: torch's DataLoader when the loader's
Python imports torch, else ``plain``; or ``plain`` / ``torch``), ``python`` (the interpreter
that runs the loader: iobench's own, or a training venv's with torch), ``seed`` (1).
docs/dataset.md says what each figure means and how AU is computed.
"""

from __future__ import annotations

import json
import math
import os
import random
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

import psutil

from iobench import files
from iobench.errors import IOBenchError, ScenarioError
from iobench.rundir.kinds import dataset as rows
from iobench.scenario.kinds.dataset import Settings, settings_of
from iobench.trial import coldcache
from iobench.trial.outcome import Stop, check
from iobench.trial.sampler import SamplerResult
from iobench.trial.steps import Step, Trial

#: the loader script (run by path: it imports nothing of iobench)
LOADER = Path(__file__).with_name("dataset_loader.py")
#: the data a run generates lives in its role's scratch under this name (one per settings)
DATA_PREFIX = "dataset-"
#: the block generated files are cut from (a file is a rotation of it, repeated)
BLOCK_BYTES = 4 << 20
_WORDS = (
    "the of and model data train loss step batch token layer weight gradient epoch volume "
    "storage read write cache file shard sample image text label tensor device memory"
).split()

NAME = rows.NAME


def loader_settings(p: Settings, folder: Path) -> dict[str, Any]:
    """What the loader script reads (``dataset_loader.py``): the folder and the loop's settings."""
    keys = ("batch", "workers", "prefetch", "epochs", "compute_ms", "compute_sd_ms", "loader",
            "seed")  # fmt: skip
    return {"folder": str(folder), **{k: getattr(p, k) for k in keys}}


def check_here(table: Mapping[str, Any], configs: Sequence[str], where: str) -> None:
    """The source folder and the loader's interpreter exist here, for every config."""
    for name in configs:
        p = settings_of(table, name, where)
        if p.source and not os.path.isdir(p.source):
            raise ScenarioError(f"{where}.source: {p.source} is not a folder")
        if p.python and not os.access(p.python, os.X_OK):
            raise ScenarioError(f"{where}.python: {p.python} is not an executable interpreter")


# ---------------------------------------------------------------------------------- the data


def file_sizes(p: Settings) -> list[int]:
    """Each file's size in bytes: ``file_mb`` each, or lognormal with that mean."""
    mean = p.file_mb * 1e6
    if not p.size_sd:
        return [max(1, round(mean))] * p.files
    rng = random.Random(p.seed)
    mu = math.log(mean) - p.size_sd**2 / 2  # so that the mean is ``mean``
    return [min(round(16 * mean), max(1024, round(rng.lognormvariate(mu, p.size_sd))))
            for _ in range(p.files)]  # fmt: skip


def block(p: Settings) -> bytes:
    """The bytes files are cut from: JSONL records of words, or random binary records."""
    rng = random.Random(p.seed)
    if p.format == "binary":
        return rng.randbytes(BLOCK_BYTES)
    lines, size, n = [], 0, 0
    while size < BLOCK_BYTES:
        text = " ".join(rng.choices(_WORDS, k=rng.randint(20, 200)))
        line = json.dumps({"id": n, "text": text, "label": rng.randint(0, 999)}) + "\n"
        lines.append(line)
        size += len(line)
        n += 1
    return "".join(lines).encode()


def generate(folder: Path, p: Settings) -> int:
    """Write the data set into ``folder`` (made by iobench, inside its scratch); bytes written.

    The folder gets a ``.complete`` marker last, so a run stopped half-way makes it again."""
    data = block(p)
    ext = "jsonl" if p.format == "jsonl" else "bin"
    total = 0
    for i, size in enumerate(file_sizes(p)):
        start = (i * 7919) % len(data)  # each file its own rotation of the block
        with files.open_stream(folder / f"shard-{i:06d}.{ext}", 0o644) as fh:
            left, at = size, start
            while left:
                piece = data[at : at + min(left, len(data) - at)]
                fh.write(piece)
                left -= len(piece)
                at = (at + len(piece)) % len(data)
        total += size
    files.fresh(folder / ".complete")
    return total


# ---------------------------------------------------------------------------------- figures


@dataclass(frozen=True)
class Figures:
    """What the loader's record says (docs/dataset.md): every figure in seconds or bytes."""

    epochs_s: float
    compute_s: float
    io_wait_s: float
    au: float | None
    batches: int
    files_read: int
    data_bytes: int


def au_of(epochs: Sequence[Sequence[float]], batches: Sequence[Sequence[float]]) -> float | None:
    """MLPerf Storage's accelerator utilisation: compute time / wall time, summed over the
    epochs, each epoch's wall counted from the arrival of its first batch (its I/O is left
    out, as DLIO leaves out the first step). None when no epoch has a wall to divide by."""
    compute = wall = 0.0
    for start, end in epochs:
        mine = [b for b in batches if start <= b[0] <= end]
        if not mine:
            continue
        compute += sum(b[2] for b in mine)
        wall += end - mine[0][0]
    return min(1.0, compute / wall) if wall > 0 else None


def figures(record: Mapping[str, Any]) -> Figures:
    """The row's figures from the loader's JSON record."""
    epochs, batches = record["epochs"], record["batches"]
    return Figures(
        epochs_s=float(record["list_s"]) + sum(end - start for start, end in epochs),
        compute_s=sum(b[2] for b in batches),
        io_wait_s=sum(b[1] for b in batches),
        au=au_of(epochs, batches),
        batches=len(batches),
        files_read=sum(int(b[4]) for b in batches),
        data_bytes=sum(int(b[3]) for b in batches),
    )


def cached_note(p: Settings, cold_method: str, epoch_bytes: int, available: int) -> str:
    """Why some reads may have come from the page cache ('' when none did)."""
    if cold_method == "none":
        return "warm mode (--cache-mode warm): the data may have been in the page cache"
    if p.epochs > 1 and cold_method != "lab-flush" and epoch_bytes <= available:
        return (
            f"epochs 2-{p.epochs} may have been read from the page cache: the data "
            f"({epoch_bytes / 1e6:,.0f} MB) fits in available memory ({available / 1e6:,.0f} MB)"
        )
    return ""


# ---------------------------------------------------------------------------------- the trial


class Dataset:
    """One dataset trial: the data made cold, an optional staged copy, then the loader."""

    kind: ClassVar[str] = NAME

    def __init__(self) -> None:
        self.params = Settings()
        self.folder = Path()  # the data as it lies on its role (generated, or the source)
        self.read_from = Path()  # where the loader reads: the folder, or its staged copy
        self.record = Path()
        self.cold_method = ""

    def prepare(self, t: Trial) -> Stop | None:
        p = self.params = settings_of(t.ctx.params, t.cfg.name, "workload")
        if p.python and not os.access(p.python, os.X_OK):
            return Stop("failed", f"workload.python: {p.python} is not executable")
        self.folder = Path(p.source) if p.source else self._generated(t)
        self.read_from = self.folder
        if t.cfg.stage != "off":
            self.read_from = t.dirs[t.cfg.stage] / "data"
        t.env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "TMPDIR": str(t.ctx.cwd)}
        row = t.row
        row.data_role, row.stage_role = t.cfg.data, t.cfg.stage
        row.data_fstype = t.fstype(self.folder) or t.ctx.fstypes.get(t.cfg.data, "")
        row.stage_fstype = t.ctx.fstypes.get(t.cfg.stage, "") if t.cfg.stage != "off" else ""
        row.workers, row.epochs = p.workers, p.epochs
        try:
            cold = coldcache.make_cold(self.folder, t.ctx.cache_mode)
        except IOBenchError as exc:
            return Stop("failed", f"making the data cold: {exc}")
        self.cold_method = row.cold_method = cold.method
        row.cold_warm_left = cold.warm_left
        t.watch_credits(self.folder)
        t.phases = dict.fromkeys(t.phases)  # an install's phases: none of them ran
        self.record = t.ctx.logs / f"{t.tid}.loader.json"
        return None

    def _generated(self, t: Trial) -> Path:
        """The run's copy of the generated data on the config's data role (made once)."""
        folder = t.ctx.scratch[t.cfg.data].run_root / f"{DATA_PREFIX}{self.params.data_key()}"
        if not (folder / ".complete").exists():
            p = self.params
            t.message(f"generating {p.files:,} files ({p.mb:,.0f} MB) on {t.cfg.data}")
            folder.mkdir(parents=True, exist_ok=True)
            generate(folder, self.params)
        return folder

    def fs_paths(self, t: Trial) -> dict[str, Path]:
        return {}

    def timed(self) -> Sequence[Step]:
        return (self.stage, self.read)

    def stage(self, t: Trial) -> Stop | None:
        if t.cfg.stage == "off":
            return None
        r = t.phase("stage", ["cp", "-r", "--", str(self.folder), str(self.read_from)])
        t.row.stage_s = r.seconds
        return check(r, f"copying the data to {t.cfg.stage}")

    def read(self, t: Trial) -> Stop | None:
        p = self.params
        spec = t.ctx.logs / f"{t.tid}.loader-settings.json"
        files.write(spec, json.dumps({**loader_settings(p, self.read_from), "zero": t.t0}))
        python = p.python or sys.executable
        r = t.phase("read", [python, "-I", str(LOADER), str(spec), str(self.record)])
        t.mark_ready(r.end)
        return check(r, "the data loader")

    def measured(self, t: Trial, result: SamplerResult) -> None:
        record = json.loads(self.record.read_text())
        fig = figures(record)
        row = t.row
        for f in fields(Figures):
            setattr(row, f.name, getattr(fig, f.name))
        row.loader = str(record.get("loader", ""))
        if skipped := record.get("skipped"):  # a FIFO, a device, a link out of the folder
            t.ctx.progress.message(  # a warning: the figures are of fewer files than listed
                f"warning: {t.tid}: read only the regular files of {self.read_from}; skipped "
                f"{len(skipped)}: {', '.join(map(str, skipped[:5]))} (the list: its loader.json)"
            )
        row.time_to_ready_s = (row.stage_s or 0.0) + fig.epochs_s
        row.read_mb_per_s = fig.data_bytes / 1e6 / fig.epochs_s if fig.epochs_s > 0 else None
        epoch_bytes = fig.data_bytes // max(1, self.params.epochs)
        available = psutil.virtual_memory().available
        row.data_cached = cached_note(self.params, self.cold_method, epoch_bytes, available)

    def after(self, t: Trial, stop: Stop | None) -> None:
        return None


__all__ = ["NAME", "Dataset", "Figures", "au_of", "check_here", "figures", "generate",
           "loader_settings"]  # fmt: skip
