"""build.py: the files a report writes, from synthetic and real run directories."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from helpers import runs as rf
from helpers.reports import check_summary_against_trials

from iobench.cost.idle import CostOptions
from iobench.cost.prices import find_preset
from iobench.report import build_report
from iobench.report.load import load_run


def test_report_of_a_real_run_matches_its_trials(real_run: Path) -> None:
    result = build_report(real_run, CostOptions(gpu="H100", gpus=8))
    check_summary_against_trials(real_run, 8 * find_preset("H100 SXM").usd_per_hour, 30.0)
    for name in ("summary.csv", "summary.json", "report.html", "time_to_ready.png", "cost.png",
                 "timeline-naive.png", "timeline-nocache.png"):  # fmt: skip
        assert (real_run / name).is_file(), name
    v = result.summary.verdict
    assert v.fastest in ("naive", "nocache") and result.winner == v.winner
    assert result.winner is None or v.kind in ("advice", "keep")
    assert not result.warnings


@pytest.mark.charts
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
                 "nfs4", "/workspace", "latency/metadata bound", "uv-local is 16× faster than naive"):  # fmt: skip
        assert text in html, text
    data = json.loads((run_dir / "summary.json").read_text())  # strict: NaN would not parse as null
    assert data["winner"] == "uv-local" and data["baseline"] == "naive"
    assert data["verdict"]["kind"] == "advice" and data["verdict"]["vs_baseline"]["beyond_noise"]
    assert "export VIRTUAL_ENV=/root/scratch/venv" in data["recommendation"]["shell"]
    assert len(data["configs"]) == 4


@pytest.mark.charts
def test_the_winner_s_measured_uv_link_mode_reaches_its_start_script(tmp_path: Path) -> None:
    configs = tuple(
        dataclasses.replace(c, link_mode="symlink") if c.name == "uv-local" else c
        for c in rf.DEFAULT_CONFIGS
    )
    run_dir = rf.make_run_dir(tmp_path, configs=configs, samples=False)
    build_report(run_dir, CostOptions(gpu="H100"))
    data = json.loads((run_dir / "summary.json").read_text())
    assert data["winner"] == "uv-local"
    assert {c["config"]: c["link_mode"] for c in data["configs"]}["uv-local"] == "symlink"
    assert "export UV_LINK_MODE=symlink" in data["recommendation"]["shell"]
    assert "the venv breaks when that cache is cleaned" in json.dumps(data["recommendation"])


@pytest.mark.charts
def test_out_dir_and_missing_or_corrupt_samples(run_dir: Path, tmp_path: Path) -> None:
    (run_dir / "samples" / "naive-r1.csv").unlink()
    (run_dir / "samples" / "naive-r2.csv").write_bytes(b"\x00\xff garbage \x00\n\x01")
    out = tmp_path / "elsewhere"
    result = build_report(run_dir, out_dir=out)
    assert (out / "report.html").is_file() and not (run_dir / "report.html").exists()
    assert any("naive-r1.csv: missing" in w for w in result.warnings)
    assert any("naive-r2.csv" in w for w in result.warnings)
    assert "warning:" in "\n".join(result.lines)


@pytest.mark.charts
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


@pytest.mark.charts
def test_a_report_rebuilt_without_a_price_drops_the_old_cost_chart(tmp_path: Path) -> None:
    run_dir = rf.make_run_dir(tmp_path, gpu=None)  # no detected GPU: no price unless given
    build_report(run_dir, CostOptions(gpu="H100"))
    assert (run_dir / "cost.png").is_file()
    result = build_report(run_dir)
    assert not (run_dir / "cost.png").exists() and "cost_png" not in result.paths
    assert (run_dir / "time_to_ready.png").is_file()


@pytest.mark.charts
def test_the_timeline_shows_the_median_trial_even_of_two(tmp_path: Path) -> None:
    run = rf.make_run_dir(tmp_path, repeats=2)
    result = build_report(run)
    trials = load_run(run).trials.set_index("trial_id")
    for config, trial_id in result.summary.median_trials.items():
        times = trials[(trials["config"] == config) & (trials["status"] == "ok")]
        times = times["time_to_ready_s"].sort_values()
        assert trial_id == times.index[0], (config, times)  # of two: the faster middle one


@pytest.mark.charts
def test_a_report_without_charts_writes_every_file_but_the_pictures(run_dir: Path) -> None:
    result = build_report(run_dir, charts=False)
    assert not list(run_dir.glob("*.png")) and not any(
        p.suffix == ".png" for p in result.paths.values()
    )
    assert (run_dir / "summary.json").is_file() and "<img" not in (
        run_dir / "report.html"
    ).read_text()
    assert result.summary.verdict.kind == build_report(run_dir).summary.verdict.kind
