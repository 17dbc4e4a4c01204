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
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from iobench.scenario import Config
from iobench.trial import TrialSpec


def round_order(configs: Sequence[Config], round_no: int, seed: int) -> list[Config]:
    """The configs in the order round ``round_no`` (1-based) runs them."""
    n = len(configs)
    if n == 0:
        return []
    cycle, shift = divmod(round_no - 1, n)
    base = list(configs)
    random.Random(f"{seed}:{cycle}").shuffle(base)
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
