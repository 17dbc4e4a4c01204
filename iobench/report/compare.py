"""``iobench compare``: several runs (pods, storage types, labels) in one table and chart.

Like asv's ``compare``, this only reads stored results. Each run is summarised on its own
(its own GPU price, when it recorded a GPU and no ``--gpu`` is given), then configs are
matched by name. ``ratio_vs_ref`` is a run's median time-to-ready over the first run's
(the reference): 0.5 means twice as fast as the reference, 2.0 twice as slow; every text
output says it the one way (report/units.fmt_speed): "2.00× faster than A".

The output goes to ``--out`` or to a new ``iobench-compare-<time>`` folder in the current
one, never into a run directory or a results folder that holds one of the runs it reads.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from iobench import files
from iobench.cost.idle import CostOptions, PriceChoice, resolve_price
from iobench.cost.measure import Measure
from iobench.errors import RunDirError, UsageError
from iobench.report import charts, formats
from iobench.report import html as html_page
from iobench.report.build import check_has_successes
from iobench.report.configs import ConfigTimes, configs_from_rows, spread
from iobench.report.figures import collect_sample_figures
from iobench.report.load import Run, load_runs
from iobench.report.summary import Summary, measure_of, summarize
from iobench.stats import MIN_TRIALS, compare
from iobench.units import fmt_speed as _speed
from iobench.units import fmt_vs, noise_known, run_key

COMPARE_FORMAT = "iobench-compare"
#: 1: first version.
#: 2: rows gain ``min_time_to_ready_s``/``max_time_to_ready_s``; ``speedup_vs_naive`` is
#:    ``speedup_vs_baseline`` (summary.json version 2).
#: 3: rows gain beyond_noise_vs_ref (the tie rule per row).
#: 4: each run is judged by its kind's measure (iobench.cost.kinds): rows gain ``measure``,
#:    ``median``, ``low``, ``high`` and ``median_text`` (its figure), ``au``; ``ratio_vs_ref``
#:    is the measure's ratio; ``monthly_cost_usd`` a dataset's month of training, a
#:    checkpoint's GPU time lost a month.
COMPARE_FORMAT_VERSION = 4

LONG_COLUMNS = [
    "run_label", "run_id", "host", "config", "placement", "venv_fstype", "n_ok", "n_failed",
    "measure", "median", "low", "high", "median_text",
    "median_time_to_ready_s", "p10_time_to_ready_s", "p90_time_to_ready_s",
    "min_time_to_ready_s", "max_time_to_ready_s", "ratio_vs_ref",
    "speedup_vs_baseline", "au", "cost_per_start_usd", "monthly_cost_usd", "bottleneck",
    "beyond_noise_vs_ref",
]  # fmt: skip


@dataclass
class CompareResult:
    """The merged tables, the files written and the labels in order (reference first)."""

    out_dir: Path
    labels: list[str]
    long: pd.DataFrame
    wide: pd.DataFrame
    summaries: dict[str, Summary]
    runs: list[Run]
    paths: dict[str, Path] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def format(self, fmt: str = "table") -> list[str]:
        """Console output: ``table``, ``markdown`` or ``json``."""
        if fmt == "json":
            return json.dumps(compare_dict(self), indent=2, allow_nan=False).splitlines()
        if fmt == "markdown":
            return compare_markdown(self)
        lines = compare_table(self)
        lines += [f"note: {n}" for n in self.notes]
        if "html" in self.paths:
            lines.append(
                f"Comparison: {self.paths['html']} (+ compare.csv, compare.json, compare.png)"
            )
        return lines

    @property
    def lines(self) -> list[str]:
        """The console comparison in the default (table) format."""
        return self.format("table")

    def slower(self, bar: float) -> tuple[list[str], list[str]]:
        """(configs of a later run slower than the reference's beyond noise, by ``bar``× or
        more; those at or past ``bar``× that too few trials leave undecided), each one text.
        A config that only one of the two runs has is neither."""
        ref, found, undecided = self.labels[0], [], []
        for r in self.long[self.long["run_label"] != ref].itertuples():
            ratio = float(r.ratio_vs_ref)
            if not math.isfinite(ratio) or ratio < bar:
                continue
            text = f"{r.run_label}: {r.config} {_speed(1 / ratio, ref)}"
            known = noise_known(r.beyond_noise_vs_ref)
            if known:
                found.append(text)
            elif known is None:
                undecided.append(f"{text} (too few trials to tell it from noise)")
        return found, undecided


def unique_labels(runs: Sequence[Run]) -> list[str]:
    """Each run's label (else host, else id), made unique with the run id when needed."""
    labels = [r.label for r in runs]
    out = []
    for r, lab in zip(runs, labels, strict=True):
        out.append(f"{lab} ({r.run_id})" if labels.count(lab) > 1 else lab)
    if len(set(out)) < len(out):  # the same run directory given twice
        out = [f"{lab} #{i + 1}" for i, lab in enumerate(out)]
    return out


def _month_usd(s: Summary, c: ConfigTimes | None, row: Any) -> float:
    """A config's dollars a month, by its run's measure: the figure itself when it is dollars,
    the measure's conversion when it has one, else the start's month (installs)."""
    m = s.measure
    if c is not None and c.n and m.unit == "$":
        return c.median
    if c is not None and c.n and m.usd_per_month is not None:
        return m.usd_per_month(c.median)
    return float(row["monthly_cost_usd"])


def merge(summaries: dict[str, Summary], runs: dict[str, Run], labels: list[str]) -> pd.DataFrame:
    """One row per (run, config): its measure's median and spread, and the ratio of its median
    to the reference run's (each run judged by its own kind's question)."""
    rows = []
    ref = {c.name: c for c in summaries[labels[0]].configs}
    for label in labels:
        s = summaries[label]
        run = runs[label]
        mine = {c.name: c for c in s.configs}
        for _, r in s.table.iterrows():
            c, base = mine.get(r["config"]), ref.get(r["config"])
            med = c.median if c is not None and c.n else math.nan
            ref_med = base.median if base is not None and base.n else math.nan
            ratio = (
                med / ref_med
                if math.isfinite(med) and math.isfinite(ref_med) and ref_med > 0
                else math.nan
            )
            lo, hi, _ = spread(c.times) if c is not None and c.n else (math.nan, math.nan, "")
            rows.append({
                "run_label": label, "run_id": run.run_id, "host": run.hostname,
                "config": r["config"], "placement": formats.placement(r),
                "venv_fstype": r["venv_fstype"], "n_ok": r["n_ok"], "n_failed": r["n_failed"],
                "measure": s.measure.name, "median": med, "low": lo, "high": hi,
                "median_text": s.measure.fmt(med) if math.isfinite(med) else "—",
                "median_time_to_ready_s": r["median_time_to_ready_s"],
                "p10_time_to_ready_s": r["p10_time_to_ready_s"],
                "p90_time_to_ready_s": r["p90_time_to_ready_s"],
                "min_time_to_ready_s": r["min_time_to_ready_s"],
                "max_time_to_ready_s": r["max_time_to_ready_s"], "ratio_vs_ref": ratio,
                "speedup_vs_baseline": r["speedup_vs_baseline"], "au": r.get("median_au", math.nan),
                "cost_per_start_usd": r["cost_per_start_usd"],
                "monthly_cost_usd": _month_usd(s, c, r), "bottleneck": r["bottleneck"],
            })  # fmt: skip
    return pd.DataFrame(rows, columns=LONG_COLUMNS)


def widen(long: pd.DataFrame, labels: list[str]) -> pd.DataFrame:
    """config x run: the measure's median (and its text), the ratio to the reference, AU, the
    monthly cost (configs in first-seen order)."""
    configs = list(dict.fromkeys(long["config"]))
    rows = []
    for config in configs:
        row: dict[str, Any] = {"config": config}
        for lab in labels:
            hit = long[(long["run_label"] == lab) & (long["config"] == config)]
            first = hit.iloc[0] if len(hit) else None
            row[f"{lab}: median_s"] = float(first["median"]) if first is not None else math.nan
            row[f"{lab}: median_text"] = str(first["median_text"]) if first is not None else "—"
            row[f"{lab}: ratio"] = float(first["ratio_vs_ref"]) if first is not None else math.nan
            row[f"{lab}: noise"] = first["beyond_noise_vs_ref"] if first is not None else None
            row[f"{lab}: au"] = float(first["au"]) if first is not None else math.nan
            row[f"{lab}: monthly_usd"] = (
                float(first["monthly_cost_usd"]) if first is not None else math.nan
            )
        rows.append(row)
    return pd.DataFrame(rows)


def headlines(
    long: pd.DataFrame, labels: list[str], words: tuple[str, str] = ("faster", "slower")
) -> list[str]:
    """One sentence per non-reference run: the range of its ratios and the extreme config."""

    def fmt_speed(ratio: float) -> str:
        return _speed(ratio, None, words)

    out = []
    for lab in labels[1:]:
        sub = long[(long["run_label"] == lab) & long["ratio_vs_ref"].notna()]
        if sub.empty:
            out.append(f"{lab} has no config in common with {labels[0]}")
            continue
        noise = sub["beyond_noise_vs_ref"] if "beyond_noise_vs_ref" in sub else None
        if noise is not None and len(sub) and not any(v is True for v in noise):
            some = " (too few trials to tell for some)" if any(v is None for v in noise) else ""
            out.append(
                f"On {lab}, no config differs from {labels[0]} beyond noise{some}; the medians' "
                f"ratio is {fmt_speed(1 / sub['ratio_vs_ref'].median())} at the median."
            )
            continue
        if noise is not None:  # the extremes among the rows that differ beyond noise
            sub = sub[[v is True for v in noise]]
        lo = sub.loc[sub["ratio_vs_ref"].idxmin()]
        hi = sub.loc[sub["ratio_vs_ref"].idxmax()]
        beyond = "" if noise is None else f"{len(sub)} config(s) beyond noise: "
        text = (
            f"On {lab}, {beyond}from {fmt_speed(1 / lo['ratio_vs_ref'])} to "
            f"{fmt_speed(1 / hi['ratio_vs_ref'])} than on {labels[0]} (median: "
            f"{fmt_speed(1 / sub['ratio_vs_ref'].median())})"
        )
        extreme = (
            lo if abs(math.log(lo["ratio_vs_ref"])) >= abs(math.log(hi["ratio_vs_ref"])) else hi
        )
        if abs(math.log(extreme["ratio_vs_ref"])) >= math.log(1.1):
            text += (
                f"; the biggest change is {extreme['config']} "
                f"({fmt_speed(1 / extreme['ratio_vs_ref'])})"
            )
        out.append(text + ".")
    return out


def _price_label(price: PriceChoice | None) -> str | None:
    return price.label if price is not None else None


def compare_dict(result: CompareResult) -> dict[str, Any]:
    """The content of compare.json."""
    return formats.clean({
        "format": COMPARE_FORMAT,
        "format_version": COMPARE_FORMAT_VERSION,
        "reference": result.labels[0],
        "runs": [
            {"label": lab, "run_id": run.run_id, "path": str(run.path),
             "host": run.hostname,
             "winner": result.summaries[lab].winner,
             "price_label": _price_label(result.summaries[lab].price)}
            for lab, run in zip(result.labels, result.runs, strict=True)
        ],
        "measure": result.summaries[result.labels[0]].measure.name,
        "headlines": headlines(result.long, result.labels, _words(result)),
        "rows": result.long.to_dict("records"),
        "notes": result.notes,
    })  # fmt: skip


def _words(result: CompareResult) -> tuple[str, str]:
    """The reference run's measure's words for a ratio (``faster``, ``cheaper``...)."""
    m = result.summaries[result.labels[0]].measure
    return m.better, m.worse


def _vs_text(row: Any, label: str, words: tuple[str, str] = ("faster", "slower")) -> str:
    """``1.60× slower (within noise)``: the ratio and the per-row tie rule's answer (``too
    few trials`` where a side has fewer than two)."""
    return fmt_vs(1 / row[f"{label}: ratio"], row.get(f"{label}: noise"), None, words)


def compare_table(result: CompareResult) -> list[str]:
    """Aligned text: config, then each run's median, then ratios to the reference."""
    labels = result.labels
    keys = [run_key(i) for i in range(len(labels))]
    header = ["config", *keys, *[f"{k} vs {keys[0]}" for k in keys[1:]]]
    rows = [header]
    for _, r in result.wide.iterrows():
        rows.append([
            str(r["config"]),
            *[str(r[f"{lab}: median_text"]) for lab in labels],
            *[_vs_text(r, lab, _words(result)) for lab in labels[1:]],
        ])  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    measure = result.summaries[labels[0]].measure.name
    lines = [f"iobench compare: median {measure} of {len(labels)} runs", ""]
    for i, (key, lab) in enumerate(zip(keys, labels, strict=True)):
        lines.append(f"  {key} = {lab}" + (" (reference)" if i == 0 else ""))
    lines.append("")
    for row in rows:
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            ).rstrip()
        )
    if any(math.isfinite(float(x)) for x in result.long["au"]):
        lines += ["", "AU and a month (dollars when a GPU price is known):"]
        for lab in labels:
            sub = result.long[result.long["run_label"] == lab]
            lines.append(f"  {lab}: " + "; ".join(
                f"{r.config} AU {float(r.au):.2f}, {formats.fmt_usd(float(r.monthly_cost_usd))}/month"
                for r in sub.itertuples()))  # fmt: skip
    lines.append("")
    lines += headlines(result.long, labels, _words(result))
    for lab in labels:
        s = result.summaries[lab]
        best = next((c for c in sorted(s.configs, key=lambda c: c.median) if c.n), None)
        if best is not None:
            lines.append(f"Best measured on {lab}: {best.name} ({best.fmt(best.median)}); "
                         f"{s.verdict.headline}")  # fmt: skip
    return lines


def compare_markdown(result: CompareResult) -> list[str]:
    """The comparison as Markdown, to paste into an issue or a wiki."""
    labels = result.labels
    head = [
        "config",
        *[f"{lab} median" for lab in labels],
        *[f"{lab} vs {labels[0]}" for lab in labels[1:]],
    ]
    lines = [
        f"### iobench compare (reference: {labels[0]})",
        "",
        "| " + " | ".join(head) + " |",
        "|---|" + "---:|" * (len(head) - 1),
    ]
    for _, r in result.wide.iterrows():
        cells = [
            str(r["config"]),
            *[str(r[f"{lab}: median_text"]) for lab in labels],
            *[_speed(1 / r[f"{lab}: ratio"], None, _words(result)) for lab in labels[1:]],
        ]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    lines.append("")
    lines += [f"- {h}" for h in headlines(result.long, labels)]
    for lab in labels:
        s = result.summaries[lab]
        if s.winner:  # bold only where the verdict names it
            lines.append(f"- winner on {lab}: **{s.winner}**")
        elif s.fastest:
            lines.append(f"- fastest measured on {lab}: {s.fastest} ({s.verdict.kind})")
    return lines


def _runs_rows(result: CompareResult) -> list[list[object]]:
    """The page's table of runs (plain values: the template escapes them)."""
    rows: list[list[object]] = []
    for i, (lab, run) in enumerate(zip(result.labels, result.runs, strict=True)):
        target = run.roles.get("target")
        gpu = run.gpu
        rows.append([
            run_key(i) + (" (reference)" if i == 0 else ""), lab, run.run_id, run.hostname,
            f"{target.fstype} at {target.path}" if target else "? at ?",
            f"{gpu.count} x {gpu.name}" if gpu else "none", len(run.trials),
            result.summaries[lab].winner,
        ])  # fmt: skip
    return rows


def trust_warnings(run: Run) -> list[str]:
    """What makes a run's figures weak: trials that ran under contention, or too few trials."""
    out = []
    trials = run.trials
    ok = trials[trials["status"] == "ok"]
    contended = ok["contended"].fillna("").astype(str).str.strip() != ""
    if contended.any():
        out.append(
            f"{int(contended.sum())} of {len(ok)} successful trials ran while other processes "
            "did disk I/O (the contended column): its times may be inflated"
        )
    per_config = ok.groupby("config").size()
    if len(per_config) and int(per_config.min()) < MIN_TRIALS:
        out.append(
            f"only {int(per_config.min())} successful trial for some configs: a single trial "
            "cannot show noise, so differences against it are not verdicts"
        )
    return out


def output_folder(runs: Sequence[Run], out_dir: Path | str | None) -> Path:
    """Where the comparison goes: ``--out``, else ``compare-<time>/`` in the runs' results
    folder (the one folder that holds them all; the current folder when they lie apart).
    Never inside a run it reads, nor the results folder itself (its files would sit among
    the runs); a folder without meta.json is no run to ``iobench list``."""
    parents = {Path(run.path).resolve().parent for run in runs}
    stamp = time.strftime("%Y%m%d-%H%M%S")
    if out_dir is not None:
        out = Path(out_dir)
    elif len(parents) == 1:
        out = next(iter(parents)) / f"compare-{stamp}"
    else:
        out = Path.cwd() / f"iobench-compare-{stamp}"
    target = out.resolve()
    for run in runs:
        path = Path(run.path).resolve()
        inside_run = target == path or path in target.parents
        if inside_run or target == path.parent:
            where = path if inside_run else path.parent
            raise UsageError(
                f"{out}: the comparison would go into {where}, which holds a run it reads; "
                "pass --out DIR (a new folder)"
            )
    return out


def noise_marks(
    runs: dict[str, Run], labels: list[str], measures: dict[str, Measure]
) -> dict[tuple[str, str], bool | None]:
    """(run label, config) -> whether its trials differ from the reference run's beyond
    noise (iobench.stats.compare: pooled — two runs share no rounds — with the family-wise
    level split over the configs compared); None when either side has too few trials."""

    def configs(lab: str) -> dict[str, ConfigTimes]:
        rows = runs[lab].records
        return {c.name: c for c in configs_from_rows(rows, measures[lab])}

    ref = configs(labels[0])
    out: dict[tuple[str, str], bool | None] = {}
    for lab in labels[1:]:
        mine = configs(lab)
        common = [n for n in mine if n in ref and mine[n].n and ref[n].n]
        for name in common:
            a, b = mine[name], ref[name]
            fast, slow = (a, b) if a.median <= b.median else (b, a)
            test = compare(fast.name, fast.times, slow.name, slow.times, max(len(common), 1))
            out[(lab, name)] = None if min(a.n, b.n) < MIN_TRIALS else test.distinguishable
    return out


def build_compare(
    run_dirs: Sequence[Path | str],
    out_dir: Path | str | None = None,
    costs: Sequence[CostOptions] | None = None,
) -> CompareResult:
    """Merge several runs, each priced with its own cost options (``costs``, one a run: what
    it was made with and the flags given); writes compare.csv, .json, .png and .html."""
    if len(run_dirs) < 2:
        raise UsageError("compare needs at least two run directories")
    runs = load_runs(run_dirs)
    for run in runs:
        check_has_successes(run)
    labels = unique_labels(runs)
    summaries: dict[str, Summary] = {}
    notes: list[str] = []
    for i, (lab, run) in enumerate(zip(labels, runs, strict=True)):
        options = costs[i] if costs else CostOptions()
        price, price_notes = resolve_price(options, run.gpu)
        judged, _, _ = measure_of(run, options)
        s = summarize(run, price, options, collect_sample_figures(run), judged)
        summaries[lab] = s
        notes += [f"{lab}: {n}" for n in [*price_notes, *run.notes, *s.notes]]
        notes += [f"{lab}: {w}" for w in run.warnings]
        notes += [f"{lab}: {w}" for w in trust_warnings(run)]
    by_label = dict(zip(labels, runs, strict=True))
    long = merge(summaries, by_label, labels)
    marks = noise_marks(by_label, labels, {lab: s.measure for lab, s in summaries.items()})
    long["beyond_noise_vs_ref"] = [
        marks.get((lab, cfg)) for lab, cfg in zip(long["run_label"], long["config"], strict=True)
    ]
    wide = widen(long, labels)
    out = output_folder(runs, out_dir)
    try:
        files.make_folders(out)  # judged on the way (iobench.files): no folder of another user's
    except OSError as exc:
        raise RunDirError(
            f"{out}: cannot write the comparison there ({exc.strerror}); use --out DIR"
        ) from None
    result = CompareResult(out, labels, long, wide, summaries, runs, notes=notes)
    files.write(out / "compare.csv", long.to_csv(index=False, float_format="%.6g"))
    files.write(
        out / "compare.json", json.dumps(compare_dict(result), indent=2, allow_nan=False) + "\n"
    )
    title = "iobench compare: " + " vs ".join(labels)
    m = summaries[labels[0]].measure
    chart = charts.compare_chart(
        long, labels, title, out / "compare.png", m.name, m.fmt, (m.better, m.worse)
    )
    page = html_page.compare_page(title, _runs_rows(result), wide, labels, chart, notes,
                                  headlines(long, labels, (m.better, m.worse)), long, m.name,
                                  (m.better, m.worse))  # fmt: skip
    files.write(out / "compare.html", page)
    result.paths.update({
        "csv": out / "compare.csv", "json": out / "compare.json",
        "png": chart, "html": out / "compare.html",
    })  # fmt: skip
    return result
