"""Latency distributions of a probe's operations, and their JSON in fio's words.

Every timed operation of a probe (:mod:`iobench.predict.probes`, :mod:`iobench.predict.tree`)
is one sample in nanoseconds (``time.perf_counter_ns`` around the system call(s) it names).
:class:`Latency` keeps the count, mean, spread, extremes and the percentiles people quote —
p50, p95, p99, p99.9 — computed with the project's one rule (:func:`iobench.stats.percentile`,
linear between order statistics). A p99.9 of fewer than 1,000 samples is the largest-but-one
or so: the count is always printed beside it.

The JSON form (:meth:`Latency.clat_ns`) uses fio's names for a completion-latency block
(``clat_ns``: ``min``, ``max``, ``mean``, ``stddev``, ``N``, ``percentile`` keyed
``"50.000000"`` ...), so a script that reads fio's JSON reads the probe's with the same keys;
fio reports its percentiles from a histogram (within ~1.5 %), these from the samples.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from iobench.stats import percentile

#: the percentiles every probe reports, as fio's JSON names them
PERCENTILES = (50.0, 95.0, 99.0, 99.9)


@dataclass(frozen=True)
class Latency:
    """The distribution of ``count`` timed operations, in nanoseconds."""

    count: int
    min_ns: int
    max_ns: int
    mean_ns: float
    stddev_ns: float
    percentiles_ns: tuple[float, ...]  # at PERCENTILES

    @classmethod
    def of(cls, samples_ns: Sequence[int] | Iterable[int]) -> Latency:
        """The distribution of these samples (all zeros for none)."""
        xs = sorted(int(x) for x in samples_ns)
        if not xs:
            return cls(0, 0, 0, 0.0, 0.0, tuple(0.0 for _ in PERCENTILES))
        mean = sum(xs) / len(xs)
        var = sum((x - mean) ** 2 for x in xs) / (len(xs) - 1) if len(xs) > 1 else 0.0
        return cls(
            len(xs),
            xs[0],
            xs[-1],
            mean,
            math.sqrt(var),
            tuple(percentile(xs, q) for q in PERCENTILES),
        )

    def ms(self, q: float) -> float:
        """Percentile ``q`` (one of :data:`PERCENTILES`) in milliseconds."""
        return self.percentiles_ns[PERCENTILES.index(q)] / 1e6

    @property
    def p50_ms(self) -> float:
        return self.ms(50.0)

    @property
    def p99_ms(self) -> float:
        return self.ms(99.0)

    @property
    def max_ms(self) -> float:
        return self.max_ns / 1e6

    def clat_ns(self) -> dict[str, Any]:
        """fio's ``clat_ns`` block."""
        return {
            "min": self.min_ns,
            "max": self.max_ns,
            "mean": round(self.mean_ns, 1),
            "stddev": round(self.stddev_ns, 1),
            "N": self.count,
            "percentile": {
                f"{q:.6f}": int(round(v))
                for q, v in zip(PERCENTILES, self.percentiles_ns, strict=True)
            },
        }

    @classmethod
    def from_clat_ns(cls, block: Any) -> Latency | None:
        """A ``clat_ns`` block read back (a probe's JSON in a run folder: untrusted), or None."""
        if not isinstance(block, dict) or not isinstance(block.get("percentile"), dict):
            return None
        try:
            pct = tuple(float(block["percentile"][f"{q:.6f}"]) for q in PERCENTILES)
            got = cls(int(block["N"]), int(block["min"]), int(block["max"]),
                      float(block["mean"]), float(block["stddev"]), pct)  # fmt: skip
        except (KeyError, TypeError, ValueError):
            return None
        values = (got.min_ns, got.max_ns, got.mean_ns, got.stddev_ns, *pct)
        if got.count < 0 or not all(math.isfinite(v) and v >= 0 for v in values):
            return None
        return got

    def words(self) -> str:
        """``p50 1.02  p95 1.10  p99 1.31  p99.9 2.40  max 3.02 ms (n=2,000)``."""
        if not self.count:
            return "not measured"
        parts = "  ".join(f"p{q:g} {self.ms(q):.3f}" for q in PERCENTILES)
        return f"{parts}  max {self.max_ms:.3f} ms (n={self.count:,})"
