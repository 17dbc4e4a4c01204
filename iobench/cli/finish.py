"""The end of `iobench run`: the report, the exports, and the answer last.

The last lines of a run are its answer, as hyperfine ends: the table, then the verdict in
words (what it saves and what to set), wrapped to the terminal, ending with where the start
script and the report are. What stood between the user and the answer goes elsewhere: the
start script to ``start.sh`` in the run folder (``iobench report RUN --script`` prints it
again), the run's internals (contention, overhead, predictions, versions) to ``notes.txt``
there, counted in one notes line (``--verbose`` prints them whole; the report keeps them).
Both files are written through the run folder's held descriptor (docs/safety.md).
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from iobench.cli import emphasis
from iobench.errors import IOBenchError
from iobench.trial.progress import fit, shown, stream_width

#: trial statuses that are a result: finished, or ended by --give-up-after with a lower bound
FINISHED = ("ok", "censored")
#: the start script and the notes, in the run folder
SCRIPT_FILE = "start.sh"
NOTES_FILE = "notes.txt"
_CONTENTION = "other processes did disk I/O"


def run_exit_code(rows: list[Any], allow_failures: bool = False) -> int:
    """0: every trial ok; 1: some failed (with allow_failures: only when a config has no ok trial).

    ``rows``: one per trial, its latest (``RunDir.trials(latest_only=True)``).
    """
    if rows and all(r.status in FINISHED for r in rows):
        return 0
    if allow_failures:
        configs = {r.config for r in rows}
        good = {r.config for r in rows if r.status in FINISHED}
        return 0 if configs and configs == good else 1
    return 1


def console_summary(
    rows: list, roles: dict | None = None, order: Sequence[str] = (), measure: Any = None
) -> list[str]:
    """The short table printed at the end of a run: the report's verdict rule (report/verdict.py)
    over the run's measure; configs in the scenario's ``order``, whose first is the baseline
    when none is named naive."""
    from iobench.report.verdict import TIME, console_lines

    return console_lines(rows, roles, order=order, measure=measure or TIME)


def script_of(result: Any) -> list[str]:
    """The start script a report's sections advise (the install kind's recommendation, the
    weights kind's lines), as ``iobench.report.script`` wrote it; [] where none advises."""
    for part in result.parts:
        rec = getattr(part, "script", None)
        if rec is not None and getattr(rec, "shell", None):
            return list(rec.shell)
        data = getattr(part, "data", None) or {}
        if data.get("script"):
            return list(data["script"])
    return []


def prose_of(answer: Iterable[str]) -> list[str]:
    """The report's answer lines without the start script (its indented lines and the line
    that introduces them): the words a person acts on."""
    lines = list(answer)
    out = []
    for i, line in enumerate(lines):
        if line.startswith(emphasis.SCRIPT_INDENT):
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.rstrip().endswith(":") and nxt.startswith(emphasis.SCRIPT_INDENT):
            continue
        out.append(line.strip())
    return out


def save_script(run_dir: Any, lines: Sequence[str]) -> Path:
    """``start.sh`` in the run folder, through its held descriptor (executable, yours only)."""
    run_dir.held().write(SCRIPT_FILE, "\n".join(lines) + "\n", 0o700)
    return Path(run_dir.path) / SCRIPT_FILE


def save_notes(run_dir: Any, notes: Sequence[str]) -> Path | None:
    """``notes.txt``: the run's internals, one a line; None when it could not be written (the
    notes are also in the report and with --verbose: nothing measured is lost)."""
    try:
        run_dir.held().write(NOTES_FILE, "".join(f"{n}\n" for n in notes))
    except (OSError, IOBenchError):
        return None
    return Path(run_dir.path) / NOTES_FILE


def notes_line(notes: Sequence[str], where: Path | None) -> str:
    """One line for the run's internals: how many, of what, and where to read them."""
    contended = sum(1 for n in notes if _CONTENTION in n)
    what = f"{contended} on other processes' disk I/O, " if contended else ""
    kept = f"in {shown(where)}" if where is not None else "in the report"
    return (
        f"notes: {len(notes)} ({what}overhead, predictions, versions) {kept}; --verbose prints them"
    )


#: words of a report's console line that make it an internal (a fleet's knee)
_INTERNAL_WORDS = ("the knee is at", "no knee up to")
_WARM_STILL = "; warm still: "


def internal(line: str, result: Any) -> tuple[str, str]:
    """A report's console line split into what is printed and what goes to the notes: the
    summary's notes, the prediction table (the foresight section), a fleet's knee and a
    strategy row's warm-still tail are notes. ``(printed, note)``; either may be ''."""
    if line.startswith("note: "):
        return "", line.removeprefix("note: ")
    foresight = {ln for p in result.parts if p.name == "foresight" for ln in p.lines}
    if line in foresight or any(w in line for w in _INTERNAL_WORDS):
        return "", line.strip()
    if _WARM_STILL in line:
        head, _, tail = line.partition(_WARM_STILL)
        return head, f"{head.split()[0]}: warm still: {tail}"
    return line, ""


def _report(args: argparse.Namespace, run_dir: Any, cost: Any, notes: list[str]) -> Any:
    """Build the report (its context lines printed, its notes kept); None when there is none."""
    from iobench.cli.export import requested, write_exports
    from iobench.report import import_report_libraries

    quiet, verbose = bool(getattr(args, "quiet", False)), bool(getattr(args, "verbose", False))
    try:
        import_report_libraries()
    except IOBenchError as exc:
        if requested(args):
            raise
        print(f"iobench: warning: no report ({exc}); then: iobench report {run_dir.path}",
              file=sys.stderr)  # fmt: skip
        return None
    from iobench.report import build_report
    from iobench.run.overhead import timed_report

    result = timed_report(run_dir, lambda: build_report(run_dir.path, cost))
    width = stream_width(sys.stdout)
    for line in result.context_lines:
        if line.startswith("Report: "):
            continue  # said last, with the verdict
        said, note = internal(line, result)
        if note:
            notes.append(note)
        shown_line = line if verbose else said  # --verbose: every internal whole, in place
        if shown_line and not quiet:
            print(fit(shown_line, width))
        elif shown_line and line.startswith("warning:"):  # --quiet: stdout is the verdict alone
            print(shown_line, file=sys.stderr)
    for line in write_exports(args, result, getattr(args, "export_stdout", None)):
        if not quiet:
            print(fit(f"export {line}", width))
    return result


def finish_run(args: argparse.Namespace, run_dir: Any, cost: Any, notes: Sequence[str] = ()) -> int:
    """The end of a run, answer last: the report built, the exports written, the notes line;
    then the table and the verdict in words, ending with where the start script and the
    report are (``--quiet``: the verdict only). ``notes``: what the progress kept of the
    run's internals. Returns the exit status."""
    from iobench.cli.cost import judged_by
    from iobench.cli.export import requested
    from iobench.report.verdict import verdict_of_rows
    from iobench.rundir.fleet import fleet_rows, is_fleet

    rows = run_dir.trials()
    latest = run_dir.trials(latest_only=True)
    compared = fleet_rows(latest) if is_fleet(latest) else rows  # a fleet: by its figure
    meta = run_dir.meta()
    quiet, verbose = bool(getattr(args, "quiet", False)), bool(getattr(args, "verbose", False))
    kept = list(notes)
    result = None
    if not args.no_report and any(r.status == "ok" for r in latest):
        result = _report(args, run_dir, cost, kept)
    elif requested(args):
        print("iobench: warning: no export written: no trial succeeded", file=sys.stderr)
    code = run_exit_code(latest, args.allow_failures)
    failed = [r.trial_id for r in latest if r.status not in FINISHED]
    if failed:
        relaxed = " (--allow-failures)" if code == 0 else ""
        print(f"iobench: {len(failed)} trial(s) did not succeed: {', '.join(failed[:5])}{relaxed}",
              file=sys.stderr)  # fmt: skip
    judged = judged_by(meta, compared, cost)
    verdict = verdict_of_rows(compared, meta.roles, order=meta.config_names, measure=judged)
    table = []
    for line in console_summary(compared, meta.roles, meta.config_names, judged):
        if _CONTENTION in line:
            kept.append(line.removeprefix("warning: "))
            if verbose:
                table.append(line)
        elif line != verdict.headline:
            table.append(line)
    words = prose_of(result.answer_lines) if result is not None else []
    script = script_of(result) if result is not None else []
    where = []
    if script:
        where.append(f"Start script: {shown(save_script(run_dir, script))} "
                     f"(again: iobench report {shown(run_dir.path)} --script)")  # fmt: skip
    html = result.paths.get("html") if result is not None else None
    where.append(f"Report: {shown(html)}." if html else f"Results: {shown(run_dir.path)}.")
    notes_at = save_notes(run_dir, kept) if kept else None
    width = stream_width(sys.stdout)
    sys.stderr.flush()
    if quiet:
        emphasis.print_answer([], verdict.winner, wrapped([verdict.headline], width))
        return code
    if kept and not verbose:  # --verbose printed them where they arose
        print(fit(notes_line(kept, notes_at), width))
    print()
    headline = wrapped([verdict.headline], width)
    answer = headline + wrapped([*words, "; ".join(where)], width)
    emphasis.print_answer(table + answer, verdict.winner, headline)
    return code


def wrapped(paragraphs: Sequence[str], width: int | None) -> list[str]:
    """Each paragraph wrapped to ``width`` (never breaking a path or a word), as lines."""
    if width is None:
        return [p for p in paragraphs if p]
    return [line for p in paragraphs if p
            for line in textwrap.wrap(p, width, break_long_words=False, break_on_hyphens=False)]  # fmt: skip
