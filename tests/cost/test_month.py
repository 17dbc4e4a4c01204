"""The cost of a strategy over a month, with numbers worked by hand."""

from __future__ import annotations

import csv
import math
from importlib import resources
from pathlib import Path

import pytest

from iobench.cost import month, prices
from iobench.cost.month import LifeFigures
from iobench.cost.prices import Prices
from iobench.errors import UsageError

# $3.60 an hour is $0.001 a second; storage $0.30/GB-month
P = Prices(gpu_usd_per_hour=3.6, storage_usd_per_gb_month=0.30)
PERSISTENT = LifeFigures("persistent-venv", first_s=100, restart_s=10, stored_bytes=5e9)
PACKED = LifeFigures("packed-venv", first_s=120, restart_s=4, stored_bytes=2e9)
REINSTALL = LifeFigures("reinstall", first_s=60, restart_s=60)
ALL = [PERSISTENT, PACKED, REINSTALL]


def test_a_month_is_the_first_start_plus_n_minus_one_restarts() -> None:
    c = month.monthly(PERSISTENT, 30, P)
    assert c.idle_s == 100 + 29 * 10
    assert c.gpu_usd == pytest.approx(0.39)
    assert c.storage_usd == pytest.approx(1.5)  # 5 GB x $0.30
    assert c.total_usd == pytest.approx(1.89)
    assert month.monthly(REINSTALL, 1, P).total_usd == pytest.approx(0.06)


def test_reads_are_billed_per_restart_where_the_volume_bills_them() -> None:
    f = LifeFigures("copied-venv", first_s=0, restart_s=0, stored_bytes=1e9, restart_read_bytes=2e9)
    c = month.monthly(f, 11, Prices(0, 0.30, 0.03))
    assert c.storage_usd == pytest.approx(0.30 + 10 * 2 * 0.03)


def test_break_even_by_hand() -> None:
    # packed: 0.716 + 0.004 N; reinstall: 0.06 N  ->  N = 0.716 / 0.056
    assert month.break_even(PACKED, REINSTALL, P) == pytest.approx(0.716 / 0.056)
    n = month.break_even(PACKED, REINSTALL, P)
    assert month.monthly(PACKED, n, P).total_usd == pytest.approx(
        month.monthly(REINSTALL, n, P).total_usd
    )
    # persistent (1.59 + 0.01 N) is above packed (0.716 + 0.004 N) for every N >= 1
    assert month.break_even(PERSISTENT, PACKED, P) is None
    same_slope = LifeFigures("x", first_s=1, restart_s=4)
    assert month.break_even(PACKED, same_slope, P) is None


def test_recommendation_depends_on_starts() -> None:
    few = month.recommend(ALL, 1, P)
    assert [c.strategy for c in few.ranking] == ["reinstall", "packed-venv", "persistent-venv"]
    assert few.break_even == pytest.approx(12.7857, abs=1e-3)
    many = month.recommend(ALL, 30, P)
    assert [c.strategy for c in many.ranking] == ["packed-venv", "reinstall", "persistent-venv"]
    assert many.best.total_usd == pytest.approx(0.836)
    lines = month.summary_lines(many, ALL)
    assert lines[0] == "At 30 starts a month:"
    assert (
        lines[1]
        == "  packed-venv: $0.836/month (GPU idle $0.236, storage $0.600; first start 120.0 s, restart 4.0 s)"
    )
    assert lines[-2:] == [
        "Cheapest: packed-venv.",
        "Break-even with reinstall: 12.8 starts a month (reinstall below it, packed-venv above).",
    ]


def test_without_storage_prices_the_faster_restart_wins_at_large_n() -> None:
    free = Prices(3.6)
    rec = month.recommend(ALL, 100, free)
    assert rec.best.strategy == "packed-venv" and rec.runner_up.strategy == "persistent-venv"
    # packed 0.116 + 0.004 N, persistent 0.09 + 0.01 N: cross at N = 0.026 / 0.006
    assert rec.break_even == pytest.approx(0.026 / 0.006)


def test_ties_go_to_the_faster_restart() -> None:
    a = LifeFigures("a", first_s=10, restart_s=10)
    b = LifeFigures("b", first_s=19, restart_s=1)
    rec = month.recommend([a, b], 2, Prices(3.6))  # both 20 s of idle GPU
    assert rec.best.strategy == "b"


def test_crossings_inside_the_chart_range() -> None:
    found = month.crossings(ALL, P, 1, 1000)
    assert [(round(n, 3), a, b) for n, a, b, _ in found] == [
        (round(0.716 / 0.056, 3), "packed-venv", "reinstall"),
        (round(1.59 / 0.05, 3), "persistent-venv", "reinstall"),
    ]


@pytest.mark.parametrize("bad", [0, 0.5, -3, math.nan, math.inf, "10", True])
def test_bad_starts_is_one_clear_line(bad: object) -> None:
    with pytest.raises(UsageError, match="--starts must"):
        month.recommend(ALL, bad, P)  # type: ignore[arg-type]


def test_storage_presets_have_source_and_date() -> None:
    presets = prices.load_storage_presets()
    assert {p.name for p in presets} >= {"EFS Standard", "EBS gp3", "RunPod network volume"}
    for p in presets:
        assert p.source.startswith("https://") and p.date[:4].isdigit(), p
        assert p.billed in ("used", "provisioned") and p.usd_per_gb_month > 0
    assert prices.find_storage_preset("efs").usd_per_gb_month == 0.30
    assert prices.find_storage_preset("RunPod").prices(2.0) == Prices(2.0, 0.07, 0.0)
    with pytest.raises(UsageError, match="unknown --storage 'tape'; known: EFS Standard"):
        prices.find_storage_preset("tape")
    text = resources.files("iobench.cost").joinpath("storage_prices.csv").read_text()
    assert all(len(row) == 10 for row in csv.reader(text.splitlines()))


def test_chart_draws_a_line_per_strategy_and_marks_crossings(tmp_path: Path) -> None:
    from iobench.report.lifecycle_chart import plot_lifecycle

    chart = plot_lifecycle(ALL, P, tmp_path / "life.png", starts=30, title="test")
    assert chart.path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert chart.lines == ("persistent-venv", "packed-venv", "reinstall")
    assert [round(n, 1) for n in chart.crossings] == [12.8, 31.8]
    assert "GPU $" in chart.title and "stand-in" not in chart.title


def test_chart_without_a_gpu_price_says_its_dollar_an_hour_is_a_stand_in(tmp_path: Path) -> None:
    from iobench.report.lifecycle_chart import plot_lifecycle

    chart = plot_lifecycle(ALL, Prices(1.0), tmp_path / "life.png", priced=False)
    assert "GPU $1/hour (a stand-in: no --gpu or --gpu-price given)" in chart.title


def test_chart_with_free_storage_and_a_free_start_uses_a_linear_axis(tmp_path: Path) -> None:
    from iobench.report.lifecycle_chart import plot_lifecycle

    free = LifeFigures("free", first_s=0, restart_s=0)
    chart = plot_lifecycle([free, REINSTALL], Prices(3.6), tmp_path / "c.png")
    assert chart.path.stat().st_size > 1000 and chart.crossings == ()


# ---- strategies in scenarios and the report's section ------------------------------------------


def test_a_strategy_key_places_the_venv_and_makes_the_scenario_measure_restarts(tmp_path) -> None:
    import pytest as _pytest

    from iobench.errors import ScenarioError
    from iobench.scenario.load import load_scenario

    base = (
        '[scenario]\nname = "s"\npackages = ["x"]\nready = "import x"\nrepeats = 1\n'
        '[defaults]\nvenv = "tmp"\ntmpdir = "tmp"\ncache = "tmp"\n'
    )
    path = tmp_path / "s.toml"
    path.write_text(
        base
        + '[matrix]\nstrategy = ["reinstall", "persistent-venv", "packed-venv"]\nname = "{strategy}"\n'
    )
    s = load_scenario(path)
    assert s.lifecycle
    assert {c.name: c.venv for c in s.configs} == {
        "reinstall": "tmp",
        "persistent-venv": "target",
        "packed-venv": "tmp",
    }
    path.write_text(base + "[configs.a]\n")
    assert not load_scenario(path).lifecycle  # no strategy: first start only, as before
    path.write_text(base + '[configs.a]\nstrategy = "frozen-venv"\n')
    with _pytest.raises(
        ScenarioError, match=r"configs\.a\.strategy: 'frozen-venv' is not one of reinstall"
    ):
        load_scenario(path)


def _trials() -> object:
    import pandas as pd

    scratch = "/vol/.iobench-scratch/run-1/packed-venv-r1"
    rows = [
        {
            "config": "reinstall",
            "strategy": "reinstall",
            "status": "ok",
            "first_start_s": 20.0,
            "restart_s": 18.0,
            "stored_bytes": 0,
            "cold_method": "none",
            "cache_mode": "cold",
        },
        {
            "config": "persistent-venv",
            "strategy": "persistent-venv",
            "status": "ok",
            "first_start_s": 40.0,
            "restart_s": 6.0,
            "stored_bytes": 2e9,
            "cold_method": "drop_caches",
            "cold_warm_left": "sshfs's own directory cache (20 s)",
            "cache_mode": "cold",
            "restart_target_read_bytes": 5e8,
        },
        {
            "config": "packed-venv",
            "strategy": "packed-venv",
            "status": "ok",
            "first_start_s": 25.0,
            "restart_s": 3.0,
            "stored_bytes": 1e9,
            "cold_method": "lab-flush",
            "cache_mode": "cold",
            "persist_method": "tar",
            "persist_command": f"tar -C /tmp/x -cf {scratch}/store/venv.tar venv",
            "restore_command": f"tar -C /tmp/x -xf {scratch}/store/venv.tar",
        },
        {
            "config": "packed-venv",
            "strategy": "packed-venv",
            "status": "failed",
            "first_start_s": 1.0,
            "restart_s": None,
        },
    ]
    return pd.DataFrame(rows)


def test_the_report_section_ranks_at_the_users_starts() -> None:
    from iobench.report.lifecycle_report import build_section

    at_100 = build_section(_trials(), 3.6, 100, "runpod")  # type: ignore[arg-type]
    assert [r["config"] for r in at_100.rows] == ["reinstall", "persistent-venv", "packed-venv"]
    assert at_100.best == "packed-venv"
    text = "\n".join(at_100.lines)
    # packed: 25 s + 99 x 3 s = 322 s at $3.6/h = $0.322, + 1 GB x $0.07
    assert "packed-venv: $0.392/month (GPU idle $0.322, storage $0.070" in text, text
    assert "cold (drop_caches); warm still: sshfs's own directory cache (20 s)" in text
    # its start script is the main recommendation's (tests/report/test_recommend_lifecycle.py)
    assert "tar -C" not in text and ".iobench-scratch" not in text
    assert at_100.ranking is not None and at_100.ranking.runner_up is not None
    assert at_100.ranking.runner_up.strategy == "persistent-venv"
    assert at_100.monthly_usd()["packed-venv"] == pytest.approx(0.392)
    # one start a month: reinstall's 20 s beat packed's 25 s plus its storage
    assert build_section(_trials(), 3.6, 1, "runpod").best == "reinstall"  # type: ignore[arg-type]
    no_price = build_section(_trials(), None, 30, None)  # type: ignore[arg-type]
    assert any("ranked by GPU idle time" in line for line in no_price.lines)


def test_a_run_without_restarts_has_no_section() -> None:
    import pandas as pd

    from iobench.report.lifecycle_report import build_section

    frame = pd.DataFrame([{"config": "naive", "status": "ok", "time_to_ready_s": 3.0}])
    assert build_section(frame, 2.0, 30, None).rows == []
