"""The early-stop rules with hand-made numbers: the give-up bound, censored medians, and when
`--repeats auto` may stop (docs/early-stop.md)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from iobench.run.earlystop import (
    DEFAULT_MAX_REPEATS,
    Outcome,
    best_median,
    give_up_bound,
    outcomes,
    parse_repeats,
    ranking,
    settled,
)
from iobench.stats import censored_median


def ok(*xs: float) -> list[Outcome]:
    return [Outcome(x) for x in xs]


def cen(*xs: float) -> list[Outcome]:
    return [Outcome(x, True) for x in xs]


def test_censored_median_is_a_bound_only_when_the_middle_is_censored() -> None:
    assert censored_median([1, 2, 3], [False] * 3) == (2.0, False)
    # one of three censored, at the top: the median is the finished middle value
    assert censored_median([1, 2, 9], [False, False, True]) == (2.0, False)
    # a censored value *below* finished ones still ranks last (it is +inf at its bound)
    assert censored_median([1, 2, 1.5], [False, False, True]) == (2.0, False)
    # two of three: "> the median of the values with the bounds", which can only be lower
    assert censored_median([1, 9, 8], [False, True, True]) == (8.0, True)
    assert censored_median([5, 1], [False, True]) == (3.0, True)
    m, is_bound = censored_median([], [])
    assert math.isnan(m) and not is_bound


def test_outcomes_keep_ok_times_and_censored_bounds_only() -> None:
    rows = [
        SimpleNamespace(config="a", status="ok", time_to_ready_s=10.0, censored_after_s=None),
        SimpleNamespace(config="b", status="censored", time_to_ready_s=None, censored_after_s=30.0),
        SimpleNamespace(config="b", status="failed", time_to_ready_s=None, censored_after_s=None),
        SimpleNamespace(
            config="a", status="interrupted", time_to_ready_s=None, censored_after_s=None
        ),
    ]
    assert outcomes(rows) == {"a": [Outcome(10.0)], "b": [Outcome(30.0, True)]}


def test_give_up_bound_is_k_times_the_best_finished_median() -> None:
    assert give_up_bound({}, 3) is None  # the first trials run in full
    assert give_up_bound({"slow": cen(40.0)}, 3) is None  # a bound is no median
    by = {"fast": ok(10.0, 12.0, 20.0), "slow": ok(30.0), "gone": cen(5.0)}
    assert best_median(by) == 12.0
    assert give_up_bound(by, 3) == pytest.approx(36.0)


def test_before_anything_finished_only_configs_predicted_slow_are_bounded() -> None:
    predicted = {"fast": 10.0, "near": 25.0, "slow": 60.0, "uv": None}
    assert give_up_bound({}, 3, predicted, "slow") == pytest.approx(30.0)
    assert give_up_bound({}, 3, predicted, "near") is None  # within K x the best prediction
    assert give_up_bound({}, 3, predicted, "fast") is None
    assert give_up_bound({}, 3, predicted, "uv") is None  # not predicted: runs in full
    # once a config has finished, its median rules, whatever was predicted
    assert give_up_bound({"fast": ok(20.0)}, 3, predicted, "near") == pytest.approx(60.0)


def test_ranking_puts_censored_medians_after_every_finished_one() -> None:
    by = {"c": cen(20.0, 25.0), "b": ok(50.0, 60.0), "a": ok(10.0, 11.0)}
    assert ranking(by) == ["a", "b", "c"]


def test_not_settled_before_two_rounds_or_with_one_config() -> None:
    assert settled({"w": ok(10.0), "naive": ok(50.0)}, "naive") is None
    assert settled({"w": ok(10.0, 10.1)}, "w") is None


def test_settled_when_apart_beyond_noise_and_ratio_tight() -> None:
    by = {"w": ok(10.0, 10.2, 9.9), "mid": ok(20.0, 20.5, 19.8), "naive": ok(40.0, 40.8, 39.5)}
    why = settled(by, "naive")
    assert why is not None and "w fastest" in why and "4.0" in why


def test_two_configs_alike_within_the_tolerance_do_not_hold_the_run() -> None:
    # w and twin cannot be told apart, and their medians are within 25 %: either is the answer
    by = {
        "w": ok(10.0, 10.1, 10.0, 10.05),
        "twin": ok(10.2, 10.1, 10.3, 10.15),
        "naive": ok(40.0, 40.8, 39.5, 40.2),
    }
    why = settled(by, "naive")
    assert why is not None and "alike: twin" in why
    by["twin"] = ok(9.0, 18.0, 11.0, 17.0)  # 40 % slower on the median, within the spread
    assert settled(by, "naive") is None


def rounds(*xs: float) -> list[Outcome]:
    return [Outcome(x, False, i + 1) for i, x in enumerate(xs)]


def test_a_runner_up_alike_the_winner_needs_its_headline_known_too() -> None:
    """A default run (2026-12-06, 4 rounds, times in s) stopped on "naive /
    warm-cache-on-target = 1.46x, 95%: 1.24-1.70x" while its verdict named the tied
    venv-on-tmp (fewer changes, then the name) and printed 1.09-1.92x: the verdict may name
    either of two alike configs, so both headline ratios must be settled."""
    by = {
        "naive": rounds(2.30, 2.55, 2.58, 2.74),
        "tmp-fix": rounds(2.46, 2.61, 2.54, 2.42),
        "venv-on-tmp": rounds(1.87, 1.64, 1.81, 1.72),
        "warm": rounds(1.59, 1.90, 1.65, 1.85),
    }
    assert settled(by, "naive") is None
    steady = {**by, "venv-on-tmp": rounds(1.60, 1.89, 1.66, 1.84)}  # pairs as warm's do
    why = settled(steady, "naive")
    assert why is not None and "naive / warm = " in why and "naive / venv-on-tmp = " in why
    # a runner-up alike W but not told from the baseline is never named: W's headline suffices
    far = {"naive": rounds(2.0, 2.1, 2.05), "w": rounds(1.0, 1.02, 0.99),
           "twin": rounds(1.1, 2.3, 1.2)}  # fmt: skip
    why = settled(far, "naive")
    assert why is not None and "alike: twin" in why and "naive / twin" not in why


def test_not_settled_while_the_headline_ratio_is_wide() -> None:
    # the ranking is clear (2x at least) but naive's spread leaves its ratio to w open
    by = {"w": ok(10.0, 10.1, 10.0), "naive": ok(25.0, 60.0, 40.0)}
    assert settled(by, "naive") is None
    by["naive"] = ok(40.0, 40.5, 39.8)
    assert settled(by, "naive") is not None


def test_censored_baseline_settles_the_ratio_as_a_lower_bound() -> None:
    by = {"w": ok(10.0, 10.4), "naive": [Outcome(45.0), Outcome(31.0, True)]}
    why = settled(by, "naive")
    assert why is not None and "> " in why and "censored" in why


def test_a_censored_config_must_lie_above_every_value_of_the_winner() -> None:
    by = {"w": ok(10.0, 16.0), "naive": cen(15.0, 15.0)}
    assert settled(by, "naive") is None  # 16 s of w is above naive's bound of 15 s
    by["w"] = ok(10.0, 10.5)
    assert settled(by, "naive") is not None


def test_a_winner_with_a_censored_trial_is_not_settled() -> None:
    by = {"w": [Outcome(10.0), Outcome(10.2), Outcome(30.0, True)], "naive": cen(30.0, 31.0, 32.0)}
    assert settled(by, "naive") is None


def test_parse_repeats() -> None:
    assert parse_repeats("3") == 3
    assert parse_repeats("auto") == ("auto", DEFAULT_MAX_REPEATS)
    assert parse_repeats("auto:8") == ("auto", 8)
    for bad in ("0", "auto:1", "auto:x", "soon"):
        with pytest.raises(ValueError):
            parse_repeats(bad)


def test_a_config_given_up_once_needs_no_second_round() -> None:
    """naive given up in its one trial (its next would be given up again): the winner's two
    rounds settle it; a config with one finished trial still needs its second."""
    from iobench.run.earlystop import given_up

    assert given_up(cen(31.0)) and not given_up([Outcome(45.0), Outcome(31.0, True)])
    assert not given_up([])
    by = {"w": ok(10.0, 10.4), "naive": cen(31.0)}
    why = settled(by, "naive")
    assert why is not None and "after 2 rounds" in why and "> 3.04x" in why  # 31 / 10.2
    assert settled({"w": ok(10.0), "naive": cen(31.0)}, "naive") is None  # w: one round
    assert settled({"w": ok(10.0, 10.4), "x": ok(30.0), "naive": cen(31.0)}, "naive") is None
