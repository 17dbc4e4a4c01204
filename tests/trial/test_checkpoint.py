"""The checkpoint workload (iobench/trial/kinds/checkpoint.py, iobench/trial/kinds/checkpoint_saver.py, its settings iobench/scenario/kinds/checkpoint.py): its settings,
the pre-made bytes, the figures from the saver's records by hand, a corrupted byte caught by
the check, and real runs on a tmpfs, the disk and the lab volume — the fsyncs counted by the
volume's own daemon, a cold restore slower than a warm one, the rates against a bandwidth cap,
and the report's section read back."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.files import only_run_dir, read_csv
from helpers.lab import needs_fuse, volume_factory
from helpers.standin import scratch_left

from iobench.__main__ import main
from iobench.errors import ScenarioError
from iobench.lab.state import read_stats
from iobench.report import build_report
from iobench.scenario.kinds.checkpoint import Settings as SaveSettings
from iobench.scenario.load import load_scenario
from iobench.trial.kinds import checkpoint
from iobench.trial.kinds import checkpoint_saver as saver

volume = pytest.fixture(volume_factory)

#: a small checkpoint: 6 MB in tensors of at most 1 MB
SMALL = "[workload]\ncheckpoint_mb = 6\ntensor_mb = 1\n"
CONFIGS = """
[configs.volume]
save = "target"

[configs.local-then-copy]
save = "tmp"
copy_to = "target"
"""


def scenario_file(tmp_path: Path, workload: str = SMALL, configs: str = CONFIGS,
                  repeats: int = 1) -> Path:  # fmt: skip
    path = tmp_path / "ck.toml"
    path.write_text(f'[scenario]\nname = "ck"\nkind = "checkpoint"\nrepeats = {repeats}\n'
                    f"size_mb = 10\n{workload}\n{configs}")  # fmt: skip
    return path


def run(tmp_path: Path, target: Path, tmp: Path, *options: str, **kw: object) -> tuple[int, Path]:
    path = scenario_file(tmp_path, **kw)  # type: ignore[arg-type]
    results = tmp_path / "results"
    rc = main(["run", "--scenario", str(path), "--target", str(target), "--tmp", str(tmp),
               "--results", str(results), "--no-report", "--quiet", *options])  # fmt: skip
    return rc, only_run_dir(results)


# ------------------------------------------------------------------------------ pure parts


def test_settings_are_checked_before_anything_runs(tmp_path: Path) -> None:
    def load(workload: str, configs: str = '[configs.a]\nsave = "target"\n') -> object:
        path = tmp_path / "x.toml"
        path.write_text(f'[scenario]\nname = "x"\nkind = "checkpoint"\n{workload}\n{configs}')
        scenario = load_scenario(str(path))
        names = [c.name for c in scenario.configs]
        checkpoint.check_here(scenario.workload, names, "x: workload")
        return scenario

    cfg = load("[workload]\nshards = 2\n").configs[0]  # type: ignore[attr-defined]
    assert cfg.roles() == {"target"} and cfg.copy_to == "off"
    copy = load("", '[configs.a]\nsave = "tmp"\ncopy_to = "target"\n').configs[0]  # type: ignore[attr-defined]
    assert copy.roles() == {"tmp", "target"}
    for bad, says in [
        ("[workload]\nshards = 0\n", "workload.shards: expected a number from 1"),
        ("[workload]\ntensor_mb = 100\n", "workload.tensor_mb: expected a number from"),
        ("[workload]\nformat = 'safetensors'\n", "workload.format: expected one of auto"),
        ("[workload]\nsize = 3\n", "workload.size: not a setting"),
        ("[workload]\npython = 'python3'\n", "workload.python: expected an absolute path"),
        ("[workload.by_config.b]\nshards = 4\n", "workload.by_config.b: no such config"),
    ]:
        with pytest.raises(ScenarioError, match=says):
            load(bad)
    for configs, says in [
        ('[configs.a]\ndata = "target"\n', "unknown key"),
        ('[configs.a]\ncopy_to = "tmp"\n', "configs.a.save: missing"),
        ('[configs.a]\nsave = "tmp"\ncopy_to = "tmp"\n', "where the checkpoint is saved"),
    ]:
        with pytest.raises(ScenarioError, match=says):
            load("", configs)


def test_shards_split_the_checkpoint_and_tensors_are_views_of_one_block() -> None:
    p = SaveSettings(checkpoint_mb=10.000003, shards=4)
    assert p.shard_bytes() == [2_500_001, 2_500_001, 2_500_001, 2_500_000]
    buf = saver.block(7, 1 << 20)
    assert len(buf) == 2 << 20 and buf[: 1 << 20] == buf[1 << 20 :]  # the block, twice
    plans = [saver.layout(s, 5 << 20, 1 << 20, 1 << 20) for s in range(3)]
    assert [n for _, n in plans[0]] == [1 << 20] * 5
    offsets = [off for plan in plans for off, _ in plan]
    assert len(set(offsets)) == len(offsets)  # no two tensors start alike
    assert all((a - b) % 4096 for a in offsets for b in offsets if a != b)  # nor 4 KiB apart
    views = saver.views(buf, plans[0])
    assert all(v.obj is buf for v in views)  # reused bytes, nothing generated per tensor
    names = saver.names({"shard_bytes": [1, 1, 1]}, torch=False)
    assert names == ["shard-00001-of-00003.bin", "shard-00002-of-00003.bin",
                     "shard-00003-of-00003.bin"]  # fmt: skip


def test_figures_from_a_save_record_by_hand() -> None:
    # two shards: written 0.1-0.5 s and 0.2-0.6 s, each fsync 0.1 s, the folders' 0.05 s
    save = {"go": 0.1, "end": 0.75, "dirsync": [0.7, 0.75],
            "shards": [[0.1, 0.4, 0.5, 0.5, 10], [0.2, 0.5, 0.6, 0.7, 10]]}  # fmt: skip
    assert checkpoint.span(save) == pytest.approx(0.65)
    # fsync: 0.1 + 0.1 + 0.05 = 0.25 of (0.4 + 0.5 + 0.05) = 0.95
    assert checkpoint.fsync_share(save) == pytest.approx(0.25 / 0.95)
    assert checkpoint.rate_mb_per_s(2e6, 0.5) == 4.0 and checkpoint.rate_mb_per_s(1, 0) is None


def _saver(mode: str, spec: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-I", str(checkpoint.SAVER), mode, str(spec), str(out)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def test_the_check_reads_every_byte_back_and_names_a_corrupted_file(tmp_path: Path) -> None:
    p = SaveSettings(checkpoint_mb=3, shards=3, tensor_mb=0.4, format="raw")
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps(checkpoint.saver_settings(p, tmp_path / "ckpt", None)))
    assert _saver("save", spec, tmp_path / "save.json").returncode == 0
    saved = json.loads((tmp_path / "save.json").read_text())
    assert saved["format"] == "raw" and saved["fsync_calls"] == 5  # 3 files, 2 folders
    assert sum(s[4] for s in saved["shards"]) == 3_000_000
    spec.write_text(json.dumps({**checkpoint.saver_settings(p, tmp_path / "ckpt", None),
                                "files": saved["files"], "saved_format": "raw"}))  # fmt: skip
    ok = _saver("check", spec, tmp_path / "check.json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads((tmp_path / "check.json").read_text())["how"] == "crc32 of 3 files"
    second = tmp_path / "ckpt" / saved["files"][1]
    data = bytearray(second.read_bytes())
    data[123_456] ^= 0x01  # one bit
    second.write_bytes(bytes(data))
    bad = _saver("check", spec, tmp_path / "check2.json")
    assert bad.returncode == 3 and saved["files"][1] in bad.stderr and "crc32" in bad.stderr


# ------------------------------------------------------------------------------ real runs


def check_rows(run_dir: Path, nbytes: int, shards: int = 1) -> list[dict[str, str]]:
    """Every ok row's figures agree with the saver's own records and with each other."""
    rows = read_csv(run_dir / "trials.csv")
    assert rows and all(r["status"] == "ok" for r in rows), rows
    for r in rows:
        saved = json.loads((run_dir / "logs" / f"{r['trial_id']}.save.json").read_text())
        assert int(r["ckpt_bytes"]) == nbytes == sum(s[4] for s in saved["shards"])
        assert int(r["shards"]) == shards and int(r["fsync_calls"]) == shards + 2
        write_s, read_s = float(r["write_s"]), float(r["ckpt_read_s"])
        assert write_s == pytest.approx(saved["end"] - saved["go"], abs=1e-3)
        # the CSV keeps seconds to 4 places: a 4 ms save's rate is known to within 1.3 %
        for rate, secs in (("write_mb_per_s", write_s), ("ckpt_read_mb_per_s", read_s)):
            lo, hi = nbytes / 1e6 / (secs + 5e-5), nbytes / 1e6 / max(secs - 5e-5, 1e-9)
            assert lo * 0.999 <= float(r[rate]) <= hi * 1.001, (rate, r[rate], secs)
        assert float(r["time_to_ready_s"]) == pytest.approx(write_s + read_s, abs=2e-3)
        assert 0 <= float(r["fsync_share"]) <= 1
        assert r["verified"] == f"crc32 of {shards} files" and r["ckpt_format"] == "raw"
        assert r["cold_method"] in ("lab-flush", "drop_caches", "fadvise")
        assert r["venv_s"] == "" and "data_role" not in r  # its row: the core and its own
        # the sampler saw the saver's processes write and read at least the checkpoint
        assert int(r["write_bytes"]) >= nbytes and int(r["read_bytes"]) >= 2 * nbytes
    return rows


def test_checkpoint_run_on_the_disk_and_a_tmpfs_with_a_background_copy(
    tmp_path: Path, tmpfs, disk_dir: Path
) -> None:
    fast = tmpfs(size="64m")
    rc, run_dir = run(tmp_path, disk_dir, fast, "--gpu-price", "2", "--every-minutes", "30")
    assert rc == 0
    rows = check_rows(run_dir, 6_000_000)
    local = next(r for r in rows if r["config"] == "local-then-copy")
    assert local["save_fstype"] == "tmpfs" and local["copy_role"] == "target"
    assert float(local["copy_s"]) > 0 and float(local["exposed_s"]) >= float(local["copy_s"])
    direct = next(r for r in rows if r["config"] == "volume")
    assert direct["copy_s"] == "" and float(direct["exposed_s"]) == 0
    assert direct["copy_role"] == "off" and direct["save_role"] == "target"
    assert scratch_left(disk_dir, fast) == {str(disk_dir): set(), str(fast): set()}
    report = build_report(run_dir, cost=None)
    text = "\n".join(report.section_lines)
    assert "How often to save" in text and "save every" in text and "without saves" in text
    assert "straight to target" in text and "to tmp and copy out to target" in text
    html = (run_dir / "report.html").read_text()
    assert 'id="checkpoint"' in html and "GPU time lost at the best interval" in html
    assert (run_dir / "saves.png").stat().st_size > 10_000
    assert report.recommendation is None  # no venv script for a checkpoint's placement
    # the verdict judges the GPU time lost at the best interval: its winner (when noise lets it
    # name one) loses least, and is the one name in the table, the page and the exports
    lost = {c.name: c.median for c in report.summary.configs if c.n}
    winner = report.summary.winner
    said = json.loads((run_dir / "summary.json").read_text())
    assert (
        said["winner"] == winner and said["measure"]["name"] == "GPU time lost at the best interval"
    )
    starred = re.findall(r"([\w.-]+) ★</td>", html)
    if winner is not None:
        assert lost[winner] == min(lost.values()) and starred == [winner]
    else:
        assert report.summary.verdict.kind in ("noise", "too-few") and starred == []


@pytest.mark.timing  # a rate: a loaded machine slows the writer
def test_the_writer_on_a_tmpfs_is_far_faster_than_any_volume(tmp_path: Path, tmpfs) -> None:
    """The harness is not the limit: 4 writers of pre-made bytes on a tmpfs (EFS Elastic's
    per-client ceiling is 1,500 MiB/s, RunPod's volumes 200-400 MB/s)."""
    fast, other = tmpfs(size="400m"), tmpfs(size="8m", name="other")
    workload = "[workload]\ncheckpoint_mb = 256\nshards = 4\n"
    rc, run_dir = run(tmp_path, fast, other, workload=workload,
                      configs='[configs.volume]\nsave = "target"\n', repeats=2)  # fmt: skip
    assert rc == 0
    rates = [float(r["write_mb_per_s"]) for r in check_rows(run_dir, 256_000_000, shards=4)]
    print(f"tmpfs write: {rates} MB/s")
    assert max(rates) > 750, rates  # idle, this 2-core VM: 2,800-3,400 MB/s (docs/checkpoint.md)


@needs_fuse
def test_every_fsync_reaches_the_lab_volume_and_every_byte_comes_back(
    tmp_path: Path, volume
) -> None:
    mnt = volume("ck")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    workload = SMALL + "\n[workload.by_config.volume]\nshards = 3\n"
    time.sleep(0.3)
    before = read_stats(mnt) or {"ops": {}}
    rc, run_dir = run(tmp_path, mnt, tmp, workload=workload)
    assert rc == 0
    rows = read_csv(run_dir / "trials.csv")
    assert all(r["status"] == "ok" for r in rows), rows
    time.sleep(0.6)  # the daemon refreshes its live counters every 0.25 s
    after = read_stats(mnt)
    assert after is not None

    def ops(stats: dict, op: str) -> int:
        return int(stats["ops"].get(op, {}).get("count", 0))

    # the volume config fsyncs its 3 shards, the copy its 1 file; folders: 2 each, both trials
    assert ops(after, "fsync") - ops(before, "fsync") >= 3 + 1
    assert ops(after, "fsyncdir") - ops(before, "fsyncdir") >= 2 + 2
    # written: both checkpoints; read: each restored and checked, from the daemon
    assert after["bytes_written"] - before.get("bytes_written", 0) >= 2 * 6_000_000
    assert after["bytes_read"] - before.get("bytes_read", 0) >= 2 * 2 * 6_000_000
    assert all(r["cold_method"] == "lab-flush" for r in rows)
    assert {r["copy_fstype"] for r in rows} == {"", "fuse.iobench-lab"}


@needs_fuse
@pytest.mark.timing  # latencies: a loaded machine blurs the difference
def test_a_cold_restore_on_the_lab_is_slower_than_a_warm_one(tmp_path: Path, volume) -> None:
    """With names cached for 30 s and 30 ms a round trip, the restore after a lab flush looks
    every name up again (the lab keeps no file data cached: both read every byte from it)."""
    mnt = volume("names", latency_ms=30, cache_s=30)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    workload = "[workload]\ncheckpoint_mb = 2\nshards = 8\n"
    configs = '[configs.volume]\nsave = "target"\n'
    times = {}
    for mode in ("cold", "warm"):
        (tmp_path / f"run-{mode}").mkdir()
        rc, run_dir = run(tmp_path / f"run-{mode}", mnt, tmp, "--cache-mode", mode, workload=workload,
                          configs=configs, repeats=2)  # fmt: skip
        assert rc == 0
        rows = read_csv(run_dir / "trials.csv")
        assert {r["cold_method"] for r in rows} == {"lab-flush" if mode == "cold" else "none"}
        times[mode] = min(float(r["ckpt_read_s"]) for r in rows)
    print(f"restore on the lab: {times}")
    # at least the 8 shards' names, 30 ms each, looked up again (in parallel: one round)
    assert times["cold"] > times["warm"] + 0.025, times


@needs_fuse
@pytest.mark.timing  # rates through the lab's byte link
def test_rates_on_a_capped_lab_volume_stay_at_the_cap(tmp_path: Path, volume) -> None:
    mnt = volume("cap", mb_per_s=50)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    workload = "[workload]\ncheckpoint_mb = 40\nshards = 4\n"
    rc, run_dir = run(tmp_path, mnt, tmp, workload=workload,
                      configs='[configs.volume]\nsave = "target"\n')  # fmt: skip
    assert rc == 0
    row = check_rows(run_dir, 40_000_000, shards=4)[0]
    write, read = float(row["write_mb_per_s"]), float(row["ckpt_read_mb_per_s"])
    print(f"capped at 50 MB/s: write {write:.1f} MB/s, cold read {read:.1f} MB/s")
    assert write == pytest.approx(50, rel=0.1)
    assert read <= 50 * 1.03  # never faster than the link (a little for the clocks)
