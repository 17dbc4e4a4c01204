"""The run-directory model: records, the one meta.json loader, the one latest-row rule, and
run directories read back as untrusted input — by the reader, `report`, `compare` and the
resume state alike. Also: runs written by d8a1c15 (tests/data/run-d8a1c15*) still load.

The d8a1c15 runs are real: `iobench run` of tests/data/tiny.toml by that commit, one complete
and one stopped with SIGTERM during its second trial; their samples are cut to six rows and
their `env` to six harmless variables before they were checked in.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import runs
from helpers.files import DATA

from iobench.__main__ import main
from iobench.errors import RunDirError
from iobench.report import build_compare, build_report
from iobench.report.load import load_run
from iobench.run.resume import resume_state
from iobench.rundir import kinds
from iobench.rundir.folder import SCHEMA_VERSION, RunDir, latest_rows, new_run_id, readme_tables
from iobench.rundir.kinds.install import Row as InstallRow
from iobench.rundir.meta import RoleInfo, RunMeta, load_meta
from iobench.rundir.records import (
    SAMPLE_COLUMNS,
    STALL_COLUMNS,
    TRIAL_COLUMNS,
    UNIT_RANGES,
    Sample,
    Stall,
    TrialRow,
)

OLD = DATA / "run-d8a1c15"
OLD_INTERRUPTED = DATA / "run-d8a1c15-interrupted"
README = Path(__file__).parents[2] / "results" / "README.md"
#: trials.csv's header as d8a1c15 wrote it
INSTALL_COLUMNS = kinds.kind("install").columns
OLD_HEADER = OLD.joinpath("trials.csv").read_text().splitlines()[0].split(",")


def _row(
    trial_id: str = "naive-r1", status: str = "ok", run_id: str = "run-1", **kw: object
) -> TrialRow:
    config = trial_id.rsplit("-r", 1)[0]
    return InstallRow(
        run_id=run_id, trial_id=trial_id, config=config, repeat=1, status=status, **kw
    )


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """A small synthetic run written by the real writer."""
    return runs.make_run_dir(tmp_path, repeats=2)


# --- the records --------------------------------------------------------------------------------


def test_columns_come_from_the_fields_and_keep_the_old_order() -> None:
    assert TRIAL_COLUMNS == tuple(f.name for f in dataclasses.fields(TrialRow))
    assert SAMPLE_COLUMNS == tuple(f.name for f in dataclasses.fields(Sample))
    assert STALL_COLUMNS == (
        "run_id",
        "trial_id",
        "phase",
        "start_s",
        "length_s",
        "dstate_max",
        "iowait_mean_pct",
    )
    # a kind's row is the core, then its own group (schema 3), `error` last; an install run
    # still writes every column d8a1c15 wrote
    install = kinds.kind("install").columns
    assert install[: len(TRIAL_COLUMNS) - 1] == TRIAL_COLUMNS[:-1]
    assert set(OLD_HEADER) <= set(install) and install[-1] == TRIAL_COLUMNS[-1] == "error"
    for k in kinds.KINDS.values():  # no kind has another's columns
        others = {c for o in kinds.KINDS.values() if o.row is not k.row for c in o.group}
        assert not others & set(k.group), k.name
    for record in (TrialRow, Sample, Stall):
        for f in dataclasses.fields(record):
            assert f.metadata["doc"].strip(), f.name
            assert f.metadata["unit"] in ("", *UNIT_RANGES), f.name


def test_a_second_run_in_the_same_second_gets_a_folder_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One process, two runs within one second (seen in CI: the second refused with "run
    directory ... already exists"): the second id takes a suffix; the first is unchanged."""
    import time

    second = time.gmtime()
    monkeypatch.setattr("iobench.rundir.folder.time.gmtime", lambda: second)
    first = new_run_id("pod/1", "smoke", tmp_path)
    assert re.fullmatch(r"\d{8}-\d{6}-pod-1-smoke-\d+", first), first
    RunDir.create(tmp_path, first, RunMeta())
    again = new_run_id("pod/1", "smoke", tmp_path)
    assert again == f"{first}-2"
    RunDir.create(tmp_path, again, RunMeta())
    assert new_run_id("pod/1", "smoke", tmp_path) == f"{first}-3"
    assert new_run_id("pod/1", "smoke") == first  # no results folder given: nothing to avoid


def test_a_row_reads_back_as_written(tmp_path: Path) -> None:
    rd = RunDir(tmp_path)
    row = _row(position=3, time_to_ready_s=12.345678, write_bytes=2**40, offcpu_frac=0.25,
               error="line one\nline two", contended="dpkg:12")  # fmt: skip
    rd.append_trial(row)
    rd.append_trial(_row("b-r1", "failed"))
    back = rd.trials()
    assert back[0] == dataclasses.replace(row, time_to_ready_s=12.3457, error="line one | line two")
    assert (
        back[1].status == "failed" and back[1].time_to_ready_s is None and back[1].position is None
    )
    assert tmp_path.joinpath("trials.csv").read_text().splitlines()[0] == ",".join(INSTALL_COLUMNS)


def test_samples_and_stalls_are_written_from_records(tmp_path: Path) -> None:
    rd = RunDir(tmp_path)
    rd.samples_dir.mkdir()
    rd.write_samples(
        "a-r1", [Sample(t=0.1, phase="venv", iowait_pct=2.5), {"t": 0.2, "phase": "install"}]
    )
    lines = rd.sample_path("a-r1").read_text().splitlines()
    assert lines[0] == ",".join(SAMPLE_COLUMNS)
    assert lines[1].startswith("0.1,venv,0.0,0.0,2.5,") and lines[1].endswith(",,,")
    rd.append_stalls(
        "run-1", "a-r1", [Stall(phase="install", start_s=1.5, length_s=30.0), {"phase": "import"}]
    )
    text = rd.stalls_csv.read_text().splitlines()
    assert text == [
        ",".join(STALL_COLUMNS),
        "run-1,a-r1,install,1.5,30.0,0,0.0",
        "run-1,a-r1,import,0.0,0.0,0,0.0",
    ]


# --- one rule for "the latest row per trial" ------------------------------------------------------


def test_latest_rows_with_literal_rows() -> None:
    ids = ["a-r1", "b-r1", "a-r1", "c-r1", "d-r1", "d-r1", "d-r1"]
    statuses = ["interrupted", "ok", "ok", "interrupted", "interrupted", "interrupted", "failed"]
    assert latest_rows(ids, statuses) == ([1, 2, 3, 6], ["a-r1", "d-r1"])
    assert latest_rows(["x"], ["interrupted"]) == ([0], [])
    assert latest_rows([], []) == ([], [])


def test_report_resume_and_the_reader_share_the_rule(run: Path) -> None:
    runs.resume_rows(run, ("naive-r2",))
    rd = RunDir(run)
    assert len(rd.trials()) == len(rd.trials(latest_only=True)) + 1
    latest = {r.trial_id: r.status for r in rd.trials(latest_only=True)}
    assert latest["naive-r2"] == "ok"
    assert resume_state(rd).done == frozenset(latest)
    report = load_run(run)
    assert list(report.trials["trial_id"]) == [r.trial_id for r in rd.trials(latest_only=True)]


# --- meta.json: one loader, a version history ----------------------------------------------------


def test_meta_round_trips_and_keeps_unknown_keys(run: Path) -> None:
    rd = RunDir(run)
    data = json.loads(rd.meta_json.read_text())
    data["from_a_later_minor_change"] = {"x": 1}
    data["host"]["new_fact"] = "y"
    rd.meta_json.write_text(json.dumps(data))
    meta = rd.update_meta(status="interrupted", resumed_at="2026-11-30T13:00:00+00:00")
    assert meta.status == "interrupted" and meta.hostname == "pod-a"
    again = json.loads(rd.meta_json.read_text())
    assert again["from_a_later_minor_change"] == {"x": 1} and again["host"]["new_fact"] == "y"
    assert RunMeta.from_json(again) == meta
    with pytest.raises(RunDirError, match=r"status: 'paused' is not one of running, complete"):
        rd.update_meta(status="paused")
    assert load_meta(run).status == "interrupted"  # a refused change is not written


def test_version_1_upgrades_and_newer_versions_are_refused(run: Path) -> None:
    data = json.loads((OLD / "meta.json").read_text())
    assert data["schema_version"] == 1 and "order_seed" not in data
    meta = load_meta(OLD)
    assert (meta.schema_version, meta.order_seed) == (SCHEMA_VERSION, None)
    data["schema_version"] = SCHEMA_VERSION + 1
    (run / "meta.json").write_text(json.dumps(data))
    with pytest.raises(
        RunDirError,
        match=r"schema_version 4 is not supported \(this iobench reads 1, 2, 3\): written by a newer iobench",
    ):
        load_meta(run)


def _set(path: str, value: object) -> Callable[[dict], None]:
    def change(meta: dict) -> None:
        *parents, last = path.split(".")
        for p in parents:
            meta = meta[p]
        meta[last] = value

    return change


HOSTILE_META = [
    (_set("run_id", "../../etc"), r"run_id: '\.\./\.\./etc' must be letters"),
    (_set("run_id", "/abs/path"), r"run_id: '/abs/path' must be letters"),
    (_set("run_id", 7), r"run_id: expected a string"),
    (
        _set("roles.target.path", "relative/dir"),
        r"roles.target: path: 'relative/dir' is not an absolute path",
    ),
    (
        _set("roles.target.path", "/tmp/../etc"),
        r"roles.target: path: '/tmp/\.\./etc' is not an absolute path without '\.\.'",
    ),
    (_set("roles", {"../x": {"path": "/x"}}), r"roles\.\.\./x: '\.\./x' must be letters"),
    (_set("venv_python", "python3"), r"venv_python: 'python3' is not an absolute path"),
    (_set("repeats", 10**9), r"repeats: 1000000000 is not a finite number in \[1, 1000\]"),
    (_set("repeats", 2.5), r"repeats: expected an integer"),
    (_set("repeats", True), r"repeats: expected an integer"),
    (_set("stall_after_s", -1), r"stall_after_s: -1 is not a finite number"),
    (_set("host.memory_bytes", 10**30), r"host: memory_bytes: 10{30} is not a finite number"),
    (_set("status", "pwned"), r"status: 'pwned' is not one of"),
    (_set("env", {"A": 1}), r"env: expected an object of strings"),
    (_set("scenario", []), r"scenario: expected an object"),
    (_set("command", "rm -rf /"), r"command: expected a list of strings"),
    (_set("schema_version", True), r"schema_version True is not supported"),
]


@pytest.mark.parametrize(("damage", "match"), HOSTILE_META)
def test_hostile_meta_is_one_line_everywhere(
    run: Path, damage: Callable[[dict], None], match: str, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads((run / "meta.json").read_text())
    damage(data)
    (run / "meta.json").write_text(json.dumps(data))
    _refused_everywhere(run, match, capsys)


@pytest.mark.parametrize(
    ("literal", "match"),
    [
        ("NaN", r"meta.json: not valid JSON \(NaN is not a number JSON allows\)"),
        ("-Infinity", r"meta.json: not valid JSON \(-Infinity is not a number JSON allows\)"),
        ("1e999", r"meta.json: sample_hz: inf is not a finite number in \[0.001, 1000\]"),
    ],
)
def test_non_finite_numbers_in_meta_are_refused(
    run: Path, literal: str, match: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (run / "meta.json").read_text()
    assert '"sample_hz": 10.0' in text
    (run / "meta.json").write_text(text.replace('"sample_hz": 10.0', f'"sample_hz": {literal}'))
    _refused_everywhere(run, match, capsys)


def _refused_everywhere(
    run: Path, match: str, capsys: pytest.CaptureFixture[str], trials: bool = False
) -> None:
    """The same one line from the readers, the resume state, `report`, `compare` and `run --resume`."""
    readers = (lambda: RunDir(run).meta(), lambda: RunDir(run).read_trials(),
               lambda: resume_state(RunDir(run)), lambda: load_run(run))  # fmt: skip
    for read in readers[1:] if trials else readers[:1] + readers[2:]:
        with pytest.raises(RunDirError, match=match) as err:
            read()
        assert "\n" not in str(err.value) and str(run) in str(err.value)
    for argv in (
        ["report", str(run)],
        ["compare", str(run), str(run)],
        ["run", "--resume", str(run), "--no-report"],
    ):
        capsys.readouterr()
        assert main(argv) == RunDirError.exit_code, argv
        err = capsys.readouterr().err.strip()
        assert re.search(match, err) and "\n" not in err, (argv, err)


# --- trials.csv read back: untrusted --------------------------------------------------------------

HEADER = ",".join(INSTALL_COLUMNS)


def _replace_cell(column: str, value: str) -> Callable[[str], str]:
    def damage(text: str) -> str:
        lines = text.splitlines(keepends=True)
        cells = lines[1].rstrip("\n").split(",")
        cells[INSTALL_COLUMNS.index(column)] = value
        lines[1] = ",".join(cells) + "\n"
        return "".join(lines)

    return damage


HOSTILE_TRIALS = [
    (lambda t: "run_id,trial_id,con", r"trials.csv: header is cut short"),
    (
        lambda t: t.replace(",error\n", ",error,extra\n", 1),
        rf"header is cut short or damaged \(row 2 has {len(INSTALL_COLUMNS)} cells, the header {len(INSTALL_COLUMNS) + 1}\)",
    ),
    (
        lambda t: t.replace(",error\n", ",err\n", 1),
        r"header is cut short or damaged \(column 'err'\)",
    ),
    (
        lambda t: t.replace(",error\n", ",error,the end\n", 1),
        r"header is cut short or damaged \(column 'the end'\)",
    ),
    (
        lambda t: t.replace("\n", ",x\n", 2).replace(",x\n", "\n", 1),
        rf"header is cut short or damaged \(row 2 has {len(INSTALL_COLUMNS) + 1} cells, the header {len(INSTALL_COLUMNS)}\)",
    ),
    (
        lambda t: t.replace("run_id,trial_id,config", "run_id,trial_id,trial_id", 1),
        r"header names column\(s\) twice: trial_id",
    ),
    (lambda t: "\n" + t, r"missing column\(s\) trial_id, config, status, time_to_ready_s"),
    (
        _replace_cell("time_to_ready_s", "nan"),
        r"row 2: time_to_ready_s: 'nan' is not a number in \[0, 1e\+07\] \(s\)",
    ),
    (_replace_cell("time_to_ready_s", "inf"), r"time_to_ready_s: 'inf' is not a number in"),
    (_replace_cell("time_to_ready_s", "-3"), r"time_to_ready_s: '-3' is not a number in"),
    (_replace_cell("write_bytes", "1e300"), r"write_bytes: '1e300' is not a number in"),
    (_replace_cell("offcpu_frac", "1.5"), r"offcpu_frac: '1.5' is not a number in \[0, 1\]"),
    (_replace_cell("repeat", "x"), r"repeat: 'x' is not a number"),
    (
        _replace_cell("status", "pwned"),
        r"status: 'pwned' is not one of ok, failed, stalled, censored, interrupted",
    ),
    (
        _replace_cell("trial_id", "../../etc/passwd"),
        r"trial_id: '\.\./\.\./etc/passwd' must be letters",
    ),
    (_replace_cell("run_id", "/abs"), r"run_id: '/abs' must be letters"),
    (lambda t: "\xff\xfe" + t, r"trials.csv: not text \(byte 0 is not UTF-8\)"),
]


@pytest.mark.parametrize(("damage", "match"), HOSTILE_TRIALS)
def test_hostile_trials_csv_is_one_line_everywhere(
    run: Path, damage: Callable[[str], str], match: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = run / "trials.csv"
    text = damage(path.read_text())
    path.write_bytes(text.encode("latin-1") if text.startswith("\xff") else text.encode())
    _refused_everywhere(run, match, capsys, trials=True)


def test_a_row_cut_after_its_status_is_not_trusted(run: Path) -> None:
    path = run / "trials.csv"
    lines = path.read_text().splitlines(keepends=True)
    last = lines[-1]
    cut = last[: last.index(",ok,") + len(",ok")]  # a crash right after the status
    path.write_text("".join(lines[:-1]) + cut)
    rd = RunDir(run)
    cut_id = cut.split(",")[1]
    read = rd.read_trials()
    assert len(read.rows) == len(lines) - 2 and cut_id not in {r.trial_id for r in read.rows}
    assert re.fullmatch(
        rf".*trials.csv: row {len(lines)} is cut short \(\d+ of {len(INSTALL_COLUMNS)} cells\); not trusted, skipped",
        read.skipped[0],
    )
    assert cut_id not in resume_state(rd).done  # --resume runs it again
    report = load_run(run)
    assert cut_id not in set(report.trials["trial_id"]) and read.skipped[0] in report.warnings
    # the next append starts a line of its own; the cut row stays skipped
    rd.append_trial(_row(cut_id, run_id=report.run_id))
    assert [r.trial_id for r in rd.trials()][-1] == cut_id and len(rd.read_trials().skipped) == 1


def test_a_newer_iobench_column_is_ignored(run: Path) -> None:
    """Adding a column needs no new schema version: an older reader skips what it lacks."""
    path = run / "trials.csv"
    lines = path.read_text().splitlines()
    path.write_text(
        "".join(f"{line},{'warmth_c' if i == 0 else i}\n" for i, line in enumerate(lines))
    )
    read = RunDir(run).read_trials()
    assert read.columns[-1] == "warmth_c" and len(read.rows) == len(lines) - 1 and not read.skipped
    RunDir(run).append_trial(_row("naive-r9", run_id=read.rows[0].run_id))
    assert path.read_text().splitlines()[-1].endswith(",")  # the column it does not know: empty
    assert load_run(run).trials["trial_id"].iloc[-1] == "naive-r9"


def test_the_first_row_cut_is_a_cut_row_not_a_bad_header(tmp_path: Path) -> None:
    rd = RunDir(tmp_path)
    rd.append_trial(_row())
    text = rd.trials_csv.read_text()
    rd.trials_csv.write_text(text[: text.index(",ok,") + 3])
    assert rd.read_trials().rows == () and len(rd.read_trials().skipped) == 1
    rd.append_trial(_row())
    assert [r.trial_id for r in rd.trials()] == ["naive-r1"]


def test_a_full_row_without_its_end_of_line_is_not_trusted(run: Path) -> None:
    path = run / "trials.csv"
    path.write_text(path.read_text().rstrip("\n"))
    read = RunDir(run).read_trials()
    assert len(read.skipped) == 1 and "cut short" in read.skipped[0]


def test_an_empty_or_absent_trials_csv_means_no_trial_yet(run: Path) -> None:
    (run / "trials.csv").write_text("")
    assert RunDir(run).trials() == [] and resume_state(RunDir(run)).done == frozenset()
    (run / "trials.csv").unlink()
    assert RunDir(run).trials() == []


def test_resume_refuses_trials_of_configs_the_scenario_lacks(run: Path) -> None:
    RunDir(run).append_trial(_row("other-r1", run_id="x"))
    with pytest.raises(RunDirError, match=r"config\(s\) other are not in meta.json's scenario"):
        resume_state(RunDir(run))


# --- runs written by d8a1c15 -----------------------------------------------------------------------


def test_a_d8a1c15_run_loads_through_the_new_loader() -> None:
    rd = RunDir(OLD)
    meta = rd.meta()
    assert (meta.hostname, meta.scenario_name, meta.label) == ("vm", "tiny", "old d8a1c15")
    assert meta.config_names == ["naive", "venv-on-tmp", "warm", "nocache"]
    rows = rd.trials(latest_only=True)
    assert [r.status for r in rows] == ["ok"] * 4 and all(r.position is None for r in rows)
    assert all(r.time_to_ready_s and r.time_to_ready_s > 0 for r in rows)
    state = resume_state(rd)
    assert state.done == frozenset(f"{c}-r1" for c in meta.config_names) and state.repeats == 1
    assert set(state.roles) == {"target", "tmp"} and state.scenario.name == "tiny"


@pytest.mark.charts
def test_a_d8a1c15_run_still_reports_and_compares(tmp_path: Path) -> None:
    a, b = tmp_path / "results" / "a", tmp_path / "results" / "b"
    shutil.copytree(OLD, a)
    shutil.copytree(OLD_INTERRUPTED, b)
    result = build_report(a)
    assert list(result.summary.table["config"]) and (a / "report.html").is_file()
    assert build_compare([a, b], tmp_path / "cmp").labels == ["old d8a1c15", "old d8a1c15, resumed"]
    assert main(["report", str(a), "--format", "json"]) == 0


def test_the_resume_state_of_an_interrupted_d8a1c15_run() -> None:
    state = resume_state(RunDir(OLD_INTERRUPTED))
    assert state.meta.status == "interrupted"
    assert state.done == frozenset({"naive-r1"})  # nocache-r1 was interrupted: it runs again
    assert [r.status for r in state.rows] == ["ok", "interrupted"]


def test_appending_to_a_d8a1c15_run_keeps_its_header(tmp_path: Path) -> None:
    old = tmp_path / OLD_INTERRUPTED.name
    shutil.copytree(OLD_INTERRUPTED, old)
    rd = RunDir(old)
    rd.append_trial(_row("nocache-r1", run_id=rd.meta().run_id, position=1, time_to_ready_s=3.5))
    assert (old / "trials.csv").read_text().splitlines()[0].split(",") == OLD_HEADER
    assert [r.status for r in rd.trials(latest_only=True)] == ["ok", "ok"]
    assert resume_state(rd).done == frozenset({"naive-r1", "nocache-r1"})
    assert (
        load_run(old)
        .notes[0]
        .startswith("1 trial(s) interrupted and run again by --resume (nocache-r1)")
    )


# --- the README documents every column and key --------------------------------------------------------


def test_the_readme_tables_are_the_field_docs() -> None:
    text = README.read_text()
    start = text.index("<!-- generated: python -m iobench.rundir.folder --markdown -->\n")
    end = text.index("<!-- end generated -->")
    generated = text[start:end].split("\n", 1)[1]
    assert generated == readme_tables(), (
        "run: python -m iobench.rundir.folder --markdown, paste into results/README.md"
    )
    for name in ("sampler_cpu_s", "position", "venv_python", "stall_after_s", "stall_timeout_s",
                 "resumed_at", "host.machine", "index.source", "order_seed"):  # fmt: skip
        assert f"`{name}`" in generated, name
    assert "<pid>" in text


def test_roles_are_records() -> None:
    meta = load_meta(OLD)
    assert isinstance(meta.roles["target"], RoleInfo) and meta.roles["target"].path.startswith("/")
    assert meta.index is not None and meta.index.source.startswith("synthetic profile tiny")


@pytest.mark.e2e
def test_run_resume_continues_a_d8a1c15_run(tmp_path: Path) -> None:
    """`iobench run --resume` of the interrupted d8a1c15 run, with this code. Only what is
    machine-specific in its meta.json is pointed at this test's folders: the roles, the
    synthetic wheel profile and the interpreter."""
    import sys

    old = tmp_path / "results" / OLD_INTERRUPTED.name
    shutil.copytree(OLD_INTERRUPTED, old)
    data = json.loads((old / "meta.json").read_text())
    for role in ("target", "tmp"):
        (tmp_path / role).mkdir()
        data["roles"][role]["path"] = str(tmp_path / role)
    data["scenario"]["wheels"] = str(DATA / "tiny-profile.toml")
    data["venv_python"] = sys.executable
    (old / "meta.json").write_text(json.dumps(data, indent=2))
    assert main(["run", "--resume", str(old), "--no-report", "--quiet"]) == 0
    rd = RunDir(old)
    assert (old / "trials.csv").read_text().splitlines()[0].split(",") == OLD_HEADER
    assert [(r.trial_id, r.status) for r in rd.trials()] == [
        ("naive-r1", "ok"), ("nocache-r1", "interrupted"), ("nocache-r1", "ok"),
    ]  # fmt: skip
    meta = rd.meta()
    assert (meta.status, meta.schema_version) == ("complete", SCHEMA_VERSION) and meta.resumed_at
    assert (
        load_run(old)
        .notes[0]
        .startswith("1 trial(s) interrupted and run again by --resume (nocache-r1)")
    )


# --- schema 2's dataset and checkpoint runs: their renamed columns --------------------------------

OLD_DATASET = DATA / "run-b4dcc8e-dataset"
OLD_CHECKPOINT = DATA / "run-b4dcc8e-checkpoint"


def test_schema_2_runs_read_their_renamed_columns() -> None:
    """b4dcc8e wrote every kind's columns and a ``read_s`` that meant two things: a dataset's
    epochs, a checkpoint's restore; read now, each is its kind's own column."""
    ds = RunDir(OLD_DATASET)
    assert ds.meta().schema_version == SCHEMA_VERSION and ds.meta().kind == "dataset"
    assert "read_s" in ds.trials_csv.read_text().splitlines()[0].split(",")
    rows = ds.trials()
    assert all(
        isinstance(r, kinds.row_type("dataset")) and r.epochs_s and r.epochs_s > 0 for r in rows
    )
    ck = RunDir(OLD_CHECKPOINT).trials()
    assert all(r.ckpt_read_s and r.ckpt_read_s > 0 and r.ckpt_read_mb_per_s for r in ck)


@pytest.mark.charts
def test_schema_2_runs_report_compare_and_keep_their_prices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    for old in (OLD_DATASET, OLD_CHECKPOINT):
        shutil.copytree(old, results / old.name)
    ds, ck = results / OLD_DATASET.name, results / OLD_CHECKPOINT.name
    # no pricing key in their meta.json: the command they were made with (--gpu-price 2) prices them
    assert "pricing" not in json.loads((ds / "meta.json").read_text())
    assert main(["report", str(ds)]) == 0
    out = capsys.readouterr().out
    assert "a month of training" in out and "$2/GPU-hour" in out, out
    assert main(["report", str(ck), "--format", "json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["measure"]["name"] == "GPU time lost at the best interval"
    again = results / "again"
    shutil.copytree(ds, again)
    compared = build_compare([ds, again], tmp_path / "cmp")
    assert "a month of training" in compared.summaries[compared.labels[0]].measure.name


@pytest.mark.e2e
def test_resuming_a_schema_2_dataset_run_writes_its_old_header(tmp_path: Path) -> None:
    old = tmp_path / "results" / OLD_DATASET.name
    shutil.copytree(OLD_DATASET, old)
    lines = (old / "trials.csv").read_text().splitlines()
    header = lines[0].split(",")
    (old / "trials.csv").write_text("\n".join(lines[:-1]) + "\n")  # its last trial not run yet
    data = json.loads((old / "meta.json").read_text())
    for role in ("target", "tmp"):
        (tmp_path / role).mkdir()
        data["roles"][role]["path"] = str(tmp_path / role)
    data["status"], data["ended_at"] = "interrupted", None
    data["venv_python"] = sys.executable  # the interpreter here, not the one that made it
    (old / "meta.json").write_text(json.dumps(data, indent=2))
    assert main(["run", "--resume", str(old), "--no-report", "--quiet"]) == 0
    text = (old / "trials.csv").read_text().splitlines()
    assert text[0].split(",") == header and len(text) == len(lines)
    last = dict(zip(header, next(csv.reader([text[-1]])), strict=True))
    assert float(last["read_s"]) > 0 and last["status"] == "ok"  # epochs_s, in its old name
