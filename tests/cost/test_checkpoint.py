"""How often to save (iobench/cost/checkpoint.py): Young's interval and the GPU time lost,
with literal numbers worked by hand, and the formula's parts checked against a simulation."""

from __future__ import annotations

import math
import random

import pytest

from iobench.cost.checkpoint import (
    MTBF_HOURS,
    SaveCosts,
    best_interval_s,
    lost_share,
    no_save_risk,
    young_interval_s,
)
from iobench.cost.idle import CostOptions
from iobench.errors import UsageError


def test_young_interval_with_literal_numbers() -> None:
    # a 30 s save, a failure a day: sqrt(2 * 30 * 86,400) = sqrt(5,184,000) = 2,276.8 s (38 min)
    assert young_interval_s(30, 86_400) == pytest.approx(2276.84, abs=0.01)
    # a 2 s save, one failure every 4 h: sqrt(2 * 2 * 14,400) = 240 s
    assert young_interval_s(2, 14_400) == pytest.approx(240.0)


def test_lost_share_with_literal_numbers() -> None:
    # 2 s pause every 1,800 s: 2/1800 = 0.11%; a failure (one per 86,400 s) costs half an
    # interval 900 + the pause 2 + the copy's window 40 + the restore 60 = 1,002 s: 1.16%
    assert lost_share(SaveCosts(2, 40, 60), 1800, 86_400) == pytest.approx(0.0127083, abs=1e-7)
    # at Young's interval the two halves of the pause/failure trade-off are equal
    t = young_interval_s(30, 86_400)
    assert 30 / t == pytest.approx(t / 2 / 86_400)
    assert lost_share(SaveCosts(30, 0, 60), t, 86_400) == pytest.approx(0.027394, abs=1e-6)
    with pytest.raises(ValueError):
        lost_share(SaveCosts(1, 0, 0), 0, 86_400)


def test_young_interval_is_where_the_loss_is_least() -> None:
    costs, mtbf = SaveCosts(5, 3, 20), 24 * 3600.0
    grid = [10.0 * k for k in range(5, 3000)]
    best = min(grid, key=lambda t: lost_share(costs, t, mtbf))
    assert best == pytest.approx(young_interval_s(5, mtbf), abs=10)


def test_an_interval_is_never_shorter_than_the_save_and_its_copy() -> None:
    # Young's interval for a 1 s save and a failure an hour is sqrt(7,200) = 84.9 s, but the
    # copy takes 100 s: the next save waits for it
    assert best_interval_s(SaveCosts(1, 100, 0), 3600) == 101
    assert best_interval_s(SaveCosts(1, 0, 0), 3600) == pytest.approx(84.85, abs=0.01)


def test_what_a_run_without_saves_risks() -> None:
    # 7 h at an MTBF of 24 h: P = 1 - e^(-7/24) = 25.3%; lost on average
    # 24 h * (1 - e^(-7/24) * (1 + 7/24)) = 0.8425 h = 3,033 s
    chance, lost = no_save_risk(7 * 3600, 24 * 3600)
    assert chance == pytest.approx(0.25298, abs=1e-5)
    assert lost == pytest.approx(3032.85, abs=0.01)
    assert no_save_risk(0, 3600) == (0.0, 0.0)


def test_the_failure_term_matches_a_simulation() -> None:
    """Failures at uniform times within a save cycle lose, on average, T/2 + C + D (the work
    since the last save that was durable), as lost_share assumes."""
    rng = random.Random(3)
    interval, pause, lag = 600.0, 20.0, 70.0
    losses = []
    for _ in range(200_000):
        u = rng.uniform(0, interval)  # time since the last save started
        losses.append(u if u >= pause + lag else u + interval)
    assert sum(losses) / len(losses) == pytest.approx(interval / 2 + pause + lag, rel=0.01)


def test_the_cost_options_take_an_mtbf_and_an_interval() -> None:
    assert CostOptions().mtbf_hours == MTBF_HOURS == 24.0
    assert CostOptions(mtbf_hours=6, every_minutes=30).every_minutes == 30
    for bad in ({"mtbf_hours": 0}, {"mtbf_hours": -1}, {"every_minutes": math.inf}):
        with pytest.raises(UsageError):
            CostOptions(**bad)  # type: ignore[arg-type]


def test_the_command_line_reads_mtbf_hours_and_every_minutes() -> None:
    import argparse

    from iobench.cli.cost import add_cost_arguments, cost_options_from_args

    parser = argparse.ArgumentParser()
    add_cost_arguments(parser)
    opts = cost_options_from_args(parser.parse_args(["--mtbf-hours", "6", "--every-minutes", "45"]))
    assert (opts.mtbf_hours, opts.every_minutes) == (6.0, 45.0)
    assert cost_options_from_args(parser.parse_args([])).every_minutes is None
    with pytest.raises(UsageError, match="--mtbf-hours wants a number of hours"):
        cost_options_from_args(parser.parse_args(["--mtbf-hours", "daily"]))
