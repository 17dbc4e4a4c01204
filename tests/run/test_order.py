"""iobench.run.order: order is not a treatment — every config takes every place equally often."""

from __future__ import annotations

from collections import Counter

import pytest

from iobench.run.order import plan_trials, round_order
from iobench.scenario.kinds.install import InstallConfig as Config


def _configs(n: int) -> tuple[Config, ...]:
    return tuple(Config(f"c{i}", "target", "tmp", "off") for i in range(n))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("cycles", [1, 3])
def test_plan_is_balanced_over_full_cycles(n: int, cycles: int) -> None:
    plans = plan_trials(_configs(n), repeats=n * cycles, seed=1234)
    assert len(plans) == n * n * cycles
    places = Counter((p.config.name, p.position) for p in plans)
    assert set(places.values()) == {cycles}  # each config at each position equally often
    assert len(places) == n * n
    for r in range(1, n * cycles + 1):  # every round runs every config once, positions 1..n
        in_round = [p for p in plans if p.round == r]
        assert sorted(p.config.name for p in in_round) == sorted(c.name for c in _configs(n))
        assert [p.position for p in in_round] == list(range(n))  # 0: first
        assert all(p.repeat == r for p in in_round)


def test_first_place_is_not_always_the_same_config() -> None:
    firsts = {p.config.name for p in plan_trials(_configs(4), repeats=4, seed=7) if p.position == 0}
    assert len(firsts) == 4


def test_the_seed_decides_the_order_and_a_resume_rebuilds_it() -> None:
    configs = _configs(4)
    a = [p.trial_id for p in plan_trials(configs, 8, seed=99)]
    assert a == [p.trial_id for p in plan_trials(configs, 8, seed=99)]
    orders = {tuple(c.name for c in round_order(configs, 1, seed)) for seed in range(20)}
    assert len(orders) > 1  # the base order is shuffled by the seed
    done = set(a[:5])
    rest = plan_trials(configs, 8, seed=99, done=done)
    assert [p.trial_id for p in rest] == a[5:]


def test_no_configs_no_trials() -> None:
    assert plan_trials((), 3, seed=0) == []


def test_a_warm_config_runs_after_a_cold_config_whose_cache_it_can_adopt() -> None:
    """Round 1 puts the warm config after a cold one of its placement (no priming install);
    later rounds stay rotations, so the balance over a cycle holds."""
    naive = Config("naive", "target", "target", "target")
    tmp_fix = Config("tmp-fix", "target", "tmp", "tmp")
    on_tmp = Config("venv-on-tmp", "tmp", "tmp", "tmp")
    warm = Config("warm", "tmp", "tmp", "target", cache_state="warm")
    configs = (warm, on_tmp, tmp_fix, naive)
    firsts = set()
    for seed in range(200):
        first = [c.name for c in round_order(configs, 1, seed)]
        assert first.index("naive") < first.index("warm"), (seed, first)
        firsts.add(first[0])
        plans = plan_trials(configs, repeats=4, seed=seed)
        places = Counter((p.config.name, p.position) for p in plans)
        assert set(places.values()) == {1} and len(places) == 16
    assert firsts == {"naive", "tmp-fix", "venv-on-tmp"}  # still drawn, not fixed
    # no cold config of that placement: nothing to wait for, the warm one may come first
    alone = (warm, on_tmp, tmp_fix)
    assert {round_order(alone, 1, s)[0].name for s in range(50)} == {
        "warm",
        "venv-on-tmp",
        "tmp-fix",
    }
