"""The lifecycle chart: monthly cost against starts per month, a line per strategy, crossings
marked — where the cheapest way to start a pod changes (those are numbered and listed in the
corner; crossings of two costlier lines get a small grey dot only).

Same conventions as :mod:`iobench.report.charts`: matplotlib's object API on the Agg canvas
(no pyplot, no global backend), Okabe-Ito colours, a title and units on both axes. Starts run
on a log axis (1 to 1,000 a month by default) because the interesting crossings sit anywhere
from a few starts a month to hundreds. Each total is a straight line in N, so a line is drawn
through many points only to look straight on the log axis.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from iobench.cost.month import LifeFigures, crossings, monthly
from iobench.cost.prices import Prices, format_usd
from iobench.report.charts import save_figure

_COLOURS = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000"]
_STYLES = ["-", "--", "-.", ":"]


@dataclass(frozen=True)
class LifecycleChart:
    """What was drawn: the file, a line per strategy (in order), the marked crossings, the
    title (with the prices it assumed)."""

    path: Path
    lines: tuple[str, ...]
    crossings: tuple[float, ...]  # starts a month
    title: str = ""


def plot_lifecycle(
    figures: list[LifeFigures],
    prices: Prices,
    path: str | Path,
    starts: float | None = None,
    lo: float = 1,
    hi: float = 1000,
    title: str = "",
    priced: bool = True,
) -> LifecycleChart:
    """Draw monthly $ against starts per month, one line per strategy; mark crossings and the
    user's ``starts``; write a PNG to ``path``. ``priced`` false: the GPU price is a stand-in
    (no price was given), and the title says so."""
    path = Path(path)
    fig = Figure(figsize=(8, 5.4 + 0.2 * len(figures)))
    ax = fig.add_subplot(1, 1, 1)
    ns = np.geomspace(lo, hi, 200)
    positive = True
    for i, f in enumerate(figures):
        ys = [monthly(f, float(n), prices).total_usd for n in ns]
        positive = positive and min(ys) > 0
        ax.plot(
            ns,
            ys,
            _STYLES[i % len(_STYLES)],
            color=_COLOURS[i % len(_COLOURS)],
            lw=2,
            label=f"{f.strategy}: first start {f.first_s:.1f} s, restart {f.restart_s:.1f} s",
        )
    marked = crossings(figures, prices, lo, hi)
    _mark_crossings(ax, figures, prices, marked)
    if starts is not None:
        ax.axvline(starts, color="#777777", lw=1, ls=":")
        ax.annotate(
            f"your {starts:g} starts",
            (starts, 0),
            xycoords=("data", "axes fraction"),
            textcoords="offset points",
            xytext=(3, 4),
            fontsize=8,
            color="#555555",
        )
    heading = _scales_and_title(ax, prices, positive, lo, hi, title, priced)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    fig.tight_layout()
    save_figure(fig, path)
    drawn = tuple(n for n, *_ in marked)
    return LifecycleChart(path, tuple(f.strategy for f in figures), drawn, heading)


def _scales_and_title(
    ax: Axes, prices: Prices, positive: bool, lo: float, hi: float, title: str, priced: bool
) -> str:
    """Log axes (a line a + bN is flat, then rises), labels, and the title with the prices;
    returns the title as drawn."""
    ax.set_xscale("log")
    if positive:  # on a log axis crossings at cents stay visible
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.set_xlim(lo, hi)
    ax.set_xlabel("starts per month (log scale)")
    ax.set_ylabel("USD per month, GPU idle + storage" + (" (log scale)" if positive else ""))
    gpu = f"GPU ${prices.gpu_usd_per_hour:g}/hour"
    if not priced:
        gpu += " (a stand-in: no --gpu or --gpu-price given)"
    price = f"{gpu}, storage ${prices.storage_usd_per_gb_month:g}/GB-month"
    heading = f"{title or 'Monthly cost of each start-up strategy'}\n{price}"  # the caller's, once
    ax.set_title(_dollars(heading), fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    return heading


def _mark_crossings(
    ax: Axes,
    figures: list[LifeFigures],
    prices: Prices,
    marked: list[tuple[float, str, str, float]],
) -> None:
    """A dot at each crossing; where the cheapest strategy changes, a bigger one, numbered
    and listed in the corner."""
    notes: list[str] = []
    for n, a, b, usd in marked:
        cheapest = usd <= min(monthly(f, n, prices).total_usd for f in figures) * (1 + 1e-9)
        ax.plot(
            [n],
            [usd],
            "o",
            ms=7 if cheapest else 4,
            mfc="white",
            mec="black" if cheapest else "#888888",
            zorder=5,
        )
        if cheapest:  # where the cheapest strategy changes: numbered, listed in the corner
            notes.append(
                _dollars(f"{len(notes) + 1}: {a} = {b} at {n:.1f} starts/month, {format_usd(usd)}")
            )
            ax.annotate(
                str(len(notes)),
                (n, usd),
                textcoords="offset points",
                xytext=(-4, 7),
                fontsize=8,
                fontweight="bold",
            )
    if notes:
        ax.text(
            0.01,
            0.98,
            "cheapest strategy changes at\n" + "\n".join(notes),
            transform=ax.transAxes,
            va="top",
            ha="left",
            fontsize=7,
            bbox={"boxstyle": "round,pad=0.3", "fc": "white", "ec": "#bbbbbb", "alpha": 0.9},
        )


def _dollars(text: str) -> str:
    """Escape ``$`` so matplotlib prints it instead of starting mathtext."""
    return text.replace("$", r"\$")
