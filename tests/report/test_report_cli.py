"""The `report` command: output formats and bad input answered in one line."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest
from helpers import runs as rf
from helpers.reports import run_cli

from iobench.cli.report import register
from iobench.errors import RunDirError, UsageError
from iobench.report.load import load_run


def test_cli_report_of_a_real_run(real_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["report", str(real_run), "--gpu", "rtx 4090", "--format", "json"]) == (0, "")
    data = json.loads(capsys.readouterr().out)
    assert data["format"] == "iobench-summary" and {c["config"] for c in data["configs"]} == {
        "naive",
        "nocache",
    }


@pytest.mark.charts
def test_cli_report_ok(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["report", str(run_dir), "--gpu", "H200", "--starts-per-month", "100"]) == (
        0,
        "",
    )
    out = capsys.readouterr().out
    assert "uv-local is 16× faster than naive" in out and "1x H200" in out and "100 starts" in out
    assert (run_dir / "report.html").is_file()


@pytest.mark.parametrize(
    ("case", "extra", "error", "match"),
    [
        ("not-a-run", [], UsageError, r"not-a-run is not an iobench run folder \(no meta.json"),
        ("missing", [], UsageError, r"missing: no such folder"),
        ("all-failed", [], RunDirError, r"no successful trial to report \(4 failed\); first error: ERROR: Could not install"),
        ("ok", ["--gpu", "Voodoo5"], UsageError, r"unknown --gpu 'Voodoo5' \(known: RTX 4090, .*H100 SXM, H200.*p5\.48xlarge"),
        ("ok", ["--gpu-price", "-2"], UsageError, r"--gpu-price must not be negative \(got -2\)"),
        ("ok", ["--gpus", "0"], UsageError, r"--gpus must be a whole number of at least 1"),
        ("ok", ["--format", "yaml"], UsageError, r"--format must be one of table, markdown, json"),
    ],
)  # fmt: skip
def test_cli_bad_input_is_one_line_and_non_zero(
    tmp_path: Path, case: str, extra: list[str], error: type, match: str
) -> None:
    paths = {
        "not-a-run": lambda: rf.make_not_a_run(tmp_path),
        "missing": lambda: tmp_path / "missing",
        "all-failed": lambda: rf.make_all_failed(tmp_path),
        "ok": lambda: rf.make_run_dir(tmp_path),
    }
    target = paths[case]()
    for command in ("report", "compare"):
        argv = [command, str(target)] + ([str(target)] if command == "compare" else []) + extra
        with pytest.raises(error) as err:
            parser = argparse.ArgumentParser()
            sub = parser.add_subparsers(dest="command", required=True)
            register(sub)
            args = parser.parse_args(argv)
            args.func(args)
        message = str(err.value)
        assert re.search(match, message), message
        assert "\n" not in message and "Traceback" not in message
        assert run_cli(argv)[0] == error("x").exit_code


def test_validation_happens_before_any_reading(tmp_path: Path) -> None:
    # a bad number is reported even though the folder does not exist either
    code, message = run_cli(["report", str(tmp_path / "nowhere"), "--gpu-price", "-1"])
    assert code == 2 and message.startswith("--gpu-price")


@pytest.mark.parametrize(
    ("damage", "match"),
    [
        (lambda d: (d / "meta.json").write_text("{not json"), r"meta.json: not valid JSON \(line 1"),
        (lambda d: (d / "meta.json").write_text('{"schema_version": 7}'), r"schema_version 7 is not supported .*newer iobench"),
        (lambda d: (d / "meta.json").write_text('{"run_id": "x"}'), r"no schema_version"),
        (lambda d: (d / "meta.json").write_text("[1, 2]"), r"expected a JSON object"),
        (lambda d: (d / "trials.csv").unlink(), r"no trials.csv yet"),
        (lambda d: (d / "trials.csv").write_text(""), r"trials.csv: empty"),
        (lambda d: (d / "trials.csv").write_text("config,status\nnaive,ok\n"), r"missing column\(s\) trial_id, time_to_ready_s"),
    ],
)  # fmt: skip
def test_damaged_run_directories_name_the_folder_and_file(
    run_dir: Path, damage, match: str
) -> None:
    damage(run_dir)
    with pytest.raises(RunDirError, match=match) as err:
        load_run(run_dir)
    assert str(run_dir) in str(err.value)


def test_results_folder_instead_of_a_run_gets_a_hint(run_dir: Path) -> None:
    with pytest.raises(
        RunDirError, match=r"it contains run directories \(20261130-120000-pod-a-torch\): pass one"
    ):
        load_run(run_dir.parent)
