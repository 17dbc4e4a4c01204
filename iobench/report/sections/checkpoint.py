"""The ``checkpoint`` kind's section: what a save costs the GPU on each placement, the restore
after a restart, and how often to save (the verdict's measure: the share of GPU time lost at
the best interval, ``iobench.cost.kinds.checkpoint``).

Read only from the run folder: trials.csv's checkpoint columns (medians over each config's ok
trials) and the median trial's samples (the write and read rates of the saver's processes over
the trial). How often to save is ``iobench.cost.checkpoint``'s: Young's interval from the
measured pause, the copy's window and the restore, for the pod's mean time between failures
(``--mtbf-hours``), the share of GPU time each placement then loses, the share at the user's
own interval (``--every-minutes``), and what a run as long as the LoRA fine-tune of docs/checkpoint.md risked without saves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from iobench.cost.checkpoint import (
    MTBF_HOURS,
    NO_SAVE_RUN_HOURS,
    SaveCosts,
    best_interval_s,
    lost_share,
    no_save_risk,
)
from iobench.cost.prices import format_usd
from iobench.report.charts import OKABE_ITO, save_figure, style_axes, tex_escape
from iobench.report.diagnose import drop_window_s, window_rates
from iobench.report.page import fragment
from iobench.report.part import Context, Part, slug
from iobench.rundir.kinds import checkpoint as rows_of
from iobench.stats import median
from iobench.units import fmt_num, noise_known, noise_word

NAME = rows_of.NAME


@dataclass
class ConfigSaves:
    """One config's medians over its ok trials."""

    config: str
    n: int
    save_role: str
    copy_role: str  # "off": saved where a restart finds it
    shards: int
    ckpt_mb: float
    write_s: float
    write_mb_per_s: float
    fsync_share: float
    copy_s: float  # nan without a copy
    exposed_s: float
    read_s: float
    read_mb_per_s: float
    cold_method: str = ""
    verified: str = ""
    trial: str = ""

    @property
    def costs(self) -> SaveCosts:
        return SaveCosts(self.write_s, self.exposed_s if math.isfinite(self.exposed_s) else 0.0,
                         self.read_s)  # fmt: skip

    @property
    def how(self) -> str:
        """The placement in a few words: ``to tmp and copy out to target``."""
        shards = f" in {self.shards} shards" if self.shards > 1 else ""
        if self.copy_role not in ("", "off"):
            return f"to {self.save_role}{shards} and copy out to {self.copy_role}"
        return f"straight to {self.save_role}{shards}"


@dataclass
class CheckpointSection:
    """What the report shows about checkpoints (empty ``rows`` in other runs)."""

    rows: list[ConfigSaves] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    charts: dict[str, Path] = field(default_factory=dict)
    saves_png: Path | None = None
    mtbf_h: float = MTBF_HOURS


def _med(frame: pd.DataFrame, col: str) -> float:
    if col not in frame.columns:
        return math.nan
    values = [float(v) for v in pd.to_numeric(frame[col], errors="coerce") if not pd.isna(v)]
    return median(values) if values else math.nan


def _first_text(frame: pd.DataFrame, col: str) -> str:
    if col not in frame.columns:
        return ""
    return next((str(v) for v in frame[col] if isinstance(v, str) and v), "")


def build_section(
    trials: pd.DataFrame,
    median_trials: dict[str, str],
    price_usd_h: float | None,
    mtbf_h: float = MTBF_HOURS,
    every_min: float | None = None,
) -> CheckpointSection:
    """The section from a run's trials (in the summary's order)."""
    section = CheckpointSection(mtbf_h=mtbf_h)
    if "save_role" not in trials.columns or not trials["save_role"].fillna("").astype(str).any():
        return section
    ok = trials[trials["status"] == "ok"]
    order = {c: i for i, c in enumerate(median_trials)}
    groups = sorted(ok.groupby("config", sort=False), key=lambda g: order.get(str(g[0]), 1e9))
    for config, group in groups:
        shards = _med(group, "shards")
        section.rows.append(
            ConfigSaves(
                config=str(config),
                n=len(group),
                save_role=_first_text(group, "save_role"),
                copy_role=_first_text(group, "copy_role") or "off",
                shards=int(shards) if math.isfinite(shards) else 1,
                ckpt_mb=_med(group, "ckpt_bytes") / 1e6,
                write_s=_med(group, "write_s"),
                write_mb_per_s=_med(group, "write_mb_per_s"),
                fsync_share=_med(group, "fsync_share"),
                copy_s=_med(group, "copy_s"),
                exposed_s=_med(group, "exposed_s"),
                read_s=_med(group, "ckpt_read_s"),
                read_mb_per_s=_med(group, "ckpt_read_mb_per_s"),
                cold_method=_first_text(group, "cold_method"),
                verified=_first_text(group, "verified"),
                trial=median_trials.get(str(config), ""),
            )
        )
    section.lines = section_lines(section, price_usd_h, every_min)
    return section


def _minutes(seconds: float) -> str:
    minutes = seconds / 60
    if minutes >= 120:
        return f"{minutes / 60:.1f} h"
    return f"{minutes:.0f} min" if minutes >= 10 else f"{minutes:.1f} min"


def _share(x: float) -> str:
    return f"{x:.2%}" if x < 0.01 else f"{x:.1%}"


def _usable(r: ConfigSaves) -> bool:
    return all(math.isfinite(x) and x >= 0 for x in (r.write_s, r.read_s)) and r.write_s > 0


def _placement_lines(rows: list[ConfigSaves]) -> list[str]:
    """Each placement's save, copy and restore, one line each under the checkpoint's size."""
    width = max(len(r.config) for r in rows)
    size = median([r.ckpt_mb for r in rows if math.isfinite(r.ckpt_mb)] or [math.nan])
    lines = [
        f"Checkpoints ({size:,.0f} MB; the GPU waits for the save, a restart for the restore):"
    ]
    for r in rows:
        copy = ""
        if math.isfinite(r.copy_s):
            copy = (f"; copy to {r.copy_role} {r.copy_s:.2f} s in the background (a crash in "
                    f"those {r.exposed_s:.2f} s loses the save)")  # fmt: skip
        lines.append(
            f"  {r.config:<{width}}  save {r.write_s:.2f} s ({r.write_mb_per_s:,.0f} MB/s, fsync "
            f"{r.fsync_share:.0%}), restore {r.read_s:.2f} s ({r.read_mb_per_s:,.0f} MB/s, "
            f"cold: {r.cold_method or '?'}){copy}"
        )
    return lines


def section_lines(
    section: CheckpointSection, price_usd_h: float | None, every_min: float | None = None
) -> list[str]:
    """The console's (and the page's) words: each placement's save, copy and restore; how often
    to save each way and what it costs; what a run without saves risked."""
    rows = section.rows
    lines = _placement_lines(rows)
    usable = [r for r in rows if _usable(r)]
    if not usable:
        return lines
    mtbf_s = section.mtbf_h * 3600
    plans = sorted(
        ((r, best_interval_s(r.costs, mtbf_s)) for r in usable),
        key=lambda p: lost_share(p[0].costs, p[1], mtbf_s),
    )
    best, t_best = plans[0]
    parts = [f"save every {_minutes(t_best)} {best.how}: "
             f"{_share(lost_share(best.costs, t_best, mtbf_s))} of GPU time"]  # fmt: skip
    for r, t in plans[1:]:
        parts.append(f"{r.how} (every {_minutes(t)}): {_share(lost_share(r.costs, t, mtbf_s))}")
    lines.append(f"How often to save (Young's interval, a failure every {section.mtbf_h:g} h "
                 "on average: --mtbf-hours):")  # fmt: skip
    lines.append("  " + "; ".join(parts))
    if price_usd_h is not None:
        lines.append(
            "  each save costs "
            + ", ".join(
                f"{r.config} {format_usd(r.write_s * price_usd_h / 3600)}" for r, _ in plans
            )
            + f" of GPU time at {format_usd(price_usd_h)}/h"
        )
    if every_min is not None:
        mine = ", ".join(
            f"{r.config} {_share(lost_share(r.costs, every_min * 60, mtbf_s))}" for r, _ in plans
        )
        lines.append(f"  at your interval, every {every_min:g} min: {mine} of GPU time")
    run_s = NO_SAVE_RUN_HOURS * 3600
    chance, lost_s = no_save_risk(run_s, mtbf_s)
    saved_s = run_s * lost_share(best.costs, t_best, mtbf_s)
    money = ""
    if price_usd_h is not None:
        money = f" ({format_usd(lost_s * price_usd_h / 3600)})"
    lines.append(
        f"  a {NO_SAVE_RUN_HOURS:.0f} h {round(NO_SAVE_RUN_HOURS % 1 * 60):d} min run without "
        f"saves (a LoRA run lost so: docs/checkpoint.md) risked: a {chance:.0%} chance of a failure, {lost_s / 3600:.2f} h "
        f"of GPU time lost on average{money}; saving every {_minutes(t_best)} {best.how}: "
        f"{saved_s / 3600:.2f} h, saves and failures together"
    )
    return lines


# ---------------------------------------------------------------------------------- charts


def io_rates(samples: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The saver's write and read rates over the trial: (t, write MB/s, t, read MB/s)."""
    empty = np.array([])
    if samples is None or "tree_write_bytes" not in samples.columns or len(samples) < 3:
        return empty, empty, empty, empty
    t = samples["t"].to_numpy(dtype=float)
    window = drop_window_s(t)
    tw, w = window_rates(t, samples["tree_write_bytes"].to_numpy(dtype=float), window)
    tr, r = window_rates(t, samples["tree_read_bytes"].to_numpy(dtype=float), window)
    return tw, w / 1e6, tr, r / 1e6


def rate_chart(samples: pd.DataFrame, row: ConfigSaves, path: Path) -> Path | None:
    """Write and read MB/s over one trial, its phases (save, copy, restore, check) marked."""
    tw, w, tr, r = io_rates(samples)
    if len(tw) < 2:
        return None
    fig = Figure(figsize=(10, 3.4))
    ax = fig.add_subplot()
    style_axes(ax)
    ax.step(tw, w, where="post", color=OKABE_ITO["vermillion"], label="write MB/s")
    ax.step(tr, r, where="post", color=OKABE_ITO["blue"], label="read MB/s")
    if "phase" in samples.columns:
        t = samples["t"].to_numpy(dtype=float)
        phases = samples["phase"].astype(str).to_numpy()
        starts = [i for i in range(len(phases)) if i == 0 or phases[i] != phases[i - 1]]
        for i in starts:
            ax.axvline(t[i], color="#bbbbbb", linewidth=0.8)
            ax.text(t[i], 1.0, f" {phases[i]}", transform=ax.get_xaxis_transform(),
                    fontsize=8, va="top", color="#555555")  # fmt: skip
    ax.set_xlabel("seconds since the trial started")
    ax.set_ylabel("MB/s (10^6 bytes)")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper right", fontsize=8, frameon=False)
    ax.set_title(tex_escape(f"Checkpoint — {row.config}: save {row.write_mb_per_s:,.0f} MB/s, "
                            f"restore {row.read_mb_per_s:,.0f} MB/s"), loc="left",
                 fontsize=11)  # fmt: skip
    fig.subplots_adjust(left=0.08, right=0.98, top=0.86, bottom=0.16)
    return save_figure(fig, path)


def saves_chart(section: CheckpointSection, title: str, path: Path) -> Path | None:
    """Per config: the save (the GPU waits), the background copy, the restore, side by side."""
    rows = [r for r in section.rows if _usable(r)]
    if not rows:
        return None
    fig = Figure(figsize=(10, 1.6 + 0.6 * len(rows)))
    ax = fig.add_subplot()
    style_axes(ax)
    y = np.arange(len(rows))[::-1]
    save = [r.write_s for r in rows]
    copy = [r.copy_s if math.isfinite(r.copy_s) else 0.0 for r in rows]
    ax.barh(y, save, height=0.6, color=OKABE_ITO["vermillion"], label="save (the GPU waits)")
    ax.barh(y, copy, left=save, height=0.6, color=OKABE_ITO["orange"], alpha=0.45,
            label="copy out (in the background)")  # fmt: skip
    ax.barh(y, [r.read_s for r in rows], left=[a + b for a, b in zip(save, copy, strict=True)],
            height=0.6, color=OKABE_ITO["blue"], label="restore after a restart (cold)")  # fmt: skip
    top = max(a + b + r.read_s for a, b, r in zip(save, copy, rows, strict=True))
    for yi, r, a, b in zip(y, rows, save, copy, strict=True):
        ax.text(a + b + r.read_s + top * 0.01, yi, tex_escape(
            f"save {r.write_s:.2f} s · restore {r.read_s:.2f} s"), va="center", fontsize=9)  # fmt: skip
    ax.set_yticks(y, labels=[tex_escape(r.config) for r in rows])
    ax.set_xlim(0, top * 1.45)
    ax.set_xlabel("seconds (medians over each config's trials)")
    fig.legend(loc="lower center", ncol=3, fontsize=8, frameon=False)
    ax.set_title(tex_escape(title), loc="left", fontsize=11)
    fig.subplots_adjust(left=0.2, right=0.98, top=1 - 0.5 / fig.get_figheight(),
                        bottom=1.15 / fig.get_figheight())  # fmt: skip
    return save_figure(fig, path)


TEMPLATE = """\
{% from "macros.html.j2" import table, img %}
<h2>Per config: {{ measure }}</h2>
<p class="caption">Medians over each config's successful trials; ★ marks the verdict's winner (none when it names none). The save is what the GPU waits for (every file and folder fsynced); a background copy is not, but until it is durable a crash loses the save. The restore reads the checkpoint cold where a restarted pod finds it, and every byte is checked.</p>
{{ table(["config", "saved to", "copied to", "ok", "save (s)", "write MB/s", "fsync share", "copy out (s)", "restore (s)", "read MB/s", measure, "vs " ~ baseline, "noise", "cold by", "checked"], rows, num=(3, 4, 5, 6, 7, 8, 9, 10), classes=classes) }}
{% if words %}<p>{% for w in words %}{{ w }}{% if not loop.last %}<br>{% endif %}{% endfor %}</p>{% endif %}
{{ img(saves_png, "save and restore per config") }}
{% for config, path in charts.items() %}{{ img(path, "write and read rate of " ~ config) }}{% endfor %}
"""

ANSWER = """{% for line in lines %}<p>{{ line }}</p>{% endfor %}"""

ABOUT = """\
<li><b>GPU time lost</b> (what the verdict compares): saving every T seconds, a save that pauses the GPU for C seconds costs C / T of its time, and a failure (one every {{ mtbf }} h on average: <code>--mtbf-hours</code>) costs the work since the last durable save, the save's copy window and the restore: lost(T) = C / T + (T / 2 + C + D + R) / MTBF, least at Young's T* = √(2 · C · MTBF), never shorter than a save and its copy (docs/checkpoint.md). In dollars: that share of a month of training ({{ hours }} h) at the pod's price.</li>
"""


def _rows(ctx: Context, section: CheckpointSection) -> tuple[list[list[object]], list[str]]:
    s, by = ctx.summary, {r.config: r for r in section.rows}
    cells, classes = [], []
    for c in sorted(s.configs, key=lambda c: c.median if c.n else math.inf):
        r, row = by.get(c.name), s.row(c.name)
        star = " ★" if c.name == s.winner else ""
        copy = str(row.get("copy_role") or "off")
        nan = math.nan
        cells.append([f"{c.name}{star}", f"{row.get('save_role') or '?'} ({row.get('save_fstype') or '?'})",
                      "— (none)" if copy in ("off", "nan", "<NA>") else copy,
                      f"{row['n_ok']}/{row['n_ok'] + row['n_failed'] + row['n_censored']}",
                      fmt_num(r.write_s if r else nan, ".2f"), fmt_num(r.write_mb_per_s if r else nan, ",.0f"),
                      fmt_num(r.fsync_share if r else nan, ".0%"), fmt_num(r.copy_s if r else nan, ".2f"),
                      fmt_num(r.read_s if r else nan, ".2f"), fmt_num(r.read_mb_per_s if r else nan, ",.0f"),
                      c.fmt(c.median) if c.n else "—", row["vs_baseline"] or "—",
                      noise_word(noise_known(row["beyond_noise_vs_baseline"])) or "—",
                      r.cold_method if r else "", r.verified if r else ""])  # fmt: skip
        classes.append("winner" if c.name == s.winner else ("failed" if not c.n else ""))
    return cells, classes


def build(ctx: Context) -> Part | None:
    s, run, p = ctx.summary, ctx.run, ctx.pricing
    section = build_section(
        run.trials, s.median_trials, ctx.price_usd_h, p.mtbf_hours, p.every_minutes
    )
    if not section.rows:
        return None
    paths: dict[str, Path] = {}
    if ctx.charts:
        title = f"Save and restore per config — {run.scenario_name} on {run.hostname or '?'}"
        png = saves_chart(section, title, ctx.out / "saves.png")
        if png is not None:
            paths["saves_png"] = section.saves_png = png
        for row in section.rows:
            samples = run.read_samples(row.trial) if row.trial else None
            png = (
                rate_chart(samples, row, ctx.out / f"io-{slug(row.config)}.png")
                if samples is not None
                else None
            )
            if png is not None:
                section.charts[row.config] = paths[f"io:{row.config}"] = png
    words = [w.strip() for w in section.lines[1 + len(section.rows) :]]
    price = ""
    if p.usd_per_hour is not None:
        price = (
            f"Price: {p.label}; a month of training = {p.training_hours:g} h, a failure every "
            f"{p.mtbf_hours:g} h on average."
        )
    cells, classes = _rows(ctx, section)
    return Part(
        NAME, lines=section.lines, answer=[*words, *([price] if price else [])],
        answer_html=fragment(ANSWER, lines=words), paths=paths,
        html=fragment(TEMPLATE, measure=s.measure.name, rows=cells, classes=classes,
                      baseline=s.baseline or "baseline", words=[], saves_png=section.saves_png,
                      charts=section.charts),
        about=fragment(ABOUT, mtbf=f"{p.mtbf_hours:g}", hours=f"{p.training_hours:g}"),
    )  # fmt: skip


__all__ = ["NAME", "CheckpointSection", "ConfigSaves", "build", "build_section", "rate_chart",
           "saves_chart", "section_lines"]  # fmt: skip
