"""The verdict of a run: which config wins, whether that is beyond noise, and whether to advise.

The one verdict engine of every kind of work: it judges the run's measure (its kind's question,
``iobench.cost.measure``: time-to-ready, a month of training, GPU time lost), lower is better.
Pure Python (no pandas), so the end-of-run console table and every report format decide
the same way from the same rule (``iobench.stats.compare``; docs/verdicts.md). The verdict
is one of:

* ``advice`` — the best config beats the baseline beyond noise: name it and print what
  to set;
* ``keep`` — the baseline is the best: keep what you have;
* ``noise`` — the best config is not distinguishable from the baseline: "no difference
  beyond noise (n=…)", and no start script;
* ``too-few`` — one trial per config: a ranking needs more;
* ``same-storage`` — the fastest config differs from the baseline only by moving things
  between roles that sit on one filesystem (same device and mount point): the difference
  can only be noise or order, and is never turned into advice;
* ``none`` — no config finished a trial.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from iobench.cost.measure import Measure
from iobench.report.configs import (
    TIME,
    ConfigTimes,
    _latest,
    configs_from_rows,
    spread,
)
from iobench.report.placement import differences, shared_storage_lines
from iobench.rundir.meta import RoleInfo
from iobench.stats import (
    MIN_TRIALS,
    Comparison,
    censored_median,
    compare,
)
from iobench.units import fmt_s, fmt_s_range, noise_word

MORE_REPEATS = "iobench run --repeats 5"


def _more_repeats(n: int) -> str:
    """What to run for a clearer answer after ``n`` trials a config: more than it had (twice
    as many, at least 5), and from 5 on a quieter machine (noise, not the count, is then the
    limit)."""
    if n < 3:
        return MORE_REPEATS
    return f"iobench run --repeats {max(2 * n, 5)}, on a machine without other disk I/O"


def _compare(fast: ConfigTimes, slow: ConfigTimes, k: int) -> Comparison:
    """The tie rule between two configs, paired by round where their rounds allow it."""
    rounds = (
        (fast.rounds, slow.rounds)
        if len(fast.rounds) == fast.n and len(slow.rounds) == slow.n
        else None
    )
    return compare(fast.name, fast.times, slow.name, slow.times, k, rounds)


# --- the verdict --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """The decision and its sentence; ``advise`` is True only when a start script is earned."""

    kind: str
    headline: str
    fastest: str | None = None  # the fastest measured, beyond noise or not
    baseline: str | None = None
    runner_up: str | None = None
    vs_baseline: Comparison | None = None
    vs_runner_up: Comparison | None = None
    changes: tuple[str, ...] = ()
    moot: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    advised: str | None = None  # the config the start script is for (kind "advice")

    @property
    def advise(self) -> bool:
        """Whether the outputs may print a start script."""
        return self.kind == "advice"

    @property
    def winner(self) -> str | None:
        """The config the verdict names: the advised one, or the baseline when it is fastest
        beyond noise; None for "no difference", "too few trials" and a lone config. The one
        meaning of "winner" in every export, ``list``, Markdown and HTML."""
        if self.kind == "advice":
            return self.advised
        if self.kind == "keep" and self.vs_runner_up is not None:
            return self.fastest if self.vs_runner_up.distinguishable else None
        return None


def _label(c: ConfigTimes) -> str:
    return f"{c.name} {c.fmt(c.median)}"


def decide(
    configs: Sequence[ConfigTimes],
    baseline: str | None,
    roles: Mapping[str, RoleInfo] | None = None,
) -> Verdict:
    """Apply the tie rule to the fastest config, the runner-up and the baseline."""
    roles = roles or {}
    usable = sorted((c for c in configs if c.n > 0), key=lambda c: c.median)
    if not usable:
        return Verdict("none", "No config finished a trial; nothing to compare.")
    win = usable[0]
    base = next((c for c in usable if c.name == baseline), None)
    runner = usable[1] if len(usable) > 1 else None
    k = max(len(usable) - 1, 1)
    vs_runner = _compare(win, runner, k) if runner else None
    vs_base = _compare(win, base, k) if base and base is not win else None
    common = Verdict("", "", win.name, base.name if base else None,
                     runner.name if runner else None, vs_base, vs_runner)  # fmt: skip
    shown = [c for c in (win, base, runner) if c is not None]
    given_up = next((c for c in configs if c.name == baseline and not c.n and c.censored), None)
    if given_up is not None and win.n >= MIN_TRIALS and max(win.times) < min(given_up.censored):
        return _beats_given_up(win, given_up, roles, common)
    if min(c.n for c in shown) < MIN_TRIALS:
        return replace(
            common,
            kind="too-few",
            headline=f"One trial per config ({win.measure.best} measured: {_label(win)}): a ranking needs at least "
            f"{MIN_TRIALS} trials per config, and 3 or more to tell small differences apart "
            f"({MORE_REPEATS}).",
        )
    if base is None or base is win:
        return _baseline_fastest(win, runner, vs_runner, common)
    assert vs_base is not None
    real, moot = differences(win.facts, base.facts, roles)
    if real and vs_base.distinguishable:
        return _advise_fastest(win, base, runner, vs_base, vs_runner, real, moot, common, k, roles)
    slower = _slower_beyond_noise(usable, base, win, bool(real), k, roles, common)
    if slower is not None:
        return slower
    return _no_difference(win, base, vs_base, real, moot, common)


def _beats_given_up(
    win: ConfigTimes, base: ConfigTimes, roles: Mapping[str, RoleInfo], common: Verdict
) -> Verdict:
    """The baseline's every trial was given up (``--give-up-after``) later than the fastest
    config's slowest trial finished: it is slower beyond any noise, by more than the ratio
    of its lowest bound to the fastest median (docs/early-stop.md)."""
    bound = min(base.censored)
    real, moot = differences(win.facts, base.facts, roles)
    guess = ""
    if base.predicted is not None and base.predicted > bound:  # the model agrees with the bound
        guess = (
            f"; predicted {fmt_s(base.predicted)}, ~{base.predicted / win.median:.1f}× "
            "(docs/prediction.md)"
        )
    text = (
        f"{win.name} is more than {bound / win.median:.2f}× faster than {base.name} "
        f"({fmt_s(win.median)}, n={win.n}; {base.name}'s {len(base.censored)} trial(s) given "
        f"up after > {fmt_s(bound)}{guess})."
    )
    return replace(common, kind="advice", headline=text, advised=win.name, baseline=base.name,
                   changes=tuple(real), moot=tuple(moot))  # fmt: skip


def _advise_fastest(
    win: ConfigTimes,
    base: ConfigTimes,
    runner: ConfigTimes | None,
    vs_base: Comparison,
    vs_runner: Comparison | None,
    real: list[str],
    moot: list[str],
    common: Verdict,
    k: int = 1,
    roles: Mapping[str, RoleInfo] | None = None,
) -> Verdict:
    """The fastest beats the baseline beyond noise; say so when the runner-up ties with it.

    Two configs that tie within noise and both beat the baseline: the one with fewer
    changes against the baseline is advised (then the first by name), not the
    faster-measured — which of two tied configs measures faster is noise, and a verdict
    that flips between them from run to run is no verdict."""
    if runner is None or runner is base or vs_runner is None or vs_runner.distinguishable:
        return _advice(win, base, vs_base, real, moot, common, "", [])
    r_real, r_moot = differences(runner.facts, base.facts, roles or {})
    vs_base_r = _compare(runner, base, k)
    both = bool(r_real) and vs_base_r.distinguishable
    simpler = both and (len(r_real), runner.name) < (len(real), win.name)
    pick, other = (runner, win) if simpler else (win, runner)
    extra = f"; {other.name} ({other.fmt(other.median)}) is {other.measure.alike} within noise"
    notes = [
        f"{win.name} and {runner.name} are not distinguishable ({vs_runner.n_text}); either "
        "change pays off, and the start script shows "
        + ("the one with fewer changes" if both else "the faster-measured one")
    ]
    if simpler:
        return _advice(runner, base, vs_base_r, r_real, r_moot, common, extra, notes)
    return _advice(win, base, vs_base, real, moot, common, extra, notes)


def _slower_beyond_noise(
    usable: Sequence[ConfigTimes],
    base: ConfigTimes,
    win: ConfigTimes,
    win_real: bool,
    k: int,
    roles: Mapping[str, RoleInfo],
    common: Verdict,
) -> Verdict | None:
    """The fastest measured is not beyond noise: advise a slower config that is, if any."""
    for other in usable[1 : usable.index(base)]:
        test = _compare(other, base, k)
        o_real, o_moot = differences(other.facts, base.facts, roles)
        if o_real and test.distinguishable:
            why = (
                "its trials spread too much to tell"
                if win_real
                else "it only moves things within one filesystem"
            )
            extra = f"; {win.name} measured {win.measure.better} ({win.fmt(win.median)}), but {why}"
            return _advice(other, base, test, o_real, o_moot, common, extra, [])
    return None


def _no_difference(
    win: ConfigTimes,
    base: ConfigTimes,
    vs_base: Comparison,
    real: list[str],
    moot: list[str],
    common: Verdict,
) -> Verdict:
    """Nothing beats the baseline beyond noise: same storage, or noise (configs that differ
    in no placement at all — two strategies, two installers — are noise, not same storage)."""
    if not real and moot:
        return replace(
            common,
            kind="same-storage",
            headline=f"No difference to act on: {win.name} and {base.name} differ only in "
            f"{'; '.join(moot)}, one filesystem, so {_label(win)} vs {_label(base)} "
            f"({vs_base.n_text}) is noise or order.",
            moot=tuple(moot),
        )
    return replace(
        common,
        kind="noise",
        headline=f"No difference beyond noise ({vs_base.interval_text}): {win.measure.best} measured {_label(win)} vs "
        f"{_label(base)}; keep what you have, or measure again with more repeats "
        f"({_more_repeats(min(win.n, base.n))}).",
        changes=tuple(real),
        moot=tuple(moot),
    )


def _advice(
    cfg: ConfigTimes,
    base: ConfigTimes,
    test: Comparison,
    real: list[str],
    moot: list[str],
    common: Verdict,
    extra: str,
    notes: list[str],
) -> Verdict:
    text = (
        f"{cfg.name} {cfg.measure.verb} {cfg.vs(test.ratio, base.name)} ({cfg.fmt(cfg.median)} "
        f"vs {base.fmt(base.median)}; {test.interval_text}; beyond noise){extra}."
    )
    return replace(
        common,
        kind="advice",
        headline=text,
        advised=cfg.name,
        vs_baseline=test,
        changes=tuple(real),
        moot=tuple(moot),
        notes=tuple(notes),
    )


def _baseline_fastest(
    win: ConfigTimes, runner: ConfigTimes | None, vs_runner: Comparison | None, common: Verdict
) -> Verdict:
    if runner is None or vs_runner is None:
        text = f"Only {_label(win)} finished; nothing to compare it with."
        return replace(common, kind="keep", headline=text)
    if vs_runner.distinguishable:
        text = (
            f"{win.name}, the baseline, is {win.measure.best} ({win.fmt(win.median)}, "
            f"{win.vs(vs_runner.ratio, runner.name)}; {vs_runner.interval_text}): keep what you have."
        )
    else:
        text = (
            f"No difference beyond noise ({vs_runner.interval_text}): the baseline {_label(win)} is "
            f"{win.measure.best} measured, {runner.name} {runner.fmt(runner.median)}; keep what you have."
        )
    return replace(common, kind="keep", headline=text)


def row_marks(
    configs: Sequence[ConfigTimes], baseline: str | None
) -> dict[str, tuple[float, str, bool | None]]:
    """Per config: (speed-up vs the baseline, its text, beyond noise?) — None when untestable.

    The speed-up is median baseline ÷ median config (>1 faster); each config is tested
    against the baseline with the same rule and the same number of comparisons as the verdict.
    """
    usable = [c for c in configs if c.n > 0]
    base = next((c for c in usable if c.name == baseline), None)
    k = max(len(usable) - 1, 1)
    out: dict[str, tuple[float, str, bool | None]] = {}
    given_up = next((c for c in configs if c.name == baseline and not c.n and c.censored), None)
    if given_up is not None:  # the baseline is only "> bound": faster than that, or unknown
        bound = min(given_up.censored)
        for c in configs:
            if c is given_up:
                out[c.name] = (float("nan"), "baseline", None)
            elif c.n and max(c.times) < bound:
                out[c.name] = (bound / c.median, f"> {c.vs(bound / c.median)}", True)
            else:
                out[c.name] = (float("nan"), "—", None)
        return out
    for c in configs:
        if base is None or c.n == 0:
            out[c.name] = (float("nan"), "—", None)
        elif c is base:
            out[c.name] = (1.0, "baseline", None)
        else:
            ratio = base.median / c.median if c.median > 0 else float("nan")
            fast, slow = (c, base) if ratio >= 1 else (base, c)
            test = _compare(fast, slow, k)
            known = None if min(c.n, base.n) < MIN_TRIALS else test.distinguishable
            out[c.name] = (ratio, c.vs(ratio), known)
    return out


def _range(c: ConfigTimes, lo: float, hi: float) -> str:
    """A spread in the measure's unit (seconds as ``2.0–3.1 s``)."""
    return fmt_s_range(lo, hi) if c.measure.unit == "s" else c.measure.spread_text(lo, hi)


def _median_text(c: ConfigTimes) -> str:
    """The median, or "> b" when the trials given up put it beyond their bounds."""
    if not c.censored:
        return c.fmt(c.median)
    values = [*c.times, *c.censored]
    m, lower = censored_median(values, [False] * c.n + [True] * len(c.censored))
    return f"> {fmt_s(m)}" if lower else fmt_s(m)


def _ordered(
    rows: Iterable[object], baseline: str, order: Sequence[str], measure: Measure = TIME
) -> tuple[list[ConfigTimes], str | None]:
    """The configs of ``rows`` in the scenario's ``order`` (as the report uses) and the
    baseline: ``baseline`` if it has trials, else the first config that has."""
    configs = configs_from_rows(rows, measure)
    rank = {name: i for i, name in enumerate(order)}
    configs = sorted(configs, key=lambda c: rank.get(c.name, len(rank)))
    names = [c.name for c in configs if c.n or c.censored]
    return configs, baseline if baseline in names else (names[0] if names else None)


def verdict_of_rows(
    rows: Iterable[object],
    roles: Mapping[str, RoleInfo] | None = None,
    baseline: str = "naive",
    order: Sequence[str] = (),
    measure: Measure = TIME,
) -> Verdict:
    """The verdict from trials.csv rows alone (``iobench list`` of a run without a report)."""
    configs, base = _ordered(_latest(rows), baseline, order, measure)
    return decide(configs, base, roles or {})


def console_lines(
    rows: Iterable[object],
    roles: Mapping[str, RoleInfo] | None = None,
    baseline: str = "naive",
    order: Sequence[str] = (),
    measure: Measure = TIME,
) -> list[str]:
    """The end-of-run table (the measure's median, spread, ratio to the baseline, noise) and
    the verdict.

    ``rows`` are trials.csv rows (dicts or typed records), ``roles`` meta.json's roles.
    """
    rows = _latest(rows)
    roles = roles or {}
    configs, base = _ordered(rows, baseline, order, measure)
    marks = row_marks(configs, base)
    given_up = any(c.censored for c in configs)
    head = ["config", "n", "median" if measure.name == TIME.name else measure.name, "spread",
            f"vs {base or 'baseline'}", "", "failed"]  # fmt: skip
    head += ["given up"] if given_up else []
    table = [head]
    for c in configs:
        lo, hi, _ = spread(c.times)
        _, text, known = marks[c.name]
        table.append([c.name, str(c.n), _median_text(c), _range(c, lo, hi) if c.n > 1 else "—", text,
                      noise_word(known), str(c.failed or "")]
                     + ([str(len(c.censored) or "")] if given_up else []))  # fmt: skip
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    lines = [
        "  ".join(
            cell.rjust(w) if i in (1, 2, 3) else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()
        for r in table
    ]
    if any(c.n for c in configs):
        name = spread(next(c for c in configs if c.n).times)[2]
        lines.append(f"spread: {name} of the successful trials")
    contended = sum(1 for r in rows if str(r.get("contended") or "").strip())
    if contended:
        lines.append(
            f"warning: {contended} trial(s) ran while other processes did disk I/O; see the "
            "contended column of trials.csv"
        )
    lines[:0] = shared_storage_lines(roles)
    lines.append(decide(configs, base, roles).headline)
    return lines
