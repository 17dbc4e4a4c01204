"""diagnose.py: the bottleneck rules, change points and write gaps, with literal numbers."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from iobench.report import build_report
from iobench.report.diagnose import (
    ConfigFigures,
    SampleFigures,
    change_point,
    classify,
    drop_window_s,
    find_drop,
    find_write_gaps,
    install_drop,
    sample_figures,
)

FUSE_LIKE = dict(download_s=3.8, install_s=5.2, cpu_s=2.8, write_bytes=37.6e6, write_calls=4_292,
                 files_installed=2_423, dstate_max=1, iowait_p95_pct=0.0)  # fmt: skip


def test_diagnosis_of_the_synthetic_profiles(run_dir: Path) -> None:
    result = build_report(run_dir, charts=False)
    t = result.summary.table.set_index("config")
    assert t.loc["naive", "bottleneck"] == "latency/metadata bound"
    assert "write rate fell" in t.loc["naive", "why"] and "stall" in t.loc["naive", "why"]
    assert t.loc["venv-local", "bottleneck"] == "CPU bound"
    assert t.loc["uv-local", "bottleneck"] == "bandwidth bound"


def test_change_point_with_literal_numbers() -> None:
    k, before, after = change_point(np.array([10, 11, 9, 10, 2, 2, 3, 1], dtype=float))
    assert (k, before, after) == (4, 10.0, 2.0)
    assert change_point(np.array([1.0, 2.0])) is None


def test_find_write_gaps() -> None:
    starts = np.arange(20.0)
    rates = np.array([5.0] * 5 + [0.0] * 8 + [5.0] * 5 + [0.0] * 2)
    assert find_write_gaps(starts, rates) == [(5.0, 13.0)]


def test_sample_figures_find_a_drop_and_ignore_a_stall() -> None:
    t = np.arange(0, 100, 0.1)
    rate = np.where(t < 60, 20e6, 4e6)  # bytes/s: 20 MB/s, then 4 MB/s from 60 s
    rate[(t >= 20) & (t < 30)] = 0  # a 10 s stall earlier on
    df = pd.DataFrame({
        "t": t, "phase": "install", "tree_write_bytes": np.cumsum(rate * 0.1),
        "tree_dstate": (t > 50).astype(int), "net_recv_bps": 0,
    })  # fmt: skip
    f = sample_figures(df)
    assert f.drop_at_s == pytest.approx(60, abs=1.5)
    assert f.drop_before_mbps == pytest.approx(20, rel=0.05) and f.drop_after_mbps == pytest.approx(
        4, rel=0.1
    )
    assert f.dstate_share == pytest.approx(0.49, abs=0.01)
    assert math.isnan(f.net_recv_mbps)


@pytest.mark.parametrize(
    ("fig", "bottleneck", "quoted"),
    [
        (ConfigFigures(100, download_s=55, install_s=30, cpu_s=10, samples=SampleFigures(net_recv_mbps=12.3)),
         "network bound", ["download 55.0 s of 100 s (55%)", "12.3 MB/s"]),
        (ConfigFigures(50, download_s=5, install_s=40, cpu_s=45, offcpu_frac=0.1),
         "CPU bound", ["on CPU 90% of 50.0 s", "45.0 CPU-s"]),
        (ConfigFigures(20, download_s=2, install_s=15, cpu_s=50),
         "CPU bound", ["2.5 cores busy"]),
        (ConfigFigures(400, download_s=20, install_s=320, cpu_s=40, offcpu_frac=0.9, write_bytes=2.6e9,
                       write_calls=250_000, files_installed=15_000, dstate_max=3, iowait_p95_pct=40,
                       samples=SampleFigures(install_write_mbps=8.1, write_plateau=0.4, dstate_share=0.5)),
         "latency/metadata bound", ["250,000 write calls of 10.2 KiB", "15,000 files at 21.33 ms each",
                                    "only 8.1 MB/s", "off CPU 90%", "iowait p95 40%"]),
        (ConfigFigures(60, download_s=5, install_s=50, cpu_s=12, offcpu_frac=0.8, write_bytes=5e9,
                       write_calls=20_000, samples=SampleFigures(install_write_mbps=100, write_plateau=0.9)),
         "bandwidth bound", ["near 100.0 MB/s", "244 KiB calls", "off CPU 80%"]),
        (ConfigFigures(60, download_s=5, install_s=30, cpu_s=36, offcpu_frac=0.4,
                       phases=(("install", 30.0), ("import", 20.0))),
         "mixed", ["longest phase install 30.0 s"]),
        (ConfigFigures(math.nan), "no data", ["no successful trial"]),
    ],
)  # fmt: skip
def test_classify_rules_with_literal_numbers(
    fig: ConfigFigures, bottleneck: str, quoted: list[str]
) -> None:
    d = classify(fig)
    assert d.bottleneck == bottleneck, d
    for text in quoted:
        assert text in d.why, (text, d.why)


def test_classify_mentions_drops_and_stalls() -> None:
    fig = ConfigFigures(400, download_s=20, install_s=320, cpu_s=40, offcpu_frac=0.9, stalls=2,
                        stall_longest_s=31, drop_trials=3, sampled_trials=3,
                        samples=SampleFigures(drop_before_mbps=17.1, drop_after_mbps=3.3, drop_at_s=165))  # fmt: skip
    why = classify(fig).why
    assert "write rate fell from 17.1 to 3.3 MB/s at 165 s (3/3 trials)" in why
    assert "2 stall(s), longest 31.0 s" in why


@pytest.mark.parametrize(
    ("fig", "bottleneck", "quoted", "absent"),
    [
        # FUSE: off CPU only 40 % and no D state, but a thread waits on the volume in 82 %
        (ConfigFigures(18.4, offcpu_frac=0.40, fswait_frac=0.82, **FUSE_LIKE),
         "latency/metadata bound",
         ["installer waited on the filesystem in 82% of samples, off CPU 40%",
          "only 7.2 MB/s in 4,292 write calls of 8.6 KiB", "2,423 files at 2.15 ms each",
          "iowait p95 0%"], []),
        # just under the threshold, and off CPU under 50 %: not storage
        (ConfigFigures(18.4, offcpu_frac=0.40, fswait_frac=0.29, **FUSE_LIKE), "mixed", [], []),
        # an old run (no column): off CPU alone decides, nothing about filesystem waits
        (ConfigFigures(18.4, offcpu_frac=0.40, **FUSE_LIKE), "mixed", [], []),
        (ConfigFigures(18.4, offcpu_frac=0.85, **FUSE_LIKE),
         "latency/metadata bound", ["off CPU 85%"], ["filesystem"]),
        # off CPU high but the wait channel says the filesystem is rarely the wait: said so
        (ConfigFigures(18.4, offcpu_frac=0.85, fswait_frac=0.02, **FUSE_LIKE),
         "latency/metadata bound", ["in a filesystem wait in only 2% of samples, off CPU 85%"], []),
        # no trials.csv column but the samples have tree_fswait: they decide
        (ConfigFigures(18.4, offcpu_frac=0.40, samples=SampleFigures(fswait_share=0.6), **FUSE_LIKE),
         "latency/metadata bound", ["installer waited on the filesystem in 60% of samples"], []),
    ],
)  # fmt: skip
def test_filesystem_waits_decide_storage_wait_with_literal_numbers(
    fig: ConfigFigures, bottleneck: str, quoted: list[str], absent: list[str]
) -> None:
    d = classify(fig)
    assert d.bottleneck == bottleneck, d
    for text in quoted:
        assert text in d.why, (text, d.why)
    for text in absent:
        assert text not in d.why, (text, d.why)


def test_fswait_share_from_samples() -> None:
    df = pd.DataFrame({"t": np.arange(10) / 10, "phase": "install",
                       "tree_fswait": [0, 1, 2, 1, 0, 1, 1, 1, 0, 0]})  # fmt: skip
    assert sample_figures(df).fswait_share == pytest.approx(0.6)
    assert math.isnan(sample_figures(df.drop(columns="tree_fswait")).fswait_share)


def test_a_throttled_writer_moving_chunks_is_a_drop_not_a_steady_rate() -> None:
    # 2 MB/s for 10 s, then 2 MB chunks every 4 s (0.5 MB/s), 1-second windows
    rates = np.array([2.0] * 10 + [2.0, 0.0, 0.0, 0.0] * 7 + [2.0, 0.0])
    at, before, after = find_drop(np.arange(40.0), rates)
    assert (at, before, after) == (11.0, 2.0, pytest.approx(14 / 29))


def test_a_drop_in_a_short_install_is_found_with_finer_windows() -> None:
    t = np.round(np.arange(0, 5, 0.1), 1)  # a 5-s install at 10 Hz
    rate = np.where(t < 2.0, 5e6, 0.5e6)  # 5 MB/s, then 0.5 MB/s from 2 s
    df = pd.DataFrame({"t": t, "phase": "install", "tree_write_bytes": np.cumsum(rate * 0.1)})
    assert drop_window_s(t) == pytest.approx(0.2)
    drop = install_drop(df)
    assert drop is not None
    # ten 0.2-s windows before (the last one straddles the fall: 2.75 MB/s), fifteen after;
    # 1-second windows would give two before, too few for a change point
    assert drop.at_s == 2.0
    assert drop.before_mbps == pytest.approx((9 * 5.0 + 2.75) / 10)
    assert drop.after_mbps == pytest.approx(0.5)
    assert (drop.start_s, drop.end_s) == (0.0, 4.9)
    assert drop_window_s(np.arange(0, 300, 0.1)) == 1.0


def test_cpu_comes_before_network_and_loopback_downloads_say_so() -> None:
    # the lab's venv-on-tmp: a loopback index, pip busy 88 % of 1.6 s, download 58 %
    d = classify(ConfigFigures(1.63, download_s=0.95, install_s=0.24, cpu_s=1.43,
                               samples=SampleFigures(net_recv_mbps=0.0)))  # fmt: skip
    assert (d.bottleneck, d.why) == ("CPU bound", "installer on CPU 88% of 1.6 s (1.4 CPU-s)")
    # issue 21: no "network bound" without bytes on a network interface
    d = classify(
        ConfigFigures(
            10, download_s=6, cpu_s=3, samples=SampleFigures(net_recv_mbps=0.01, machine_busy=0.5)
        )
    )
    assert d.bottleneck == "download bound"
    assert d.why == (
        "download 6.0 s of 10.0 s (60%), no traffic on the network interfaces: a loopback "
        "index, paced by its cap"
    )
    d = classify(ConfigFigures(10, download_s=6, cpu_s=3, samples=SampleFigures(net_recv_mbps=8.0)))
    assert d.bottleneck == "network bound" and "receiving 8.0 MB/s" in d.why
    # the machine saturated, the installer's own share small: CPU, and the index is named
    d = classify(
        ConfigFigures(
            10, download_s=6, cpu_s=3, samples=SampleFigures(net_recv_mbps=0.0, machine_busy=0.97)
        )
    )
    assert d.bottleneck == "CPU bound" and "CPUs 97% busy" in d.why and "loopback index" in d.why


def test_a_busy_machine_on_tmpfs_is_cpu_not_latency_bound() -> None:
    """Issue 21: tmpfs configs of a strategy run were "latency/metadata bound" where the
    limit was CPU: off CPU because other processes had the cores, not waiting on storage."""
    d = classify(ConfigFigures(20, download_s=2, install_s=15, cpu_s=6, offcpu_frac=0.7,
                               samples=SampleFigures(machine_busy=0.95, fswait_share=0.0, dstate_share=0.0)))  # fmt: skip
    assert d.bottleneck == "CPU bound", d
    # waiting on a filesystem is storage, whatever else burns the CPU
    d = classify(ConfigFigures(20, download_s=2, install_s=15, cpu_s=6, offcpu_frac=0.7,
                               samples=SampleFigures(machine_busy=0.95, fswait_share=0.6)))  # fmt: skip
    assert d.bottleneck == "latency/metadata bound", d


def test_recorded_samples_of_a_saturated_run_say_cpu(tmp_path: Path) -> None:
    """tests/data/run-d8a1c15: a real run on a loaded 2-core machine with a loopback index
    (the download 50-60 % of each trial, no bytes on a network interface): before, every
    config was "network bound"; the samples show both cores busy throughout."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(Path(__file__).parents[1] / "data" / "run-d8a1c15", run)
    t = build_report(run, charts=False).summary.table.set_index("config")
    for config in ("naive", "venv-on-tmp", "warm", "nocache"):
        assert t.loc[config, "bottleneck"] == "CPU bound", t.loc[config, "why"]
        assert "CPUs 100% busy" in t.loc[config, "why"] and "loopback index" in t.loc[config, "why"]


def test_a_share_that_rounds_to_zero_reads_under_one_percent() -> None:
    d = classify(ConfigFigures(20, install_s=10, cpu_s=2, offcpu_frac=0.9,
                               samples=SampleFigures(dstate_share=0.004)))  # fmt: skip
    assert "off CPU 90%, D state in <1% of samples" in d.why
