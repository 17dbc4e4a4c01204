"""End to end: `iobench run` on two real filesystems, every column checked against reality."""

from __future__ import annotations

import json
import os
import tempfile
from datetime import datetime
from pathlib import Path

import pytest
from helpers.files import DATA, only_run_dir, read_csv, wheel_bytes

from iobench.__main__ import main
from iobench.run.facts import fstype_of
from iobench.rundir import kinds
from iobench.rundir.folder import SAMPLE_COLUMNS, SCHEMA_VERSION
from iobench.stats import percentile

TINY = DATA / "tiny.toml"

pytestmark = pytest.mark.e2e


def _run(argv: list[str]) -> int:
    return main(["run", "--scenario", str(TINY), "--no-report", "--quiet", *argv])


def test_run_on_tmpfs_and_disk_checks_every_column(tmpfs, disk_dir: Path, tmp_path: Path) -> None:
    target = tmpfs(size="200m", name="target")
    assert fstype_of(target) == "tmpfs"
    if fstype_of(disk_dir) == "tmpfs":
        pytest.skip("the test's temp folder is itself a tmpfs; need a disk filesystem")
    disk_fs = fstype_of(disk_dir)
    results = tmp_path / "results"
    cwd_folders = set(Path(tempfile.gettempdir()).glob("iobench-cwd-*"))
    rc = _run(
        [
            "--target",
            str(target),
            "--tmp",
            str(disk_dir),
            "--results",
            str(results),
            "--sample-hz",
            "20",
        ]
    )
    assert rc == 0
    # phases ran in an empty folder inside the tmp role's scratch, not a /tmp/iobench-cwd-* left behind
    assert set(Path(tempfile.gettempdir()).glob("iobench-cwd-*")) <= cwd_folders
    run = only_run_dir(results)
    rows = read_csv(run / "trials.csv")
    assert list(rows[0].keys()) == list(kinds.kind("install").columns)
    assert sorted(r["trial_id"] for r in rows) == sorted(
        ["naive-r1", "venv-on-tmp-r1", "warm-r1", "nocache-r1"]
    )
    assert [int(r["position"]) for r in rows] == [0, 1, 2, 3]  # one round, in its shuffled order
    whl_bytes, whl_files = wheel_bytes()
    meta = json.loads((run / "meta.json").read_text())
    assert meta["schema_version"] == SCHEMA_VERSION and meta["status"] == "complete"
    assert meta["roles"]["target"]["fstype"] == "tmpfs"
    assert meta["roles"]["tmp"]["fstype"] == disk_fs
    assert meta["roles"]["target"]["free_bytes"] > 0 and meta["roles"]["target"]["mount_options"]
    assert meta["pip_config"]["isolated"] is True
    # the warm-up venv (made beside the probe) says what the trial venvs are made of
    assert meta["versions"]["venv"]["python"].startswith("3.") and meta["versions"]["venv"]["pip"]
    assert meta["versions"]["pip_host"].startswith("pip ")
    assert isinstance(meta["pip_config"]["config_list"], list)  # filled in after the warm-up
    assert meta["index"]["kind"] == "local"
    assert (
        isinstance(meta["order_seed"], int) and meta["same_storage"] == []
    )  # tmpfs vs disk: not one filesystem
    assert (
        meta["trial_timeout_s"] == 600 + 2 * 10
    )  # the default: 10 minutes + 2 s per MB (size_mb 10)
    for r in rows:
        tid = r["trial_id"]
        assert r["status"] == "ok", r["error"]
        assert r["run_id"] == meta["run_id"]
        assert r["error"] == ""
        fs = {"target": "tmpfs", "tmp": disk_fs}
        assert r["venv_fstype"] == fs[r["venv_role"]]
        assert r["tmpdir_fstype"] == fs[r["tmpdir_role"]]
        assert r["cache_fstype"] == (fs[r["cache_role"]] if r["cache_role"] != "off" else "")
        phases = [float(r[f"{p}_s"]) for p in ("venv", "download", "install", "compile", "import")]
        ttr = float(r["time_to_ready_s"])
        assert all(p >= 0 for p in phases)
        assert phases[0] > 0 and phases[2] > 0 and phases[4] > 0
        # phases add up to the total; the rest is process start-up gaps between phases, which
        # a busy machine stretches (0.31 s of 3.47 at load 12): their bound is a timing test
        # (tests/run/test_runner.py::test_the_phases_and_samples_end_with_the_trial)
        assert sum(phases) <= ttr + 1e-3
        if r["compile"] == "off":
            assert float(r["compile_s"]) == 0
        else:
            assert float(r["compile_s"]) > 0
        # every installed file is written: bytes at least the unpacked wheel content, calls > files
        assert int(r["files_installed"]) >= whl_files - 10
        assert int(r["write_bytes"]) > 1_000_000
        assert int(r["write_calls"]) > int(r["files_installed"])
        assert int(r["read_bytes"]) > 0 and int(r["read_calls"]) > 0
        assert 0 < float(r["cpu_s"]) < ttr * os.cpu_count()
        assert float(r["offcpu_frac"]) == pytest.approx(
            max(0.0, 1 - float(r["cpu_s"]) / ttr), abs=2e-3
        )
        assert int(r["rss_max_bytes"]) > 5_000_000
        assert int(r["stalls"]) == 0
        assert float(r["sampler_cpu_s"]) > 0
        # the venv was really on the filesystem its role names: that filesystem grew by
        # about the installed size, while it was on the tmpfs or the disk
        assert int(r["venv_bytes"]) > 1_000_000 or r["venv_role"] == "tmp"
        samples = read_csv(run / "samples" / f"{tid}.csv")
        assert list(samples[0].keys()) == list(SAMPLE_COLUMNS)
        assert len(samples) >= 5
        ts = [float(s["t"]) for s in samples]
        assert ts == sorted(ts) and ts[0] >= 0
        # the sampler ticks until the trial's end is handled, later on a busy machine (4.237 s
        # in a 4.007 s trial at load 6); its t counts from the trial's start, so a sample
        # after the ready moment sees no trial process but the ready check's unreaped root
        # (how soon the sampler stops is the same timing test)
        after = [s for s in samples if float(s["t"]) > ttr]
        assert all(int(s["tree_procs"]) <= 1 and s["phase"] == "import" for s in after), after
        order = [s["phase"] for s in samples]
        seen = list(dict.fromkeys(order))
        expected = [p for p in ("venv", "download", "install", "compile", "import") if p in seen]
        assert seen == expected and "venv" in seen
        iow = [float(s["iowait_pct"]) for s in samples]
        assert float(r["iowait_mean_pct"]) == pytest.approx(sum(iow) / len(iow), abs=1e-3)
        assert float(r["iowait_p95_pct"]) == pytest.approx(percentile(iow, 95), abs=1e-3)
        assert 0 <= max(iow) <= 100.0
        assert int(r["blocked_max"]) == max(int(s["procs_blocked"]) for s in samples)
        assert int(r["dstate_max"]) == max(int(s["tree_dstate"]) for s in samples)
        assert int(r["rss_max_bytes"]) == max(int(s["tree_rss_bytes"]) for s in samples)
        wc = [int(s["tree_write_calls"]) for s in samples]
        assert wc == sorted(wc) and wc[-1] <= int(r["write_calls"])
        assert max(int(s["tree_procs"]) for s in samples) >= 1
        if r["venv_role"] == "target":  # the tmpfs target filled while the venv was made
            # (as the usage poller, a process of its own, answered: its first answer comes
            # late on a busy machine, the samples before it empty)
            used = [(s["phase"], int(s["fs_used_venv"])) for s in samples if s["fs_used_venv"]]
            assert used, samples
            if used[0][0] in ("venv", "download"):  # it answered before the install wrote
                assert max(u for _, u in used) - used[0][1] > 1_000_000
        log = run / "logs" / f"{tid}.log"
        assert "Installing collected packages" in log.read_text()
    by = {r["config"]: r for r in rows}
    # downloads: the cold trials fetched every wheel from the index, the warm one nothing
    assert int(by["naive"]["index_bytes"]) == whl_bytes
    assert int(by["nocache"]["index_bytes"]) == whl_bytes
    assert int(by["warm"]["index_bytes"]) == 0
    # nothing left behind in either role: not even an empty scratch folder
    for role_dir in (target, disk_dir):
        assert [p.name for p in role_dir.iterdir()] == []


def test_relative_results_folder_keeps_logs_and_phase_split(tmp_path: Path, monkeypatch) -> None:
    """Phases run in the trial's folder; a relative --results must still receive the logs."""
    monkeypatch.chdir(tmp_path)
    assert (
        _run(
            [
                "--configs",
                "venv-on-tmp",
                "--target",
                ".",
                "--tmp",
                str(tmp_path),
                "--results",
                "res",
            ]
        )
        == 0
    )
    run = only_run_dir(tmp_path / "res")
    row = read_csv(run / "trials.csv")[0]
    assert float(row["install_s"]) > 0 and float(row["download_s"]) > 0
    assert "Installing collected packages" in (run / "logs" / "venv-on-tmp-r1.log").read_text()


def test_overhead_is_recorded_caches_primed_once_and_nothing_left(tmp_path: Path) -> None:
    """meta.json's overhead adds up (parts <= wall - trials), the warm cache is primed once
    for two repeats, and the deferred removals leave nothing behind and touch nothing else."""
    from iobench.report.formats import overhead_line as summary_line
    from iobench.rundir.meta import OVERHEAD_CAUSES as CAUSES

    target, tmp, results = tmp_path / "target", tmp_path / "tmp", tmp_path / "results"
    for role in (target, tmp):
        role.mkdir()
        (role / "users-file.txt").write_text("not iobench's")
    argv = ["--configs", "warm", "--repeats", "2", "--target", str(target)]
    assert _run([*argv, "--tmp", str(tmp), "--results", str(results)]) == 0
    run = only_run_dir(results)
    rows = read_csv(run / "trials.csv")
    assert len(rows) == 2 and all(r["status"] == "ok" for r in rows)
    meta = json.loads((run / "meta.json").read_text())
    o = meta["overhead"]
    assert o["trials_s"] == pytest.approx(sum(float(r["time_to_ready_s"]) for r in rows), abs=0.01)
    parts = o["parts_s"]
    assert set(parts) == set(CAUSES) and all(v >= 0 for v in parts.values())
    named = sum(v for c, v in parts.items() if c != "other")
    assert named <= o["wall_s"] - o["trials_s"] + 0.01
    assert sum(parts.values()) == pytest.approx(o["wall_s"] - o["trials_s"], abs=0.01)
    assert parts["priming"] > 0 and parts["setup"] > 0 and parts["cleanup"] > 0
    started, ended = (
        datetime.fromisoformat(meta[k].replace("Z", "+00:00")) for k in ("started_at", "ended_at")
    )
    assert abs((ended - started).total_seconds() - o["wall_s"]) < 1.5  # timestamps: whole seconds
    assert 0 <= o["before_start_s"] < o["wall_s"]
    # pip leaves its cache as primed (names and sizes): one priming install, reused once
    assert (o["primes"], o["primes_reused"]) == (1, 1)
    assert [int(r["index_bytes"]) for r in rows if r["config"] == "warm"] == [0, 0]  # both warm
    line = summary_line(o)
    assert line is not None and line.startswith("iobench overhead: ") and "priming" in line
    for role in (target, tmp):  # the trash was emptied, the users' files were not touched
        assert [p.name for p in role.iterdir()] == ["users-file.txt"]
        assert (role / "users-file.txt").read_text() == "not iobench's"


def test_a_cold_trial_fills_the_warm_cache_and_no_priming_install_runs(tmp_path: Path) -> None:
    """naive (cold cache on the target) runs first: its filled cache becomes the warm config's
    (same placement), so the warm trial downloads nothing and no priming install ran."""
    target, tmp, results = tmp_path / "target", tmp_path / "tmp", tmp_path / "results"
    target.mkdir()
    tmp.mkdir()
    argv = ["--configs", "naive,warm", "--repeats", "1", "--order-seed", "1", "--no-probe"]
    assert _run([*argv, "--target", str(target), "--tmp", str(tmp), "--results", str(results)]) == 0
    run = only_run_dir(results)
    rows = {r["config"]: r for r in read_csv(run / "trials.csv")}
    assert rows["naive"]["position"] == "0" and rows["warm"]["position"] == "1"
    assert all(r["status"] == "ok" for r in rows.values())
    assert int(rows["naive"]["index_bytes"]) > 0 and int(rows["warm"]["index_bytes"]) == 0
    o = json.loads((run / "meta.json").read_text())["overhead"]
    assert (o["primes"], o["primes_adopted"]) == (0, 1)
    assert not list(run.glob("logs/*.prime.log"))
