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

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.text import Text
from matplotlib.ticker import MaxNLocator

from iobench.cost.prices import format_usd
from iobench.report.diagnose import Drop, find_write_gaps, install_drop, install_write_rates
from iobench.report.load import PHASES
from iobench.report.verdict import SPREAD_MINMAX_BELOW
from iobench.units import fmt_mbps, fmt_median, fmt_s, fmt_speed, run_key

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


def _tx(text: str) -> str:
    """Escape ``$`` so matplotlib does not read prices as mathtext."""
    return str(text).replace("$", r"\$")


def _save(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    # zlib level 1: a fifth of the default's encoding time for PNGs about a third larger
    fig.savefig(path, dpi=DPI, facecolor="white", pil_kwargs={"compress_level": 1})
    return path


def _style(ax: Axes) -> None:
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
    _style(ax)
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
            notes.append(ax.text(edge, y, "  " + _tx(note), va="center", fontsize=9))
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
            "  " + _tx(note),
            va="center",
            fontsize=9,
            fontweight="bold" if config == winner else "normal",
        ))  # fmt: skip
    labels = [_tx(f"{c}  ★" if c == winner else str(c)) for c in rows["config"]]
    ax.set_yticks(range(len(rows)), labels=labels)
    ax.set_xlim(0, xmax * 1.32 if xmax > 0 else 1)
    _fit_texts(ax, notes)
    ax.set_xlabel("time-to-ready (s): venv creation start to ready check success")
    ax.set_title(_tx(title), loc="left", fontsize=12)
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
    return _save(fig, path)


def _phase_spans(t: np.ndarray, phase: np.ndarray) -> list[tuple[str, float, float]]:
    """Contiguous (phase, start, end) runs in a samples table."""
    spans: list[tuple[str, float, float]] = []
    if len(t) == 0:
        return spans
    start = 0
    for i in range(1, len(t) + 1):
        if i == len(t) or phase[i] != phase[start]:
            end = t[i] if i < len(t) else t[-1]
            spans.append((str(phase[start]), float(t[start]), float(end)))
            start = i
    return spans


def _binned(
    t: np.ndarray, y: np.ndarray, width: float, how: str = "mean"
) -> tuple[np.ndarray, np.ndarray]:
    """Values per time bin of ``width`` seconds (mean or max), plotted at bin centres.

    At 10 Hz a raw 10-minute series is 6,000 jagged points that print as a solid block;
    bins keep the shape (a stall, a step down) readable.
    """
    ok = np.isfinite(t) & np.isfinite(y)
    t, y = t[ok], y[ok]
    if len(t) == 0:
        return t, y
    idx = np.floor((t - t[0]) / width).astype(int)
    n = int(idx.max()) + 1
    if how == "max":
        out = np.full(n, -np.inf)
        np.maximum.at(out, idx, y)
    else:
        sums = np.bincount(idx, weights=y, minlength=n)
        counts = np.bincount(idx, minlength=n)
        with np.errstate(invalid="ignore", divide="ignore"):
            out = sums / counts
    keep = np.isfinite(out)
    centres = t[0] + (np.arange(n) + 0.5) * width
    return centres[keep], out[keep]


NICE_BINS_S = (0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600)
MAX_BINS = 200


def _bin_width(t: np.ndarray) -> float:
    """The smallest round width giving at most ``MAX_BINS`` bins, never finer than 2 ticks."""
    span = float(t[-1] - t[0]) if len(t) > 1 else 1.0
    tick = float(np.median(np.diff(t))) if len(t) > 1 else 0.1
    for w in NICE_BINS_S:
        if span / w <= MAX_BINS and w >= 2 * tick:
            return float(w)
    return float(NICE_BINS_S[-1])


def _rate(t: np.ndarray, cum: np.ndarray, width: float) -> tuple[np.ndarray, np.ndarray]:
    """Rate (per second) of a cumulative counter over windows of ``width`` s, at window centres."""
    ok = np.isfinite(t) & np.isfinite(cum)
    t, cum = t[ok], cum[ok]
    if len(t) < 2:
        return t, np.zeros_like(t)
    edges = np.arange(t[0], t[-1] + width, width)
    at = np.interp(edges, t, cum)
    r = np.diff(at) / width
    return edges[:-1] + width / 2, np.clip(r, 0, None)


MIN_RATE_BINS = 20


def _rate_width(t: np.ndarray, width: float) -> float:
    """Rate windows: the timeline's bin width, widened to 5 sampler ticks (a 2-tick rate of
    a writer that moves 1 MB chunks is all spikes) unless that leaves fewer than
    ``MIN_RATE_BINS`` windows (a trial of a few seconds keeps its fine bins)."""
    if len(t) < 2:
        return float(width)
    tick = float(np.median(np.diff(t)))
    span = float(t[-1] - t[0])
    for w in NICE_BINS_S:
        if w >= width and w >= 5 * tick - 1e-9:
            return float(w) if span / w >= MIN_RATE_BINS else float(width)
    return float(width)


CLIP_FACTOR = 1.5  # clip the MB/s axis only when peaks exceed the robust top by this much


def _rate_top(values: np.ndarray, floor: float = 0.0) -> float | None:
    """Upper limit of the MB/s axis, or None to let matplotlib choose.

    A one-off burst (pip copying a wheel into its cache at 50 MB/s) would otherwise squash
    the install's few MB/s, and a drop from 3 to 0.5 MB/s, into the bottom pixels. The top is
    1.2 x the 95th percentile of all plotted rates (or ``floor``, the level before a drop);
    shorter, higher peaks are clipped and labelled with their value.
    """
    v = values[np.isfinite(values)]
    if len(v) < 10:
        return None
    robust = max(float(np.percentile(v, 95)), floor) * 1.2
    if robust <= 0 or float(v.max()) <= CLIP_FACTOR * robust:
        return None
    return robust


def _mark_clipped(
    ax: Axes,
    series: list[tuple[np.ndarray, np.ndarray, str]],
    top: float,
    span: float,
    x_range: tuple[float, float] | None = None,
) -> None:
    """A small label at the top edge for each run of rates above the axis (highest first,
    none closer than 4 % of the time axis to another)."""
    peaks: list[tuple[float, float, str]] = []
    for x, y, colour in series:
        over = np.isfinite(y) & (y > top)
        i = 0
        while i < len(y):
            if over[i]:
                j = i
                while j + 1 < len(y) and over[j + 1]:
                    j += 1
                k = i + int(np.argmax(y[i : j + 1]))
                peaks.append((float(x[k]), float(y[k]), colour))
                i = j + 1
            else:
                i += 1
    lo, hi = ax.get_xlim() if x_range is None else x_range
    shown: list[float] = []
    for px, py, pcolour in sorted(peaks, key=lambda p: -p[1]):
        px = min(max(px, lo + 0.015 * span), hi - 0.015 * span)  # keep the label inside
        if any(abs(px - s) < 0.04 * span for s in shown):
            continue
        shown.append(px)
        ax.annotate(
            f"↑{_mbps(py)}",
            xy=(px, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(0, -1),
            textcoords="offset points",
            ha="center",
            va="top",
            fontsize=7,
            color=pcolour,
            bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8},
        )


def _mbps(x: float) -> str:
    """A rate without its unit (the axis says MB/s)."""
    return fmt_mbps(x).removesuffix(" MB/s")


def _draw_drop(ax: Axes, drop: Drop) -> None:
    """The detected drop: a dotted line where it happens, the two segment means as thick
    dashed levels across the install phase, and the figures."""
    colour = OKABE_ITO["vermillion"]
    ax.axvline(drop.at_s, color=colour, linestyle=":", linewidth=1.6)
    ax.hlines(
        [drop.before_mbps, drop.after_mbps],
        [drop.start_s, drop.at_s],
        [drop.at_s, drop.end_s],
        colors=colour,
        linestyles="--",
        linewidth=2.2,
        zorder=4,
        label="mean write rate before\nand after the drop",
    )
    ax.annotate(
        f"write rate fell {_mbps(drop.before_mbps)} → {_mbps(drop.after_mbps)} MB/s "
        f"at {drop.at_s:.0f} s",
        xy=(drop.at_s, 0.8),  # below the labels of clipped peaks along the top edge
        xycoords=("data", "axes fraction"),
        xytext=(6, 0),
        textcoords="offset points",
        fontsize=8,
        color=colour,
        bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.8},
    )


def _legend_right(ax: Axes) -> None:
    ax.legend(
        loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False, borderaxespad=0
    )


def timeline_chart(
    samples: pd.DataFrame,
    config: str,
    trial_id: str,
    subtitle: str,
    path: Path,
    stalls: list[tuple[float, float]] | None = None,
) -> Path:
    """iowait/CPU %, write MB/s and blocked processes over one trial, with phase bands.

    ``stalls`` are (start, end) seconds as the run recorded them (stalls.csv); a run without
    stalls.csv gets its write gaps drawn instead (diagnose.find_write_gaps), labelled as such.
    """
    t = samples["t"].to_numpy(dtype=float)
    phase = (
        samples["phase"].to_numpy(dtype=str) if "phase" in samples.columns else np.full(len(t), "")
    )
    width = _bin_width(t)
    fig = Figure(figsize=(11, 6.6))
    axes = fig.subplots(3, 1, sharex=True, gridspec_kw={"height_ratios": [1, 1.3, 0.8]})
    spans = _phase_spans(t, phase)
    total = float(t[-1] - t[0]) if len(t) > 1 else 1.0
    for ax in axes:
        _style(ax)
        ax.grid(axis="y", color="#EEEEEE", linewidth=0.8)
        for name, a, b in spans:
            ax.axvspan(a, b, color=PHASE_COLOURS.get(name, "#DDDDDD"), alpha=0.15, linewidth=0)
    for name, a, b in spans:
        if b - a > 0.035 * total:
            axes[0].text(
                (a + b) / 2,
                1.02,
                name,
                transform=axes[0].get_xaxis_transform(),
                ha="center",
                va="bottom",
                fontsize=9,
                color="#333333",
            )

    def col(name: str) -> np.ndarray:
        if name in samples.columns:
            return samples[name].to_numpy(dtype=float)
        return np.full(len(t), np.nan)

    per = f"{width:g} s"
    ax = axes[0]
    ax.plot(
        *_binned(t, col("iowait_pct"), width),
        color=OKABE_ITO["vermillion"],
        linewidth=1.3,
        label=f"iowait % ({per} mean)",
    )
    ax.plot(
        *_binned(t, col("cpu_user_pct") + col("cpu_system_pct"), width),
        color=OKABE_ITO["blue"],
        linewidth=1.3,
        label=f"CPU user+system % ({per} mean)",
    )
    ax.set_ylabel("% of all CPUs")
    ax.set_ylim(0, 100)
    _legend_right(ax)

    ax = axes[1]
    rw = _rate_width(t, width)
    series: list[tuple[np.ndarray, np.ndarray, str]] = []
    tw = col("tree_write_bytes")
    if np.isfinite(tw).any():
        x, y = _rate(t, tw, rw)
        series.append((x, y / 1e6, OKABE_ITO["orange"]))
        ax.plot(x, y / 1e6, color=OKABE_ITO["orange"], linewidth=1.6, label="installer writes")
    dw = col("disk_write_bps")
    if np.nan_to_num(dw).max() > 0:
        bx, by = _binned(t, dw, rw)
        series.append((bx, by / 1e6, OKABE_ITO["black"]))
        ax.plot(
            bx,
            by / 1e6,
            color=OKABE_ITO["black"],
            linewidth=0.8,
            alpha=0.7,
            linestyle="--",
            label="block-device writes",
        )
    nr = col("net_recv_bps")
    if np.nan_to_num(nr).max() > 0:
        bx, by = _binned(t, nr, rw)
        series.append((bx, by / 1e6, OKABE_ITO["sky"]))
        ax.plot(bx, by / 1e6, color=OKABE_ITO["sky"], linewidth=1.0, label="network receive")
    if stalls is not None:
        gaps, what = stalls, "stall"
    else:
        gaps, what = find_write_gaps(*install_write_rates(samples)), "write gap"
    for a, b in gaps:
        ax.axvspan(
            a, b, facecolor="none", edgecolor=OKABE_ITO["vermillion"], hatch="///", linewidth=0
        )
        ax.annotate(
            f"{what} {b - a:.0f} s",
            xy=((a + b) / 2, 0.5),
            xycoords=("data", "axes fraction"),
            ha="center",
            fontsize=8,
            color=OKABE_ITO["vermillion"],
            bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.8},
        )
    drop = install_drop(samples)
    if drop is not None:
        _draw_drop(ax, drop)
    values = np.concatenate([y for _, y, _ in series]) if series else np.array([])
    top = _rate_top(values, 1.5 * drop.before_mbps if drop is not None else 0.0)
    if top is not None:
        _mark_clipped(ax, series, top, total, (float(t[0]), float(t[-1])))
        ax.set_ylim(0, top)
    else:
        ax.set_ylim(bottom=0)
    ax.set_ylabel(f"MB/s ({rw:g} s windows)")
    _legend_right(ax)

    ax = axes[2]
    bx, by = _binned(t, col("procs_blocked"), width, "max")
    ax.step(
        bx,
        by,
        where="mid",
        color=OKABE_ITO["purple"],
        linewidth=1.2,
        label=f"blocked processes\n(system, {per} max)",
    )
    bx, by = _binned(t, col("tree_dstate"), width, "max")
    ax.step(
        bx,
        by,
        where="mid",
        color=OKABE_ITO["green"],
        linewidth=1.2,
        label=f"installer threads\nin D state ({per} max)",
    )
    fw = col("tree_fswait")
    if np.isfinite(fw).any():
        bx, by = _binned(t, fw, rw)
        ax.plot(
            bx,
            by,
            color=OKABE_ITO["blue"],
            linewidth=1.2,
            label=f"installer threads in a\nfilesystem wait ({rw:g} s mean)",
        )
    top = np.nan_to_num(
        np.concatenate([col("procs_blocked"), col("tree_dstate"), col("tree_fswait")])
    ).max()
    ax.set_ylim(0, max(1.0, float(top)) * 1.15)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("count")
    _legend_right(ax)
    ax.set_xlabel("seconds since the trial started")
    if len(t):
        ax.set_xlim(t[0], t[-1])
    fig.suptitle(
        _tx(f"{config}: timeline of its median trial, {trial_id}"), x=0.07, ha="left", fontsize=12
    )
    fig.text(0.07, 0.935, _tx(subtitle), fontsize=9, color="#444444")
    fig.subplots_adjust(left=0.07, right=0.79, top=0.87, bottom=0.08, hspace=0.14)
    return _save(fig, path)


def cost_chart(table: pd.DataFrame, title: str, starts_per_month: float, path: Path) -> Path | None:
    """Monthly cost of slow starts per config (GPU idle, plus metered storage if priced)."""
    rows = table[np.isfinite(table["cost_per_start_usd"].to_numpy(dtype=float))]
    if rows.empty:
        return None
    rows = rows.sort_values("monthly_cost_usd", ascending=True)
    n = len(rows)
    fig = Figure(figsize=(10, 1.5 + 0.55 * n))
    ax = fig.add_subplot()
    _style(ax)
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
            _tx(
                f"  {format_usd(row['cost_per_start_usd'])} per start · {format_usd(row['monthly_cost_usd'])} per month"
            ),
            va="center",
            fontsize=9,
        )
    ax.set_yticks(y, labels=[_tx(c) for c in rows["config"]])
    ax.set_xlim(0, top * 1.45 if top > 0 else 1)
    ax.set_xlabel(f"USD per month at {starts_per_month:g} cold starts")
    ax.set_title(_tx(title), loc="left", fontsize=11)
    fig.legend(loc="lower right", ncol=2, fontsize=8, frameon=False)  # below the axes: no overlap
    fig.subplots_adjust(
        left=0.2, right=0.98, top=1 - 0.5 / fig.get_figheight(), bottom=1.0 / fig.get_figheight()
    )
    return _save(fig, path)


def compare_chart(merged: pd.DataFrame, run_labels: Sequence[str], title: str, path: Path) -> Path:
    """Grouped bars: each config's median time-to-ready on each run, with spread whiskers.

    Runs are named by key (A, B, ...) on the bars and in a legend below the axes, so long
    labels never cover a bar; the title is wrapped to the figure's width.
    """
    import textwrap

    configs = list(dict.fromkeys(merged["config"]))
    k = max(len(run_labels), 1)
    n = max(len(configs), 1)
    title_lines = textwrap.wrap(_tx(title), 95) or [""]
    legend_rows = k
    fig = Figure(figsize=(10, 1.4 + 0.25 * (len(title_lines) + legend_rows) + n * (0.3 + 0.32 * k)))
    ax = fig.add_subplot()
    _style(ax)
    height = 0.8 / k
    xmax = 0.0
    minmax = int(merged["n_ok"].max()) < SPREAD_MINMAX_BELOW if len(merged) else True
    lo_col, hi_col = (
        ("min_time_to_ready_s", "max_time_to_ready_s") if minmax
        else ("p10_time_to_ready_s", "p90_time_to_ready_s")
    )  # fmt: skip
    for j, label in enumerate(run_labels):
        sub = merged[merged["run_label"] == label].set_index("config")
        colour = SERIES_COLOURS[j % len(SERIES_COLOURS)]
        for i, config in enumerate(configs):
            if config not in sub.index:
                continue
            r = sub.loc[config]
            med = float(r["median_time_to_ready_s"])
            if not math.isfinite(med):
                continue
            y = (n - 1 - i) + (k - 1 - j - (k - 1) / 2) * height
            ax.barh(y, med, height=height * 0.9, color=colour)
            lo, hi = float(r[lo_col]), float(r[hi_col])
            if math.isfinite(lo) and math.isfinite(hi):
                ax.errorbar(med, y, xerr=[[med - lo], [hi - med]], fmt="none", ecolor="black",
                            elinewidth=1, capsize=3)  # fmt: skip
            else:
                hi = med
            ratio = r.get("ratio_vs_ref", math.nan)
            text = f"  {run_key(j)}: {fmt_s(med)}"
            if j > 0 and math.isfinite(ratio) and ratio > 0:
                text += f", {fmt_speed(1 / ratio, 'A')}"
            ax.text(max(hi, med), y, _tx(text), va="center", fontsize=8)
            xmax = max(xmax, hi, med)
    ax.set_yticks(range(n), labels=[_tx(c) for c in configs[::-1]])
    ax.set_xlim(0, xmax * 1.55 if xmax > 0 else 1)
    ax.set_xlabel(f"median time-to-ready (s); whiskers {'min–max' if minmax else 'p10–p90'}")
    ax.set_title("\n".join(title_lines), loc="left", fontsize=11)
    handles = [
        Patch(color=SERIES_COLOURS[j % len(SERIES_COLOURS)], label=_tx(f"{run_key(j)}: {lab}"))
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
    return _save(fig, path)
