"""The one place that decides whether two configs' times differ beyond noise.

Pure Python (no numpy or pandas), so the runner, the end-of-run console table and the
report all use the same median, percentile and tie rule. docs/verdicts.md explains the rule
and why it was chosen; in short:

* **median** and **percentile** of the finite values; percentiles interpolate linearly
  between order statistics (Hyndman & Fan type 7, numpy's default).
* **Tie rule** (``compare``): two configs differ when the confidence interval of the ratio
  of their times, from Student's t-test on the logarithms of the trial times (variance
  pooled over the two configs), excludes 1
  *and* the ratio of their medians is at least ``MIN_EFFECT`` (5 %). The interval's level is
  95 % split over the comparisons made (Bonferroni), because the winner is picked as the
  fastest of several configs. Fewer than ``MIN_TRIALS`` (2) successful trials on either side
  cannot show a spread, so they never count as a difference.
* **Paired by round**: a run's round r runs every config once, in a shuffled order. When
  both configs have successful trials in at least ``MIN_PAIRS`` (3) common rounds, the
  interval comes from the per-round log ratios instead (a paired t-test): load that drifts
  across a run (a neighbour starting half-way) shifts both trials of a round and cancels
  out, so it can neither invent a difference nor hide one. ``Comparison.rule`` says which
  interval decided.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: the smallest change in time-to-ready worth acting on (the median ratio must reach 1.05)
MIN_EFFECT = 0.05
#: family-wise confidence of the interval (split over the comparisons made)
CONFIDENCE = 0.95
#: trials per config below which no spread, and so no ranking, can be known
MIN_TRIALS = 2
#: rounds in common from which the paired (by round) interval decides instead of the pooled
MIN_PAIRS = 3


def finite(values: Iterable[object]) -> list[float]:
    """The values that are finite numbers (None, NaN, text and infinities dropped)."""
    out = []
    for v in values:
        try:
            x = float(v)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue
        if math.isfinite(x):
            out.append(x)
    return out


def percentile(values: Iterable[object], q: float) -> float:
    """The q-th percentile (0-100) with linear interpolation; NaN when there are no values."""
    xs = sorted(finite(values))
    if not xs:
        return math.nan
    pos = (len(xs) - 1) * min(max(q, 0.0), 100.0) / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def median(values: Iterable[object]) -> float:
    """The median of the finite values; NaN when there are none."""
    return percentile(values, 50.0)


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                   -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):  # fmt: skip
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h


def _betai(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x)
    front = math.exp(ln + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` (possibly fractional) degrees of freedom."""
    if math.isinf(df):
        return 0.5 * math.erfc(-t / math.sqrt(2.0))
    tail = 0.5 * _betai(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The t value below which a share ``p`` (0.5 <= p < 1) of Student's t lies."""
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-10 * max(1.0, hi):
            break
    return (lo + hi) / 2.0


@dataclass(frozen=True)
class Comparison:
    """Config ``fast`` against config ``slow``: their time ratio, its interval, the decision.

    ``ratio`` is median(slow) / median(fast), so 1.33 reads "fast is 1.33x faster". ``low``
    and ``high`` bound the ratio of their geometric mean times (NaN when unknown).
    """

    fast: str
    slow: str
    ratio: float
    low: float
    high: float
    n_fast: int
    n_slow: int
    distinguishable: bool
    reason: str  # why not, in a few words; "" when distinguishable
    rule: str = "pooled"  # which interval decided: "paired" (by round) or "pooled"
    pairs: int = 0  # rounds in which both configs have a successful trial

    @property
    def interval_text(self) -> str:
        """``95%: 1.3–2.1×, n=3, paired by round`` (the family-wise level, as decided)."""
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            return self.n_text
        how = "paired by round" if self.rule == "paired" else "pooled"
        return f"{CONFIDENCE:.0%}: {self.low:.2f}–{self.high:.2f}×, {self.n_text}, {how}"

    @property
    def n_text(self) -> str:
        """``n=3`` or ``n=3 and 5``: the number of trials behind the decision."""
        if self.n_fast == self.n_slow:
            return f"n={self.n_fast}"
        return f"n={self.n_fast} and {self.n_slow}"


def _mean_var(xs: Sequence[float]) -> tuple[float, float]:
    m = sum(xs) / len(xs)
    return m, sum((x - m) ** 2 for x in xs) / (len(xs) - 1)


def ratio_interval(
    fast: Sequence[float], slow: Sequence[float], comparisons: int = 1
) -> tuple[float, float]:
    """Interval of slow/fast (geometric means) from Student's t on log times with the
    variance pooled over both configs; NaN if n < 2 on either side."""
    a = [math.log(x) for x in finite(fast) if x > 0]
    b = [math.log(x) for x in finite(slow) if x > 0]
    na, nb = len(a), len(b)
    if na < MIN_TRIALS or nb < MIN_TRIALS:
        return math.nan, math.nan
    (ma, va), (mb, vb) = _mean_var(a), _mean_var(b)
    diff = mb - ma
    df = na + nb - 2
    se = math.sqrt(((na - 1) * va + (nb - 1) * vb) / df * (1.0 / na + 1.0 / nb))
    if se == 0.0:
        return math.exp(diff), math.exp(diff)
    alpha = (1.0 - CONFIDENCE) / max(comparisons, 1)
    q = t_quantile(1.0 - alpha / 2.0, df)
    return math.exp(diff - q * se), math.exp(diff + q * se)


def paired_interval(
    fast: Sequence[float],
    fast_rounds: Sequence[int],
    slow: Sequence[float],
    slow_rounds: Sequence[int],
    comparisons: int = 1,
) -> tuple[float, float, int]:
    """Interval of slow/fast from the rounds both ran in: Student's t on the per-round log
    ratios (paired), so that load drifting from round to round cancels out. Returns
    ``(low, high, pairs)``; NaN bounds below ``MIN_PAIRS`` pairs."""
    a, b = _by_round(fast, fast_rounds), _by_round(slow, slow_rounds)
    d = [math.log(b[r]) - math.log(a[r]) for r in sorted(a.keys() & b.keys())]
    if len(d) < MIN_PAIRS:
        return math.nan, math.nan, len(d)
    m, v = _mean_var(d)
    se = math.sqrt(v / len(d))
    if se == 0.0:
        return math.exp(m), math.exp(m), len(d)
    alpha = (1.0 - CONFIDENCE) / max(comparisons, 1)
    q = t_quantile(1.0 - alpha / 2.0, len(d) - 1)
    return math.exp(m - q * se), math.exp(m + q * se), len(d)


def _by_round(times: Sequence[float], rounds: Sequence[int]) -> dict[int, float]:
    """round -> time of the finite positive times; a round seen twice pairs with nothing."""
    out: dict[int, float] = {}
    seen: set[int] = set()
    for t, r in zip(times, rounds, strict=True):
        if isinstance(t, (int, float)) and math.isfinite(t) and t > 0:
            if r in seen:
                out.pop(r, None)
            else:
                out[r] = float(t)
            seen.add(r)
    return out


def compare(
    fast_name: str,
    fast: Sequence[float],
    slow_name: str,
    slow: Sequence[float],
    comparisons: int = 1,
    rounds: tuple[Sequence[int], Sequence[int]] | None = None,
) -> Comparison:
    """Is ``fast`` faster than ``slow`` beyond noise? (See the module docstring.)

    ``rounds``: the round of each time of ``fast`` and of ``slow``; with ``MIN_PAIRS`` or
    more rounds in common the paired interval decides, else the pooled one."""
    a, b = finite(fast), finite(slow)
    ma, mb = median(a), median(b)
    ratio = mb / ma if a and b and ma > 0 else math.nan
    low, high = ratio_interval(a, b, comparisons)
    rule, pairs = "pooled", 0
    if rounds is not None:
        p_low, p_high, pairs = paired_interval(fast, rounds[0], slow, rounds[1], comparisons)
        if pairs >= MIN_PAIRS:
            low, high, rule = p_low, p_high, "paired"
    if min(len(a), len(b)) < MIN_TRIALS:
        reason = "one trial" if min(len(a), len(b)) == 1 else "no trial"
        return Comparison(fast_name, slow_name, ratio, low, high, len(a), len(b), False, reason,
                          rule, pairs)  # fmt: skip
    if not (low > 1.0):
        reason = "within the spread"
    elif not ratio >= 1.0 + MIN_EFFECT:
        reason = f"under {MIN_EFFECT:.0%}"
    else:
        reason = ""
    return Comparison(fast_name, slow_name, ratio, low, high, len(a), len(b), not reason, reason,
                      rule, pairs)  # fmt: skip


def censored_median(values: Sequence[float], censored: Sequence[bool]) -> tuple[float, bool]:
    """The median of times some of which are only lower bounds (``censored``: the trial was
    ended at that time, docs/early-stop.md): ``(m, False)`` when the median is a finished
    time, ``(b, True)`` when it is not ("> b"). A censored time counts as +inf for where the
    median falls; ``b`` is the median with every bound taken as its value (the median can
    only be larger). NaN without values."""
    pairs = [(float(v), bool(c)) for v, c in zip(values, censored, strict=True)]
    pairs = [(v, c) for v, c in pairs if math.isfinite(v)]
    if not pairs:
        return math.nan, False
    ranked = sorted(pairs, key=lambda p: (math.inf if p[1] else p[0], p[0]))
    n = len(ranked)
    middle = ranked[(n - 1) // 2 : n // 2 + 1]
    if any(c for _, c in middle):
        return median([v for v, _ in pairs]), True
    return sum(v for v, _ in middle) / len(middle), False
