"""iobench.reading, and every reader of a run folder (issue 35's hostile re-test): a FIFO
planted at a sample file's name held `iobench report` for good; a link read another file
into it. Each is now a file that is skipped or refused, in one line."""

from __future__ import annotations

import errno
import json
import os
import shutil
import threading
from pathlib import Path

import pytest
from helpers.runs import make_run_dir

from iobench import reading
from iobench.report.load import load_run, read_sample_batches, read_sample_file
from iobench.rundir.folder import RunDir


def test_only_a_regular_file_is_read(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"data")
    assert reading.read_bytes(tmp_path / "f") == b"data"
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link").symlink_to(tmp_path / "f")
    for name, code in (("fifo", errno.EINVAL), ("link", errno.ELOOP), (".", errno.EISDIR)):
        with pytest.raises(OSError) as info:
            reading.read_bytes(tmp_path / name)
        assert info.value.errno == code, name
    with pytest.raises(OSError, match="larger than"):
        reading.read_bytes(tmp_path / "f", limit=3)


def test_a_small_file_costs_its_size_not_the_limit(tmp_path: Path) -> None:
    """Before: each read asked Python for the whole limit first (512 MiB of address space
    for every sample file: a report of 2,000 trials peaked at 546 MB traced, from 18 MB).
    A file that grows after its fstat is read on, up to the limit."""
    import tracemalloc

    (tmp_path / "f").write_bytes(b"x" * 4096)
    tracemalloc.start()
    try:
        assert reading.read_bytes(tmp_path / "f") == b"x" * 4096
        assert tracemalloc.get_traced_memory()[1] < 1 << 20
    finally:
        tracemalloc.stop()
    grows = tmp_path / "grows"
    grows.write_bytes(b"ab")
    real_fstat = os.fstat

    def fstat_then_grow(fd: int) -> os.stat_result:
        st = real_fstat(fd)
        with open(grows, "ab") as f:
            f.write(b"cd")
        return st

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(reading.os, "fstat", fstat_then_grow)
        assert reading.read_bytes(grows) == b"abcd"
        with pytest.raises(OSError, match="larger than"):
            reading.read_bytes(grows, limit=5)  # 4 bytes at fstat, 6 when read


def _with_a_deadline(fn, seconds: float = 20.0):  # noqa: ANN001, ANN202
    """``fn()``, or a failure naming the wait (a FIFO's open never returns on its own)."""
    box: list[object] = []
    thread = threading.Thread(target=lambda: box.append(fn()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still waiting after {seconds:g} s (a FIFO's open?)"
    return box[0]


def test_a_received_run_folder_s_fifos_and_links_hold_no_reader(tmp_path: Path) -> None:
    """As it was done: `iobench report RUN --out DIR` of a run folder whose samples/<trial>.csv
    was a FIFO waited for good (killed at 60 s); so would probe.json, stalls.csv, trials.csv
    and a dataset's loader record. Now they are unreadable files, said and skipped."""
    run = make_run_dir(tmp_path / "received")
    trial = sorted((run / "samples").glob("*.csv"))[0]
    trial.unlink()
    os.mkfifo(trial)
    for name in ("stalls.csv", "probe.json"):
        (run / name).unlink(missing_ok=True)
        os.mkfifo(run / name)
    secret = tmp_path / "secret"
    secret.write_text("root's own line\n")
    loaded = _with_a_deadline(lambda: load_run(run))
    assert loaded is not None
    df, why = _with_a_deadline(lambda: read_sample_file(trial, trial.stem))
    assert df is None and "not a regular file" in why
    ids = [p.stem for p in sorted((run / "samples").iterdir())]  # the report's own reader
    got = _with_a_deadline(lambda: list(read_sample_batches(run, ids)))
    assert [(t, why) for t, s, why in got if s is None] == [(trial.stem, why)]
    assert _with_a_deadline(lambda: RunDir(run).probe()) is None
    shutil.copy(run / "trials.csv", tmp_path / "rows")
    (run / "trials.csv").unlink()
    os.mkfifo(run / "trials.csv")
    assert _with_a_deadline(lambda: RunDir(run).read_trials()).rows == ()
    (run / "trials.csv").unlink()
    (run / "trials.csv").symlink_to(tmp_path / "rows")  # a link: not followed
    with pytest.raises(Exception, match="cannot be read"):
        RunDir(run).read_trials()
    (run / "meta.json").rename(tmp_path / "meta")
    (run / "meta.json").symlink_to(secret)
    with pytest.raises(Exception, match="cannot be read") as info:
        RunDir(run).meta()
    assert "root's own" not in str(info.value)
    json.loads((tmp_path / "meta").read_text())  # the real one was fine


def test_list_is_not_held_by_a_fifo_summary_either(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from iobench.__main__ import main

    run = make_run_dir(tmp_path / "results")
    os.mkfifo(run / "summary.json")
    assert _with_a_deadline(lambda: main(["list", str(tmp_path / "results")])) == 0
    assert run.name in capsys.readouterr().out
