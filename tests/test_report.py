"""Reports: every summary figure recomputed from trials.csv, the outputs, bad input, compare.

Run directories come from tests/report_fixtures.py (synthetic, seeded) and, once, from a
real `iobench run` of the tiny scenario.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import report_fixtures as rf

from iobench.cost import CostOptions, find_preset
from iobench.errors import IOBenchError, RunDirError, UsageError
from iobench.gpu import GpuInfo
from iobench.report import build_compare, build_report
from iobench.report.charts import _rate_top, _rate_width
from iobench.report.cli import register
from iobench.report.diagnose import (
    ConfigFigures,
    SampleFigures,
    change_point,
    classify,
    drop_window_s,
    find_drop,
    find_stalls,
    install_drop,
    sample_figures,
)
from iobench.report.load import drop_superseded, load_run
from iobench.report.recommend import env_for
from iobench.report.summary import median, percentile, speedup, target_bytes

H100_META = {
    "name": "NVIDIA H100 80GB HBM3",
    "count": 2,
    "driver": "570.86.15",
    "source": "nvidia-smi",
}
PHASES = ("venv", "download", "install", "compile", "import")


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return rf.make_run_dir(tmp_path / "results", gpu=H100_META)


# --- recomputing every figure ----------------------------------------------------------------


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
            "speedup_vs_naive": base / med,
            "saving_vs_naive_s": base - med,
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


def test_summary_figures_match_trials_csv(run_dir: Path) -> None:
    result = build_report(run_dir)
    price = 2 * find_preset("H100 SXM").usd_per_hour  # detected 2x H100 80GB HBM3
    summary = check_summary_against_trials(run_dir, price, 30.0)
    expected_cols = {
        "config", "n_ok", "n_failed", "median_time_to_ready_s", "p10_time_to_ready_s",
        "p90_time_to_ready_s", "iowait_mean_pct", "iowait_p95_pct", "offcpu_frac", "stalls",
        "speedup_vs_naive", "gpu_idle_cost_usd", "monthly_cost_usd", "bottleneck", "why",
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
    build_report(run_dir, opts)
    check_summary_against_trials(run_dir, 6.0, 200.0, 0.05)


def test_instance_preset_and_failures_counted(tmp_path: Path) -> None:
    specs = (
        rf.DEFAULT_CONFIGS[0],
        rf.ConfigSpec("venv-local", venv="local", profile="cpu", fail=1,
                      phases={"venv": 1, "download": 9, "install": 38, "compile": 12, "import": 4}),
    )  # fmt: skip
    run = rf.make_run_dir(tmp_path, configs=specs, repeats=4)
    result = build_report(run, CostOptions(gpu="p4d.24xlarge"))
    summary = check_summary_against_trials(run, find_preset("p4d.24xlarge").usd_per_hour, 30.0)
    row = summary.set_index("config").loc["venv-local"]
    assert (row["n_ok"], row["n_failed"]) == (3, 1)
    assert result.summary.price is not None and result.summary.price.gpus == 8


def test_without_a_price_costs_are_empty_and_the_report_says_what_to_do(tmp_path: Path) -> None:
    run = rf.make_run_dir(tmp_path, gpu=None)
    result = build_report(run)
    summary = check_summary_against_trials(run, None, 30.0)
    assert summary["gpu_idle_cost_usd"].isna().all() and summary["monthly_cost_usd"].isna().all()
    assert "cost_png" not in result.paths
    assert any("--gpu NAME" in line for line in result.lines)
    assert "--gpu NAME" in (run / "report.html").read_text()


# --- real run ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real `iobench run` of the tiny scenario (2 configs x 2 repeats)."""
    main = pytest.importorskip("iobench.__main__").main
    from conftest import TINY

    base = tmp_path_factory.mktemp("real")
    (base / "target").mkdir()
    (base / "tmp").mkdir()
    rc = main([
        "run", "--scenario", str(TINY), "--no-report", "--quiet", "--configs", "naive,nocache",
        "--repeats", "2", "--target", str(base / "target"), "--tmp", str(base / "tmp"),
        "--results", str(base / "results"),
    ])  # fmt: skip
    assert rc == 0
    (run,) = [d for d in (base / "results").iterdir() if d.is_dir()]
    return run


def test_report_of_a_real_run_matches_its_trials(real_run: Path) -> None:
    result = build_report(real_run, CostOptions(gpu="H100", gpus=8))
    check_summary_against_trials(real_run, 8 * find_preset("H100 SXM").usd_per_hour, 30.0)
    for name in ("summary.csv", "summary.json", "report.html", "time_to_ready.png", "cost.png",
                 "timeline-naive.png", "timeline-nocache.png"):  # fmt: skip
        assert (real_run / name).is_file(), name
    assert result.winner in ("naive", "nocache")
    assert not result.warnings


def test_cli_report_of_a_real_run(real_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["report", str(real_run), "--gpu", "rtx 4090", "--format", "json"]) == (0, "")
    data = json.loads(capsys.readouterr().out)
    assert data["format"] == "iobench-summary" and {c["config"] for c in data["configs"]} == {
        "naive",
        "nocache",
    }


# --- outputs -----------------------------------------------------------------------------------


def test_outputs_exist_and_html_is_self_contained(run_dir: Path) -> None:
    result = build_report(run_dir, CostOptions(gpu="H100"))
    pngs = [p for p in result.paths.values() if p.suffix == ".png"]
    assert len(pngs) == 2 + 4  # time-to-ready, cost, one timeline per config
    for p in pngs:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000
    html = (run_dir / "report.html").read_text()
    assert html.count('src="data:image/png;base64,') == 6
    assert not re.search(
        r"""(src|href)=["'](?!data:|https://)""", html.replace('href="https://', "")
    )
    assert "<script" not in html
    for text in ("export VIRTUAL_ENV=/root/scratch/venv", "ENV UV_CACHE_DIR=/root/scratch/uv-cache",
                 "nfs4", "/workspace", "latency/metadata bound", "Fastest: uv-local"):  # fmt: skip
        assert text in html, text
    data = json.loads((run_dir / "summary.json").read_text())  # strict: NaN would not parse as null
    assert data["winner"] == "uv-local" and data["baseline"] == "naive"
    assert data["recommendation"]["shell"][0] == "export VIRTUAL_ENV=/root/scratch/venv"
    assert len(data["configs"]) == 4


def test_formats(run_dir: Path) -> None:
    result = build_report(run_dir, CostOptions(gpu="H100"))
    md = "\n".join(result.format("markdown"))
    assert md.startswith("### iobench: torch on pod-a")
    assert "| **uv-local** |" in md and "```sh" in md and "```dockerfile" in md
    table = result.format("table")
    assert table[0].startswith("iobench report: torch on pod-a")
    assert any(line.startswith("uv-local *") for line in table)
    assert json.loads("\n".join(result.format("json")))["winner"] == "uv-local"
    assert any(line.startswith("Report: ") for line in result.console_lines)


def test_diagnosis_of_the_synthetic_profiles(run_dir: Path) -> None:
    result = build_report(run_dir)
    t = result.summary.table.set_index("config")
    assert t.loc["naive", "bottleneck"] == "latency/metadata bound"
    assert "write rate fell" in t.loc["naive", "why"] and "stall" in t.loc["naive", "why"]
    assert t.loc["venv-local", "bottleneck"] == "CPU bound"
    assert t.loc["uv-local", "bottleneck"] == "bandwidth bound"


def test_out_dir_and_missing_or_corrupt_samples(run_dir: Path, tmp_path: Path) -> None:
    (run_dir / "samples" / "naive-r1.csv").unlink()
    (run_dir / "samples" / "naive-r2.csv").write_bytes(b"\x00\xff garbage \x00\n\x01")
    out = tmp_path / "elsewhere"
    result = build_report(run_dir, out_dir=out)
    assert (out / "report.html").is_file() and not (run_dir / "report.html").exists()
    assert any("naive-r1.csv: missing" in w for w in result.warnings)
    assert any("naive-r2.csv" in w for w in result.warnings)
    assert "warning:" in "\n".join(result.lines)


# --- pure functions with literal numbers -----------------------------------------------------


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


def test_change_point_with_literal_numbers() -> None:
    k, before, after = change_point(np.array([10, 11, 9, 10, 2, 2, 3, 1], dtype=float))
    assert (k, before, after) == (4, 10.0, 2.0)
    assert change_point(np.array([1.0, 2.0])) is None


def test_find_stalls() -> None:
    starts = np.arange(20.0)
    rates = np.array([5.0] * 5 + [0.0] * 8 + [5.0] * 5 + [0.0] * 2)
    assert find_stalls(starts, rates) == [(5.0, 13.0)]


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


def test_env_for_each_installer_and_placement() -> None:
    roles = {
        "target": {"path": "/workspace", "device": "nfs:/vol", "mountpoint": "/workspace"},
        "tmp": {"path": "/tmp", "device": "overlay", "mountpoint": "/"},
    }
    pairs, notes = env_for({"installer": "pip", "venv_role": "tmp", "tmpdir_role": "tmp",
                            "cache_role": "off", "compile": "off", "cache_state": "cold"}, roles)  # fmt: skip
    assert pairs == [("VIRTUAL_ENV", "/tmp/venv"), ("PATH", "$VIRTUAL_ENV/bin:$PATH"), ("TMPDIR", "/tmp"),
                     ("PIP_NO_CACHE_DIR", "1"), ("PIP_NO_COMPILE", "1")]  # fmt: skip
    pairs, notes = env_for({"installer": "uv", "venv_role": "tmp", "tmpdir_role": "tmp",
                            "cache_role": "target", "compile": "on", "cache_state": "warm"}, roles)  # fmt: skip
    assert ("UV_CACHE_DIR", "/workspace/uv-cache") in pairs and ("UV_LINK_MODE", "copy") in pairs
    assert ("UV_COMPILE_BYTECODE", "1") in pairs
    assert any("warm cache" in n for n in notes) and any("hard-link" in n for n in notes)
    pairs, _ = env_for({"installer": "pip", "venv_role": "scratch", "tmpdir_role": "tmp",
                        "cache_role": "tmp", "compile": "on"}, roles)  # fmt: skip
    assert ("VIRTUAL_ENV", "<scratch path>/venv") in pairs and (
        "PIP_CACHE_DIR",
        "/tmp/pip-cache",
    ) in pairs


def test_baseline_falls_back_to_the_first_config(tmp_path: Path) -> None:
    specs = tuple(rf.ConfigSpec(c.name, venv=c.venv, tmpdir=c.tmpdir, cache=c.cache, profile=c.profile,
                                phases=c.phases) for c in rf.DEFAULT_CONFIGS[1:])  # fmt: skip
    result = build_report(rf.make_run_dir(tmp_path, configs=specs))
    assert result.summary.baseline == "tmp-cache-advice"
    assert any("no config named 'naive'" in n for n in result.summary.notes)
    t = result.summary.table.set_index("config")
    assert t.loc["tmp-cache-advice", "speedup_vs_naive"] == 1.0


# --- bad input through the registered CLI ------------------------------------------------------


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


def test_cli_report_ok(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["report", str(run_dir), "--gpu", "H200", "--starts-per-month", "100"]) == (
        0,
        "",
    )
    out = capsys.readouterr().out
    assert "Fastest: uv-local" in out and "1x H200" in out and "100 starts" in out
    assert (run_dir / "report.html").is_file()


@pytest.mark.parametrize(
    ("case", "extra", "error", "match"),
    [
        ("not-a-run", [], RunDirError, r"not-a-run is not an iobench run directory \(no meta.json\)"),
        ("missing", [], RunDirError, r"missing: no such folder"),
        ("all-failed", [], RunDirError, r"no successful trial to report \(4 failed\); first error: ERROR: Could not install"),
        ("ok", ["--gpu", "Voodoo5"], UsageError, r"unknown --gpu 'Voodoo5'; known: RTX 4090, .*H100 SXM, H200.*p5\.48xlarge"),
        ("ok", ["--gpu-price", "-2"], UsageError, r"--gpu-price must not be negative \(got -2\)"),
        ("ok", ["--gpus", "0"], UsageError, r"--gpus must be a whole number of at least 1"),
        ("ok", ["--format", "yaml"], UsageError, r"--format must be one of table, markdown, json"),
    ],
)  # fmt: skip
def test_cli_bad_input_is_one_line_and_non_zero(
    tmp_path: Path, case: str, extra: list[str], error: type, match: str
) -> None:
    paths = {
        "not-a-run": lambda: rf.make_not_a_run(tmp_path),
        "missing": lambda: tmp_path / "missing",
        "all-failed": lambda: rf.make_all_failed(tmp_path),
        "ok": lambda: rf.make_run_dir(tmp_path),
    }
    target = paths[case]()
    for command in ("report", "compare"):
        argv = [command, str(target)] + ([str(target)] if command == "compare" else []) + extra
        with pytest.raises(error) as err:
            parser = argparse.ArgumentParser()
            sub = parser.add_subparsers(dest="command", required=True)
            register(sub)
            args = parser.parse_args(argv)
            args.func(args)
        message = str(err.value)
        assert re.search(match, message), message
        assert "\n" not in message and "Traceback" not in message
        assert run_cli(argv)[0] == 2


def test_validation_happens_before_any_reading(tmp_path: Path) -> None:
    # a bad number is reported even though the folder does not exist either
    code, message = run_cli(["report", str(tmp_path / "nowhere"), "--gpu-price", "-1"])
    assert code == 2 and message.startswith("--gpu-price")


@pytest.mark.parametrize(
    ("damage", "match"),
    [
        (lambda d: (d / "meta.json").write_text("{not json"), r"meta.json: not valid JSON \(line 1"),
        (lambda d: (d / "meta.json").write_text('{"schema_version": 7}'), r"schema_version 7 is not supported .*newer iobench"),
        (lambda d: (d / "meta.json").write_text('{"run_id": "x"}'), r"no schema_version"),
        (lambda d: (d / "meta.json").write_text("[1, 2]"), r"expected a JSON object"),
        (lambda d: (d / "trials.csv").unlink(), r"no trials.csv yet"),
        (lambda d: (d / "trials.csv").write_text(""), r"trials.csv: empty"),
        (lambda d: (d / "trials.csv").write_text("config,status\nnaive,ok\n"), r"missing column\(s\) trial_id, time_to_ready_s"),
    ],
)  # fmt: skip
def test_damaged_run_directories_name_the_folder_and_file(
    run_dir: Path, damage, match: str
) -> None:
    damage(run_dir)
    with pytest.raises(RunDirError, match=match) as err:
        load_run(run_dir)
    assert str(run_dir) in str(err.value)


def test_results_folder_instead_of_a_run_gets_a_hint(run_dir: Path) -> None:
    with pytest.raises(
        RunDirError, match=r"it contains run directories \(20261130-120000-pod-a-torch\): pass one"
    ):
        load_run(run_dir.parent)


# --- compare ------------------------------------------------------------------------------------


def test_compare_two_pods(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = rf.make_run_dir(
        tmp_path / "r", run_id="20261130-120000-pod-a-torch", label="pod A", gpu=H100_META
    )
    b = rf.make_run_dir(tmp_path / "r", run_id="20261130-150000-pod-b-torch", label="pod B", seed=7,
                        gpu={"name": "NVIDIA GeForce RTX 4090", "count": 1, "driver": "565", "source": "nvidia-smi"})  # fmt: skip
    out = tmp_path / "cmp"
    result = build_compare([a, b], out)
    ta = pd.read_csv(a / "trials.csv")
    tb = pd.read_csv(b / "trials.csv")
    long = pd.read_csv(out / "compare.csv")
    for config in ta["config"].unique():
        ma = float(
            np.median(ta[(ta["config"] == config) & (ta["status"] == "ok")]["time_to_ready_s"])
        )
        mb = float(
            np.median(tb[(tb["config"] == config) & (tb["status"] == "ok")]["time_to_ready_s"])
        )
        rows = long[long["config"] == config].set_index("run_label")
        assert rows.loc["pod A", "median_time_to_ready_s"] == pytest.approx(ma)
        assert rows.loc["pod B", "median_time_to_ready_s"] == pytest.approx(mb)
        assert rows.loc["pod A", "ratio_vs_ref"] == pytest.approx(1.0)
        assert rows.loc["pod B", "ratio_vs_ref"] == pytest.approx(mb / ma, rel=1e-5)
        # each pod priced at its own detected GPU
        assert rows.loc["pod B", "monthly_cost_usd"] == pytest.approx(
            mb / 3600 * find_preset("RTX 4090").usd_per_hour * 30, rel=1e-4
        )
    assert result.labels == ["pod A", "pod B"]
    for name in ("compare.csv", "compare.json", "compare.png", "compare.html"):
        assert (out / name).is_file()
    html = (out / "compare.html").read_text()
    assert 'src="data:image/png;base64,' in html and "B / A" in html and "pod B" in html
    assert json.loads((out / "compare.json").read_text())["reference"] == "pod A"
    assert run_cli(
        ["compare", str(a), str(b), "--out", str(tmp_path / "cmp2"), "--format", "markdown"]
    ) == (0, "")
    assert "| config | pod A median | pod B median | pod B / pod A |" in capsys.readouterr().out


def test_compare_needs_two_runs_and_labels_stay_unique(tmp_path: Path) -> None:
    a = rf.make_run_dir(tmp_path)
    with pytest.raises(UsageError, match="at least two"):
        build_compare([a], tmp_path / "o")
    copy = tmp_path / "copy" / a.name
    shutil.copytree(a, copy)
    result = build_compare([a, copy], tmp_path / "o2")
    assert len(set(result.labels)) == 2


def test_report_package_never_imports_the_runner_or_sampler() -> None:
    import iobench.report as pkg

    for path in Path(pkg.__file__).parent.glob("*.py"):
        text = path.read_text()
        assert not re.search(r"^\s*(from|import)\s+iobench\.(runner|sampler)\b", text, re.M), path


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
    result = build_report(run, CostOptions(gpu="H100"))
    row = result.summary.table.set_index("config").loc["broken"]
    assert (row["n_ok"], row["n_failed"]) == (0, 3)
    assert math.isnan(row["median_time_to_ready_s"]) and math.isnan(row["gpu_idle_cost_usd"])
    assert row["why"].startswith(
        "all 3 trial(s) did not finish ok; first error: ERROR: Could not install"
    )
    assert result.winner == "venv-local"
    assert "timeline-broken.png" not in {p.name for p in result.paths.values()}
    html = (run / "report.html").read_text()
    assert '<tr class="failed"><td>broken</td>' in html
    data = json.loads((run / "summary.json").read_text())
    broken = next(c for c in data["configs"] if c["config"] == "broken")
    assert broken["median_time_to_ready_s"] is None


def test_recorded_stalls_are_read_and_bad_stall_files_only_warn(run_dir: Path) -> None:
    run = load_run(run_dir)
    stalls = run.trial_stalls("naive-r1")
    assert stalls is not None and len(stalls) == 1
    start, end = stalls[0]
    assert end - start == pytest.approx(25.0)
    assert run.trial_stalls("venv-local-r1") == []
    (run_dir / "stalls.csv").write_text("what,ever\n1,2\n")
    run = load_run(run_dir)
    assert run.trial_stalls("naive-r1") is None
    assert any("stalls.csv" in w for w in run.warnings)
    (run_dir / "stalls.csv").unlink()
    assert load_run(run_dir).trial_stalls("naive-r1") is None


# --- filesystem waits (fswait_frac) -------------------------------------------------------------

FUSE_LIKE = dict(download_s=3.8, install_s=5.2, cpu_s=2.8, write_bytes=37.6e6, write_calls=4_292,
                 files_installed=2_423, dstate_max=1, iowait_p95_pct=0.0)  # fmt: skip


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


def test_fswait_frac_in_summary_csv_json_and_html(run_dir: Path) -> None:
    build_report(run_dir, CostOptions(gpu="H100"))
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
    result = build_report(run, CostOptions(gpu="H100"))
    assert not result.warnings
    summary = check_summary_against_trials(run, find_preset("H100 SXM").usd_per_hour, 30.0)
    assert summary["fswait_frac"].isna().all()
    t = summary.set_index("config")
    assert t.loc["naive", "bottleneck"] == "latency/metadata bound"
    assert "filesystem" not in t.loc["naive", "why"]
    data = json.loads((run / "summary.json").read_text())
    assert all(c["fswait_frac"] is None for c in data["configs"])


# --- resumed runs: a trial id twice in trials.csv ---------------------------------------------


def test_drop_superseded_with_literal_rows() -> None:
    trials = pd.DataFrame({
        "trial_id": ["a-r1", "b-r1", "a-r1", "c-r1", "d-r1", "d-r1", "d-r1"],
        "status": ["interrupted", "ok", "ok", "interrupted", "interrupted", "interrupted", "failed"],
        "time_to_ready_s": [math.nan, 2.0, 3.0, math.nan, math.nan, math.nan, math.nan],
    })  # fmt: skip
    kept, resumed = drop_superseded(trials)
    assert list(zip(kept["trial_id"], kept["status"], strict=True)) == [
        ("b-r1", "ok"), ("a-r1", "ok"), ("c-r1", "interrupted"), ("d-r1", "failed"),
    ]  # fmt: skip
    assert resumed == ["a-r1", "d-r1"]
    same, none = drop_superseded(trials.drop_duplicates("trial_id"))
    assert len(same) == 4 and none == []


def test_resumed_trial_counts_once_as_ok(run_dir: Path) -> None:
    before = pd.read_csv(run_dir / "trials.csv")
    rf.resume_rows(run_dir, ("naive-r2", "venv-local-r1"))
    raw = pd.read_csv(run_dir / "trials.csv")
    assert len(raw) == len(before) + 2
    assert list(raw[raw["trial_id"] == "naive-r2"]["status"]) == ["interrupted", "ok"]
    result = build_report(run_dir, CostOptions(gpu="H100"))
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
    row = build_report(run).summary.table.set_index("config").loc["naive"]
    assert (row["n_ok"], row["n_failed"]) == (2, 1)


# --- throughput drops: short installs, throttled chunked writers, the timeline axis ------------


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


def test_timeline_axis_clips_one_off_peaks_but_not_plateaus() -> None:
    steady = np.array([3.0] * 50 + [50.0])  # one spike: clipped at 1.2 x p95
    assert _rate_top(steady) == pytest.approx(3.6)
    assert _rate_top(steady, floor=1.5 * 4.0) == pytest.approx(7.2)  # a drop's level stays in
    assert _rate_top(np.array([3.0] * 40 + [50.0] * 11)) is None  # a plateau is not a peak
    assert _rate_top(np.array([1.0, 80.0])) is None  # too few points to judge
    t = np.arange(0, 30, 0.1)
    assert _rate_width(t, 0.2) == 0.5 and _rate_width(np.arange(0, 600, 0.1), 5) == 5
    assert _rate_width(np.arange(0, 1.8, 0.1), 0.2) == 0.2  # a 1.8-s trial keeps its bins


def test_cpu_comes_before_network_and_loopback_downloads_say_so() -> None:
    # the lab's venv-on-tmp: a loopback index, pip busy 88 % of 1.6 s, download 58 %
    d = classify(ConfigFigures(1.63, download_s=0.95, install_s=0.24, cpu_s=1.43,
                               samples=SampleFigures(net_recv_mbps=0.0)))  # fmt: skip
    assert (d.bottleneck, d.why) == ("CPU bound", "installer on CPU 88% of 1.6 s (1.4 CPU-s)")
    d = classify(
        ConfigFigures(10, download_s=6, cpu_s=3, samples=SampleFigures(net_recv_mbps=0.01))
    )
    assert d.bottleneck == "network bound"
    assert (
        d.why
        == "download 6.0 s of 10.0 s (60%), no traffic on the network interfaces (a loopback index?)"
    )


def test_a_share_that_rounds_to_zero_reads_under_one_percent() -> None:
    d = classify(ConfigFigures(20, install_s=10, cpu_s=2, offcpu_frac=0.9,
                               samples=SampleFigures(dstate_share=0.004)))  # fmt: skip
    assert "off CPU 90%, D state in <1% of samples" in d.why
