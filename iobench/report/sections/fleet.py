"""A fleet's section of the report: each config's time-to-ready as a fleet (the last worker
ready, from the first start), first and last done, the tail and what it costs, and with a
sweep (``--ranks``) the fleet's time against its size, its knee marked (docs/fleet.md).

The figures come from ``iobench.rundir.fleet`` (one definition, both engines); the medians
are over the fleet trials (repeats) of each config and size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from iobench.cost.prices import format_usd
from iobench.report.charts import OKABE_ITO, save_figure, style_axes, tex_escape
from iobench.report.page import fragment
from iobench.report.part import Context, Part
from iobench.rundir.fleet import FleetTrial
from iobench.rundir.meta import RunMeta
from iobench.stats import median
from iobench.units import fmt_s

#: the knee: the largest fleet whose time-to-ready stays within this factor of the smallest's
KNEE_FACTOR = 1.25
_COLOURS = ("blue", "vermillion", "green", "orange", "purple", "sky", "yellow")


@dataclass
class FleetRow:
    """One config at one fleet size: medians over its fleet trials."""

    config: str
    size: int
    trials: int  # fleet trials run
    whole: int  # fleet trials in which every worker was ready
    fleet_s: float  # median of the fleet's time-to-ready (nan: none whole)
    fleet_min_s: float
    fleet_max_s: float
    first_done_s: float
    last_done_s: float
    tail_s: float  # last done - first done
    spread_s: float  # the workers' own time-to-ready: slowest - fastest (median over trials)
    idle_s: float  # worker-seconds waiting for the last worker (sum over workers)
    lost: int  # workers' rows lost or not ok
    lock_lines: int  # installer lines about a lock, all workers


@dataclass
class FleetSection:
    rows: list[FleetRow]
    knees: dict[str, int | None] = field(default_factory=dict)  # config -> knee size
    lines: list[str] = field(default_factory=list)
    png: Path | None = None


def _nan(x: float | None) -> float:
    return math.nan if x is None else float(x)


def build_section(
    fleet: Sequence[FleetTrial], workers: pd.DataFrame, meta: RunMeta, usd_per_hour: float | None
) -> FleetSection:
    """The section's rows, knees and console lines."""
    rows: list[FleetRow] = []
    keys = list(dict.fromkeys((ft.config, ft.size) for ft in fleet))
    for config, size in keys:
        fts = [ft for ft in fleet if ft.config == config and ft.size == size]
        whole = [ft for ft in fts if ft.fleet_s is not None]
        mine = workers[(workers["config"] == config) & (workers["fleet_size"].fillna(1) == size)]
        spreads, idles = [], []
        for _, group in mine.groupby("repeat"):
            ok = group[group["status"] == "ok"]
            if len(ok) == len(group) and len(ok) > 0:
                spreads.append(float(ok["time_to_ready_s"].max() - ok["time_to_ready_s"].min()))
                last = float(ok["fleet_ready_s"].max())
                idles.append(float((last - ok["fleet_ready_s"]).sum()))
        values = [float(ft.fleet_s) for ft in whole if ft.fleet_s is not None]
        rows.append(FleetRow(
            config=config, size=size, trials=len(fts), whole=len(whole),
            fleet_s=_nan(median(values)) if values else math.nan,
            fleet_min_s=min(values, default=math.nan), fleet_max_s=max(values, default=math.nan),
            first_done_s=_nan(median([ft.first_done_s for ft in whole if ft.first_done_s is not None]) if whole else None),
            last_done_s=_nan(median([ft.last_done_s for ft in whole if ft.last_done_s is not None]) if whole else None),
            tail_s=_nan(median([ft.tail_s for ft in whole if ft.tail_s is not None]) if whole else None),
            spread_s=_nan(median(spreads)) if spreads else math.nan,
            idle_s=_nan(median(idles)) if idles else math.nan,
            lost=int((mine["status"] != "ok").sum()),
            lock_lines=int(mine["lock_lines"].fillna(0).sum()),
        ))  # fmt: skip
    order = {c: k for k, c in enumerate(meta.config_names)}
    rows.sort(key=lambda r: (order.get(r.config, len(order)), r.size))
    section = FleetSection(rows)
    for config in dict.fromkeys(r.config for r in rows):
        section.knees[config] = knee([(r.size, r.fleet_s) for r in rows if r.config == config])
    section.lines = _lines(section, meta, usd_per_hour)
    return section


def knee(points: Sequence[tuple[int, float]]) -> int | None:
    """The largest size whose fleet time-to-ready is within ``KNEE_FACTOR`` of the smallest
    size's, when a larger size is past it; None when every size stays within (no knee seen)."""
    pts = sorted((n, s) for n, s in points if math.isfinite(s))
    if len(pts) < 2:
        return None
    base = pts[0][1]
    within = [n for n, s in pts if s <= KNEE_FACTOR * base]
    beyond = [n for n, s in pts if s > KNEE_FACTOR * base]
    if not beyond:
        return None
    return max((n for n in within if n < min(beyond)), default=pts[0][0])


def _lines(section: FleetSection, meta: RunMeta, usd_per_hour: float | None) -> list[str]:
    f = meta.fleet or {}
    engine = "MPI ranks" if f.get("engine") == "mpi" else "workers of a --fleet-dir"
    lib = f" ({f['library']})" if f.get("library") else ""
    size = f.get("size") or max((r.size for r in section.rows), default=1)
    stagger = f", started {f['stagger_s']:g} s apart" if f.get("stagger_s") else ""
    out = [
        f"Fleet: {size} {engine}{lib}{stagger} on one volume; a fleet trial's time-to-ready is "
        "the last worker ready, from the first start (the configs are compared by it)",
        f"{'config':<22} {'workers':>7} {'fleet':>9} {'first done':>10} {'last done':>9} "
        f"{'tail':>8} {'not ok':>6}",
    ]
    for r in section.rows:
        out.append(
            f"{r.config[:22]:<22} {r.size:>7} {fmt_s(r.fleet_s):>9} {fmt_s(r.first_done_s):>10} "
            f"{fmt_s(r.last_done_s):>9} {fmt_s(r.tail_s):>8} {r.lost:>6}"
        )
    sizes = {r.size for r in section.rows}
    if len(sizes) > 1:
        for config, n in section.knees.items():
            top = max(r.size for r in section.rows if r.config == config)
            if n is None:
                out.append(f"  {config}: no knee up to {top} workers (each within "
                           f"{KNEE_FACTOR:g}x of the smallest fleet's time)")  # fmt: skip
            else:
                out.append(f"  {config}: the knee is at {n} worker(s): past it the fleet's "
                           f"time-to-ready grows beyond {KNEE_FACTOR:g}x the smallest fleet's")  # fmt: skip
    big = [r for r in section.rows if r.size == max(sizes) and math.isfinite(r.idle_s)]
    if usd_per_hour and big:
        worst = max(big, key=lambda r: r.idle_s)
        cost = worst.idle_s * usd_per_hour / 3600
        out.append(
            f"  the tail: with {worst.size} GPUs at {format_usd(usd_per_hour)}/h, waiting for "
            f"the last worker costs {format_usd(cost)} per fleet start for {worst.config} "
            f"({worst.idle_s:.1f} GPU-seconds idle)"
        )
    locks = sum(r.lock_lines for r in section.rows)
    if locks:
        out.append(f"  the installers printed {locks} line(s) about locks (a shared cache)")
    return out


def scaling_chart(section: FleetSection, title: str, path: Path) -> Path | None:
    """The fleet's time-to-ready against its size, per config (min-max bars), knees marked."""
    configs = list(dict.fromkeys(r.config for r in section.rows))
    if len({r.size for r in section.rows}) < 2:
        return None
    fig = Figure(figsize=(10, 5))
    ax = fig.add_subplot()
    style_axes(ax)
    for k, config in enumerate(configs):
        rows = sorted((r for r in section.rows if r.config == config), key=lambda r: r.size)
        rows = [r for r in rows if math.isfinite(r.fleet_s)]
        if not rows:
            continue
        colour = OKABE_ITO[_COLOURS[k % len(_COLOURS)]]
        x = np.array([r.size for r in rows])
        y = np.array([r.fleet_s for r in rows])
        err = np.array([[r.fleet_s - r.fleet_min_s for r in rows],
                        [r.fleet_max_s - r.fleet_s for r in rows]])  # fmt: skip
        ax.errorbar(x, y, yerr=err, color=colour, marker="o", capsize=3, label=tex_escape(config))
        ax.plot(x, [r.first_done_s for r in rows], color=colour, linestyle=":", linewidth=1)
        n = section.knees.get(config)
        if n is not None:
            at = next(r for r in rows if r.size == n)
            ax.plot([n], [at.fleet_s], marker="o", markersize=14, markerfacecolor="none",
                    markeredgecolor=colour, markeredgewidth=1.5)  # fmt: skip
            ax.annotate("knee", (n, at.fleet_s), textcoords="offset points", xytext=(8, -14),
                        fontsize=8, color=colour)  # fmt: skip
    sizes = sorted({r.size for r in section.rows})
    ax.set_xticks(sizes)
    ax.set_xlabel("workers starting together on the volume")
    ax.set_ylabel("fleet time-to-ready (s): the last worker ready")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left", fontsize=9, title="solid: last done · dotted: first done",
              title_fontsize=8, frameon=False)  # fmt: skip
    ax.set_title(tex_escape(title), loc="left", fontsize=11)
    fig.subplots_adjust(left=0.08, right=0.98, top=0.9, bottom=0.12)
    return save_figure(fig, path)


TEMPLATE = """\
{% from "macros.html.j2" import table, img %}
<h2>Fleet</h2>
<p>{{ lead }}.</p>
{{ table(["config", "workers", "fleet time-to-ready", "first done", "last done", "tail", "workers' own spread", "not ok"], rows, num=(1, 2, 3, 4, 5, 6, 7)) }}
{% if words %}<p>{% for w in words %}{{ w }}{% if not loop.last %}<br>{% endif %}{% endfor %}</p>{% endif %}
{{ img(png, "fleet time-to-ready against workers") }}
"""


def build(ctx: Context) -> Part | None:
    """A fleet's figures per config and size, the knee, the tail's cost, a chart, a section."""
    run = ctx.run
    if not run.fleet or run.workers is None:
        return None
    section = build_section(run.fleet, run.workers, run.info, ctx.price_usd_h)
    paths: dict[str, Path] = {}
    if ctx.charts:
        title = f"Fleet time-to-ready against workers — {run.scenario_name}"
        png = scaling_chart(section, title, ctx.out / "fleet.png")
        if png is not None:
            section.png = paths["fleet_png"] = png
    rows = [[r.config, r.size, fmt_s(r.fleet_s), fmt_s(r.first_done_s), fmt_s(r.last_done_s),
             fmt_s(r.tail_s), fmt_s(r.spread_s), r.lost] for r in section.rows]  # fmt: skip
    words = [line.strip() for line in section.lines[2 + len(section.rows) :]]
    return Part("fleet", lines=section.lines, paths=paths,
                html=fragment(TEMPLATE, lead=section.lines[0], rows=rows, words=words, png=section.png))  # fmt: skip


__all__ = ["FleetRow", "FleetSection", "build", "build_section", "knee", "scaling_chart"]
