"""PNG charts for the report: time-to-ready, a timeline per config, cost, and comparisons.

matplotlib's object API with the Agg canvas is used directly (no pyplot), so making charts
never changes a global backend, never opens a window and never leaks figures. Colours are
the Okabe-Ito palette (Okabe & Ito, "Color Universal Design", 2008), which stays
distinguishable for the common forms of colour blindness; every chart has a title, axis
units and config names.

Charts stay cheap for big runs: the time-to-ready chart draws one bar per config and at most
``MAX_DOTS`` trial dots per config, and a timeline shows only each config's median trial.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.text import Text

from iobench import files
from iobench.cost.prices import format_usd
from iobench.report.configs import SPREAD_MINMAX_BELOW
from iobench.report.load import PHASES
from iobench.units import fmt_median, fmt_s, fmt_speed, fmt_vs, printable, run_key

OKABE_ITO = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky": "#56B4E9",
    "green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
}
PHASE_COLOURS = {
    "venv": OKABE_ITO["blue"],
    "download": OKABE_ITO["sky"],
    "install": OKABE_ITO["orange"],
    "compile": OKABE_ITO["purple"],
    "import": OKABE_ITO["green"],
    "other": "#BBBBBB",
}
SERIES_COLOURS = [
    OKABE_ITO["blue"],
    OKABE_ITO["orange"],
    OKABE_ITO["green"],
    OKABE_ITO["vermillion"],
    OKABE_ITO["purple"],
    OKABE_ITO["sky"],
    OKABE_ITO["yellow"],
    OKABE_ITO["black"],
]
DPI = 110
MAX_DOTS = 60
_rng = np.random.default_rng(12345)  # jitter only; fixed so charts are reproducible


def tex_escape(text: str) -> str:
    """Escape ``$`` so matplotlib does not read prices as mathtext, and write control
    characters as their escapes (a label read from a received meta.json: the font has no
    glyph for them, and matplotlib's warning would print them raw to the terminal)."""
    lines = str(text).split("\n")  # a chart's own line breaks stay breaks
    return "\n".join(printable(line) for line in lines).replace("$", r"\$")


def save_figure(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    # zlib level 1: a fifth of the default's encoding time for PNGs about a third larger
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=DPI, facecolor="white", pil_kwargs={"compress_level": 1})
    files.write(path, png.getvalue())
    return path


def style_axes(ax: Axes) -> None:
    ax.spines["top"].set_visible(False)
    ax.spines["right"].set_visible(False)
    ax.grid(axis="x", color="#DDDDDD", linewidth=0.8)
    ax.set_axisbelow(True)


def phase_split(ok_trials: pd.DataFrame, median_s: float) -> list[tuple[str, float]]:
    """Per-phase medians and the median gap ("other"), scaled to sum to ``median_s``."""
    parts: list[tuple[str, float]] = []
    phase_sum = np.zeros(len(ok_trials))
    for p in PHASES:
        vals = pd.to_numeric(ok_trials[f"{p}_s"], errors="coerce").to_numpy(dtype=float)
        vals = np.nan_to_num(vals)
        phase_sum += vals
        parts.append((p, float(np.median(vals)) if len(vals) else 0.0))
    ttr = pd.to_numeric(ok_trials["time_to_ready_s"], errors="coerce").to_numpy(dtype=float)
    gaps = np.clip(np.nan_to_num(ttr - phase_sum), 0, None)
    parts.append(("other", float(np.median(gaps)) if len(gaps) else 0.0))
    total = sum(w for _, w in parts)
    if total <= 0 or not math.isfinite(median_s):
        return [("other", median_s if math.isfinite(median_s) else 0.0)]
    return [(name, w * median_s / total) for name, w in parts]


#: the trials.csv columns the time-to-ready chart reads
TIME_TO_READY_COLUMNS = (
    "config", "status", "time_to_ready_s", "censored_after_s", *(f"{p}_s" for p in PHASES)
)  # fmt: skip


def ok_trials_by_config(trials: pd.DataFrame) -> dict[str | None, pd.DataFrame]:
    """Each config's ok trials (the chart's columns only), split once; ``None``: no rows."""
    cols = [c for c in TIME_TO_READY_COLUMNS if c in trials.columns]
    ok = trials.loc[trials["status"] == "ok", cols]
    out: dict[str | None, pd.DataFrame] = {None: ok.iloc[:0]}
    out.update({str(c): g for c, g in ok.groupby("config", sort=False)})
    return out


def drawn_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The configs the time-to-ready chart draws, bottom first (slowest): every config with an
    ok trial or a given-up one. A config given up in every trial (``--give-up-after``) has no
    median, only its bound; it sorts below the finished ones, slowest, as its "> X" says."""
    rows = table[(table["n_ok"] > 0) | (table["n_censored"] > 0)]
    finished = rows["n_ok"] > 0
    key = np.where(finished, rows["median_time_to_ready_s"], np.inf)
    tie = np.nan_to_num(np.where(finished, 0.0, rows["given_up_after_s"]))
    return rows.iloc[np.lexsort((-tie, -key))]


def _given_up_times(trials: pd.DataFrame, config: str) -> np.ndarray:
    """A config's given-up trials' bounds (``censored_after_s``), finite only."""
    if "censored_after_s" not in trials.columns:
        return np.array([])
    mine = trials[(trials["config"] == config) & (trials["status"] == "censored")]
    x = mine["censored_after_s"].to_numpy(dtype=float)
    return x[np.isfinite(x)]


def _fit_texts(ax: Axes, texts: list[Text]) -> None:
    """Widen the x axis until every label drawn right of its bar fits inside it.

    A label keeps its width in pixels while the axis rescales, so the span must satisfy
    ``x0 - lo + width_px / axis_px * span <= span`` for each label starting at ``x0``."""
    if not texts:
        return
    renderer = FigureCanvasAgg(ax.get_figure(root=True)).get_renderer()
    axis_px = ax.get_window_extent(renderer).width
    lo, hi = ax.get_xlim()
    span = hi - lo
    for t in texts:
        share = t.get_window_extent(renderer).width / axis_px
        if share < 0.9:
            span = max(span, (float(t.get_position()[0]) - lo) / (1 - share) * 1.02)
    if span > hi - lo:
        ax.set_xlim(lo, lo + span)


def time_to_ready_chart(
    table: pd.DataFrame,
    trials: pd.DataFrame,
    median_trials: dict[str, str],
    baseline: str | None,
    winner: str | None,
    title: str,
    path: Path,
) -> Path:
    """Bar = median time-to-ready, split by phase; a spread whisker; one dot per trial.

    The segments are the per-phase medians (plus the median gap between phases) scaled
    to sum to the median time-to-ready, so the bar ends where the table's median is. The
    whisker is min–max under ``SPREAD_MINMAX_BELOW`` trials (p10–p90 of two trials would
    sit between the two dots), else p10–p90.
    """
    rows = drawn_rows(table)
    minmax = int(rows["n_ok"].max()) < SPREAD_MINMAX_BELOW if len(rows) else True
    lo_col, hi_col = (
        ("min_time_to_ready_s", "max_time_to_ready_s") if minmax
        else ("p10_time_to_ready_s", "p90_time_to_ready_s")
    )  # fmt: skip
    n = max(len(rows), 1)
    fig = Figure(figsize=(10, 2.2 + 0.62 * n))
    ax = fig.add_subplot()
    style_axes(ax)
    xmax = 0.0
    notes: list[Text] = []
    ok_trials = ok_trials_by_config(trials)
    any_given_up = False
    for y, (_, row) in enumerate(rows.iterrows()):
        config = row["config"]
        given_up = _given_up_times(trials, str(config))
        any_given_up = any_given_up or len(given_up) > 0
        if len(given_up):  # open triangles at the bound each was given up at: slower than that
            ax.scatter(given_up, y + _rng.uniform(-0.2, 0.2, len(given_up)), s=30, marker=">",
                       facecolors="white", edgecolors="black", linewidths=0.9, zorder=3)  # fmt: skip
        if int(row["n_ok"]) == 0:  # given up in every trial: a hatched bar to its bound
            edge = float(np.max(given_up)) if len(given_up) else float(row["given_up_after_s"])
            if not math.isfinite(edge):
                continue  # no bound recorded: the label alone
            ax.barh(y, edge, color="white", edgecolor="#888888", hatch="///", height=0.6,
                    linewidth=0.8)  # fmt: skip
            xmax = max(xmax, edge)
            note = f"{fmt_median(row)}, given up"
            note += "  (baseline)" if config == baseline else ""
            notes.append(ax.text(edge, y, "  " + tex_escape(note), va="center", fontsize=9))
            continue
        med = float(row["median_time_to_ready_s"])
        ok_rows = ok_trials.get(str(config), ok_trials[None])
        parts = phase_split(ok_rows, med)
        left = 0.0
        for name, width in parts:
            if width > 0:
                ax.barh(y, width, left=left, color=PHASE_COLOURS[name], height=0.6,
                        edgecolor="white", linewidth=0.5)  # fmt: skip
                left += width
        ok = ok_rows["time_to_ready_s"].to_numpy(dtype=float)
        ok = ok[np.isfinite(ok)]
        if len(ok) > MAX_DOTS:
            ok = np.quantile(ok, np.linspace(0, 1, MAX_DOTS))
        ax.scatter(
            ok,
            y + _rng.uniform(-0.2, 0.2, len(ok)),
            s=16,
            color="black",
            alpha=0.75,
            zorder=3,
            edgecolors="white",
            linewidths=0.5,
        )
        p10, p90 = float(row[lo_col]), float(row[hi_col])
        ax.errorbar(
            med,
            y,
            xerr=[[med - p10], [p90 - med]],
            fmt="none",
            ecolor="black",
            elinewidth=1.2,
            capsize=4,
            zorder=4,
        )
        top = max(float(np.max(ok)) if len(ok) else 0.0, float(np.max(given_up, initial=0.0)))
        xmax = max(xmax, float(p90), left, top)
        note = f"{fmt_s(med)}"
        if (
            baseline
            and config != baseline
            and math.isfinite(row.get("speedup_vs_baseline", math.nan))
        ):
            known = row.get("beyond_noise_vs_baseline")
            word = ", within noise" if known is False else ""
            bound = "> " if str(row.get("vs_baseline", "")).startswith(">") else ""
            note += (
                f"  {bound}{fmt_speed(row['speedup_vs_baseline'])}{word}"  # > : baseline given up
            )
        elif config == baseline:
            note += "  (baseline)"
        if len(given_up):
            note += f", {len(given_up)} given up"
        right_end = max(float(p90), left, top)
        notes.append(ax.text(
            right_end,
            y,
            "  " + tex_escape(note),
            va="center",
            fontsize=9,
            fontweight="bold" if config == winner else "normal",
        ))  # fmt: skip
    labels = [tex_escape(f"{c}  ★" if c == winner else str(c)) for c in rows["config"]]
    ax.set_yticks(range(len(rows)), labels=labels)
    ax.set_xlim(0, xmax * 1.32 if xmax > 0 else 1)
    _fit_texts(ax, notes)
    ax.set_xlabel("time-to-ready (s): venv creation start to ready check success")
    ax.set_title(tex_escape(title), loc="left", fontsize=12)
    many = bool((rows["n_ok"] > MAX_DOTS).any())
    dots = (
        f"dots: trials ({MAX_DOTS} evenly spaced quantiles when more)"
        if many
        else "dots: every trial"
    )
    handles = [Patch(color=PHASE_COLOURS[p], label=p) for p in (*PHASES, "other")]
    handles[-1] = Patch(color=PHASE_COLOURS["other"], label="between phases")
    fig.legend(
        handles=handles,
        loc="lower left",
        bbox_to_anchor=(0.2, 0.01),
        ncol=6,
        fontsize=9,
        frameon=False,
        title=f"bar: median time-to-ready split by median phase times · {dots} · whisker: "
        + ("min–max" if minmax else "p10–p90")
        + (
            "\n▷: a trial given up at that bound (--give-up-after), so slower than it · "
            "hatched: every trial given up"
            if any_given_up
            else ""
        ),
        title_fontsize=9,
        alignment="left",
    )
    h = fig.get_figheight()
    fig.subplots_adjust(left=0.2, right=0.98, top=1 - 0.5 / h, bottom=1.2 / h)
    return save_figure(fig, path)


def cost_chart(table: pd.DataFrame, title: str, starts_per_month: float, path: Path) -> Path | None:
    """Monthly cost of slow starts per config (GPU idle, plus metered storage if priced)."""
    rows = table[np.isfinite(table["cost_per_start_usd"].to_numpy(dtype=float))]
    if rows.empty:
        return None
    rows = rows.sort_values("monthly_cost_usd", ascending=True)
    n = len(rows)
    fig = Figure(figsize=(10, 1.5 + 0.55 * n))
    ax = fig.add_subplot()
    style_axes(ax)
    gpu = np.nan_to_num(rows["gpu_idle_cost_usd"].to_numpy(dtype=float)) * starts_per_month
    store = np.nan_to_num(rows["storage_cost_usd"].to_numpy(dtype=float)) * starts_per_month
    y = np.arange(n)[::-1]
    ax.barh(y, gpu, color=OKABE_ITO["vermillion"], height=0.6, label="GPU idle while waiting")
    if store.any():
        ax.barh(y, store, left=gpu, color=OKABE_ITO["sky"], height=0.6, label="metered storage")
    top = float(np.max(gpu + store)) if n else 1.0
    for yi, (_, row), total in zip(y, rows.iterrows(), gpu + store, strict=True):
        ax.text(
            total,
            yi,
            tex_escape(
                f"  {format_usd(row['cost_per_start_usd'])} per start · {format_usd(row['monthly_cost_usd'])} per month"
            ),
            va="center",
            fontsize=9,
        )
    ax.set_yticks(y, labels=[tex_escape(c) for c in rows["config"]])
    ax.set_xlim(0, top * 1.45 if top > 0 else 1)
    ax.set_xlabel(f"USD per month at {starts_per_month:g} cold starts")
    ax.set_title(tex_escape(title), loc="left", fontsize=11)
    fig.legend(loc="lower right", ncol=2, fontsize=8, frameon=False)  # below the axes: no overlap
    fig.subplots_adjust(
        left=0.2, right=0.98, top=1 - 0.5 / fig.get_figheight(), bottom=1.0 / fig.get_figheight()
    )
    return save_figure(fig, path)


def compare_chart(
    merged: pd.DataFrame,
    run_labels: Sequence[str],
    title: str,
    path: Path,
    measure: str = "time-to-ready",
    fmt: Callable[[float], str] = fmt_s,
    words: tuple[str, str] = ("faster", "slower"),
) -> Path:
    """Grouped bars: each config's median of the runs' measure (time-to-ready, a month of
    training, GPU time lost) on each run, with spread whiskers.

    Runs are named by key (A, B, ...) on the bars and in a legend below the axes, so long
    labels never cover a bar; the title is wrapped to the figure's width.
    """
    import textwrap

    configs = list(dict.fromkeys(merged["config"]))
    k = max(len(run_labels), 1)
    n = max(len(configs), 1)
    title_lines = textwrap.wrap(tex_escape(title), 95) or [""]
    legend_rows = k
    fig = Figure(figsize=(10, 1.4 + 0.25 * (len(title_lines) + legend_rows) + n * (0.3 + 0.32 * k)))
    ax = fig.add_subplot()
    style_axes(ax)
    height = 0.8 / k
    xmax = 0.0
    minmax = int(merged["n_ok"].max()) < SPREAD_MINMAX_BELOW if len(merged) else True
    lo_col, hi_col = "low", "high"
    for j, label in enumerate(run_labels):
        sub = merged[merged["run_label"] == label].set_index("config")
        colour = SERIES_COLOURS[j % len(SERIES_COLOURS)]
        for i, config in enumerate(configs):
            y = (n - 1 - i) + (k - 1 - j - (k - 1) / 2) * height
            there = config in sub.index
            r = sub.loc[config] if there else pd.Series(dtype=object)
            med = float(r["median"]) if there else math.nan
            if not math.isfinite(med):  # said where its bar would be, not left a gap
                gone = "no successful trial" if there else "not in this run"
                ax.text(0, y, f"  {run_key(j)}: {gone}", va="center", fontsize=8, color="0.4")
                continue
            ax.barh(y, med, height=height * 0.9, color=colour)
            lo, hi = float(r[lo_col]), float(r[hi_col])
            if math.isfinite(lo) and math.isfinite(hi):
                ax.errorbar(med, y, xerr=[[med - lo], [hi - med]], fmt="none", ecolor="black",
                            elinewidth=1, capsize=3)  # fmt: skip
            else:
                hi = med
            ratio = r.get("ratio_vs_ref", math.nan)
            text = f"  {run_key(j)}: {fmt(med)}"
            if j > 0 and math.isfinite(ratio) and ratio > 0:
                text += f", {fmt_vs(1 / ratio, r.get('beyond_noise_vs_ref'), 'A', words)}"
            ax.text(max(hi, med), y, tex_escape(text), va="center", fontsize=8)
            xmax = max(xmax, hi, med)
    ax.set_yticks(range(n), labels=[tex_escape(c) for c in configs[::-1]])
    ax.set_xlim(0, xmax * 1.55 if xmax > 0 else 1)
    ax.set_xlabel(tex_escape(f"median {measure}; whiskers {'min–max' if minmax else 'p10–p90'}"))
    ax.set_title("\n".join(title_lines), loc="left", fontsize=11)
    handles = [
        Patch(
            color=SERIES_COLOURS[j % len(SERIES_COLOURS)], label=tex_escape(f"{run_key(j)}: {lab}")
        )
        for j, lab in enumerate(run_labels)
    ]
    h = fig.get_figheight()
    fig.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.01, 0.0), ncol=1,
               fontsize=9, frameon=False)  # fmt: skip
    fig.subplots_adjust(
        left=0.2,
        right=0.98,
        top=1 - (0.3 + 0.22 * len(title_lines)) / h,
        bottom=(0.75 + 0.22 * legend_rows) / h,
    )
    return save_figure(fig, path)
