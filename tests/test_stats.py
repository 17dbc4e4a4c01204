"""stats.py: percentile, median, Student's t and the tie rule, with literal numbers."""

from __future__ import annotations

import math
import random

import pytest

from iobench import stats
from iobench.stats import MIN_EFFECT, compare, median, percentile, ratio_interval, t_quantile


def test_percentile_and_median_interpolate_linearly_and_skip_what_is_not_a_number() -> None:
    assert percentile([1, 2, 3, 4], 10) == pytest.approx(1.3)
    assert percentile([1, 2, 3, 4], 90) == pytest.approx(3.7)
    assert percentile([4, 1], 0) == 1 and percentile([4, 1], 100) == 4
    assert median([3, None, 1, float("nan"), "x", 2, float("inf")]) == 2
    assert median([2.77, 3.55]) == pytest.approx(3.16)
    assert math.isnan(median([])) and math.isnan(percentile([None], 50))


@pytest.mark.parametrize(
    ("p", "df", "expected"),
    # printed tables of Student's t (two-sided 95 % and 99 %)
    [(0.975, 1, 12.706), (0.975, 2, 4.303), (0.975, 4, 2.776), (0.975, 10, 2.228),
     (0.995, 30, 2.750), (0.975, math.inf, 1.960)],
)  # fmt: skip
def test_t_quantiles_match_the_printed_tables(p: float, df: float, expected: float) -> None:
    assert t_quantile(p, df) == pytest.approx(expected, abs=5e-4)


def test_a_clear_difference_is_beyond_noise_with_three_trials() -> None:
    c = compare("tmpfs", [1.00, 1.02, 0.98], "volume", [2.0, 2.1, 1.9])
    assert c.distinguishable and c.reason == ""
    assert c.ratio == pytest.approx(2.0) and 1.6 < c.low < 2.0 < c.high < 2.5
    assert c.n_text == "n=3"


def test_overlapping_trials_under_contention_are_noise() -> None:
    # measured here: tiny scenario, tmpfs vs ext4, other jobs doing disk I/O
    c = compare("warm", [1.66, 2.12, 1.72], "naive", [2.04, 2.28, 3.06], comparisons=3)
    assert c.ratio == pytest.approx(2.28 / 1.72)
    assert not c.distinguishable and c.reason == "within the spread"
    assert c.low < 1 < c.high


def test_a_steady_difference_under_the_minimum_effect_is_not_worth_a_change() -> None:
    c = compare("a", [1.000, 1.001, 0.999], "b", [1.030, 1.031, 1.029])
    assert c.low > 1  # statistically clear ...
    assert c.ratio < 1 + MIN_EFFECT and not c.distinguishable and c.reason == "under 5%"


def test_one_trial_never_ranks() -> None:
    c = compare("a", [1.0], "b", [9.0, 9.1, 9.2])
    assert not c.distinguishable and c.reason == "one trial" and c.n_text == "n=1 and 3"
    assert math.isnan(c.low) and c.ratio == pytest.approx(9.1)


def test_two_trials_rank_only_a_large_steady_difference() -> None:
    assert compare("a", [1.0, 1.01], "b", [3.0, 3.05]).distinguishable
    assert not compare("a", [2.77, 3.55], "b", [3.0, 4.1]).distinguishable


def test_more_comparisons_widen_the_interval() -> None:
    one = ratio_interval([1.0, 1.1, 1.05], [1.2, 1.3, 1.25], comparisons=1)
    three = ratio_interval([1.0, 1.1, 1.05], [1.2, 1.3, 1.25], comparisons=3)
    assert three[0] < one[0] < one[1] < three[1]
    assert compare("a", [1.0, 1.1, 1.05], "b", [1.2, 1.3, 1.25], 1).distinguishable
    assert not compare("a", [1.0, 1.1, 1.05], "b", [1.2, 1.3, 1.25], 10).distinguishable


def test_identical_storage_rarely_names_a_winner() -> None:
    """Four configs of one distribution, three trials each: the fastest beats the first
    beyond noise in at most 5 % of 400 seeded runs (the rule's promise)."""
    rng = random.Random(20261130)
    wins = 0
    runs = 400
    for _ in range(runs):
        groups = [[3.0 * math.exp(rng.gauss(0, 0.08)) for _ in range(3)] for _ in range(4)]
        fastest = min(range(4), key=lambda i: median(groups[i]))
        if fastest != 0 and compare("w", groups[fastest], "b", groups[0], 3).distinguishable:
            wins += 1
    assert wins / runs <= 0.05, wins


def test_paired_by_round_finds_a_steady_difference_that_load_drift_hides() -> None:
    """Issue 21: a neighbour that starts part-way through a run slows every later round.
    Pooled, the drift is spread and hides a steady 10 %; paired by round it cancels out."""
    load = (1.0, 1.0, 1.7, 2.4, 3.1)
    fast = [10.0 * f * (1 + e) for f, e in zip(load, (0.0, 0.01, -0.01, 0.005, 0.0), strict=True)]
    slow = [11.0 * f * (1 + e) for f, e in zip(load, (0.01, 0.0, 0.0, -0.005, 0.01), strict=True)]
    rounds = list(range(1, 6))
    pooled = stats.compare("fast", fast, "slow", slow)
    assert not pooled.distinguishable and pooled.rule == "pooled"
    paired = stats.compare("fast", fast, "slow", slow, rounds=(rounds, rounds))
    assert paired.distinguishable and paired.rule == "paired" and paired.pairs == 5
    assert 1.05 < paired.low < 1.1 < paired.high < 1.15
    assert paired.interval_text.endswith("n=5, paired by round")


def test_pairs_are_only_the_rounds_both_configs_finished() -> None:
    """Two common rounds are too few to pair: the pooled interval decides, as before."""
    c = stats.compare("a", [1.0, 1.1, 1.0], "b", [2.0, 2.1], rounds=([1, 2, 3], [2, 5]))
    assert c.rule == "pooled" and c.pairs == 1
    low, high, pairs = stats.paired_interval([1.0, 1.0, 1.0], [1, 1, 2], [2.0, 2.0], [1, 2])
    assert pairs == 1 and math.isnan(low)  # round 1 twice on one side pairs with nothing


def test_identical_storage_paired_names_a_false_difference_rarely() -> None:
    """The paired rule keeps the family-wise 5 % on identical distributions (400 seeded runs
    of 4 configs x 5 rounds, round effects included)."""
    rng = random.Random(7)
    false = 0
    for _ in range(400):
        drift = [math.exp(rng.gauss(0, 0.3)) for _ in range(5)]
        times = {c: [10.0 * d * math.exp(rng.gauss(0, 0.05)) for d in drift] for c in "abcd"}
        best = min(times, key=lambda c: stats.median(times[c]))
        r = list(range(5))
        false += any(
            stats.compare(best, times[best], o, times[o], 3, (r, r)).distinguishable
            for o in times if o != best
        )  # fmt: skip
    assert false / 400 < 0.05, false
