"""compare.py: several runs in one table; labels; where the output goes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import runs as rf
from helpers.reports import run_cli

from iobench.cost.prices import find_preset
from iobench.errors import UsageError
from iobench.report import build_compare
from iobench.report.compare import compare_table

H100_META = {
    "name": "NVIDIA H100 80GB HBM3",
    "count": 2,
    "driver": "570.86.15",
    "source": "nvidia-smi",
}


@pytest.mark.charts
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
    assert 'src="data:image/png;base64,' in html and "B vs A" in html and "pod B" in html
    assert json.loads((out / "compare.json").read_text())["reference"] == "pod A"
    assert run_cli(
        ["compare", str(a), str(b), "--out", str(tmp_path / "cmp2"), "--format", "markdown"]
    ) == (0, "")
    assert "| config | pod A median | pod B median | pod B vs pod A |" in capsys.readouterr().out


@pytest.mark.charts
def test_compare_needs_two_runs_and_labels_stay_unique(tmp_path: Path) -> None:
    a = rf.make_run_dir(tmp_path)
    with pytest.raises(UsageError, match="at least two"):
        build_compare([a], tmp_path / "o")
    copy = tmp_path / "copy" / a.name
    shutil.copytree(a, copy)
    result = build_compare([a, copy], tmp_path / "out" / "o2")
    assert len(set(result.labels)) == 2


@pytest.mark.charts
def test_compare_goes_into_the_runs_results_folder_never_into_a_run_or_among_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 21: compare wrote iobench-compare-<time>/ into the current folder, not under
    results/ and not in --help. Now: a compare-<time>/ folder of the runs' results folder
    (no meta.json: `iobench list` passes it by); never inside a run nor the results folder
    itself."""
    results = tmp_path / "results"
    a = rf.make_run_dir(results, run_id="20261130-120000-pod-a-torch")
    b = rf.make_run_dir(results, run_id="20261130-150000-pod-b-torch", seed=7)
    for out in (results, a, a / "cmp"):
        with pytest.raises(UsageError, match="holds a run it reads; pass --out DIR"):
            build_compare([a, b], out)
    assert sorted(p.name for p in results.iterdir()) == sorted([a.name, b.name])
    monkeypatch.chdir(tmp_path)
    result = build_compare([a, b])
    assert result.out_dir.parent == results and result.out_dir.name.startswith("compare-")
    assert (result.out_dir / "compare.html").is_file()
    elsewhere = rf.make_run_dir(tmp_path / "other", run_id="20261130-160000-pod-c-torch", seed=3)
    result = build_compare([a, elsewhere])  # no one folder holds both: the current one
    assert result.out_dir.parent == tmp_path and result.out_dir.name.startswith("iobench-compare-")


def test_each_row_says_whether_the_runs_differ_beyond_noise(tmp_path: Path) -> None:
    """Issue 21: two runs of one machine were called "1.60x slower" with no noise test per
    row; each row now carries the tie rule's answer, and a headline without any row beyond
    noise says so."""
    a = rf.make_run_dir(tmp_path / "a", run_id="20261130-120000-pod-a-torch")
    b = rf.make_run_dir(tmp_path / "b", run_id="20261130-150000-pod-b-torch", seed=7)
    result = build_compare([a, b], tmp_path / "out")
    marks = result.long[result.long["run_label"] != result.labels[0]]["beyond_noise_vs_ref"]
    assert len(marks) and all(v in (True, False, None) for v in marks)
    text = "\n".join(compare_table(result))
    assert "noise)" in text
    data = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert all("beyond_noise_vs_ref" in row for row in data["rows"])


@pytest.mark.charts
def test_compare_warns_about_contended_and_single_trial_runs(tmp_path: Path) -> None:
    a = rf.make_run_dir(tmp_path / "a", run_id="20261130-120000-pod-a-torch")
    b = rf.make_run_dir(tmp_path / "b", run_id="20261130-150000-pod-b-torch", repeats=1, seed=7)
    trials = pd.read_csv(b / "trials.csv", dtype={"contended": "string"})
    trials.loc[0, "contended"] = "apt-get:150"
    trials.to_csv(b / "trials.csv", index=False)
    result = build_compare([a, b], tmp_path / "out")
    notes = "\n".join(result.notes)
    assert "1 of 4 successful trials ran while other processes did disk I/O" in notes
    assert "only 1 successful trial for some configs" in notes
    (contended,) = [n for n in result.notes if "ran while other processes" in n]
    assert contended.startswith(result.labels[1])


@pytest.mark.charts
def test_fail_slower_exits_3_naming_each_config_slower_beyond_noise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pytest-benchmark's --benchmark-compare-fail for a CI job that guards an image or a
    volume: a config twice as slow on the later run fails a 1.5x bar, passes a 2.5x one;
    a run against itself, or a row too few trials leave undecided, never fails it."""
    import dataclasses

    from iobench.__main__ import main

    a = rf.make_run_dir(tmp_path / "a", run_id="20261130-120000-pod-a-torch", repeats=5)
    slow = tuple(
        dataclasses.replace(c, phases={k: 2 * v for k, v in c.phases.items()})
        if c.name == "naive" else c
        for c in rf.DEFAULT_CONFIGS
    )  # fmt: skip
    b = rf.make_run_dir(tmp_path / "b", run_id="20261130-150000-pod-b-torch", repeats=5,
                        seed=7, configs=slow, hostname="pod-b")  # fmt: skip

    def compare(*more: str, runs: tuple[Path, ...] = (a, b)) -> tuple[int, str]:
        out = tmp_path / f"out{len(list(tmp_path.glob('out*')))}"
        code = main(["compare", *map(str, runs), "--out", str(out), *more])
        return code, capsys.readouterr().err

    code, err = compare("--fail-slower", "1.5")
    assert code == 3, err
    (line,) = err.splitlines()
    assert line.startswith("iobench: 1 config(s) 1.5× or more slower beyond noise: pod-b: naive ")
    assert line.endswith(" slower than pod-a"), line
    assert compare("--fail-slower", "2.5") == (0, "")
    assert compare() == (0, "")  # without the bar: a comparison, never a gate
    assert compare("--fail-slower", "1", runs=(a, a)) == (0, "")
    one = rf.make_run_dir(tmp_path / "c", run_id="20261130-160000-pod-c-torch", repeats=1,
                          seed=7, configs=slow, hostname="pod-c")  # fmt: skip
    code, err = compare("--fail-slower", "1.5", runs=(a, one))
    assert code == 0 and "pod-c: naive " in err and "too few trials to tell it from noise" in err
    for bad in ("0.9", "nan", "inf"):
        code, err = compare("--fail-slower", bad)
        assert code == 2 and err.count("\n") == 1 and "--fail-slower must be" in err, err
