"""Each config's trials as the verdict reads them: the run's measure of every ok trial, the
round it ran in, the bounds of the trials given up, and what the config is (its places and
choices, the most common value over its trials). Pure Python (no pandas), so the end-of-run
table, ``iobench list`` and every report format read the same figures from the same rows."""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from iobench.cost.measure import Measure
from iobench.report.placement import FACT_COLUMNS
from iobench.rundir.folder import latest_rows
from iobench.stats import finite, median, percentile
from iobench.units import fmt_s

#: the measure of a run that gives none: time-to-ready (an install's question)
TIME = Measure("time-to-ready", "s", lambda r: r.time_to_ready_s, fmt_s)

#: below this many trials a spread is shown as min–max (every trial inside), above as p10–p90
SPREAD_MINMAX_BELOW = 10


def spread(values: Iterable[object]) -> tuple[float, float, str]:
    """(low, high, name) of the spread shown for a config's trials.

    Under ``SPREAD_MINMAX_BELOW`` trials it is min–max, so every trial lies inside (a
    p10–p90 whisker of two trials would sit between the two dots); from there on p10–p90.
    """
    xs = finite(values)
    if len(xs) < SPREAD_MINMAX_BELOW:
        return percentile(xs, 0), percentile(xs, 100), "min–max"
    return percentile(xs, 10), percentile(xs, 90), "p10–p90"


@dataclass(frozen=True)
class ConfigTimes:
    """One config's successful trials' figures (the run's measure: a time, dollars, a share)
    and what it is (roles, installer, cache, compile)."""

    name: str
    times: tuple[float, ...]  # the measure's figure of each ok trial (seconds for installs)
    facts: Mapping[str, str] = field(default_factory=dict)
    failed: int = 0
    censored: tuple[float, ...] = ()  # the bounds of trials given up (--give-up-after): "> b"
    predicted: float | None = None  # median predicted_s of its trials given up
    rounds: tuple[int, ...] = ()  # the round of each of ``times`` (trials.csv's repeat)
    measure: Measure = field(default=TIME, compare=False)  # what ``times`` are

    def fmt(self, value: float) -> str:
        """A figure of this config's measure, in its words (``2.1 s``, ``$1,974/month``)."""
        return self.measure.fmt(value)

    def vs(self, ratio: float, other: str | None = None) -> str:
        """``2.06× faster than naive``: the ratio of ``other``'s figure over this one's."""
        return self.measure.ratio_words(ratio, other)

    @property
    def n(self) -> int:
        """Successful trials."""
        return len(self.times)

    @property
    def median(self) -> float:
        """Median time-to-ready of the successful trials (NaN without any)."""
        return median(self.times)


def plain(obj: object) -> Mapping[str, Any]:
    """A row or a role as a mapping: dicts as they are, typed records by their fields."""
    if isinstance(obj, Mapping):
        return obj
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    return {}


def _latest(rows: Iterable[object]) -> list[Mapping[str, Any]]:
    """The rows that count (results.latest_rows: a resumed trial counts once, by its later row)."""
    dicts = [plain(r) for r in rows]
    kept, _ = latest_rows(
        [str(r.get("trial_id")) for r in dicts], [str(r.get("status")) for r in dicts]
    )
    return [dicts[i] for i in kept]


class RowView:
    """A row as a measure reads it (attributes), from a dict, a frame's record or a typed row:
    NaN and pandas' NA read as None, a column the row lacks as None."""

    __slots__ = ("_cells",)

    def __init__(self, cells: Mapping[str, Any]) -> None:
        self._cells = cells

    def __getattr__(self, name: str) -> Any:
        value = self._cells.get(name)
        if value is None or value is pd_na() or (isinstance(value, float) and math.isnan(value)):
            return None
        return value


def pd_na() -> object:
    """pandas' NA when pandas is loaded (a frame's record holds it), else a sentinel."""
    mod = sys.modules.get("pandas")
    return mod.NA if mod is not None else _NOTHING


_NOTHING = object()


def configs_from_rows(rows: Iterable[object], measure: Measure = TIME) -> list[ConfigTimes]:
    """Per config (first-seen order): the ok trials' figures (the run's ``measure``: time-to-
    ready unless the kind asks another question), facts (most common value) and failures.
    A trial given up (``--give-up-after``) bounds a timed measure from below."""
    times: dict[str, list[float]] = {}
    rounds: dict[str, list[int]] = {}
    facts: dict[str, dict[str, list[str]]] = {}
    failed: dict[str, int] = {}
    censored: dict[str, list[float]] = {}
    predicted: dict[str, list[float]] = {}
    for r in _latest(rows):
        name = str(r.get("config"))
        times.setdefault(name, [])
        failed.setdefault(name, 0)
        value = measure.of(RowView(r)) if str(r.get("status")) == "ok" else None  # type: ignore[arg-type]
        bound = finite([r.get("censored_after_s")]) if measure.timed else []
        if value is not None:
            times[name].append(value)
            rounds.setdefault(name, []).append(_round(r.get("repeat")))
        elif str(r.get("status")) == "censored" and bound:
            censored.setdefault(name, []).append(bound[0])
            predicted.setdefault(name, []).extend(finite([r.get("predicted_s")]))
        else:
            failed[name] += 1
        for col in FACT_COLUMNS:
            if r.get(col) not in (None, ""):
                facts.setdefault(name, {}).setdefault(col, []).append(str(r.get(col)))
    return [
        ConfigTimes(
            name,
            tuple(times[name]),
            {c: max(set(v), key=v.count) for c, v in facts.get(name, {}).items()},
            failed[name],
            tuple(censored.get(name, ())),
            median(predicted[name]) if predicted.get(name) else None,
            tuple(rounds.get(name, ())),
            measure,
        )
        for name in times
    ]


def _round(value: object) -> int:
    """trials.csv's repeat as a number (0, pairing with nothing real, when unreadable)."""
    try:
        return int(str(value))
    except ValueError:
        return 0


__all__ = ["SPREAD_MINMAX_BELOW", "TIME", "ConfigTimes", "RowView", "configs_from_rows", "plain",
           "spread"]  # fmt: skip
