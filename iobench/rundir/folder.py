"""The run directory: meta.json, trials.csv (appended and flushed per trial), samples/, stalls.csv.

``RunDir`` is the one writer and the one reader of a run's folder; the rows are the typed
records of ``iobench.rundir.records`` and the metadata is ``iobench.rundir.meta.RunMeta`` (its
docstring keeps the schema's version history). The report, compare and --resume read
through the same functions: ``RunDir.meta()``, ``RunDir.trials(latest_only=True)`` (a trial
interrupted and run again by --resume counts once, by its later row) and
``iobench.run.resume.resume_state(run_dir)``.

Read back, trials.csv is untrusted: a cut or damaged header (a column name cut short, a row
wider than the header), a number that is not finite or out of range, or a name that is not a
safe path component is one RunDirError line; a column this version does not know (a newer
iobench's) is ignored. A row cut short (a crash mid-append, the file's last line without its
newline, or fewer cells than the header) is never trusted: it is skipped, said so, and its
trial runs again on --resume. Format and column docs: results/README.md (generated from the
field docs by ``python -m iobench.rundir.folder --markdown``).
"""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import os
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from iobench import files, reading, redact
from iobench.errors import IOBenchError, RunDirError
from iobench.rundir import kinds
from iobench.rundir.meta import SCHEMA_VERSION, RunMeta, load_meta, markdown_keys
from iobench.rundir.records import (
    FINAL_STATUSES,
    PHASES,
    REQUIRED_TRIAL_COLUMNS,
    SAMPLE_COLUMNS,
    STALL_COLUMNS,
    TRIAL_COLUMNS,
    Sample,
    Stall,
    TrialRow,
    cell,
    check_header,
    from_cells,
    markdown_table,
    to_cells,
)
from iobench.rundir.rows import TrialsFile, check_widths, latest_rows

__all__ = [
    "FINAL_STATUSES", "PHASES", "SAMPLE_COLUMNS", "SCHEMA_VERSION", "STALL_COLUMNS",
    "TRIAL_COLUMNS", "RunDir", "RunMeta", "Sample", "Stall", "TrialRow",
    "TrialsFile", "latest_rows", "new_run_id", "utcnow",
]  # fmt: skip

#: a trials.csv larger than this is not one iobench wrote (2000 trials take about 1 MB)
MAX_TRIALS_BYTES = 512 * 1024 * 1024


def utcnow(precise: bool = False) -> str:
    """Now, ISO 8601 UTC: to the second, or to the microsecond (a trial's start, which a
    fleet's figures subtract from each other)."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds" if precise else "seconds")


def new_run_id(host: str, scenario: str, results_root: Path | None = None) -> str:
    """``<UTC second>-<host>-<scenario>-<pid>``, with ``-2``, ``-3``... where a folder of that
    name is already in ``results_root`` (one process's second run within the same second)."""
    safe = (
        "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in host)[:30].strip("-_") or "host"
    )
    # the pid keeps two runs started in the same second apart (they may share a tmp role)
    run_id = time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + f"-{safe}-{scenario}-{os.getpid()}"
    n, unique = 1, run_id
    while results_root is not None and (results_root / unique).exists():
        n += 1
        unique = f"{run_id}-{n}"
    return unique


#: blanks kept at the end of meta.json: room for the final update on a full disk
META_ROOM = 2048
#: what a final update must record even on a full disk (the rest may go)
_STATE_KEYS = ("status", "ended_at", "resumed_at", "status_reason")
_FULL = (errno.ENOSPC, errno.EDQUOT)


class RunDir:
    """One run's folder."""

    def __init__(self, path: Path, folder: files.Folder | None = None) -> None:
        self.path = path
        self._held: dict[str, files.Folder] = {"": folder} if folder is not None else {}

    def held(self, sub: str = "") -> files.Folder:
        """The run folder (or its ``samples``/``logs``), held open for writing: reached once
        by ``iobench.files``' judged walk, then every file of the run is made through this
        descriptor, wherever the names above it go. A link at ``samples`` or ``logs`` (a
        received run's) is refused: the trials' files would go where it points."""
        if sub not in self._held:
            try:
                self._held[sub] = self.held().folder(sub) if sub else files.open_folder(self.path)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise RunDirError(
                        f"{self.path / sub} is a link; a run folder's own folders must be folders "
                        "(copy the run with its links resolved: cp -rL)"
                    ) from None
                raise
        return self._held[sub]

    def logs_path(self) -> Path:
        """logs/ as the trials and the programs they start name it: a path through the held
        descriptor (``iobench.files.Folder.path_for``), so pip's ``--log`` and a loader's
        record land in this very folder even if a name above it is swapped."""
        return self.held("logs").path_for()

    @property
    def trials_csv(self) -> Path:
        return self.path / "trials.csv"

    @property
    def meta_json(self) -> Path:
        return self.path / "meta.json"

    @property
    def stalls_csv(self) -> Path:
        return self.path / "stalls.csv"

    @property
    def probe_json(self) -> Path:
        """The probe of the run's roles at its start (``iobench.predict.probe.probe_roles``), if made."""
        return self.path / "probe.json"

    @property
    def samples_dir(self) -> Path:
        return self.path / "samples"

    @property
    def logs_dir(self) -> Path:
        return self.path / "logs"

    def sample_path(self, trial_id: str) -> Path:
        return self.samples_dir / f"{trial_id}.csv"

    # -------------------------------------------------------------- meta.json
    @classmethod
    def create(
        cls, results_root: Path, run_id: str, meta: RunMeta, folder: str | None = None
    ) -> RunDir:
        """Make the run's folder and write its meta.json (``meta.run_id`` is set to
        ``run_id``); the folder is named ``folder`` (a fleet's worker), else the run id."""
        info = replace(meta, run_id=run_id, schema_version=SCHEMA_VERSION)
        RunMeta.from_json(info.to_json())  # what is written must read back
        path = results_root / (folder or run_id)
        # the header now: its block then has room for the first rows even if the disk fills mid-trial
        header = io.StringIO(newline="")
        csv.writer(header).writerow(kinds.kind(info.kind).columns)
        try:  # the results folder by the judged walk; the run's own folder made through it
            with files.open_folder(results_root, make=files.FOLDER_MODE) as parent:
                rd = cls(path, parent.mkdir(path.name))
                try:
                    rd._held["samples"] = rd.held().mkdir("samples")
                    rd._held["logs"] = rd.held().mkdir("logs", redact.PRIVATE_DIR_MODE)  # config
                    rd.write_meta(info)
                    rd.held().write("trials.csv", header.getvalue())
                except OSError:
                    rd._unmake(parent)  # a full disk: no run folder without its meta.json
                    raise
        except FileExistsError:
            raise RunDirError(f"run directory {path} already exists") from None
        except OSError as exc:
            raise RunDirError(f"cannot create run directory {path}: {exc.strerror}") from None
        return rd

    def _unmake(self, parent: files.Folder) -> None:
        """Remove the run folder ``create`` made in ``parent`` and could not fill: the
        folders and files it made, nothing else (it made the folder, so nobody else wrote
        there)."""
        folder = self._held.pop("")
        for name in ("samples", "logs"):
            if name in self._held:
                self._held.pop(name).close()
                with contextlib.suppress(OSError):
                    os.rmdir(name, dir_fd=folder.fd)
        for name in os.listdir(folder.fd):
            if name in ("meta.json", "trials.csv") or name.endswith(".tmp"):
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=folder.fd)
        folder.close()
        with contextlib.suppress(OSError):
            os.rmdir(self.path.name, dir_fd=parent.fd)

    @classmethod
    def open(cls, path: Path) -> RunDir:
        """An existing run directory; its meta.json must load."""
        rd = cls(path)
        rd.meta()
        return rd

    def ensure_folders(self) -> None:
        """samples/ and logs/ of a run being continued: a run folder copied by a tool that
        drops empty folders (git, some sync tools) lacks them."""
        for name, mode in (("samples", files.FOLDER_MODE), ("logs", redact.PRIVATE_DIR_MODE)):
            try:
                if name not in self._held:
                    self._held[name] = self.held().folder(name, make=mode)
            except OSError as exc:
                if exc.errno == errno.ELOOP:  # a received run's link would take the trials' files
                    self.held(name)  # says so
                raise RunDirError(
                    f"cannot create {self.path / name}: {exc.strerror or exc}"
                ) from None

    def meta(self) -> RunMeta:
        """meta.json, upgraded to this version and checked (``iobench.rundir.meta.load_meta``)."""
        held = self._held.get("")  # a run being written: its own meta.json, wherever it went
        if held is not None:
            return load_meta(held.path_for())
        if not self.path.exists():
            raise RunDirError(f"{self.path}: no such folder")
        if not self.path.is_dir():
            raise RunDirError(f"{self.path} is not an iobench run directory (not a folder)")
        return load_meta(self.path)

    def _own(self, name: str) -> Path:
        """The run's file ``name`` to read: through the held folder while the run writes it
        (what it wrote, whatever became of the names above), else by its path."""
        held = self._held.get("")
        return held.path_for(name) if held is not None else self.path / name

    def write_meta(self, meta: RunMeta) -> None:
        text = json.dumps(meta.to_json(), indent=2, allow_nan=False, default=str) + "\n"
        # a full results disk must not leave the run "running" for good: in place if need be,
        # into the room that trailing blanks (which JSON ignores) keep for the final update
        text += " " * META_ROOM + "\n"
        self.held().write("meta.json", text, redact.PRIVATE_FILE_MODE, in_place_when_full=True)

    def update_meta(self, **changes: object) -> RunMeta:
        """Change some keys of meta.json (e.g. ``status``, ``ended_at``); checked before writing."""
        data = {**self.meta().to_json(), **changes}
        meta = RunMeta.from_json(data, str(self.meta_json))
        self.write_meta(meta)
        return meta

    def try_update_meta(self, **changes: object) -> str:
        """``update_meta`` where a full results disk must cost only the change, never the run
        or its rows: '' when written, else the warning to print."""
        try:
            self.update_meta(**changes)
        except (OSError, IOBenchError) as exc:
            kept = {k: v for k, v in changes.items() if k in _STATE_KEYS}
            if not kept or kept == changes or getattr(exc, "errno", None) not in _FULL:
                return f"meta.json not updated ({', '.join(changes)}): {exc}"
            try:  # a full disk: the run's state at least, in the room meta.json keeps for it
                self.update_meta(**kept)
            except (OSError, IOBenchError) as again:
                return f"meta.json not updated ({', '.join(changes)}): {again}"
            lost = [k for k in changes if k not in kept]
            return f"meta.json: the results disk is full; {', '.join(lost)} not recorded"
        return ""

    def try_save_series(
        self, trial_id: str, rows: list[dict], stalls: list[dict], run_id: str
    ) -> str:
        """A trial's samples and stalls, where a full results disk costs them, never the
        trial's row: '' when written, else the warning to print."""
        try:
            if rows:
                self.write_samples(trial_id, rows, SAMPLE_COLUMNS)
            self.append_stalls(run_id, trial_id, stalls)
        except OSError as exc:
            return f"samples of {trial_id} not saved: {exc.strerror or exc}"
        return ""

    def write_probe(self, doc: dict) -> None:
        """Keep the start-of-run probe (written once, atomically, like meta.json)."""
        text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
        self.held().write("probe.json", text, redact.PRIVATE_FILE_MODE)

    def probe(self) -> dict | None:
        """probe.json as written, or None when the run has none (or it does not parse)."""
        try:
            doc = json.loads(reading.read_text(self.probe_json))
        except (OSError, ValueError):
            return None
        return doc if isinstance(doc, dict) else None

    # -------------------------------------------------------------- trials.csv
    def append_trial(self, row: TrialRow) -> None:
        """Append one trial row and make it durable before the next trial starts.

        A file that already has a header keeps it (a run resumed from an older version keeps
        its columns; a column it lacks is not written).
        """
        cells = to_cells(row)
        # durable when it returns
        with files.appending_in(self.held(), "trials.csv", read=True) as fh:
            size = os.fstat(fh.fileno()).st_size
            columns = self._header() if size else kinds.of_row(row).columns
            for old, new in self._renamed(columns).items():  # an older run's header: its names
                cells[old] = cells.get(new, "")
            if size:  # a row cut off by a crash or a full disk must not swallow this one
                fh.seek(size - 1)
                if fh.read(1) != "\n":
                    fh.write("\n")
            writer = csv.writer(fh)
            if not size:  # new, or left empty by a crash
                writer.writerow(columns)
            writer.writerow([cells.get(c, "") for c in columns])

    def _header(self) -> tuple[str, ...]:
        with open(self._own("trials.csv"), newline="", encoding="utf-8", errors="replace") as fh:
            first = fh.readline(1 << 16)
        header = next(csv.reader([first]), [])
        if not first.endswith("\n"):
            raise RunDirError(f"{self.trials_csv}: header is cut short; not an iobench trials.csv")
        check_header(header, TrialRow, str(self.trials_csv), REQUIRED_TRIAL_COLUMNS)
        return tuple(header)

    def _kind(self) -> str:
        """The run's kind (meta.json's); a folder of rows without one holds the default's."""
        return self.meta().kind if self.meta_json.exists() else kinds.DEFAULT

    def _renamed(self, header: Sequence[str]) -> dict[str, str]:
        """{old name: new name} of the columns this run's kind renamed since ``header`` was
        written (a run of an older schema holds the old names, never the new ones)."""
        renamed = kinds.renamed_before(0, self._kind())
        return {old: new for old, new in renamed.items() if old in header and new not in header}

    def read_trials(self) -> TrialsFile:
        """Every row of trials.csv, checked (see the module docstring); empty if none yet."""
        path = self._own("trials.csv")
        where = str(self.trials_csv)
        try:
            if not path.exists() or path.stat().st_size == 0:
                return TrialsFile()
            if path.stat().st_size > MAX_TRIALS_BYTES:
                raise RunDirError(
                    f"{where}: larger than {MAX_TRIALS_BYTES >> 20} MiB; not an iobench trials.csv"
                )
            text = reading.read_text(path, MAX_TRIALS_BYTES)  # a regular file, not a FIFO
            records = list(csv.reader(io.StringIO(text, newline="")))
        except UnicodeDecodeError as exc:
            raise RunDirError(f"{where}: not text (byte {exc.start} is not UTF-8)") from None
        except OSError as exc:
            raise RunDirError(f"{where}: cannot be read ({exc.strerror or exc})") from None
        except csv.Error as exc:
            raise RunDirError(f"{where}: cannot be parsed as CSV ({exc})") from None
        cut_last = not text.endswith("\n")
        header = records[0] if records else []
        if cut_last and len(records) <= 1:
            raise RunDirError(
                f"{where}: header is cut short (no row, no end of line); the file is damaged"
            )
        row_type = kinds.row_type(self._kind())
        check_header(header, row_type, where, REQUIRED_TRIAL_COLUMNS)
        check_widths(records, where, cut_last)
        names = self._renamed(header)
        header = [names.get(c, c) for c in header]
        rows: list[TrialRow] = []
        skipped: list[str] = []
        for n, rec in enumerate(records[1:], start=2):
            if not rec:
                continue
            if len(rec) != len(header) or (cut_last and n == len(records)):
                skipped.append(
                    f"{where}: row {n} is cut short ({len(rec)} of {len(header)} cells); not trusted, skipped"
                )
                continue
            rows.append(
                from_cells(row_type, dict(zip(header, rec, strict=True)), f"{where}: row {n}")
            )
        return TrialsFile(tuple(rows), tuple(header), tuple(skipped))

    def trials(self, latest_only: bool = False) -> list[TrialRow]:
        """trials.csv's rows; ``latest_only``: one row per trial, by ``latest_rows``."""
        read = self.read_trials()
        return read.latest()[0] if latest_only else list(read.rows)

    def done_trial_ids(self) -> set[str]:
        """Trials whose latest row has a final status (``interrupted`` ones run again)."""
        return {r.trial_id for r in self.trials(latest_only=True) if r.status in FINAL_STATUSES}

    # -------------------------------------------------------------- samples, stalls
    def append_stalls(self, run_id: str, trial_id: str, stalls: Iterable[Stall | dict]) -> None:
        """Every no-progress interval of a trial: when, how long, D state and iowait meanwhile."""
        items = [replace(s, run_id=run_id, trial_id=trial_id) if isinstance(s, Stall)
                 else Stall(**{**s, "run_id": run_id, "trial_id": trial_id}) for s in stalls]  # fmt: skip
        if not items:
            return
        with files.appending_in(self.held(), "stalls.csv") as fh:
            writer = csv.DictWriter(fh, fieldnames=STALL_COLUMNS)
            if not os.fstat(fh.fileno()).st_size:
                writer.writeheader()
            writer.writerows(to_cells(s) for s in items)

    def write_samples(
        self,
        trial_id: str,
        rows: Sequence[Sample | dict],
        columns: tuple[str, ...] = SAMPLE_COLUMNS,
    ) -> Path:
        """A trial's time series, written whole (to a .tmp, then renamed)."""
        path = self.sample_path(trial_id)
        fh = io.StringIO(newline="")
        writer = csv.writer(fh)
        writer.writerow(columns)
        writer.writerows(
            [cell(getattr(r, c, "")) for c in columns]
            if isinstance(r, Sample)
            else [cell(r.get(c)) for c in columns]
            for r in rows
        )
        self.held("samples").write(path.name, fh.getvalue())
        return path


def _group_tables() -> list[str]:
    """Each kind's own columns, once per row type (the stand-in's are the install kind's)."""
    lines: list[str] = []
    seen: set[type] = set()
    for k in kinds.KINDS.values():
        if k.row in seen:
            continue
        seen.add(k.row)
        lines += [f"Then a `{k.name}` run's own ({k.doc}):", "", markdown_table(k.row, k.group), ""]
    return lines


def readme_tables() -> str:
    """The generated part of results/README.md: every column and meta.json key, documented."""
    return "\n".join([
        "### `trials.csv`", "", "Every kind's columns first:", "", markdown_table(TrialRow), "",
        *_group_tables(),
        "### `samples/<trial_id>.csv`", "", markdown_table(Sample), "",
        "### `stalls.csv`", "", markdown_table(Stall), "",
        f"### `meta.json` (schema_version {SCHEMA_VERSION})", "",
        "| key | meaning |", "|---|---|", *markdown_keys(), "",
    ])  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """``python -m iobench.rundir.folder --markdown``: print the README's generated tables."""
    args = sys.argv[1:] if argv is None else argv
    if args != ["--markdown"]:
        print("usage: python -m iobench.rundir.folder --markdown", file=sys.stderr)
        return 2
    sys.stdout.write(readme_tables())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
