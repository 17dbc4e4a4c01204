"""``build_report``: one run directory in, summary.csv/json, charts and report.html out.

A short pipeline of verb-named steps (load, price, summarize, recommend, write), each
raising an ``IOBenchError`` subclass when it cannot go on, so ``iobench run`` (at its end)
and ``iobench report`` (any time later) share it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from iobench import files
from iobench.cost.idle import CostOptions, resolve_price
from iobench.errors import RunDirError
from iobench.report import (
    charts,
    checkpoint_report,
    dataset_report,
    fleet_report,
    foresight,
    formats,
    timeline_chart,
)
from iobench.report import html as html_page
from iobench.report.lifecycle_chart import plot_lifecycle
from iobench.report.lifecycle_report import build_section, html_block, write_csv
from iobench.report.load import Run, load_run
from iobench.report.parallel import fork_map
from iobench.report.recommend import Recommendation, recommend
from iobench.report.summary import Summary, collect_sample_figures, summarize
from iobench.rundir.meta import RunMeta
from iobench.rundir.records import PHASES
from iobench.units import fmt_s


@dataclass
class ReportResult:
    """What a report produced: where the files are, the winner, and console lines."""

    run_dir: Path
    out_dir: Path
    summary: Summary
    recommendation: Recommendation | None
    meta: RunMeta
    paths: dict[str, Path] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    lifecycle: list[str] = field(
        default_factory=list
    )  # start-up strategies (report/lifecycle_report.py)
    dataset: list[str] = field(default_factory=list)  # training-data reads (dataset_report.py)
    checkpoint: list[str] = field(default_factory=list)  # saves (checkpoint_report.py)
    fleet: list[str] = field(default_factory=list)  # many workers (fleet_report.py)

    @property
    def winner(self) -> str | None:
        """The verdict's winner (``Verdict.winner``): None unless it advises or keeps."""
        return self.summary.winner

    @property
    def lines(self) -> list[str]:
        """The console answer in the default (table) format, plus where the files went."""
        return self.format("table")

    @property
    def context_lines(self) -> list[str]:
        """What ``iobench run`` prints before its table: notes, the strategies' month, the
        predictions, warnings and where the report went — so that the answer comes last."""
        lines = formats.note_lines(self.summary)
        lines += self.lifecycle + self.dataset + self.checkpoint + self.fleet
        lines += [f"warning: {w}" for w in self.warnings[:3]]
        lines.append(f"Report: {self.paths.get('html')}")
        return lines

    @property
    def answer_lines(self) -> list[str]:
        """What closes ``iobench run``, after its table and verdict: the saving, what changes
        and the start script (when the verdict earned one), the cost line."""
        return formats.answer_lines(
            self.summary, self.recommendation, same_storage=False, verdict=False, notes=False
        )

    @property
    def console_lines(self) -> list[str]:
        """Both, for callers that print the report's lines together."""
        return self.context_lines + self.answer_lines

    def format(self, fmt: str = "table") -> list[str]:
        """Console output as lines: ``table``, ``markdown`` or ``json``."""
        if fmt == "json":
            data = formats.summary_dict(self.summary, self.meta, self.recommendation, self.warnings)
            return formats.json_text(data).splitlines()
        if fmt == "markdown":
            return formats.markdown_lines(self.summary, self.meta, self.recommendation)
        lines = formats.table_lines(self.summary, self.meta, self.recommendation)
        lines += self.lifecycle + self.dataset + self.checkpoint + self.fleet
        lines += [f"warning: {w}" for w in self.warnings[:5]]
        if len(self.warnings) > 5:
            lines.append(f"warning: ... and {len(self.warnings) - 5} more (see report.html)")
        n_png = sum(1 for p in self.paths.values() if p.suffix == ".png")
        lines.append(
            f"Report: {self.paths.get('html')} (+ summary.csv, summary.json, {n_png} charts)"
        )
        return lines


def slug(name: str) -> str:
    """A config name made safe for a file name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "config"


def check_has_successes(run: Run) -> None:
    """Refuse a run in which no trial succeeded, quoting the first error."""
    if (run.trials["status"] == "ok").any():
        return
    counts = run.trials["status"].value_counts()
    what = ", ".join(f"{n} {s}" for s, n in counts.items())
    errors = run.trials["error"].dropna().astype(str)
    errors = errors[errors.str.strip() != ""]
    first = f"; first error: {errors.iloc[0].strip()[:300]}" if len(errors) else ""
    raise RunDirError(
        f"{run.path}: no successful trial to report ({what}){first} (see {run.path / 'logs'})"
    )


def write_summary_files(result: ReportResult) -> None:
    """summary.csv (one row per config) and summary.json (the same plus context)."""
    csv_path = result.out_dir / "summary.csv"
    files.write(csv_path, result.summary.table.to_csv(index=False, float_format="%.6g"))
    json_path = result.out_dir / "summary.json"
    data = formats.summary_dict(result.summary, result.meta, result.recommendation, result.warnings)
    files.write(json_path, formats.json_text(data) + "\n")
    result.paths.update({"summary_csv": csv_path, "summary_json": json_path})


#: the charts a report draws, by the name its jobs carry
CHARTS: dict[str, Callable[..., Path | None]] = {
    "time_to_ready_chart": charts.time_to_ready_chart,
    "timeline_chart": timeline_chart.timeline_chart,
    "cost_chart": charts.cost_chart,
}


def _draw(job: tuple[str, tuple, dict]) -> Path | None:
    """One chart: ``(chart function name, args, kwargs)`` (picklable for a worker process)."""
    name, args, kwargs = job
    return CHARTS[name](*args, **kwargs)


def write_charts(result: ReportResult, run: Run) -> dict[str, Path]:
    """time_to_ready.png, cost.png and one timeline-<config>.png per config (median trial),
    drawn side by side in worker processes when there are cores (``report.parallel``)."""
    s = result.summary
    out = result.out_dir
    host = run.hostname or "?"
    reps = f", {s.trials_per_config()}"
    jobs: dict[str, tuple[str, tuple, dict]] = {}
    slim = run.trials[[c for c in charts.TIME_TO_READY_COLUMNS if c in run.trials.columns]]
    jobs["time_to_ready_png"] = ("time_to_ready_chart", (
        s.table, slim, s.median_trials, s.baseline, s.winner,
        f"Time-to-ready per config — {run.scenario_name} on {host}{reps}",
        out / "time_to_ready.png",
    ), {})  # fmt: skip
    stale = out / "cost.png"
    if s.price is None and stale.is_file():
        stale.unlink()  # made by an earlier report with a price; this one has none
    if s.price is not None:
        title = f"What waiting costs — {formats.price_basis(s)}"
        jobs["cost_png"] = (
            "cost_chart",
            (s.table, title, s.options.starts_per_month, out / "cost.png"),
            {},
        )
    table = s.table.set_index("config")
    ttrs = run.trials.set_index("trial_id")["time_to_ready_s"]
    for config, trial_id in s.median_trials.items():
        samples = run.read_samples(trial_id)
        if samples is None:
            continue
        row = table.loc[config]
        ttr = float(ttrs.loc[trial_id])
        sub = (f"{formats.placement(row)} · {row['installer']} · time-to-ready {fmt_s(ttr)} "
               f"(config median {fmt_s(row['median_time_to_ready_s'])} over {int(row['n_ok'])} "
               f"trials) · {row['bottleneck']}")  # fmt: skip
        path = out / f"timeline-{slug(config)}.png"
        args = (samples, config, trial_id, sub, path, run.trial_stalls(trial_id))
        trial = run.trials.set_index("trial_id").loc[trial_id]
        phases = {p: float(trial[f"{p}_s"]) for p in PHASES if f"{p}_s" in trial.index}
        jobs[f"timeline:{config}"] = ("timeline_chart", args, {"phases": phases, "ready_s": ttr})
    drawn = fork_map(_draw, list(jobs.values()))
    timelines: dict[str, Path] = {}
    for key, png in zip(jobs, drawn):
        if png is None:
            continue
        result.paths[key] = png
        if key.startswith("timeline:"):
            timelines[key.removeprefix("timeline:")] = png
    return timelines


def _with_lifecycle(result: ReportResult, run: Run, page: str, charts: bool = True) -> str:
    """Start-up strategies: lines for the console, lifecycle.png, and a section in the page."""
    s = result.summary
    price = s.price.usd_per_hour if s.price is not None else None
    o = s.options
    section = build_section(run.trials, price, o.starts_per_month, o.storage, o.entered)
    if not section.rows:
        return page
    result.lifecycle = section.lines

    result.paths["lifecycle_csv"] = write_csv(section, result.out_dir / "lifecycle.csv")
    chart = None
    if charts and section.prices is not None and len(section.figures) > 1:
        drawn = plot_lifecycle(
            section.figures,
            section.prices,
            result.out_dir / "lifecycle.png",
            starts=section.starts,
            title=f"Monthly cost by start-up strategy — {run.scenario_name}",
            priced=section.priced,
        )
        chart = result.paths["lifecycle_png"] = drawn.path
    block = html_block(section, chart)
    return html_page.insert_section(page, block)


def _with_dataset(result: ReportResult, run: Run, page: str, charts: bool) -> str:
    """Training-data reads: AU per config, the read rate's drop, lines, charts and a section."""
    s = result.summary
    au_target = s.options.au_target
    price = s.price.usd_per_hour if s.price is not None else None
    samples_of = functools.cache(run.read_samples)  # the drop and the chart read one file once
    section = dataset_report.build_section(
        run.trials, s.median_trials, run.path, samples_of, price, s.options.storage,
        s.options.starts_per_month, au_target,
    )  # fmt: skip
    if not section.rows:
        return page
    result.dataset = section.lines
    if charts:
        title = f"Accelerator utilisation per config — {run.scenario_name} on {run.hostname or '?'}"
        png = dataset_report.au_chart(section, title, result.out_dir / "au.png")
        if png is not None:
            result.paths["au_png"] = section.au_png = png
    for row in section.rows if charts else []:
        samples = samples_of(row.trial) if row.trial else None
        if samples is None:
            continue
        path = result.out_dir / f"reads-{slug(row.config)}.png"
        png = dataset_report.throughput_chart(samples, row.config, row, au_target, path)
        if png is not None:
            section.charts[row.config] = result.paths[f"reads:{row.config}"] = png
    return html_page.insert_section(
        page, dataset_report.html_block(section), html_page.DATASET_MARK
    )


def _with_checkpoint(result: ReportResult, run: Run, page: str, charts: bool) -> str:
    """Saves and restores: each placement's pause, copy and restore, how often to save, charts
    and a section."""
    s = result.summary
    price = s.price.usd_per_hour if s.price is not None else None
    section = checkpoint_report.build_section(
        run.trials, s.median_trials, price, s.options.mtbf_hours, s.options.every_minutes
    )
    if not section.rows:
        return page
    result.checkpoint = section.lines
    if charts:
        title = f"Save and restore per config — {run.scenario_name} on {run.hostname or '?'}"
        png = checkpoint_report.saves_chart(section, title, result.out_dir / "saves.png")
        if png is not None:
            result.paths["saves_png"] = section.saves_png = png
    for row in section.rows if charts else []:
        samples = run.read_samples(row.trial) if row.trial else None
        if samples is None:
            continue
        path = result.out_dir / f"io-{slug(row.config)}.png"
        png = checkpoint_report.rate_chart(samples, row, path)
        if png is not None:
            section.charts[row.config] = result.paths[f"io:{row.config}"] = png
    return html_page.insert_section(
        page, checkpoint_report.html_block(section), html_page.CHECKPOINT_MARK
    )


def _with_fleet(result: ReportResult, run: Run, page: str, charts: bool) -> str:
    """A fleet's figures per config and size, the knee, the tail's cost, a chart, a section."""
    if not run.fleet or run.workers is None:
        return page
    s = result.summary
    price = s.price.usd_per_hour if s.price is not None else None
    section = fleet_report.build_section(run.fleet, run.workers, run.info, price)
    result.fleet = section.lines
    if charts:
        title = f"Fleet time-to-ready against workers — {run.scenario_name}"
        png = fleet_report.scaling_chart(section, title, result.out_dir / "fleet.png")
        if png is not None:
            section.png = result.paths["fleet_png"] = png
    return html_page.insert_section(page, fleet_report.html_block(section))


def build_report(
    run_dir: Path | str,
    cost: CostOptions | None = None,
    out_dir: Path | str | None = None,
    charts: bool = True,
) -> ReportResult:
    """Rebuild everything derived from one run directory; returns paths, winner and lines.

    Files go into the run directory unless ``out_dir`` is given (e.g. a read-only run);
    ``charts`` False leaves the PNG charts out (most of a report's time: ~1 s of ~1.3 s for
    a 12-trial run on 2 cores), the HTML then without pictures.
    """
    run = load_run(run_dir)
    check_has_successes(run)
    options = cost or CostOptions()
    price, price_notes = resolve_price(options, run.gpu)
    samples = collect_sample_figures(run)
    summary = summarize(run, price, options, samples)
    summary.notes[:0] = price_notes + run.notes
    summary.notes += formats.lab_notes(run.trials)  # where the lab, not its volume, set a rate
    if cost_line := formats.overhead_line(run.info.overhead):  # iobench's own cost
        summary.notes.append(cost_line)
    meta = run.info
    rec = (
        recommend(summary, meta) if meta.kind in formats.INSTALL_KINDS else None
    )  # a venv's script
    out = Path(out_dir) if out_dir is not None else run.path
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunDirError(
            f"{out}: cannot write the report there ({exc.strerror}); use --out DIR"
        ) from None
    result = ReportResult(run.path, out, summary, rec, meta, warnings=run.warnings)
    try:
        write_summary_files(result)
        # a dataset run's pictures are its own (the AU and read-rate charts of _with_dataset)
        timelines = (
            write_charts(result, run) if charts and meta.kind in formats.INSTALL_KINDS else {}
        )
        chart_paths = {
            "time_to_ready": result.paths.get("time_to_ready_png"),
            "cost": result.paths.get("cost_png"),
        }
        page = html_page.render_report(summary, meta, rec, chart_paths, timelines, result.warnings)
        page = _with_lifecycle(result, run, page, charts)
        page = _with_dataset(result, run, page, charts)
        page = _with_checkpoint(result, run, page, charts)
        page = _with_fleet(result, run, page, charts)
        page = foresight.add_to(result, run.trials, page)  # predicted vs measured, censored
        html_path = out / "report.html"
        files.write(html_path, page)
        result.paths["html"] = html_path
    except PermissionError as exc:
        raise RunDirError(
            f"{out}: cannot write the report there ({exc.strerror}); use --out DIR"
        ) from None
    return result
