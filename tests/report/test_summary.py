"""summary.py: every summary figure recomputed from trials.csv, prices, failures, resumed trials."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import runs as rf
from helpers.reports import PHASES, check_summary_against_trials

from iobench.cost.idle import CostOptions
from iobench.cost.prices import find_preset
from iobench.report import build_report
from iobench.report.figures import median, percentile, speedup, target_bytes
from iobench.report.load import load_run
from iobench.rundir.meta import GpuInfo


def test_summary_figures_match_trials_csv(run_dir: Path) -> None:
    result = build_report(run_dir, charts=False)
    price = 2 * find_preset("H100 SXM").usd_per_hour  # detected 2x H100 80GB HBM3
    summary = check_summary_against_trials(run_dir, price, 30.0)
    expected_cols = {
        "config", "n_ok", "n_failed", "median_time_to_ready_s", "p10_time_to_ready_s",
        "p90_time_to_ready_s", "iowait_mean_pct", "iowait_p95_pct", "offcpu_frac", "stalls",
        "speedup_vs_baseline", "vs_baseline", "beyond_noise_vs_baseline", "gpu_idle_cost_usd", "monthly_cost_usd", "bottleneck", "why",
        *[f"median_{p}_s" for p in PHASES],
    }  # fmt: skip
    assert expected_cols <= set(summary.columns)
    fastest = summary.loc[summary["median_time_to_ready_s"].idxmin(), "config"]
    assert result.winner == fastest == "uv-local"
    assert any(
        "detected 2x NVIDIA H100 80GB HBM3" in n and "H100 SXM" in n for n in result.summary.notes
    )
    rec = result.recommendation
    assert rec is not None
    naive = summary.set_index("config").loc["naive"]
    win = summary.set_index("config").loc["uv-local"]
    assert rec.saving_s == pytest.approx(
        naive["median_time_to_ready_s"] - win["median_time_to_ready_s"], rel=1e-5
    )
    assert rec.saving_usd_per_start == pytest.approx(
        naive["cost_per_start_usd"] - win["cost_per_start_usd"], rel=1e-4
    )
    assert rec.saving_usd_per_month == pytest.approx(30 * rec.saving_usd_per_start)


def test_explicit_price_gpus_starts_and_storage(run_dir: Path) -> None:
    opts = CostOptions(gpu_price=1.5, gpus=4, starts_per_month=200, storage_usd_per_gb=0.05)
    build_report(run_dir, opts, charts=False)
    check_summary_against_trials(run_dir, 6.0, 200.0, 0.05)


def test_instance_preset_and_failures_counted(tmp_path: Path) -> None:
    specs = (
        rf.DEFAULT_CONFIGS[0],
        rf.ConfigSpec("venv-local", venv="local", profile="cpu", fail=1,
                      phases={"venv": 1, "download": 9, "install": 38, "compile": 12, "import": 4}),
    )  # fmt: skip
    run = rf.make_run_dir(tmp_path, configs=specs, repeats=4)
    result = build_report(run, CostOptions(gpu="p4d.24xlarge"), charts=False)
    summary = check_summary_against_trials(run, find_preset("p4d.24xlarge").usd_per_hour, 30.0)
    row = summary.set_index("config").loc["venv-local"]
    assert (row["n_ok"], row["n_failed"]) == (3, 1)
    assert result.summary.price is not None and result.summary.price.gpus == 8


def test_without_a_price_costs_are_empty_and_the_report_says_what_to_do(tmp_path: Path) -> None:
    run = rf.make_run_dir(tmp_path, gpu=None)
    result = build_report(run)  # with its charts: no cost chart without a price
    summary = check_summary_against_trials(run, None, 30.0)
    assert summary["gpu_idle_cost_usd"].isna().all() and summary["monthly_cost_usd"].isna().all()
    assert "cost_png" not in result.paths
    assert any("--gpu NAME" in line for line in result.lines)
    assert "--gpu NAME" in (run / "report.html").read_text()


def test_statistics_with_literal_numbers() -> None:
    assert median([3, 1, 2]) == 2
    assert median([1, 2, 3, 4]) == 2.5
    assert math.isnan(median([]))
    assert median([1, float("nan"), 3]) == 2
    assert percentile([1, 2, 3, 4, 5], 10) == pytest.approx(1.4)
    assert percentile([1, 2, 3, 4, 5], 90) == pytest.approx(4.6)
    assert percentile([10.0], 90) == 10.0
    assert speedup(400, 100) == 4.0
    assert math.isnan(speedup(400, 0)) and math.isnan(speedup(math.nan, 3))


def test_target_bytes_does_not_double_count_a_shared_filesystem() -> None:
    row = {"venv_role": "target", "cache_role": "target", "tmpdir_role": "tmp",
           "venv_bytes": 3e9, "cache_bytes": 2e9, "tmpdir_peak_bytes": 9e9}  # fmt: skip
    assert target_bytes(row) == 3e9
    assert target_bytes({**row, "venv_role": "local", "cache_role": "off"}) == 0.0
    assert math.isnan(target_bytes({**row, "venv_bytes": "", "cache_bytes": None}))


def test_baseline_falls_back_to_the_first_config(tmp_path: Path) -> None:
    specs = tuple(rf.ConfigSpec(c.name, venv=c.venv, tmpdir=c.tmpdir, cache=c.cache, profile=c.profile,
                                phases=c.phases) for c in rf.DEFAULT_CONFIGS[1:])  # fmt: skip
    result = build_report(rf.make_run_dir(tmp_path, configs=specs), charts=False)
    assert result.summary.baseline == "tmp-cache-advice"
    assert any("no config named 'naive'" in n for n in result.summary.notes)
    t = result.summary.table.set_index("config")
    assert t.loc["tmp-cache-advice", "speedup_vs_baseline"] == 1.0
    assert t.loc["tmp-cache-advice", "vs_baseline"] == "baseline"


def test_gpu_info_from_meta_is_used_for_the_price(run_dir: Path) -> None:
    run = load_run(run_dir)
    assert run.gpu == GpuInfo("NVIDIA H100 80GB HBM3", 2, "570.86.15", source="nvidia-smi")


def test_a_config_whose_every_trial_failed_is_listed_not_averaged(tmp_path: Path) -> None:
    specs = (
        rf.DEFAULT_CONFIGS[0],
        rf.ConfigSpec("broken", venv="local", profile="cpu", fail=3),
        rf.DEFAULT_CONFIGS[2],
    )
    run = rf.make_run_dir(tmp_path, configs=specs)
    result = build_report(run, CostOptions(gpu="H100"))  # with its charts: no timeline of it
    row = result.summary.table.set_index("config").loc["broken"]
    assert (row["n_ok"], row["n_failed"]) == (0, 3)
    assert math.isnan(row["median_time_to_ready_s"]) and math.isnan(row["gpu_idle_cost_usd"])
    assert row["why"].startswith(
        "all 3 trial(s) did not finish ok; first error: ERROR: Could not install"
    )
    assert result.winner == "venv-local"
    assert "timeline-broken.png" not in {p.name for p in result.paths.values()}
    html = (run / "report.html").read_text()
    assert '<tr class="failed"><td class="name">broken</td>' in html
    data = json.loads((run / "summary.json").read_text())
    broken = next(c for c in data["configs"] if c["config"] == "broken")
    assert broken["median_time_to_ready_s"] is None


def test_fswait_frac_in_summary_csv_json_and_html(run_dir: Path) -> None:
    build_report(run_dir, CostOptions(gpu="H100"), charts=False)
    summary = check_summary_against_trials(run_dir, find_preset("H100 SXM").usd_per_hour, 30.0)
    t = summary.set_index("config")
    assert t.loc["naive", "fswait_frac"] > 0.5 > t.loc["venv-local", "fswait_frac"]
    assert "installer waited on the filesystem in" in t.loc["naive", "why"]
    data = json.loads((run_dir / "summary.json").read_text())
    naive = next(c for c in data["configs"] if c["config"] == "naive")
    assert naive["fswait_frac"] == pytest.approx(t.loc["naive", "fswait_frac"])
    html = (run_dir / "report.html").read_text()
    assert ">fs wait</span></th>" in html
    assert f'<td class="num">{100 * t.loc["naive", "fswait_frac"]:.0f}%</td>' in html


def test_old_run_without_fswait_columns_still_reports(tmp_path: Path) -> None:
    run = rf.make_run_dir(tmp_path, fswait=False)
    assert "fswait_frac" not in (run / "trials.csv").read_text().splitlines()[0]
    result = build_report(run, CostOptions(gpu="H100"), charts=False)
    assert not result.warnings
    summary = check_summary_against_trials(run, find_preset("H100 SXM").usd_per_hour, 30.0)
    assert summary["fswait_frac"].isna().all()
    t = summary.set_index("config")
    assert t.loc["naive", "bottleneck"] == "latency/metadata bound"
    assert "filesystem" not in t.loc["naive", "why"]
    data = json.loads((run / "summary.json").read_text())
    assert all(c["fswait_frac"] is None for c in data["configs"])


def test_resumed_trial_counts_once_as_ok(run_dir: Path) -> None:
    before = pd.read_csv(run_dir / "trials.csv")
    rf.resume_rows(run_dir, ("naive-r2", "venv-local-r1"))
    raw = pd.read_csv(run_dir / "trials.csv")
    assert len(raw) == len(before) + 2
    assert list(raw[raw["trial_id"] == "naive-r2"]["status"]) == ["interrupted", "ok"]
    result = build_report(run_dir, CostOptions(gpu="H100"), charts=False)
    t = result.summary.table.set_index("config")
    for config in ("naive", "venv-local"):
        assert (t.loc[config, "n_ok"], t.loc[config, "n_failed"]) == (3, 0), config
    assert result.summary.trials_per_config() == "3 trials per config"
    # every figure is what the run without the interrupted rows gives
    (run_dir / "trials.csv").write_text(before.to_csv(index=False))
    check_summary_against_trials(run_dir, find_preset("H100 SXM").usd_per_hour, 30.0)
    assert any("2 trial(s) interrupted and run again by --resume (naive-r2, venv-local-r1)" in n
               for n in result.summary.notes)  # fmt: skip
    assert not result.warnings
    assert "run again by --resume" in (run_dir / "report.html").read_text()


def test_an_interrupted_trial_never_resumed_still_counts_as_not_ok(tmp_path: Path) -> None:
    run = rf.make_run_dir(tmp_path)
    raw = pd.read_csv(run / "trials.csv")
    raw.loc[raw["trial_id"] == "naive-r3", ["status", "time_to_ready_s"]] = ["interrupted", np.nan]
    raw.to_csv(run / "trials.csv", index=False)
    row = build_report(run, charts=False).summary.table.set_index("config").loc["naive"]
    assert (row["n_ok"], row["n_failed"]) == (2, 1)
