"""The ``dataset`` kind's section: how busy the accelerator was (AU) against a bar, when the read
rate fell (a volume's burst credits running out, said in words with when), what a month of
training costs with each config (the verdict's measure: ``iobench.cost.kinds.dataset``), and
on an EFS volume that starves the accelerator, the remedies priced.

Read only from the run folder: trials.csv's dataset columns, the median trial's samples
(its read rate, and a lab volume's credit balance) and the loader's own record of its batches
(``logs/<trial>.loader.json``, checked as untrusted input). The change point is the install
report's (``diagnose.find_drop``) applied to the loader's read rate; AU before and after it
comes from the batches on each side. Prices are the report's: the GPU's idle time per epoch
and over a month of training at that AU, beside the volume's storage and per-GB read charges
(Elastic's reads cost, Bursting's do not).
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from iobench import reading
from iobench.cost.idle import AU_TARGET
from iobench.cost.kinds.dataset import month_usd
from iobench.cost.measure import Pricing, dollars
from iobench.cost.prices import find_storage_preset
from iobench.report.configs import RowView
from iobench.report.diagnose import Drop, find_drop
from iobench.report.load import Run
from iobench.report.page import fragment
from iobench.report.part import Context, Part, slug
from iobench.report.sections.dataset_charts import (
    CREDITS_EMPTY_MB,
    au_chart,
    read_rates,
    throughput_chart,
)
from iobench.rundir.kinds import dataset as rows_of
from iobench.stats import median
from iobench.units import fmt_num, fmt_s, noise_known, noise_word

NAME = rows_of.NAME


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
    compute_s: float = math.nan  # the emulated accelerator's seconds, all epochs
    month_usd: float = math.nan  # a month of training (NaN: no price)


@dataclass
class DatasetSection:
    """What the report shows about training-data reads (empty ``rows`` in other runs)."""

    rows: list[ConfigReads] = field(default_factory=list)
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
    pricing: Pricing,
) -> DatasetSection:
    """The section from a run's trials (``samples_of(trial_id)`` reads one trial's samples),
    each config's month of training priced as the verdict prices it (``cost.kinds.dataset``)."""
    section = DatasetSection(au_target=pricing.au_target)
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
            read_s=_med(group, "epochs_s"),
            stage_s=_med(group, "stage_s"),
            epochs=max(1, epochs),
            data_gb=_med(group, "data_bytes") / 1e9 / max(1, epochs),
            cached=next(
                (str(c) for c in group.get("data_cached", []) if isinstance(c, str) and c), ""
            ),
            trial=median_trials.get(str(config), ""),
            compute_s=_med(group, "compute_s"),
            month_usd=median(
                [
                    v
                    for r in group.to_dict("records")
                    if (v := month_usd(RowView(r), pricing)) is not None
                ]
            ),
        )
        if row.trial:
            record = loader_record(run_path / "logs" / f"{row.trial}.loader.json")
            row.drop = read_drop(samples_of(row.trial), record)
        section.rows.append(row)
    return section


def section_lines(section: DatasetSection) -> list[str]:
    """The console's lines: a table of AU per config, then the words (``section.words``,
    which the page shows under its own table): the drop, the break-even."""
    target = section.au_target
    head = ["config", "AU", "MB/s", "waited", "epochs", "copy", ""]
    cells = [head]
    for r in section.rows:
        verdict = (
            ""
            if not math.isfinite(r.au)
            else ("meets the bar" if r.au >= target else "below the bar")
        )
        cells.append([r.config, fmt_num(r.au, ".2f").replace("—", "?"),
                      fmt_num(r.read_mb_per_s, ",.0f").replace("—", "?"), fmt_s(r.io_wait_s),
                      fmt_s(r.read_s), fmt_s(r.stage_s), verdict])  # fmt: skip
    widths = [max(len(row[i]) for row in cells) for i in range(len(head))]
    table = ["  ".join(c.ljust(w) if i in (0, 6) else c.rjust(w)
                       for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip()
             for row in cells]  # fmt: skip
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
        credits = (f" (the volume's burst credits ran out at {d.credits_out_s:.1f} s)"
                   if d.credits_out_s is not None else "")  # fmt: skip
        words.append(f"{r.config}: the read rate fell from {d.drop.before_mbps:,.0f} to "
                     f"{d.drop.after_mbps:,.0f} MB/s at {d.drop.at_s:.1f} s{credits}{au}")  # fmt: skip
    words += break_even_lines(section.rows)
    words += [f"{r.config}: {r.cached}" for r in section.rows if r.cached]
    section.words = words
    lines = [f"Training-data reads: AU, the accelerator's busy share (bar {target:.2f}):", *table]
    return lines + [f"  {w}" for w in words]


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
                f"{r.config}: its epochs are no faster than {base.config}'s: the copy never pays"
            )
            continue
        out.append(f"{r.config}: the {fmt_s(r.stage_s)} copy pays off after {r.stage_s / saved:.1f} "
                   f"epochs ({fmt_s(saved)} saved each vs {base.config})")  # fmt: skip
    return out


# ---------------------------------------------------------------------------------- the advice


def credits_words(run: Run) -> str:
    """When the data's volume ran out of burst credits, in words ('' when it never did, or
    the volume keeps no balance): the first trial, in run order, whose balance reached zero."""
    ordered = run.trials.sort_values("started_at", kind="stable")
    for _, t in ordered[ordered["status"] == "ok"].iterrows():
        samples = run.read_samples(str(t["trial_id"]), ["t", "target_credits_mb"])
        if samples is None or "target_credits_mb" not in samples.columns:
            continue
        credits = pd.to_numeric(samples["target_credits_mb"], errors="coerce").dropna()
        if credits.empty:
            return ""
        if credits.max() <= CREDITS_EMPTY_MB:
            return (
                "The data's volume had no burst credits left when the first trial began "
                "(making the data spent them): every read ran at the volume's baseline rate."
            )
        out = credits_out_s(samples)
        if out is not None:
            return (f"The data's volume ran out of burst credits {out:.1f} s into {t['trial_id']}: "
                    "every later read ran at the volume's baseline rate.")  # fmt: skip
    return ""


def remedies(ctx: Context, section: DatasetSection) -> list[str]:
    """Where reading in place starves the accelerator on an EFS volume: what a month of
    training costs with each remedy — copying first (measured), Provisioned throughput at the
    rate that reaches the AU bar, Elastic with its reads (``iobench.cost.kinds.dataset``)."""
    p = ctx.pricing
    starved = [r for r in section.rows if not math.isfinite(r.stage_s) and r.au < p.au_target]
    if not starved or p.usd_per_hour is None or not p.storage.startswith("EFS"):
        return []
    r = starved[0]
    compute = r.compute_s / r.epochs  # the accelerator's seconds an epoch
    if not compute > 0:
        return []
    need_mibs = p.au_target * r.data_gb * 1e9 / compute / 2**20
    gpu = p.training_hours / p.au_target * p.usd_per_hour
    kept = r.data_gb * p.gb_month_usd
    prov, elastic = find_storage_preset("efs-provisioned"), find_storage_preset("efs-elastic")
    epochs = p.training_hours * 3600 / compute
    reads = r.data_gb * epochs * elastic.usd_per_gb_read
    copies = [x for x in section.rows if math.isfinite(x.stage_s) and math.isfinite(x.month_usd)]
    out = [f"Remedies for {r.config} (AU {r.au:.2f}), a month of training each:"]
    if copies:
        best = min(copies, key=lambda x: x.month_usd)
        out.append(f"  copy the data first ({best.config}, measured): {dollars(best.month_usd)}")
    out.append(
        f"  EFS Provisioned at {need_mibs:,.0f} MiB/s (what reaches AU {p.au_target:.2f}): "
        f"{dollars(gpu + kept + need_mibs * prov.usd_per_mibs_month)} "
        f"({dollars(need_mibs * prov.usd_per_mibs_month)} of it the throughput)"
    )
    out.append(
        f"  EFS Elastic, every epoch's reads billed: {dollars(gpu + kept + reads)} "
        f"({dollars(reads)} of it {r.data_gb * epochs:,.0f} GB of reads)"
    )
    if math.isfinite(r.month_usd):
        out.append(f"  as measured, reading in place: {dollars(r.month_usd)}")
    return out  # fmt: skip


def charge_words(ctx: Context, section: DatasetSection) -> list[str]:
    """A volume that bills reads (EFS Elastic): what reading in place is billed a month."""
    p = ctx.pricing
    if not p.read_usd_per_gb:
        return []
    out = []
    for r in section.rows:
        if not math.isfinite(r.stage_s) and r.compute_s > 0:
            gb = r.data_gb * p.training_hours * 3600 / (r.compute_s / r.epochs)
            out.append(f"{r.config} reads {gb:,.0f} GB a month of training from {p.storage}: "
                       f"{dollars(gb * p.read_usd_per_gb)} of read charges "
                       f"(${p.read_usd_per_gb:g}/GB); a copy first reads it once a start")  # fmt: skip
    return out


def price_line(ctx: Context) -> str:
    """What the dollars assume."""
    p = ctx.pricing
    if p.usd_per_hour is None:
        return ""
    store = f"; {p.storage} for the data" if p.storage else ""
    return (
        f"Price: {p.label}; a month of training = {p.training_hours:g} h of accelerator compute, "
        f"{p.starts_per_month:g} pod starts (each copies the data where a config copies it){store}."
    )


TEMPLATE = """\
{% from "macros.html.j2" import table, img %}
<h2>Per config: {{ measure }}</h2>
<p class="caption">Medians over each config's successful trials; ★ marks the verdict's winner (none when it names none).</p>
{{ table(["config", "data on", "copied to", "ok", "AU", "read MB/s", "waited for data (s)", "epochs (s)", "copy first (s)", measure, "vs " ~ baseline, "noise"], rows, num=(3, 4, 5, 6, 7, 8, 9), classes=classes) }}
<h2>Training-data reads</h2>
<p>AU is the share of the epochs the emulated accelerator computed rather than waited for data (the bar: {{ "%.2f" | format(target) }}).</p>
{% if words %}<p>{% for w in words %}{{ w }}{% if not loop.last %}<br>{% endif %}{% endfor %}</p>{% endif %}
{{ img(au_png, "AU per config") }}
{% for config, path in charts.items() %}{{ img(path, "read rate of " ~ config ~ " over its trial") }}{% endfor %}
"""

ANSWER = """{% for line in lines %}<p>{{ line }}</p>{% endfor %}"""

ABOUT = """\
<li><b>time</b> of a dataset trial: the copy of the data to its stage role (when the config copies it) plus the loader's listing and epochs (docs/dataset.md). <b>AU</b>: the emulated accelerator's compute over the epochs' wall time, each epoch's first batch left out (MLPerf Storage's).</li>
<li><b>A month of training</b> (what the verdict compares): {{ hours }} h of accelerator compute take {{ hours }} / AU GPU-hours, plus a copy of the data at each of {{ starts }} pod starts where the config copies it; priced at the pod's price, plus the volume's charges for the data kept and read (EFS Elastic bills every GB read: in place, every epoch).</li>
"""


def _rows(ctx: Context, section: DatasetSection) -> tuple[list[list[object]], list[str]]:
    s, by = ctx.summary, {r.config: r for r in section.rows}
    cells, classes = [], []
    for c in sorted(s.configs, key=lambda c: c.median if c.n else math.inf):
        r = by.get(c.name)
        row = s.row(c.name)
        star = " ★" if c.name == s.winner else ""
        copy = str(row.get("stage_role") or "off")
        cells.append([f"{c.name}{star}", f"{row.get('data_role') or '?'} ({row.get('data_fstype') or '?'})",
                      "— (read in place)" if copy in ("off", "nan", "<NA>") else copy,
                      f"{row['n_ok']}/{row['n_ok'] + row['n_failed'] + row['n_censored']}",
                      fmt_num(r.au if r else math.nan, ".2f"), fmt_num(r.read_mb_per_s if r else math.nan, ",.0f"),
                      fmt_num(r.io_wait_s if r else math.nan, ".2f"), fmt_num(r.read_s if r else math.nan, ".2f"),
                      fmt_num(r.stage_s if r else math.nan, ".2f"), c.fmt(c.median) if c.n else "—",
                      row["vs_baseline"] or "—", noise_word(noise_known(row["beyond_noise_vs_baseline"])) or "—"])  # fmt: skip
        classes.append("winner" if c.name == s.winner else ("failed" if not c.n else ""))
    return cells, classes


def build(ctx: Context) -> Part | None:
    s, run = ctx.summary, ctx.run
    samples_of = functools.cache(run.read_samples)  # the drop and the chart read one file once
    section = build_section(run.trials, s.median_trials, run.path, samples_of, ctx.pricing)
    if not section.rows:
        return None
    lines = section_lines(section)
    paths: dict[str, Path] = {}
    if ctx.charts:
        title = f"Accelerator utilisation per config — {run.scenario_name} on {run.hostname or '?'}"
        png = au_chart(section, title, ctx.out / "au.png")
        if png is not None:
            paths["au_png"] = section.au_png = png
        for row in section.rows:
            frame = samples_of(row.trial) if row.trial else None
            path = ctx.out / f"reads-{slug(row.config)}.png"
            png = (
                throughput_chart(frame, row.config, row, section.au_target, path)
                if frame is not None
                else None
            )
            if png is not None:
                section.charts[row.config] = paths[f"reads:{row.config}"] = png
    answer = [w for w in (credits_words(run), *charge_words(ctx, section)) if w]
    answer += remedies(ctx, section) + [x for x in (price_line(ctx),) if x]
    cells, classes = _rows(ctx, section)
    return Part(
        NAME, lines=lines, answer=answer, answer_html=fragment(ANSWER, lines=answer),
        html=fragment(TEMPLATE, measure=s.measure.name, rows=cells, classes=classes,
                      baseline=s.baseline or "baseline", target=section.au_target, words=section.words,
                      au_png=section.au_png, charts=section.charts),
        about=fragment(ABOUT, hours=f"{ctx.pricing.training_hours:g}", starts=f"{ctx.pricing.starts_per_month:g}"),
        paths=paths,
    )  # fmt: skip


__all__ = ["NAME", "DatasetSection", "au_chart", "build", "build_section", "credits_words",
           "remedies", "throughput_chart"]  # fmt: skip
