"""The timeline of one trial: CPU and iowait, MB/s read and written, blocked and D-state
threads and filesystem waits over time, the phases as bands, a rate drop marked where the
change-point finder (:mod:`iobench.report.diagnose`) puts one."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from iobench.report.charts import (
    OKABE_ITO,
    PHASE_COLOURS,
    save_figure,
    style_axes,
    tex_escape,
)
from iobench.report.diagnose import Drop, find_write_gaps, install_drop, install_write_rates
from iobench.rundir.records import PHASES
from iobench.units import fmt_mbps


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


def _complete_spans(
    spans: list[tuple[str, float, float]], phases: Mapping[str, float]
) -> list[tuple[str, float, float]]:
    """``spans`` plus the phases of ``phases`` (in PHASES order) that no sample was labelled
    with, each placed after the phase before it, as long as the row says it took."""
    have = {name for name, _, _ in spans}
    out = list(spans)
    for name in PHASES:
        seconds = phases.get(name)
        if name in have or seconds is None or not math.isfinite(seconds) or seconds <= 0:
            continue
        before = [b for n, _, b in out if n in PHASES[: PHASES.index(name)]]
        start = max(before) if before else (out[-1][2] if out else 0.0)
        out.append((name, start, start + seconds))
        have.add(name)
    return sorted(out, key=lambda span: span[1])


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
    phases: Mapping[str, float] | None = None,
    ready_s: float | None = None,
) -> Path:
    """iowait/CPU %, write MB/s and blocked processes over one trial, with phase bands.

    ``phases``: the trial row's phase seconds; a phase shorter than a sample interval has
    no sample labelled with it (a 0.05 s import at 10 Hz) and gets its band from them,
    after the last one sampled. ``ready_s``: the trial's time-to-ready, where the x axis
    ends (the last sample comes up to an interval earlier).

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
    spans = _complete_spans(_phase_spans(t, phase), phases or {})
    end = max([float(t[-1])] if len(t) else [1.0])
    end = max(end, ready_s or 0.0, *(b for _, _, b in spans)) if spans else max(end, ready_s or 0.0)
    total = end - float(t[0]) if len(t) > 1 else 1.0
    for ax in axes:
        style_axes(ax)
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
        ax.set_xlim(t[0], end)
    fig.suptitle(
        tex_escape(f"{config}: timeline of its median trial, {trial_id}"),
        x=0.07,
        ha="left",
        fontsize=12,
    )
    # a long placement wrapped, not clipped at the figure's edge (~150 characters at 9 pt)
    fig.text(0.07, 0.935, tex_escape(textwrap.fill(subtitle, 150)), fontsize=9, color="#444444",
             va="top" if len(subtitle) > 150 else "baseline")  # fmt: skip
    fig.subplots_adjust(left=0.07, right=0.79, top=0.87, bottom=0.08, hspace=0.14)
    return save_figure(fig, path)
