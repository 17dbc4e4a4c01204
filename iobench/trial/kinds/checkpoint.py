"""The ``checkpoint`` workload: what saving a model and restoring it cost on a role.

A trial does what a careful trainer does (``iobench.trial.saver``, processes of their own):
it saves a checkpoint of ``checkpoint_mb`` MB to the config's ``save`` role as one file or as
``shards`` files written by as many processes at once — ``torch.save`` of tensors when the
saver's Python imports torch, else the same bytes — ``fsync``s every file and the folders,
then, when the config has a ``copy_to`` role, copies it there in the background (the GPU
waits only for the save; the copy's time is the window in which a crash still loses the
save). The checkpoint where a restarted pod would find it (``copy_to``, else ``save``) is
then made cold as a restart is (``iobench.trial.coldcache``: lab flush, drop_caches or
fadvise; the row records which) and read back, and every byte read is checked against the
bytes it was made from (crc32). MLPerf Storage's checkpointing workload (DLIO) does the same:
each rank ``torch.save``s its shard, then a forced ``fsync``; reads must not come from the
page cache; its rule takes the slowest rank's time, as ``write_s`` and ``read_s`` do here.

A config says where the checkpoint is saved (``save``) and where it is copied (``copy_to``,
or ``off``); the ``[workload]`` table sets the rest, and ``[workload.by_config.NAME]`` changes
any of it for one config: ``checkpoint_mb`` (256), ``shards`` (1: one file), ``tensor_mb``
(64: the largest tensor; a shard holds as many as it needs), ``format`` (``auto``: torch when
it imports, else ``raw``; or ``torch`` / ``raw``), ``python`` (the interpreter that runs the
saver: iobench's own, or a training venv's with torch), ``seed`` (1). docs/checkpoint.md says
what each figure means and how the report turns them into how often to save.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from iobench import files
from iobench.errors import IOBenchError, ScenarioError
from iobench.rundir.kinds import checkpoint as rows
from iobench.scenario.kinds.checkpoint import Settings, settings_of
from iobench.trial import coldcache
from iobench.trial.outcome import Stop, check
from iobench.trial.process import PhaseResult
from iobench.trial.sampler import SamplerResult
from iobench.trial.steps import Step, Trial

#: the saver script (run by path: it imports nothing of iobench)
SAVER = Path(__file__).with_name("checkpoint_saver.py")

NAME = rows.NAME


def saver_settings(p: Settings, folder: Path, copy_to: Path | None) -> dict[str, Any]:
    """What every mode of the saver script reads (``checkpoint_saver.py``)."""
    return {
        "folder": str(folder),
        "copy_to": str(copy_to) if copy_to is not None else "",
        "shard_bytes": p.shard_bytes(),
        "tensor_bytes": round(p.tensor_mb * 1e6),
        "format": p.format,
        "seed": p.seed,
    }


def check_here(table: Mapping[str, Any], configs: Sequence[str], where: str) -> None:
    """The saver's interpreter runs here, for every config."""
    for name in configs:  # by_config's names were checked when the file was read
        p = settings_of(table, name, where)
        if p.python and not os.access(p.python, os.X_OK):
            raise ScenarioError(f"{where}.python: {p.python} is not an executable interpreter")


# ---------------------------------------------------------------------------------- figures


def span(record: Mapping[str, Any]) -> float:
    """Seconds from the first process's start to the record's end (the slowest one, folders'
    fsync included)."""
    return max(0.0, float(record["end"]) - float(record["go"]))


def fsync_share(save: Mapping[str, Any]) -> float | None:
    """The share of the writers' time spent in ``fsync``: every shard's fsync and the folders',
    over every shard's time from its start to its close plus the folders'."""
    dirsync = float(save["dirsync"][1]) - float(save["dirsync"][0])
    in_fsync = sum(float(s[2]) - float(s[1]) for s in save["shards"]) + dirsync
    total = sum(float(s[3]) - float(s[0]) for s in save["shards"]) + dirsync
    return min(1.0, max(0.0, in_fsync / total)) if total > 0 else None


def rate_mb_per_s(nbytes: float, seconds: float) -> float | None:
    return nbytes / 1e6 / seconds if seconds > 0 else None


# ---------------------------------------------------------------------------------- the trial


class Checkpoint:
    """One checkpoint trial: the save, an optional copy, the cold restore and its check."""

    kind: ClassVar[str] = NAME

    def __init__(self) -> None:
        self.params = Settings()
        self.saved = Path()  # the checkpoint's folder on the save role
        self.copied: Path | None = None  # its copy on the copy_to role
        self.base: dict[str, Any] = {}  # the saver's settings every mode shares
        self.records: dict[str, Path] = {}
        self.read_from = Path()

    def prepare(self, t: Trial) -> Stop | None:
        p = self.params = settings_of(t.ctx.params, t.cfg.name, "workload")
        if p.python and not os.access(p.python, os.X_OK):
            return Stop("failed", f"workload.python: {p.python} is not executable")
        self.saved = t.dirs[t.cfg.save] / "ckpt"
        if t.cfg.copy_to != "off":
            self.copied = t.dirs[t.cfg.copy_to] / "ckpt"
        self.read_from = self.copied or self.saved
        t.env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "TMPDIR": str(t.ctx.cwd)}
        row = t.row
        row.save_role, row.copy_role = t.cfg.save, t.cfg.copy_to
        row.save_fstype = t.fstype(t.dirs[t.cfg.save]) or t.ctx.fstypes.get(t.cfg.save, "")
        if self.copied is not None:
            row.copy_fstype = t.fstype(self.copied.parent) or t.ctx.fstypes.get(t.cfg.copy_to, "")
        row.shards = p.shards
        t.watch_credits(self.read_from.parent)
        t.phases = dict.fromkeys(t.phases)  # an install's phases: none of them ran
        self.base = saver_settings(p, self.saved, self.copied)
        self.records = {m: t.ctx.logs / f"{t.tid}.{m}.json" for m in ("save", "copy", "restore")}
        return None

    def fs_paths(self, t: Trial) -> dict[str, Path]:
        return {}

    def timed(self) -> Sequence[Step]:
        return (self.save, self.copy, self.cold, self.restore, self.verify)

    def _run(
        self, t: Trial, mode: str, out: Path, extra: Mapping[str, Any] | None = None
    ) -> PhaseResult:
        """One of the saver's modes as a phase (its settings in the run's logs)."""
        path = t.ctx.logs / f"{t.tid}.{mode}-settings.json"
        files.write(path, json.dumps({**self.base, **(extra or {}), "zero": t.t0}))
        python = self.params.python or sys.executable
        return t.phase(mode, [python, "-I", str(SAVER), mode, str(path), str(out)])

    def _saved(self) -> dict[str, Any]:
        return json.loads(self.records["save"].read_text())

    def save(self, t: Trial) -> Stop | None:
        r = self._run(t, "save", self.records["save"])
        return check(r, f"saving the checkpoint to {t.cfg.save}")

    def copy(self, t: Trial) -> Stop | None:
        if self.copied is None:
            return None
        saved = self._saved()
        r = self._run(t, "copy", self.records["copy"], {"files": saved["files"]})
        return check(r, f"copying the checkpoint to {t.cfg.copy_to}")

    def cold(self, t: Trial) -> Stop | None:
        try:
            cold = coldcache.make_cold(self.read_from, t.ctx.cache_mode)
        except IOBenchError as exc:
            return Stop("failed", f"making the checkpoint cold: {exc}")
        t.row.cold_method, t.row.cold_warm_left = cold.method, cold.warm_left
        return None

    def restore(self, t: Trial) -> Stop | None:
        extra = {"folder": str(self.read_from), "files": self._saved()["files"]}
        r = self._run(t, "restore", self.records["restore"], extra)
        t.mark_ready(r.end)
        return check(r, "reading the checkpoint back")

    def verify(self, t: Trial) -> Stop | None:
        saved = self._saved()
        extra = {"folder": str(self.read_from), "files": saved["files"],
                 "saved_format": saved["format"]}  # fmt: skip
        out = t.ctx.logs / f"{t.tid}.check.json"
        r = self._run(t, "check", out, extra)
        stop = check(r, "checking the bytes read back")
        if stop is None:
            t.row.verified = str(json.loads(out.read_text()).get("how", ""))
        return stop

    def measured(self, t: Trial, result: SamplerResult) -> None:
        saved = self._saved()
        restored = json.loads(self.records["restore"].read_text())
        row = t.row
        row.ckpt_format = saved["format"] + (f" {saved['torch']}" if saved.get("torch") else "")
        row.ckpt_bytes = int(sum(float(s[4]) for s in saved["shards"]))
        row.fsync_calls = int(saved["fsync_calls"])
        row.write_s = span(saved)
        row.write_mb_per_s = rate_mb_per_s(row.ckpt_bytes, row.write_s)
        row.fsync_share = fsync_share(saved)
        if self.copied is not None:
            copied = json.loads(self.records["copy"].read_text())
            row.copy_s = span(copied)
            # from the moment the trainer goes on (the save done) to the copy durable
            row.exposed_s = max(0.0, float(copied["end"]) - float(saved["end"]))
        else:
            row.exposed_s = 0.0
        row.ckpt_read_s = span(restored)
        read_bytes = sum(float(f[2]) for f in restored["files"])
        row.ckpt_read_mb_per_s = rate_mb_per_s(read_bytes, row.ckpt_read_s)
        row.time_to_ready_s = row.write_s + row.ckpt_read_s  # the GPU waits: a save, a restore

    def after(self, t: Trial, stop: Stop | None) -> None:
        return None


__all__ = ["NAME", "Checkpoint", "check_here", "fsync_share", "saver_settings", "span"]
