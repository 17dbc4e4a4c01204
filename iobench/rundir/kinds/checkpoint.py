"""The ``checkpoint`` kind at the bottom: a trial saves a checkpoint, copies it out when its
config says so, and reads it back cold (docs/checkpoint.md). Its columns: where it was saved and
copied, how long the GPU paused for the save, the window a crash still loses it, the restore."""

from __future__ import annotations

from dataclasses import dataclass

from iobench.rundir.kind import Choice, Kind, Place
from iobench.rundir.records import TrialRow, column, rate, seconds, text


@dataclass(kw_only=True, slots=True)
class Row(TrialRow):
    """A line of a checkpoint run's trials.csv: the core columns, then the checkpoint kind's."""

    save_role: str = text("the role the checkpoint was saved to")
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
    ckpt_read_s: float | None = column(
        "the cold restore: from the first reader's start to the last shard read (`read_s` "
        "before schema 3)",
        "s",
    )
    ckpt_read_mb_per_s: float | None = column(
        "ckpt_bytes / ckpt_read_s (10^6 bytes per second; `read_mb_per_s` before schema 3)", "MB/s"
    )
    verified: str = text("how the bytes read back were checked against those written")

    def details(self) -> list[str]:
        """The save, the copy, the restore."""
        copy = (
            f" (copy {seconds(self.copy_s)} in the background)" if self.copy_s is not None else ""
        )
        return [
            f"(save {seconds(self.write_s)} + restore {seconds(self.ckpt_read_s)}){copy}",
            f"write {rate(self.write_mb_per_s)}, fsync {self.fsync_share or 0:.0%} of it; "
            f"read {rate(self.ckpt_read_mb_per_s)} ({self.cold_method})",
        ]


NAME = "checkpoint"
KIND = Kind(
    name=NAME,
    doc="a trainer's saves of a checkpoint and its cold restore",
    row=Row,
    places=(
        Place("checkpoint", "save_role", "save_fstype"),
        Place("checkpoint copied", "copy_role", "copy_fstype", off="no background copy"),
    ),
    choices=(Choice("checkpoint shards", "shards"),),
    renamed={3: {"read_s": "ckpt_read_s", "read_mb_per_s": "ckpt_read_mb_per_s"}},
)
