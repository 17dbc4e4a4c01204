"""The ``dataset`` kind at the bottom: a trial reads a training set as a data loader does
(docs/dataset.md). Its columns: where the data lived and where it was copied first, the loader,
and what its epochs cost the emulated accelerator (AU, waits, read rate)."""

from __future__ import annotations

from dataclasses import dataclass

from iobench.rundir.kind import Choice, Kind, Place
from iobench.rundir.records import TrialRow, column, rate, seconds, text


@dataclass(kw_only=True, slots=True)
class Row(TrialRow):
    """A line of a dataset run's trials.csv: the core columns, then the dataset kind's."""

    data_role: str = text("the role holding the training data")
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
    epochs_s: float | None = column(
        "the epochs, from the loader's start (its listing included) to the last batch computed "
        "(`read_s` before schema 3)",
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
        "bytes read / epochs_s (10^6 bytes per second, as the lab's flags)", "MB/s"
    )
    data_cached: str = text(
        "why some reads may have come from the page cache (empty when every epoch read cold)"
    )

    def details(self) -> list[str]:
        """The copy, the epochs, the AU."""
        stage = f"stage {seconds(self.stage_s)} + " if self.stage_s is not None else ""
        au = f"AU {self.au:.2f}" if self.au is not None else "AU ?"
        return [
            f"({stage}read {seconds(self.epochs_s)})",
            f"{au}, {rate(self.read_mb_per_s)}, waited {seconds(self.io_wait_s)} s for data",
        ]


NAME = "dataset"
KIND = Kind(
    name=NAME,
    doc="a training loop's reads of its data, copied first or read where it lies",
    row=Row,
    places=(
        Place("data", "data_role", "data_fstype"),
        Place("data copied", "stage_role", "stage_fstype", off="data read in place"),
    ),
    choices=(Choice("loader workers", "workers"),),
    renamed={3: {"read_s": "epochs_s"}},
)
