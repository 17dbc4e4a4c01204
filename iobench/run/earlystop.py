"""When a run has its answer: the give-up bound of the next trial and the rule that stops repeating.

Both are pure functions of the rows measured so far (docs/early-stop.md states the rule and
why): ``give_up_bound`` is ``K`` times the best finished median, the time past which a trial
is ended and recorded as ``censored`` (its time-to-ready is only known to exceed the bound);
``settled`` says whether the ranking and the headline ratio can no longer change enough to
matter, using the report's own tie rule (``iobench.stats.compare``), so a run stopped early
says what its report would say.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from iobench.cost.measure import Measure
from iobench.scenario.vocab import AUTO_MAX_REPEATS, MIN_AUTO_ROUNDS
from iobench.stats import Comparison, censored_median, compare

#: --give-up-after below this would end trials that are only noisily slower
MIN_GIVE_UP = 1.5
#: rounds before the rule may stop a run; --repeats auto's maximum unless given (``auto:N``)
MIN_ROUNDS, DEFAULT_MAX_REPEATS = MIN_AUTO_ROUNDS, AUTO_MAX_REPEATS
#: the headline ratio is settled when its interval lies within this share of it
RATIO_TOLERANCE = 0.25


@dataclass(frozen=True)
class Outcome:
    """One trial's time-to-ready, or (``censored``) the bound it ran past."""

    seconds: float
    censored: bool = False
    round: int = 0  # the round it ran in (trials.csv's repeat): the verdict pairs by round


def outcomes(rows: Iterable[object], measure: Measure | None = None) -> dict[str, list[Outcome]]:
    """Per config (first-seen order): the ok trials' times and the censored ones' bounds;
    failed, stalled and interrupted trials say nothing about the time and are left out.
    ``measure``: the run's question (``iobench.cost.measure``) when it is not the time: each
    ok trial's figure (a trial given up bounds only a time)."""
    out: dict[str, list[Outcome]] = {}
    for r in rows:
        status, config = getattr(r, "status", ""), str(getattr(r, "config", ""))
        rnd = int(getattr(r, "repeat", 0) or 0)
        if measure is not None and not measure.timed:
            value = measure.of(r) if status == "ok" else None  # type: ignore[arg-type]
            if value is not None and value > 0:
                out.setdefault(config, []).append(Outcome(value, False, rnd))
        elif status == "ok" and _finite(getattr(r, "time_to_ready_s", None)):
            out.setdefault(config, []).append(Outcome(float(r.time_to_ready_s), False, rnd))  # type: ignore[attr-defined]
        elif status == "censored" and _finite(getattr(r, "censored_after_s", None)):
            out.setdefault(config, []).append(Outcome(float(r.censored_after_s), True, rnd))  # type: ignore[attr-defined]
    return out


def _finite(x: object) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def config_median(obs: Sequence[Outcome]) -> tuple[float, bool]:
    """A config's median and whether it is only a lower bound (``> b``)."""
    return censored_median([o.seconds for o in obs], [o.censored for o in obs])


def ranking(by_config: Mapping[str, Sequence[Outcome]]) -> list[str]:
    """Configs fastest first: finished medians by value, then the censored ones by bound."""
    meds = {c: config_median(v) for c, v in by_config.items() if v}
    return sorted(meds, key=lambda c: (meds[c][1], meds[c][0]))


def best_median(by_config: Mapping[str, Sequence[Outcome]]) -> float | None:
    """The smallest finished median of any config, None while no config has one."""
    meds = [m for v in by_config.values() if v for m, cen in [config_median(v)] if not cen]
    return min(meds) if meds else None


def give_up_bound(
    by_config: Mapping[str, Sequence[Outcome]],
    k: float,
    predicted: Mapping[str, float | None] | None = None,
    config: str = "",
) -> float | None:
    """The next trial's bound: ``k`` x the best finished median. Before any config has
    finished, the prediction stands in (docs/prediction.md): a ``config`` predicted slower
    than ``k`` x the best prediction gets that as its bound, every other one runs in full
    (so the configs that set the first measured best are never cut by a prediction)."""
    best = best_median(by_config)
    if best is not None and best > 0:
        return k * best
    guesses = [v for v in (predicted or {}).values() if v is not None and v > 0]
    mine = (predicted or {}).get(config)
    if guesses and mine is not None and mine > k * min(guesses):
        return k * min(guesses)
    return None


def settled(
    by_config: Mapping[str, Sequence[Outcome]],
    baseline: str,
    min_rounds: int = MIN_ROUNDS,
    best: str = "fastest",
) -> str | None:
    """Why the run may stop repeating now, or None to run another round.

    Settled when every config has ``min_rounds`` values and (1) the fastest config ``W``
    has no censored value and is told from every other config ``C``: by the report's tie
    rule (``stats.compare``, censored values at their bound, which only understates the
    difference), or alike (not told apart, medians within ±``RATIO_TOLERANCE``: either
    is the answer), when C's median is a finished time; when C's median is censored (``> b``,
    more than K x best) by every value of W lying below every value or bound of C; and (2)
    the headline ratio ``baseline / W`` is known within ±``RATIO_TOLERANCE``: the interval
    the verdict prints (``stats.compare``) lies inside it, or the baseline's median is censored (the ratio is
    then reported as ``> b / W``); when the runner-up is alike ``W`` and also told from the
    baseline, the verdict may name it instead (the one with fewer changes), so its headline
    ratio must be known as well.
    """
    have = {c: list(v) for c, v in by_config.items() if v}
    if len(have) < 2 or not all(len(v) >= min_rounds or given_up(v) for v in have.values()):
        return None
    order = ranking(have)
    w = order[0]
    if any(o.censored for o in have[w]):
        return None
    fast = [o.seconds for o in have[w]]
    alike = []
    for other in order[1:]:
        obs = have[other]
        if config_median(obs)[1]:  # "> b": more than K x best; every W value must be below it
            if max(fast) >= min(o.seconds for o in obs):
                return None
        else:
            rounds = ([o.round for o in have[w]], [o.round for o in obs])
            c = compare(w, fast, other, [o.seconds for o in obs], len(order) - 1, rounds)
            if not c.distinguishable:
                if not _alike(c):
                    return None
                alike.append(other)
    n = min((len(v) for v in have.values() if not given_up(v)), default=1)
    if alike and len(alike) == len(order) - 1:  # the verdict: no difference beyond noise
        lead = (f"{w} measured {best}, not told apart: {', '.join(alike)} alike, within "
                f"±{RATIO_TOLERANCE:.0%}")  # fmt: skip
    else:
        lead = f"{w} {best} beyond noise" + (f" (alike: {', '.join(alike)})" if alike else "")
    if baseline == w or baseline not in have:
        return f"ranking settled after {n} rounds ({lead})"
    heads = [_headline(have, w, baseline, len(order) - 1)]
    runner = order[1]
    if runner in alike and runner != baseline and _told(have, runner, baseline, len(order) - 1):
        heads.append(_headline(have, runner, baseline, len(order) - 1))
    known = [h for h in heads if h is not None]
    if len(known) < len(heads):
        return None
    return f"ranking and headline ratio settled after {n} rounds ({lead}; {'; '.join(known)})"


def _told(have: Mapping[str, list[Outcome]], c: str, baseline: str, k: int) -> bool:
    """Whether ``c`` is faster than the baseline beyond noise: a runner-up alike ``W`` that
    is may be the config the verdict names (of two tied configs, the one with fewer changes:
    docs/verdicts.md), so its headline ratio must be known too."""
    fast, base = have[c], have[baseline]
    if config_median(base)[1]:
        return True
    return compare(c, [o.seconds for o in fast], baseline, [o.seconds for o in base], k,
                   ([o.round for o in fast], [o.round for o in base])).distinguishable  # fmt: skip


def _headline(have: Mapping[str, list[Outcome]], w: str, baseline: str, k: int) -> str | None:
    """The headline ratio ``baseline / w`` when known within ±``RATIO_TOLERANCE``, else None.
    Its interval is the one the verdict prints: the same ``k`` comparisons (Bonferroni),
    paired by round from MIN_PAIRS rounds on (a pooled, unadjusted one settled the default
    run at 1.01-1.37x while its verdict said 0.89-1.54x)."""
    med_b, cen_b = config_median(have[baseline])
    med_w = config_median(have[w])[0]
    if cen_b:
        return f"{baseline} / {w} > {med_b / med_w:.2f}x, censored"
    ratio = med_b / med_w
    base, fast = have[baseline], have[w]
    head = compare(w, [o.seconds for o in fast], baseline, [o.seconds for o in base], k,
                   ([o.round for o in fast], [o.round for o in base]))  # fmt: skip
    if not (
        head.low >= ratio / (1 + RATIO_TOLERANCE) and head.high <= ratio * (1 + RATIO_TOLERANCE)
    ):
        return None
    return f"{baseline} / {w} = {ratio:.2f}x, {head.interval_text}"


def given_up(obs: Sequence[Outcome]) -> bool:
    """Every trial of the config so far was given up (more than K x the best median, or
    prediction): it is no candidate for the answer, and ``--repeats auto`` does not repeat
    it (a second bound would only confirm "> K x best" at K x the best's cost again)."""
    return bool(obs) and all(o.censored for o in obs)


def _alike(c: Comparison) -> bool:
    """Two configs the tie rule cannot tell apart whose medians lie within
    ±``RATIO_TOLERANCE`` of each other: the same answer ("either"), and more rounds would
    be spent on a difference smaller than the headline's own tolerance."""
    return not c.distinguishable and 1 / (1 + RATIO_TOLERANCE) <= c.ratio <= 1 + RATIO_TOLERANCE


def parse_repeats(text: str) -> int | tuple[str, int]:
    """``--repeats``: a number of trials per config, or ``auto`` / ``auto:N`` (stop once
    settled, at most N rounds; default ``DEFAULT_MAX_REPEATS``) as ``("auto", N)``."""
    word, _, most = text.strip().partition(":")
    if word != "auto":
        value = int(text)
        if value < 1:
            raise ValueError(text)
        return value
    top = int(most) if most else DEFAULT_MAX_REPEATS
    if top < MIN_ROUNDS:
        raise ValueError(text)
    return ("auto", top)


__all__ = [
    "Outcome", "best_median", "config_median", "give_up_bound", "outcomes", "parse_repeats",
    "ranking", "settled",
]  # fmt: skip
