"""``build_report``: one run directory in, summary.csv/json, charts and report.html out.

A short pipeline of verb-named steps (load, price, summarize, recommend, write), each
raising an ``IOBenchError`` subclass when it cannot go on, so ``iobench run`` (at its end)
and ``iobench report`` (any time later) share it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from iobench import files
from iobench.cost.idle import CostOptions, options_from_meta, resolve_price
from iobench.errors import IOBenchError, RunDirError
from iobench.report import formats
from iobench.report import html as html_page
from iobench.report.figures import collect_sample_figures
from iobench.report.load import Run, load_run
from iobench.report.part import Context, Part
from iobench.report.recommend import Recommendation
from iobench.report.sections import build_parts
from iobench.report.summary import Summary, measure_of, summarize
from iobench.rundir.meta import RunMeta


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
    #: what each section (the run's kind's, then its features') added
    parts: list[Part] = field(default_factory=list)

    @property
    def winner(self) -> str | None:
        """The verdict's winner (``Verdict.winner``): None unless it advises or keeps."""
        return self.summary.winner

    @property
    def lines(self) -> list[str]:
        """The console answer in the default (table) format, plus where the files went."""
        return self.format("table")

    @property
    def section_lines(self) -> list[str]:
        """Every section's console lines (a strategy run's month, a dataset's AU...)."""
        return [line for part in self.parts for line in part.lines]

    @property
    def context_lines(self) -> list[str]:
        """What ``iobench run`` prints before its table: notes, the sections' lines,
        warnings and where the report went — so that the answer comes last."""
        lines = formats.note_lines(self.summary) + self.section_lines
        lines += [f"warning: {w}" for w in self.warnings[:3]]
        lines.append(f"Report: {self.paths.get('html')}")
        return lines

    @property
    def answer_lines(self) -> list[str]:
        """What closes ``iobench run``, after its table and verdict: what the sections advise
        (the saving and the start script; the remedies priced...)."""
        return formats.answer_lines(self.summary, self.parts, verdict=False, notes=False)

    @property
    def console_lines(self) -> list[str]:
        """Both, for callers that print the report's lines together."""
        return self.context_lines + self.answer_lines

    def format(self, fmt: str = "table") -> list[str]:
        """Console output as lines: ``table``, ``markdown`` or ``json``."""
        if fmt == "json":
            return formats.json_text(self.summary_data()).splitlines()
        if fmt == "markdown":
            return formats.markdown_lines(self.summary, self.meta, self.parts)
        lines = formats.table_lines(self.summary, self.meta, self.parts)
        lines += self.section_lines
        lines += [f"warning: {w}" for w in self.warnings[:5]]
        if len(self.warnings) > 5:
            lines.append(f"warning: ... and {len(self.warnings) - 5} more (see report.html)")
        n_png = sum(1 for p in self.paths.values() if p.suffix == ".png")
        lines.append(
            f"Report: {self.paths.get('html')} (+ summary.csv, summary.json, {n_png} charts)"
        )
        return lines

    def summary_data(self) -> dict:
        """summary.json's content."""
        return formats.summary_dict(self.summary, self.meta, self.recommendation, self.warnings,
                                    self.parts)  # fmt: skip


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


def run_options(run: Run) -> CostOptions:
    """The cost options the run was made with (meta.json's ``pricing``); none stored, or one
    this version no longer knows (a preset since renamed): unpriced."""
    try:
        return options_from_meta(run.info.pricing)
    except IOBenchError:
        return CostOptions()


def write_summary_files(result: ReportResult) -> None:
    """summary.csv (one row per config) and summary.json (the same plus context)."""
    csv_path = result.out_dir / "summary.csv"
    files.write(csv_path, result.summary.table.to_csv(index=False, float_format="%.6g"))
    json_path = result.out_dir / "summary.json"
    files.write(json_path, formats.json_text(result.summary_data()) + "\n")
    result.paths.update({"summary_csv": csv_path, "summary_json": json_path})


def build_report(
    run_dir: Path | str,
    cost: CostOptions | None = None,
    out_dir: Path | str | None = None,
    charts: bool = True,
) -> ReportResult:
    """Rebuild everything derived from one run directory; returns paths, winner and lines.

    The run is judged by its kind's question (``iobench.cost.kinds``) at the prices it was
    made with (``cost``: its stored options, with any given on top); each section (its kind's,
    then its features') adds its lines, its advice, its fragment of the page and its files.
    Files go into the run directory unless ``out_dir`` is given (e.g. a read-only run);
    ``charts`` False leaves the PNG charts out (most of a report's time), the HTML then
    without pictures.
    """
    run = load_run(run_dir)
    check_has_successes(run)
    options = cost or run_options(run)
    price, price_notes = resolve_price(options, run.gpu)
    samples = collect_sample_figures(run)
    judged, pricing, _ = measure_of(run, options)
    summary = summarize(run, price, options, samples, judged)
    summary.notes[:0] = price_notes + run.notes
    summary.notes += formats.lab_notes(run.trials)  # where the lab, not its volume, set a rate
    if cost_line := formats.overhead_line(run.info.overhead):  # iobench's own cost
        summary.notes.append(cost_line)
    meta = run.info
    out = Path(out_dir) if out_dir is not None else run.path
    try:
        files.make_folders(out)  # judged on the way (iobench.files): no folder of another user's
    except OSError as exc:
        raise RunDirError(
            f"{out}: cannot write the report there ({exc.strerror}); use --out DIR"
        ) from None
    result = ReportResult(run.path, out, summary, None, meta, warnings=run.warnings)
    try:
        result.parts = build_parts(Context(run, summary, out, charts, pricing))
        result.recommendation = next((p.script for p in result.parts if p.script), None)
        for part in result.parts:
            result.paths.update(part.paths)
        write_summary_files(result)
        html_path = out / "report.html"
        files.write(html_path, html_page.report_page(summary, meta, result.parts, result.warnings))
        result.paths["html"] = html_path
    except PermissionError as exc:
        raise RunDirError(
            f"{out}: cannot write the report there ({exc.strerror}); use --out DIR"
        ) from None
    return result
