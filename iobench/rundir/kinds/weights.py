"""The ``weights`` kind at the bottom: a trial loads a model's weights cold, as a server does at
every pod start (docs/weights.md): read where they lie on the volume (memory-mapped, read whole
first, or by many readers at once), or copied or restored locally first. Its columns: where
the weights lay and where they were copied, how they were loaded, how long until every tensor
was in memory, and what the volume served meanwhile."""

from __future__ import annotations

from dataclasses import dataclass

from iobench.rundir.kind import Choice, Kind, Place
from iobench.rundir.records import TrialRow, column, rate, seconds, text
from iobench.units import fmt_bytes


@dataclass(kw_only=True, slots=True)
class Row(TrialRow):
    """A line of a weights run's trials.csv: the core columns, then the weights kind's."""

    weights_role: str = text("the role holding the model's folder (a Hugging Face cache)")
    local_role: str = text(
        "the role the weights were copied or restored to before loading (`off`: loaded where "
        "they lie)"
    )
    weights_fstype: str = text("filesystem type of the weights' role (or the source folder's)")
    local_fstype: str = text("filesystem type of the local role (empty when `off`)")
    staged: str = text(
        "how the weights reached the local role: `copy` (the model's folder copied, `cp -a`) "
        "or `packed` (a tar archive kept beside them restored); empty when loaded in place"
    )
    load_method: str = text(
        "how the loader read the weights: `mmap` (safetensors' safe_open, tensor by tensor in "
        "the index's order), `sequential` (each file read whole into memory, then its tensors "
        "made from it) or `concurrent` (`readers` threads reading ranges of the files at once)"
    )
    readers: int | None = column("threads reading the files at once (1 but `concurrent`)", "count")
    framework: str = text("what the tensors were made as: `numpy`, or `torch` and its version")
    weight_files: int | None = column("safetensors files the model has (its shards)", "count")
    tensors: int | None = column("tensors loaded, every one of the model's", "count")
    weights_bytes: int | None = column("bytes of the model's safetensors files", "bytes")
    local_copy_s: float | None = column(
        "the copy of the model's folder, or the restore of its packed copy, to the local role "
        "before loading (part of time_to_ready_s)",
        "s",
    )
    load_s: float | None = column(
        "the load: from the loader's start (the index read) until every tensor was in memory",
        "s",
    )
    load_mb_per_s: float | None = column("weights_bytes / load_s (10^6 bytes per second)", "MB/s")
    volume_read_bytes: int | None = column(
        "bytes the weights' volume served during the timed part (its own counters: an iobench "
        "lab volume's; empty elsewhere)",
        "bytes",
    )
    volume_mb_per_s: float | None = column(
        "volume_read_bytes over the step that read the volume (the copy or restore when the "
        "config has one, else the load): the read rate the link gave",
        "MB/s",
    )
    major_faults: int | None = column(
        "the loader's major page faults (a memory-mapped page read from the file)", "count"
    )
    tensors_checked: str = text(
        "how every tensor's bytes were checked after the clock: crc32 against the generator's "
        "(a source's: against one reading of it made before the run's first trial)"
    )

    def details(self) -> list[str]:
        """The copy, the load, the volume's rate."""
        copy = f"{self.staged} {seconds(self.local_copy_s)} + " if self.staged else ""
        volume = (
            f"; volume read {fmt_bytes(self.volume_read_bytes)} at {rate(self.volume_mb_per_s)}"
            if self.volume_read_bytes is not None
            else ""
        )
        return [
            f"({copy}load {seconds(self.load_s)})",
            f"{self.load_method} x{self.readers or 1}, {fmt_bytes(self.weights_bytes)} at "
            f"{rate(self.load_mb_per_s)}{volume}, {self.major_faults or 0} major faults",
        ]


NAME = "weights"
KIND = Kind(
    name=NAME,
    doc="a model's weights loaded cold at a pod's start, in place or copied locally first",
    row=Row,
    places=(
        Place("weights", "weights_role", "weights_fstype"),
        Place("weights copied", "local_role", "local_fstype", off="weights loaded in place"),
    ),
    choices=(
        Choice("weights staged as", "staged"),
        Choice("weights loader", "load_method"),
        Choice("weights readers", "readers"),
    ),
)
