"""Turn a config that won beyond noise into a start script and Dockerfile lines that work
when pasted, derived from what was measured on this machine, never from a fixed belief.

Only a verdict of kind ``advice`` (report/verdict.py) earns a script. In a run with start-up
strategies (docs/strategies.md) the verdict judges a month of starts at the user's starts a
month (iobench.cost.month's one cost function), and the script holds the advised strategy's
measured persist and restore lines: made once, restored at every start. The script sets the
places the winning config used — ``VIRTUAL_ENV``, ``TMPDIR``, ``PIP_CACHE_DIR`` /
``PIP_NO_CACHE_DIR`` for pip or ``UV_CACHE_DIR`` / ``UV_NO_CACHE`` for uv, bytecode and uv
link-mode settings — and makes the venv the way the trials did where the machine can, else
with ``python3 -m venv`` (what a stock Debian 12 / Ubuntu 24.04 python3 has, with the
``python3-venv`` package, under PEP 668), saying how the two compared when the run measured
both. It stops at the first error, carries the caveats of its places as comments, ends by
running the command it is given (so a Dockerfile can make it the entrypoint), and never points
into iobench's own folders: the roles' paths are the user's folders, and one that lay inside
iobench's clone is replaced by the clone's parent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from iobench.cost.month import crossings, monthly
from iobench.cost.prices import format_usd as usd
from iobench.report.lifecycle_report import TRADE_OFFS, LifecycleSection
from iobench.report.script import (
    caveats,
    creator_of,
    dockerfile_lines,
    env_for,
    export_lines,
    install_command,
    shell_lines,
    stock_difference,
    strategy_lines,
    venv_lines,
    venv_note,
)
from iobench.report.summary import Summary
from iobench.rundir.meta import RunMeta
from iobench.units import fmt_s


@dataclass(frozen=True)
class Recommendation:
    """What to set, and what it saves against the baseline, with the figures behind it."""

    config: str
    baseline: str | None
    shell: list[str]
    dockerfile: list[str]
    notes: list[str] = field(default_factory=list)
    saving_s: float = math.nan
    saving_pct: float = math.nan
    saving_usd_per_start: float = math.nan
    saving_usd_per_month: float = math.nan
    winner_s: float = math.nan
    baseline_s: float = math.nan
    changes: list[str] = field(default_factory=list)
    lifecycle: str = ""  # a strategy run: why this config (its month against the runner-up's)
    given_up: bool = False  # the baseline's trials were all given up: its time is a lower bound

    @property
    def why(self) -> str:
        """What earned this config its script, as a clause after its name."""
        if self.lifecycle:
            return "the cheapest start-up strategy over a month"
        if self.given_up:
            return f"which finished before {self.baseline}'s trials were given up"
        return f"which beat {self.baseline} beyond noise"

    def saving_line(self, price_label: str | None, starts_per_month: float) -> str:
        """``Saves 0.6 s (25%) per cold start`` (+ dollars when a price is known); a strategy
        run's: the month of the cheapest config against the runner-up's."""
        if self.lifecycle:
            return self.lifecycle
        more = "more than " if self.given_up else ""
        text = (
            f"Saves {more}{fmt_s(self.saving_s)} ({more}{self.saving_pct:.0f}%) per cold start "
            f"against {self.baseline}"
        )
        if not math.isnan(self.saving_usd_per_start) and price_label:
            text += (
                f", {usd(self.saving_usd_per_start)} per start and "
                f"{usd(self.saving_usd_per_month)} a month at {starts_per_month:g} starts "
                f"({price_label})"
            )
        return text + "."


def recommend(summary: Summary, meta: RunMeta, own: Path | None = None) -> Recommendation | None:
    """The start script for a verdict that earned one (kind ``advice``), else None; in a run
    with start-up strategies, the cheapest strategy's over a month (:func:`lifecycle_advice`)."""
    if summary.has_restarts:
        return lifecycle_advice(summary, meta, own)
    verdict = summary.verdict
    if not verdict.advise or verdict.advised is None:
        return None
    roles = meta.roles
    table = summary.table.set_index("config")
    win = table.loc[verdict.advised].to_dict()
    installer = str(win.get("installer") or "pip")
    pairs, place_notes = env_for(win, roles, own)
    cav = caveats(win, roles)
    head = [f"iobench: {verdict.headline}", *cav, *place_notes]  # they travel in the script
    notes = [
        *place_notes,
        *verdict.notes,
        venv_note(meta, creator_of(win), stock_difference(summary.table, win, creator_of(win))),
        "network volumes are often mounted only when the pod starts: create the venv in the "
        "start script (or entrypoint), not in a Dockerfile RUN step",
    ]
    base = table.loc[summary.baseline] if summary.baseline in table.index else None
    base_s = float(base["median_time_to_ready_s"]) if base is not None else math.nan
    given_up = base is not None and math.isnan(base_s) and int(base.get("n_censored") or 0) > 0
    if given_up and base is not None:  # every baseline trial given up: its bound is a lower bound
        base_s = float(base["given_up_after_s"])
    win_s = float(win["median_time_to_ready_s"])
    usd_saved = (
        float(base["cost_per_start_usd"]) - float(win["cost_per_start_usd"])
        if base is not None
        else math.nan
    )
    return Recommendation(
        config=verdict.advised,
        baseline=summary.baseline,
        shell=shell_lines(
            pairs,
            installer,
            meta,
            head,
            creator_of(win),
            stock_difference(summary.table, win, creator_of(win)),
        ),  # fmt: skip
        dockerfile=dockerfile_lines(pairs, cav),
        notes=notes,
        winner_s=win_s,
        baseline_s=base_s,
        saving_s=base_s - win_s,
        saving_pct=100.0 * (base_s - win_s) / base_s if base_s > 0 else math.nan,
        saving_usd_per_start=usd_saved,
        saving_usd_per_month=usd_saved * summary.options.starts_per_month,
        changes=list(verdict.changes),
        given_up=given_up,
    )


# --- runs with start-up strategies: the cheapest over a month ----------------------------------


def lifecycle_headline(section: LifecycleSection) -> str:
    """``Cheapest over a month at 30 starts: packed-venv ($0.38/month: ...) ...``."""
    rank = section.ranking
    assert rank is not None
    best, second = rank.best, rank.runner_up
    row = section.row(best.strategy) or {}
    n = section.starts
    at = f"{n:g} start" + ("" if n == 1 else "s")
    idle = f"first start {fmt_s(row.get('first_s'))}, then {fmt_s(row.get('restart_s'))} a restart"
    if section.priced:
        text = (
            f"Cheapest over a month at {at}: {best.strategy} ({usd(best.total_usd)}/month; {idle})"
        )
        if second is not None:
            text += f", against {second.strategy} at {usd(second.total_usd)}"
    else:
        text = f"Least GPU idle time over a month at {at}: {best.strategy} ({fmt_s(best.idle_s)}; {idle})"
        if second is not None:
            text += f", against {second.strategy} at {fmt_s(second.idle_s)}"
    if second is not None and rank.break_even is not None:
        fewer, more = (best.strategy, second.strategy) if rank.break_even > n else (
            second.strategy, best.strategy)  # fmt: skip
        text += f"; break-even {rank.break_even:.1f} starts a month ({fewer} below, {more} above)"
    elif second is not None:
        text += f"; cheaper than {second.strategy} at any number of starts"
    return text + "." + _where_advice_changes(section)


def _where_advice_changes(section: LifecycleSection) -> str:
    """Where the cheapest config stops being the cheapest, nearest the user's N, when the one
    taking over is not the runner-up (whose break-even the headline gives already): only a
    crossing on the cheapest line counts, not one of two lines a third undercuts there."""
    rank, prices = section.ranking, section.prices
    assert rank is not None and prices is not None
    best = rank.best.strategy
    second = rank.runner_up.strategy if rank.runner_up is not None else None
    cheapest = {n: min(monthly(f, n, prices).total_usd for f in section.figures)
                for n, *_ in crossings(section.figures, prices, 1, 1e6)}  # fmt: skip
    found = [(n, b if a == best else a) for n, a, b, usd in crossings(section.figures, prices, 1, 1e6)
             if best in (a, b) and second not in (a, b) and usd <= cheapest[n] * (1 + 1e-9)]  # fmt: skip
    if not found:
        return ""
    n, other = min(found, key=lambda c: abs(math.log(c[0] / section.starts)))
    side = "below" if n < section.starts else "above"
    return f" {other} is cheaper {side} {n:.1f} starts a month."


def lifecycle_advice(
    summary: Summary, meta: RunMeta, own: Path | None = None
) -> Recommendation | None:
    """The start script of the config the verdict advises: the cheapest over a month at the
    user's starts a month, beyond noise (the run's measure: ``iobench.cost.kinds.install``)."""
    section = summary.lifecycle
    config = summary.verdict.winner  # advised, or the first strategy kept beyond noise
    if section.ranking is None or config is None or section.row(config) is None:
        return None
    row, table = section.row(config) or {}, summary.table.set_index("config")
    win = table.loc[config].to_dict()
    strategy = str(row.get("strategy") or win.get("strategy") or "reinstall")
    roles = meta.roles
    installer, creator = str(win.get("installer") or "pip"), creator_of(win)
    pairs, place_notes = env_for(win, roles, own)
    lost, redo = TRADE_OFFS.get(strategy, ("", ""))
    headline = lifecycle_headline(section)
    trade = [f"trade-off: lost at restart: {lost}; after changing packages: {redo}"] if lost else []
    where = ["restore to the path the venv was built at: a venv holds its absolute path"] if (
        row.get("restore_command")) else []  # fmt: skip
    cheaper = [f"{section.ranking.best.strategy} would cost less, by the figures you entered "
               f"(not measured here); the script is the cheapest measured one, {config}"
               ] if section.ranking.best.strategy != config else []  # fmt: skip
    head = [f"iobench: {headline}", *cheaper, *trade, *where, *caveats(win, roles), *place_notes]
    difference = stock_difference(summary.table, win, creator)
    make = venv_lines(meta, creator, difference)
    install = install_command(meta, installer, creator)
    shell = export_lines(pairs, head, installer) + strategy_lines(
        strategy, row, make, install, roles, own
    )
    months = section.monthly_usd()
    entered = {f.strategy for f in section.figures if f.entered}
    others = [c.strategy for c in section.ranking.ranking if c.strategy not in entered | {config}]
    return Recommendation(
        config=config,
        baseline=others[0] if others else None,  # the measured runner-up
        shell=shell,
        dockerfile=dockerfile_lines(pairs, caveats(win, roles)),
        notes=[
            *place_notes,
            *(f"Trade-off: {t[len('trade-off: ') :]}." for t in trade),
            venv_note(meta, creator, difference),
            "network volumes are often mounted only when the pod starts: run this in the "
            "start script (or entrypoint), not in a Dockerfile RUN step",
        ],  # fmt: skip
        winner_s=float(row.get("first_s", math.nan)),
        saving_usd_per_month=(months[others[0]] - months[config]) if others else math.nan,
        lifecycle=headline,
    )
