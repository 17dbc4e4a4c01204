"""The dataset workload (iobench/trial/kinds/dataset.py, iobench/trial/kinds/dataset_loader.py, its settings iobench/scenario/kinds/dataset.py): its settings, the
data it generates, AU checked by hand from the loader's recorded times, and real runs on a
tmpfs, the disk and the lab volume — with a source folder that is only read, a staged copy,
cold reads proved by the volume's own counters, and the report's section read back."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from helpers.files import only_run_dir, read_csv
from helpers.lab import needs_fuse, volume_factory
from helpers.standin import scratch_left

from iobench.__main__ import main
from iobench.cost.measure import Pricing
from iobench.errors import ScenarioError
from iobench.lab.state import read_stats
from iobench.lab.testing import slow_volume
from iobench.report import build_report
from iobench.report.sections.dataset import build_section
from iobench.scenario.kinds.dataset import Settings as DataSettings
from iobench.scenario.load import load_scenario, scenario_from_dict
from iobench.trial.kinds import dataset

volume = pytest.fixture(volume_factory)

#: a small data set: 24 files of 0.2 MB in batches of 4, 5 ms of "compute" per batch
SMALL = """
[workload]
files = 24
file_mb = 0.2
batch = 4
workers = 2
compute_ms = 5
"""


def scenario_file(
    tmp_path: Path, workload: str = SMALL, configs: str = "", repeats: int = 1
) -> Path:
    configs = (
        configs
        or '[configs.from-volume]\ndata = "target"\n\n[configs.copy-to-tmp]\ndata = "target"\nstage = "tmp"\n'
    )
    path = tmp_path / "ds.toml"
    path.write_text(
        f'[scenario]\nname = "ds"\nkind = "dataset"\nrepeats = {repeats}\nsize_mb = 10\n{workload}\n{configs}'
    )
    return path


def run(tmp_path: Path, target: Path, tmp: Path, *options: str, **kw: object) -> tuple[int, Path]:
    path = scenario_file(tmp_path, **kw)  # type: ignore[arg-type]
    results = tmp_path / "results"
    rc = main(["run", "--scenario", str(path), "--target", str(target), "--tmp", str(tmp),
               "--results", str(results), "--no-report", "--quiet", *options])  # fmt: skip
    return rc, only_run_dir(results)


# ------------------------------------------------------------------------------ pure parts


def test_au_is_compute_over_the_epochs_wall_without_each_first_batch() -> None:
    # epoch 1 from 0 to 1.0 s: batches arrive at 0.3 (waited 0.3), 0.5, 0.8; compute 0.1 each
    epochs = [(0.0, 1.0), (1.0, 1.9)]
    batches = [[0.3, 0.3, 0.1, 10, 1], [0.5, 0.1, 0.1, 10, 1], [0.8, 0.2, 0.1, 10, 1],
               [1.4, 0.4, 0.2, 10, 1], [1.7, 0.1, 0.2, 10, 1]]  # fmt: skip
    # by hand: compute 0.3 + 0.4 = 0.7; walls (1.0 - 0.3) + (1.9 - 1.4) = 1.2
    assert dataset.au_of(epochs, batches) == pytest.approx(0.7 / 1.2)
    fig = dataset.figures({"epochs": epochs, "batches": batches, "list_s": 0.05})
    assert fig.epochs_s == pytest.approx(0.05 + 1.0 + 0.9)
    assert fig.io_wait_s == pytest.approx(1.1) and fig.compute_s == pytest.approx(0.7)
    assert (fig.batches, fig.files_read, fig.data_bytes) == (5, 5, 50)
    assert dataset.au_of([(0.0, 1.0)], []) is None


def test_settings_are_checked_before_anything_runs(tmp_path: Path) -> None:
    def load(workload: str, configs: str = '[configs.a]\ndata = "target"\n') -> object:
        doc = f'[scenario]\nname = "x"\nkind = "dataset"\n{workload}\n{configs}'
        path = tmp_path / "x.toml"
        path.write_text(doc)
        scenario = load_scenario(str(path))
        dataset.check_here(scenario.workload, [c.name for c in scenario.configs], "x: workload")
        return scenario

    assert load("[workload]\nfiles = 3\n").configs[0].roles() == {"target"}  # type: ignore[attr-defined]
    for bad, says in [
        ("[workload]\nfiles = 0\n", "workload.files: expected a number from 1"),
        ("[workload]\nformat = 'parquet'\n", "workload.format: expected one of jsonl, binary"),
        ("[workload]\nbatches = 3\n", "workload.batches: not a setting"),
        ("[workload]\nsource = 'data'\n", "workload.source: expected an absolute path"),
        (f"[workload]\nsource = '{tmp_path}/none'\n", "is not a folder"),
        ("[workload.by_config.b]\nworkers = 4\n", "workload.by_config.b: no such config"),
    ]:
        with pytest.raises(ScenarioError, match=says):
            load(bad)
    for configs, says in [
        ('[configs.a]\nvenv = "target"\n', "unknown key"),
        ('[configs.a]\nstage = "tmp"\n', "configs.a.data: missing"),
        ('[configs.a]\ndata = "tmp"\nstage = "tmp"\n', "where the data already is"),
    ]:
        with pytest.raises(ScenarioError, match=says):
            load("", configs)


def test_an_install_scenario_takes_no_data_role() -> None:
    doc = {"scenario": {"name": "x", "packages": ["a"], "ready": "pass"},
           "configs": {"c": {"venv": "tmp", "tmpdir": "tmp", "cache": "off", "data": "target"}}}  # fmt: skip
    with pytest.raises(ScenarioError, match="unknown key"):
        scenario_from_dict(doc, "x.toml")


def test_generated_shards_have_the_sizes_and_format_asked_for(tmp_path: Path) -> None:
    p = DataSettings(files=30, file_mb=0.05, size_sd=0.6, seed=7)
    sizes = dataset.file_sizes(p)
    assert len(sizes) == 30 and len(set(sizes)) > 20  # spread, not one size
    assert dataset.generate(tmp_path, p) == sum(sizes)
    shards = sorted(tmp_path.glob("shard-*.jsonl"))
    assert [s.stat().st_size for s in shards] == sizes and (tmp_path / ".complete").exists()
    first = shards[0].read_text().splitlines()[1]  # a line in the middle of the block is whole
    assert set(json.loads(first)) == {"id", "text", "label"}
    many = dataset.file_sizes(DataSettings(files=4000, file_mb=1.0, size_sd=0.5))
    assert sum(many) / len(many) == pytest.approx(1e6, rel=0.05)  # the mean is file_mb
    binary = tmp_path / "bin"
    binary.mkdir()
    dataset.generate(binary, DataSettings(files=2, file_mb=0.01, format="binary"))
    assert len(list(binary.glob("shard-*.bin"))) == 2


def test_page_cache_note_says_when_later_epochs_may_be_warm() -> None:
    two = DataSettings(epochs=2)
    assert "epochs 2-2 may have been read from the page cache" in dataset.cached_note(
        two, "drop_caches", 10**6, 10**9
    )
    assert (
        dataset.cached_note(two, "lab-flush", 10**6, 10**9) == ""
    )  # the lab re-reads at every open
    assert dataset.cached_note(two, "drop_caches", 10**10, 10**9) == ""  # more data than memory
    assert dataset.cached_note(DataSettings(), "fadvise", 10**6, 10**9) == ""  # one epoch: cold
    assert "warm mode" in dataset.cached_note(DataSettings(), "none", 1, 1)


# ------------------------------------------------------------------------------ real runs


def check_rows(run_dir: Path, files: int, size: int, epochs: int = 1) -> list[dict[str, str]]:
    """Every ok row's figures agree with the loader's own record and with each other."""
    rows = read_csv(run_dir / "trials.csv")
    assert rows and all(r["status"] == "ok" for r in rows), rows
    for r in rows:
        record = json.loads((run_dir / "logs" / f"{r['trial_id']}.loader.json").read_text())
        by_hand = dataset.au_of(record["epochs"], record["batches"])
        assert float(r["au"]) == pytest.approx(by_hand, abs=1e-4) and 0 < by_hand <= 1
        assert int(r["data_bytes"]) == files * size * epochs
        assert int(r["files_read"]) == files * epochs and int(r["epochs"]) == epochs
        read_s = float(r["epochs_s"])
        assert float(r["read_mb_per_s"]) == pytest.approx(
            files * size * epochs / 1e6 / read_s, rel=0.01
        )  # read_s is rounded in the CSV
        stage = float(r["stage_s"]) if r["stage_s"] else 0.0
        assert float(r["time_to_ready_s"]) == pytest.approx(stage + read_s, abs=1e-3)
        assert (
            r["venv_s"] == "" and r["data_role"] == "target" and r["loader"] in ("plain", "torch")
        )
        assert r["cold_method"] in ("lab-flush", "drop_caches", "fadvise")
        # the sampler saw the loader's tree read at least the data (an independent count)
        assert int(r["read_bytes"]) >= files * size * epochs
    return rows


def test_dataset_run_on_tmpfs_and_disk_with_a_staged_copy(
    tmp_path: Path, tmpfs, disk_dir: Path
) -> None:
    fast = tmpfs(size="64m")
    rc, run_dir = run(tmp_path, disk_dir, fast)
    assert rc == 0
    rows = check_rows(run_dir, 24, 200_000)
    staged = next(r for r in rows if r["config"] == "copy-to-tmp")
    assert (
        float(staged["stage_s"]) > 0
        and staged["stage_role"] == "tmp"
        and staged["stage_fstype"] == "tmpfs"
    )
    inplace = next(r for r in rows if r["config"] == "from-volume")
    assert inplace["stage_s"] == "" and inplace["stage_role"] == "off"
    # nothing left: the data, the staged copy and every trial folder went with the run
    assert scratch_left(disk_dir, fast) == {str(disk_dir): set(), str(fast): set()}
    report = build_report(run_dir)
    text = "\n".join(report.section_lines)
    assert (
        "the accelerator's busy share" in text and "from-volume" in text and "copy-to-tmp" in text
    )
    assert (run_dir / "au.png").stat().st_size > 10_000
    assert 'id="dataset"' in (run_dir / "report.html").read_text()
    assert report.recommendation is None  # no venv script for a data placement
    table = report.summary.table.set_index("config")  # the exports carry the figures too
    assert 0 < table.loc["copy-to-tmp", "median_au"] <= 1
    assert table.loc["copy-to-tmp", "median_stage_s"] > 0
    page = (run_dir / "report.html").read_text()
    assert "copy-to-tmp: " in page and "pay" in page and "config  " not in page  # the words


def test_a_source_folder_is_only_read_and_epochs_are_counted(
    tmp_path: Path, disk_dir: Path
) -> None:
    source = tmp_path / "mydata"
    (source / "sub").mkdir(parents=True)
    for i in range(6):
        (source / ("sub" if i % 2 else "") / f"part-{i}.bin").write_bytes(os.urandom(50_000))
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in source.rglob("*") if p.is_file()}
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    workload = (
        f"[workload]\nsource = '{source}'\nbatch = 2\nepochs = 2\ncompute_ms = 1\nworkers = 0\n"
    )
    rc, run_dir = run(tmp_path, disk_dir, tmp, workload=workload)
    assert rc == 0
    check_rows(run_dir, 6, 50_000, epochs=2)
    after = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in source.rglob("*") if p.is_file()}
    assert after == before  # read, never written, nothing added or removed
    rows = read_csv(run_dir / "trials.csv")
    assert all(int(r["workers"]) == 0 and int(r["batches"]) == 6 for r in rows)
    assert any("page cache" in r["data_cached"] for r in rows)  # two epochs of data that fits


def test_a_fifo_a_device_link_and_links_out_of_the_source_are_skipped_and_said(
    tmp_path: Path, disk_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 35, as it was done: a FIFO in the source hung the loader in open() (the trial
    waited to its limit), a link to /dev/zero was read forever, copy-first's ``cp -r``
    staged the link as a link, and a link to a file outside the source (a secret of root's)
    was read. Now only regular files inside the source are read, each opened with
    O_NOFOLLOW|O_NONBLOCK and judged by fstat, and the trial says what it skipped."""
    source = tmp_path / "mydata"
    source.mkdir()
    for i in range(4):
        (source / f"part-{i}.bin").write_bytes(os.urandom(20_000))
    os.mkfifo(source / "pipe.bin")
    (source / "zero.bin").symlink_to("/dev/zero")
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"root's own\n")
    secret.chmod(0o600)
    (source / "secret.bin").symlink_to(secret)
    (source / "again.bin").symlink_to("part-0.bin")  # inside: read as that file
    (source / "elsewhere").symlink_to(tmp_path, target_is_directory=True)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    workload = f"[workload]\nsource = '{source}'\nbatch = 2\ncompute_ms = 1\nworkers = 1\n"
    # bounded on the code before the fix too: a FIFO's open never returned
    rc, run_dir = run(tmp_path, disk_dir, tmp, "--stall-timeout", "10", "--trial-timeout", "60",
                      workload=workload)  # fmt: skip
    said = capsys.readouterr()
    err = " ".join((said.out + said.err).split())  # lines may be wrapped to COLUMNS
    assert rc == 0, err
    check_rows(run_dir, 5, 20_000)  # the four parts and the link to one of them
    for name, why in [("pipe.bin", "a FIFO"), ("zero.bin", "a link out of the folder"),
                      ("secret.bin", "a link out of the folder"),
                      ("elsewhere", "a link to a folder")]:  # fmt: skip
        assert f"{name} ({why})" in err, err
    assert err.count("skipped 4:") == 2  # in place, and the staged copy
    assert (source / "pipe.bin").exists()  # the source only read


def test_the_loader_reads_no_file_swapped_after_its_listing(tmp_path: Path) -> None:
    """A listed file that became a FIFO before its read: refused on its descriptor (the
    open does not block), one line naming it."""
    from iobench.trial.kinds import dataset_loader as loader

    data = tmp_path / "d"
    data.mkdir()
    (data / "a.bin").write_bytes(b"x" * 100)
    files, skipped = loader.listing(str(data))
    assert skipped == [] and files == [str(data / "a.bin")]
    (data / "a.bin").unlink()
    os.mkfifo(data / "a.bin")
    with pytest.raises(OSError, match="no longer a regular file") as info:
        loader.read_files(files)
    assert info.value.filename == str(data / "a.bin")


@needs_fuse
def test_dataset_reads_come_cold_from_the_lab_volume(tmp_path: Path, volume) -> None:
    mnt = volume("data", latency_ms=0.2, data_latency_ms=0.2)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    configs = '[configs.from-volume]\ndata = "target"\n'
    before = (read_stats(mnt) or {}).get("bytes_read", 0)  # none yet on a fresh volume
    rc, run_dir = run(tmp_path, mnt, tmp, configs=configs, repeats=2)
    assert rc == 0
    rows = check_rows(run_dir, 24, 200_000)
    assert all(
        r["cold_method"] == "lab-flush" and r["data_fstype"] == "fuse.iobench-lab" for r in rows
    )
    time.sleep(0.3)  # the daemon refreshes its live counters every 0.25 s
    served = read_stats(mnt)["bytes_read"] - before
    assert served >= 2 * 24 * 200_000  # both trials read every byte from the volume's daemon
    samples = read_csv(run_dir / "samples" / f"{rows[0]['trial_id']}.csv")
    assert {s["phase"] for s in samples} <= {
        "venv",
        "read",
    }  # the sampler's first tick, then the loader
    assert all(
        s["target_credits_mb"] in ("", "0.0", "0") for s in samples
    )  # no credits on this volume
    assert not math.isnan(float(rows[0]["au"]))


@needs_fuse
@pytest.mark.timing  # rates through the lab's credit link: a loaded machine blurs the edge
def test_the_read_rate_falls_where_the_lab_volumes_credits_run_out(tmp_path: Path) -> None:
    """A volume that bursts at 50 MB/s for its credits, then moves 10 MB/s: the report's
    change point lies where the volume's own balance reached zero, AU falls after it."""
    backing = tmp_path / "backing"
    (backing / "data").mkdir(parents=True)
    dataset.generate(backing / "data", DataSettings(files=100, file_mb=1.0, format="binary"))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    with slow_volume(tmp_path, "bursting", backing=backing, mb_per_s=10, burst_mb_per_s=50,
                     burst_credits_mb=60) as mnt:  # fmt: skip
        workload = f"[workload]\nsource = '{mnt}/data'\nbatch = 4\nworkers = 2\ncompute_ms = 5\n"
        rc, run_dir = run(
            tmp_path,
            mnt,
            tmp,
            workload=workload,
            configs='[configs.from-volume]\ndata = "target"\n',
        )
    assert rc == 0
    report = build_report(run_dir)
    row = read_csv(run_dir / "trials.csv")[0]
    samples = read_csv(run_dir / "samples" / f"{row['trial_id']}.csv")
    assert max(float(s["target_credits_mb"] or 0) for s in samples) > 10  # the balance was sampled
    section = build_section(pd.read_csv(run_dir / "trials.csv"), {"from-volume": row["trial_id"]}, run_dir,
                            lambda tid: pd.read_csv(run_dir / "samples" / f"{tid}.csv"), Pricing())  # fmt: skip
    drop = section.rows[0].drop
    assert drop is not None, report.section_lines
    assert drop.drop.before_mbps > 2 * drop.drop.after_mbps
    assert drop.credits_out_s is not None and abs(drop.drop.at_s - drop.credits_out_s) < 1.5
    assert (
        drop.au_before is not None and drop.au_after is not None and drop.au_after < drop.au_before
    )
    assert any("burst credits ran out" in line for line in report.section_lines)


def _torch_python() -> str | None:
    """An interpreter that imports torch: ``IOBENCH_TORCH_PYTHON``, else this one if it can."""
    given = os.environ.get("IOBENCH_TORCH_PYTHON")
    if given:
        return given
    return sys.executable if importlib.util.find_spec("torch") is not None else None


@pytest.mark.skipif(
    _torch_python() is None, reason="no Python with torch (set IOBENCH_TORCH_PYTHON)"
)
def test_a_real_torch_dataloader_reads_the_same_batches(tmp_path: Path, disk_dir: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    workload = SMALL + f"python = '{_torch_python()}'\nloader = 'torch'\n"
    rc, run_dir = run(
        tmp_path,
        disk_dir,
        tmp,
        workload=workload,
        configs='[configs.from-volume]\ndata = "target"\n',
    )
    assert rc == 0
    rows = check_rows(run_dir, 24, 200_000)
    assert rows[0]["loader"] == "torch" and int(rows[0]["batches"]) == 6
    record = json.loads((run_dir / "logs" / f"{rows[0]['trial_id']}.loader.json").read_text())
    assert record["torch"].startswith("2.")
