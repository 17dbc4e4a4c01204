"""The order of a run's trials: every config takes every place in a round equally often.

Why: a config that always runs first (after an idle machine, a cold page cache, a fresh
volume connection) or always right after another one gets a treatment of its own that is
not the storage. On identical storage the first config of every round won 5 runs of 7.

Method: trials run in rounds (repeat 1 of every config, then repeat 2, ...), so that drift
in the machine's load spreads over all configs. Within a cycle of as many rounds as there
are configs, round k uses a base order rotated by k places (a Latin square): over a full
cycle each config takes each position exactly once. Each cycle's base order is a shuffle
drawn from a seeded generator, so neighbours change from cycle to cycle; the seed is
recorded in meta.json (``order_seed``) and a resumed run rebuilds the same plan from it.

One constraint on the first round: a warm-cache config runs after a cold config whose filled
cache it can adopt (same placement, ``iobench.trial.warmcache``), when the run has one. Its
cache then comes from that cold trial instead of an untimed priming install (a full second
install: 2 s of a 30 s smoke run, 7 s of a torch-like one on a slow volume). The first
cycle's base order is drawn again from the same seeded generator until it satisfies this,
so it is still a uniform draw among the orders that do, and rotations keep every config at
every place once per cycle.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from iobench.scenario.config import Config
from iobench.trial.context import TrialSpec
from iobench.trial.warmcache import feeds

#: draws of the first cycle's base order before giving up on the adoption constraint
_DRAWS = 1000


def _adoption_first(order: Sequence[Config], configs: Sequence[Config]) -> bool:
    """Every warm config that some cold config of the run can feed comes after one."""
    for i, warm in enumerate(order):
        if any(feeds(c, warm) for c in configs) and not any(feeds(c, warm) for c in order[:i]):
            return False
    return True


def round_order(configs: Sequence[Config], round_no: int, seed: int) -> list[Config]:
    """The configs in the order round ``round_no`` (1-based) runs them."""
    n = len(configs)
    if n == 0:
        return []
    cycle, shift = divmod(round_no - 1, n)
    base = list(configs)
    rng = random.Random(f"{seed}:{cycle}")
    rng.shuffle(base)
    for _ in range(_DRAWS if cycle == 0 else 0):
        if _adoption_first(base, configs):
            break
        rng.shuffle(base)
    return base[shift:] + base[:shift]


def plan_trials(
    configs: Sequence[Config],
    repeats: int,
    seed: int,
    done: frozenset[str] | set[str] = frozenset(),
) -> list[TrialSpec]:
    """Every trial of the run in order, minus those already done (for --resume)."""
    plans = [
        TrialSpec(cfg, repeat=r, round=r, position=i)
        for r in range(1, repeats + 1)
        for i, cfg in enumerate(round_order(configs, r, seed))
    ]
    return [p for p in plans if p.trial_id not in done]


__all__ = ["plan_trials", "round_order"]
