"""How often to save a checkpoint: Young's interval, and the GPU time a failure costs.

Method (J. W. Young, "A first order approximation to the optimum checkpoint interval",
Communications of the ACM 17(9), 1974; J. T. Daly, "A higher order estimate of the optimum
checkpoint interval for restart dumps", Future Generation Computer Systems 22(3), 2006):
failures come at random, one per ``mtbf`` on average. Saving every ``T`` seconds, a save that
pauses the GPU for ``C`` seconds costs ``C / T`` of its time; a failure costs, on average, the
work since the last save that is durable where a restarted pod finds it — half an interval,
plus the save itself and any background copy (``D``: the window in which a crash still loses
the save) — and the restore (``R``) before work resumes. So the share of GPU time lost is

    lost(T) = C / T + (T / 2 + C + D + R) / mtbf

which is least at Young's ``T* = sqrt(2 · C · mtbf)`` (Daly's higher-order terms matter only
when ``C`` is a sizeable share of ``mtbf``). An interval shorter than ``C + D`` would start a
save before the last one is durable, so ``T*`` is never less than that. Pure functions:
seconds in, seconds or shares out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: the pod's mean time between failures when the user gives none (hours). Google Compute
#: Engine's documentation ("Create and use preemptible VMs") says preemptible VMs always stop
#: after 24 hours: interruptible capacity lives at most a day. A pre-emption, a spot reclaim,
#: a driver error on a shared GPU and a pod restart all end a run the same way; hardware alone
#: fails far less often (Meta's Llama 3 training saw 419 unexpected interruptions in 54 days on
#: 16,384 GPUs: one per ~50,700 GPU-hours). Pass --mtbf-hours for your own pod.
MTBF_HOURS = 24.0
#: docs/checkpoint.md's story: a LoRA fine-tune that died after 7 h 20 min without a save
NO_SAVE_RUN_HOURS = 7 + 20 / 60


@dataclass(frozen=True)
class SaveCosts:
    """One placement's measured times, seconds: the pause, the copy after it, the restore."""

    pause_s: float  # what the GPU waits for: the save (to local disk when it copies out)
    lag_s: float  # from the pause's end until the save is durable where a restart finds it
    restore_s: float  # the cold read back after a restart


def young_interval_s(pause_s: float, mtbf_s: float) -> float:
    """Young's optimum interval between saves, ``sqrt(2 · C · mtbf)``."""
    return math.sqrt(2.0 * pause_s * mtbf_s)


def best_interval_s(costs: SaveCosts, mtbf_s: float) -> float:
    """Young's interval, but never shorter than a save and its copy take."""
    return max(young_interval_s(costs.pause_s, mtbf_s), costs.pause_s + costs.lag_s)


def lost_share(costs: SaveCosts, interval_s: float, mtbf_s: float) -> float:
    """The share of GPU time lost to saves and failures when saving every ``interval_s``."""
    if interval_s <= 0:
        raise ValueError("the interval must be positive")
    failure_s = interval_s / 2.0 + costs.pause_s + costs.lag_s + costs.restore_s
    return costs.pause_s / interval_s + failure_s / mtbf_s


def no_save_risk(run_s: float, mtbf_s: float) -> tuple[float, float]:
    """A run of ``run_s`` with no save: (the chance a failure ends it, the GPU seconds lost on
    average — a failure at ``t`` loses all ``t`` seconds run so far).

    Failures are exponential with mean ``mtbf``: P = 1 − e^(−L/M), and the loss is
    ∫₀ᴸ t e^(−t/M) / M dt = M (1 − e^(−L/M) (1 + L/M))."""
    x = run_s / mtbf_s
    return -math.expm1(-x), mtbf_s * (1.0 - math.exp(-x) * (1.0 + x))


__all__ = ["MTBF_HOURS", "NO_SAVE_RUN_HOURS", "SaveCosts", "best_interval_s", "lost_share",
           "no_save_risk", "young_interval_s"]  # fmt: skip
