"""Helpers of the report tests: the summary recomputed by hand, and the report CLI in-process."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from iobench.cli.report import register
from iobench.errors import IOBenchError

PHASES = ("venv", "download", "install", "compile", "import")


def recompute(
    trials: pd.DataFrame, usd_per_hour: float | None, starts: float, usd_per_gb: float | None
) -> dict:
    """The summary, by hand, straight from trials.csv: the independent check."""
    out = {}
    ok_all = trials[trials["status"] == "ok"]
    base = float(np.median(ok_all[ok_all["config"] == "naive"]["time_to_ready_s"]))
    for config, g in trials.groupby("config"):
        ok = g[g["status"] == "ok"]
        ttr = ok["time_to_ready_s"].astype(float).to_numpy()
        med = float(np.median(ttr))
        row = {
            "n_ok": len(ok),
            "n_failed": int((g["status"] != "ok").sum()),
            "median_time_to_ready_s": med,
            "p10_time_to_ready_s": float(np.percentile(ttr, 10)),
            "p90_time_to_ready_s": float(np.percentile(ttr, 90)),
            "iowait_mean_pct": float(np.median(ok["iowait_mean_pct"])),
            "iowait_p95_pct": float(np.median(ok["iowait_p95_pct"])),
            "offcpu_frac": float(np.median(ok["offcpu_frac"])),
            "fswait_frac": float(np.median(ok["fswait_frac"]))
            if "fswait_frac" in ok.columns
            else math.nan,
            "write_mb": float(np.median(ok["write_bytes"])) / 1e6,
            "speedup_vs_baseline": base / med,
            "saving_vs_baseline_s": base - med,
            "min_time_to_ready_s": float(ttr.min()),
            "max_time_to_ready_s": float(ttr.max()),
        }
        for p in PHASES:
            row[f"median_{p}_s"] = float(np.median(ok[f"{p}_s"]))
        if usd_per_hour is not None:
            row["gpu_idle_cost_usd"] = med / 3600 * usd_per_hour
            per_start = row["gpu_idle_cost_usd"]
            if usd_per_gb is not None:
                on_target = []
                for _, t in ok.iterrows():
                    vals = [
                        t[b]
                        for r, b in (
                            ("venv_role", "venv_bytes"),
                            ("cache_role", "cache_bytes"),
                            ("tmpdir_role", "tmpdir_peak_bytes"),
                        )
                        if t[r] == "target"
                    ]
                    on_target.append(max(vals) if vals else 0.0)
                row["storage_cost_usd"] = float(np.median(on_target)) / 1e9 * usd_per_gb
                per_start += row["storage_cost_usd"]
            row["cost_per_start_usd"] = per_start
            row["monthly_cost_usd"] = per_start * starts
        out[config] = row
    return out


def check_summary_against_trials(
    run: Path, usd_per_hour: float | None, starts: float, usd_per_gb: float | None = None
) -> pd.DataFrame:
    trials = pd.read_csv(run / "trials.csv")
    summary = pd.read_csv(run / "summary.csv")
    expected = recompute(trials, usd_per_hour, starts, usd_per_gb)
    assert sorted(summary["config"]) == sorted(expected)
    for _, row in summary.iterrows():
        for col, value in expected[row["config"]].items():
            if isinstance(value, float) and math.isnan(value):
                assert math.isnan(row[col]), (row["config"], col)
                continue
            assert row[col] == pytest.approx(value, rel=1e-5, abs=1e-9), (row["config"], col)
    return summary


def run_cli(argv: list[str]) -> tuple[int, str]:
    """Parse with register()'d subcommands and run the handler as `iobench` main would."""
    parser = argparse.ArgumentParser(prog="iobench")
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub)
    args = parser.parse_args(argv)
    try:
        return args.func(args), ""
    except IOBenchError as exc:
        return exc.exit_code, str(exc)
