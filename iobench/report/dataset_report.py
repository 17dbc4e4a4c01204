"""The report's training-data section: how busy the accelerator was (AU) against a bar, when
the read rate fell (a volume's burst credits running out), and what the waiting costs.

Read only from the run folder: trials.csv's dataset columns, the median trial's samples
(its read rate, and a lab volume's credit balance) and the loader's own record of its batches
(``logs/<trial>.loader.json``, checked as untrusted input). The change point is the install
report's (``diagnose.find_drop``) applied to the loader's read rate; AU before and after it
comes from the batches on each side. Prices are the report's: the GPU's idle time per epoch
and over a month of training at that AU, beside the volume's storage and per-GB read charges
(Elastic's reads cost, Bursting's do not).
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from iobench import reading
from iobench.cost.idle import AU_TARGET
from iobench.cost.prices import StoragePreset, find_storage_preset, format_usd
from iobench.report.charts import OKABE_ITO, save_figure, style_axes, tex_escape
from iobench.report.diagnose import Drop, drop_window_s, find_drop, window_rates
from iobench.stats import median
from iobench.units import fmt_num, fmt_s

#: a month of training, for the monthly figures
HOURS_PER_MONTH = 730.0
#: a lab volume's balance at or below this (MB) counts as run out
CREDITS_EMPTY_MB = 1.0


@dataclass(frozen=True)
class ReadDrop:
    """The loader's read rate fell (a change point), and what AU did either side."""

    drop: Drop
    au_before: float | None
    au_after: float | None
    credits_out_s: float | None  # when the lab volume's balance reached zero (None: no lab)


@dataclass
class ConfigReads:
    """One config's medians over its ok trials, and its median trial's drop."""

    config: str
    n: int
    au: float
    read_mb_per_s: float
    io_wait_s: float
    read_s: float
    stage_s: float
    epochs: int
    data_gb: float  # one epoch's data, GB (10^9 bytes)
    cached: str = ""
    trial: str = ""
    drop: ReadDrop | None = None


@dataclass
class DatasetSection:
    """What the report shows about training-data reads (empty ``rows`` in other runs)."""

    rows: list[ConfigReads] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    charts: dict[str, Path] = field(default_factory=dict)
    au_target: float = AU_TARGET
    au_png: Path | None = None
    words: list[str] = field(default_factory=list)  # what the lines say under the table


def _med(frame: pd.DataFrame, col: str) -> float:
    if col not in frame.columns:
        return math.nan
    values = [float(v) for v in frame[col] if v is not None and not pd.isna(v)]
    return median(values) if values else math.nan


def loader_record(path: Path) -> dict[str, Any] | None:
    """The loader's record of a trial, or None when it is missing or malformed."""
    try:
        data = json.loads(reading.read_text(path))
        epochs = [(float(a), float(b)) for a, b in data["epochs"]]
        batches = [tuple(float(x) for x in b[:5]) for b in data["batches"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not all(len(b) == 5 and all(math.isfinite(x) and x >= 0 for x in b) for b in batches):
        return None
    return {"epochs": epochs, "batches": batches}


def au_between(record: dict[str, Any], lo: float, hi: float) -> float | None:
    """AU of the batches that arrived in [lo, hi): compute / (compute + waits), each epoch's
    first batch's wait left out (as the row's ``au``)."""
    firsts = set()
    for start, end in record["epochs"]:
        mine = [i for i, b in enumerate(record["batches"]) if start <= b[0] <= end]
        if mine:
            firsts.add(mine[0])
    compute = wait = 0.0
    for i, (arrived, w, c, _, _) in enumerate(record["batches"]):
        if lo <= arrived < hi:
            compute += c
            wait += 0.0 if i in firsts else w
    return compute / (compute + wait) if compute + wait > 0 else None


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


def credits_out_s(samples: pd.DataFrame) -> float | None:
    """When a lab volume's balance first reached zero after having some (None: it never did,
    or the samples hold none)."""
    if samples is None or "target_credits_mb" not in samples.columns:
        return None
    c = pd.to_numeric(samples["target_credits_mb"], errors="coerce").to_numpy(dtype=float)
    t = samples["t"].to_numpy(dtype=float)
    had = False
    for ti, ci in zip(t, c, strict=True):
        if not math.isfinite(ci):
            continue
        had = had or ci > CREDITS_EMPTY_MB
        if had and ci <= CREDITS_EMPTY_MB:
            return float(ti)
    return None


def read_drop(samples: pd.DataFrame, record: dict[str, Any] | None) -> ReadDrop | None:
    """The read rate's lasting fall in one trial, with AU either side of it."""
    starts, rates = read_rates(samples)
    found = find_drop(starts, rates) if len(starts) else None
    if found is None:
        return None
    at, before, after = found
    drop = Drop(at, before, after, float(starts[0]), float(starts[-1]))
    au_b = au_between(record, 0.0, at) if record else None
    au_a = au_between(record, at, math.inf) if record else None
    return ReadDrop(drop, au_b, au_a, credits_out_s(samples))


def build_section(
    trials: pd.DataFrame,
    median_trials: dict[str, str],
    run_path: Path,
    samples_of: Any,
    price_usd_h: float | None,
    storage: str | None,
    starts_per_month: float,
    au_target: float = AU_TARGET,
) -> DatasetSection:
    """The section from a run's trials (``samples_of(trial_id)`` reads one trial's samples)."""
    section = DatasetSection(au_target=au_target)
    if "data_role" not in trials.columns or not trials["data_role"].fillna("").astype(str).any():
        return section
    ok = trials[trials["status"] == "ok"]
    order = {c: i for i, c in enumerate(median_trials)}  # the summary's order
    groups = sorted(ok.groupby("config", sort=False), key=lambda g: order.get(str(g[0]), 1e9))
    for config, group in groups:
        epochs = int(_med(group, "epochs") or 1)
        row = ConfigReads(
            config=str(config),
            n=len(group),
            au=_med(group, "au"),
            read_mb_per_s=_med(group, "read_mb_per_s"),
            io_wait_s=_med(group, "io_wait_s"),
            read_s=_med(group, "read_s"),
            stage_s=_med(group, "stage_s"),
            epochs=max(1, epochs),
            data_gb=_med(group, "data_bytes") / 1e9 / max(1, epochs),
            cached=next(
                (str(c) for c in group.get("data_cached", []) if isinstance(c, str) and c), ""
            ),
            trial=median_trials.get(str(config), ""),
        )
        if row.trial:
            record = loader_record(run_path / "logs" / f"{row.trial}.loader.json")
            row.drop = read_drop(samples_of(row.trial), record)
        section.rows.append(row)
    preset = find_storage_preset(storage) if storage else None
    section.lines = section_lines(section, price_usd_h, preset, starts_per_month)
    return section


def _au_words(au: float, target: float) -> str:
    if not math.isfinite(au):
        return "AU unknown"
    if au >= target:
        return f"AU {au:.2f}, meets the {target:.2f} bar"
    return (
        f"AU {au:.2f}, below the {target:.2f} bar: the accelerator waits {1 - au:.0%} of the time"
    )


def section_lines(
    section: DatasetSection,
    price_usd_h: float | None,
    preset: StoragePreset | None,
    starts_per_month: float,
) -> list[str]:
    """The console's lines: a table of AU per config, then the words (``section.words``,
    which the page shows under its own table): the drop, the break-even, the money."""
    target = section.au_target
    head = ["config", "AU", "MB/s", "waited", "epochs", "copy", ""]
    cells = [head]
    for r in section.rows:
        verdict = (
            ""
            if not math.isfinite(r.au)
            else ("meets the bar" if r.au >= target else "below the bar")
        )
        cells.append([
            r.config,
            f"{r.au:.2f}" if math.isfinite(r.au) else "?",
            f"{r.read_mb_per_s:,.0f}" if math.isfinite(r.read_mb_per_s) else "?",
            fmt_s(r.io_wait_s),
            fmt_s(r.read_s),
            fmt_s(r.stage_s),
            verdict,
        ])  # fmt: skip
    widths = [max(len(row[i]) for row in cells) for i in range(len(head))]
    table = [
        "  ".join(
            c.ljust(w) if i in (0, 6) else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))
        ).rstrip()
        for row in cells
    ]
    lines = [f"Training-data reads: AU, the accelerator's busy share (bar {target:.2f}):", *table]
    words: list[str] = []
    for r in section.rows:
        if math.isfinite(r.au) and r.au < target:
            words.append(f"{r.config}: the accelerator waits {1 - r.au:.0%} of the time for data")
    for r in section.rows:
        if r.drop is None:
            continue
        d = r.drop
        au = ""
        if d.au_before is not None and d.au_after is not None:
            au = f"; AU {d.au_before:.2f} before, {d.au_after:.2f} after"
        credits = (
            f" (the volume's burst credits ran out at {d.credits_out_s:.1f} s)"
            if d.credits_out_s is not None
            else ""
        )
        words.append(
            f"{r.config}: the read rate fell from {d.drop.before_mbps:,.0f} to "
            f"{d.drop.after_mbps:,.0f} MB/s at {d.drop.at_s:.1f} s{credits}{au}"
        )
    words += break_even_lines(section.rows)
    words += [f"{r.config}: {r.cached}" for r in section.rows if r.cached]
    if price_usd_h is not None:
        words += cost_lines(section.rows, price_usd_h, preset, starts_per_month)
    section.words = words
    return lines + [f"  {w}" if not w.endswith(":") else w for w in words]


def break_even_lines(rows: list[ConfigReads]) -> list[str]:
    """For each config that copies the data first: after how many epochs the copy has paid
    for itself against the first config that reads in place (the baseline's epochs)."""
    base = next((r for r in rows if not math.isfinite(r.stage_s)), None)
    out = []
    for r in rows:
        if base is None or not math.isfinite(r.stage_s):
            continue
        saved = base.read_s / base.epochs - r.read_s / r.epochs
        if saved <= 0:
            out.append(
                f"  {r.config}: its epochs are no faster than {base.config}'s: the copy never pays"
            )
            continue
        out.append(
            f"{r.config}: the {fmt_s(r.stage_s)} copy pays off after {r.stage_s / saved:.1f} "
            f"epochs ({fmt_s(saved)} saved each vs {base.config})"
        )
    return out


def cost_lines(
    rows: list[ConfigReads], price_usd_h: float, preset: StoragePreset | None, starts: float
) -> list[str]:
    """GPU idle dollars per epoch and per month of training, beside the volume's charges."""
    out = [f"GPU idle for want of data, at {format_usd(price_usd_h)}/h:"]
    charges = []
    for r in rows:
        if not math.isfinite(r.au):
            continue
        per_epoch = r.io_wait_s / r.epochs * price_usd_h / 3600
        month = (1 - r.au) * price_usd_h * HOURS_PER_MONTH
        copy = ""
        if math.isfinite(r.stage_s):
            copy = f" + {format_usd(r.stage_s * price_usd_h / 3600)} a copy"
        out.append(f"{r.config}: {format_usd(per_epoch)}/epoch{copy}, {format_usd(month)}/month")
        if preset is not None and r.data_gb > 0:
            epoch_s = r.read_s / r.epochs
            # read in place: every epoch reads the volume; copied: once per start
            reads_gb = (r.data_gb * HOURS_PER_MONTH * 3600 / epoch_s if not math.isfinite(r.stage_s)
                        else r.data_gb * starts)  # fmt: skip
            charge = r.data_gb * preset.usd_per_gb_month + reads_gb * preset.usd_per_gb_read
            charges.append(f"{r.config}: {format_usd(charge)}/month")
    if charges and preset is not None:
        out += [f"{preset.name}, the data and its reads (in place: every epoch):", *charges]
    return out


def throughput_chart(
    samples: pd.DataFrame, config: str, row: ConfigReads, target: float, path: Path
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


def au_chart(section: DatasetSection, title: str, path: Path) -> Path | None:
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


def html_block(section: DatasetSection) -> str:
    """The section as an HTML fragment for report.html."""
    if not section.rows:
        return ""
    head = ("<tr><th>config</th><th>trials</th><th>AU</th><th>read MB/s</th>"
            "<th>waited for data (s)</th><th>epochs (s)</th><th>copy first (s)</th></tr>")  # fmt: skip

    body = "".join(
        f"<tr><td>{html.escape(r.config)}</td><td>{r.n}</td><td>{fmt_num(r.au, '.2f')}</td>"
        f"<td>{fmt_num(r.read_mb_per_s, ',.0f')}</td><td>{fmt_num(r.io_wait_s, '.2f')}</td>"
        f"<td>{fmt_num(r.read_s, '.2f')}</td><td>{fmt_num(r.stage_s, '.2f')}</td></tr>"
        for r in section.rows
    )
    words = "<br>".join(html.escape(line) for line in section.words)
    imgs = "".join(
        f'<img src="{html.escape(p.name)}" alt="read rate of {html.escape(c)} over its trial">'
        for c, p in section.charts.items()
    )
    if section.au_png is not None:
        imgs = f'<img src="{html.escape(section.au_png.name)}" alt="AU per config">' + imgs
    return (
        f'<section id="dataset"><h2>Training-data reads</h2><p>AU is the share of the epochs the '
        f"emulated accelerator computed rather than waited for data (the bar: "
        f"{section.au_target:.2f}).</p><table>{head}{body}</table><p>{words}</p>{imgs}</section>"
    )


__all__ = ["DatasetSection", "au_chart", "build_section", "html_block", "throughput_chart"]
