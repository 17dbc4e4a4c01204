"""The ``dataset`` kind's charts: the read rate over a trial (the change point marked, a lab
volume's credit balance beside it), and AU per config against the bar."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from iobench.report.charts import OKABE_ITO, save_figure, style_axes, tex_escape
from iobench.report.diagnose import drop_window_s, window_rates

#: a lab volume's balance at or below this (MB) counts as run out
CREDITS_EMPTY_MB = 1.0


def read_rates(samples: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The read phase's rate from the samples (the loader tree's rchar): (start s, MB/s)."""
    if samples is None or "tree_read_bytes" not in samples.columns:
        return np.array([]), np.array([])
    part = samples[samples["phase"] == "read"] if "phase" in samples.columns else samples
    t = part["t"].to_numpy(dtype=float)
    cum = part["tree_read_bytes"].to_numpy(dtype=float)
    # from the first byte read to the last: the listing before and the last batches' compute
    # after (the workers have read everything ahead) would read as a fall of the rate
    if len(cum) > 2 and cum[-1] > cum[0]:
        span = cum[-1] - cum[0]  # the ends: where the first and the last 0.1 % were read
        first = int(np.searchsorted(cum, cum[0] + 0.001 * span))
        last = int(np.searchsorted(cum, cum[-1] - 0.001 * span))
        lo, hi = max(0, first - 1), min(len(cum), last + 1)
        t, cum = t[lo:hi], cum[lo:hi]
    starts, rates = window_rates(t, cum, drop_window_s(t))
    return starts, rates / 1e6


def throughput_chart(
    samples: pd.DataFrame, config: str, row: Any, target: float, path: Path
) -> Path | None:
    """Read MB/s over the trial, the change point marked, a lab volume's credits beside it."""
    starts, rates = read_rates(samples)
    if len(starts) < 2:
        return None
    fig = Figure(figsize=(10, 3.6))
    ax = fig.add_subplot()
    style_axes(ax)
    ax.step(starts, rates, where="post", color=OKABE_ITO["blue"], label="read MB/s (loader)")
    ax.set_xlabel("seconds since the trial started")
    ax.set_ylabel("MB/s (10^6 bytes)")
    ax.set_ylim(bottom=0)
    d = row.drop
    if d is not None:
        ax.axvline(d.drop.at_s, color=OKABE_ITO["vermillion"], linestyle="--",
                   label=f"rate fell at {d.drop.at_s:.1f} s")  # fmt: skip
        ax.hlines([d.drop.before_mbps, d.drop.after_mbps], [starts[0], d.drop.at_s],
                  [d.drop.at_s, starts[-1]], colors="#888888", linewidth=1)  # fmt: skip
    if "target_credits_mb" in samples.columns:
        credits = pd.to_numeric(samples["target_credits_mb"], errors="coerce")
        if credits.notna().any() and credits.max() > CREDITS_EMPTY_MB:  # a volume with credits
            ax2 = ax.twinx()
            ax2.plot(samples["t"], credits, color=OKABE_ITO["orange"], label="burst credits (MB)")
            ax2.set_ylabel("credit balance, MB")
            ax2.set_ylim(bottom=0)
            ax2.spines["top"].set_visible(False)
    handles = [h for a in fig.axes for h in a.get_legend_handles_labels()[0]]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    au = f"AU {row.au:.2f} (bar {target:.2f})" if math.isfinite(row.au) else "AU ?"
    ax.set_title(tex_escape(f"Training-data reads — {config}: {au}, {row.read_mb_per_s:,.0f} MB/s"),
                 loc="left", fontsize=11)  # fmt: skip
    fig.subplots_adjust(left=0.08, right=0.9, top=0.88, bottom=0.24)
    return save_figure(fig, path)


def au_chart(section: Any, title: str, path: Path) -> Path | None:
    """AU per config against the bar, each bar labelled with its time (copy + epochs)."""
    rows = [r for r in section.rows if math.isfinite(r.au)]
    if not rows:
        return None
    fig = Figure(figsize=(10, 1.6 + 0.55 * len(rows)))
    ax = fig.add_subplot()
    style_axes(ax)
    y = np.arange(len(rows))[::-1]
    colours = [OKABE_ITO["green"] if r.au >= section.au_target else OKABE_ITO["vermillion"]
               for r in rows]  # fmt: skip
    ax.barh(y, [r.au for r in rows], color=colours, height=0.6)
    ax.axvline(section.au_target, color="#333333", linestyle="--", linewidth=1)
    ax.text(section.au_target, y[0] + 0.45, f" bar {section.au_target:.2f}", fontsize=8)
    for yi, r in zip(y, rows, strict=True):
        copy = f"copy {r.stage_s:.1f} s + " if math.isfinite(r.stage_s) else ""
        ax.text(min(r.au, 1.0) + 0.01, yi, tex_escape(
            f"AU {r.au:.2f} · {copy}epochs {r.read_s:.1f} s · {r.read_mb_per_s:,.0f} MB/s"),
            va="center", fontsize=9)  # fmt: skip
    ax.set_yticks(y, labels=[tex_escape(r.config) for r in rows])
    ax.set_xlim(0, 1.6)
    ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0])
    ax.set_xlabel(
        "accelerator utilisation: compute / wall time of the epochs (MLPerf Storage's AU)"
    )
    ax.set_title(tex_escape(title), loc="left", fontsize=11)
    fig.subplots_adjust(left=0.22, right=0.98, top=1 - 0.5 / fig.get_figheight(),
                        bottom=0.9 / fig.get_figheight())  # fmt: skip
    return save_figure(fig, path)


__all__ = ["CREDITS_EMPTY_MB", "au_chart", "read_rates", "throughput_chart"]
