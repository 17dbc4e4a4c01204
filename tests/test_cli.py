"""The command line in-process: one clear line and a non-zero exit for bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TINY

from iobench import __version__
from iobench.__main__ import main


def _err(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["run", "--target", "/nonexistent/x"], "--target: /nonexistent/x does not exist"),
        (["run", "--tmp", "/etc/hostname"], "--tmp: /etc/hostname is not a directory"),
        (["run", "--target", "/"], "refusing the root folder"),
        (["run", "--repeats", "0"], "expected a whole number >= 1"),
        (["run", "--sample-hz", "-5"], "expected a number > 0"),
        (["run", "--scenario", "nope"], "unknown scenario 'nope'"),
        (["run", "--scenario", str(TINY), "--configs", "naive,zzz"], "unknown config 'zzz'"),
        (["run", "--path", "bad"], "expected NAME=DIR"),
        (["run", "--wheelhouse", "/nonexistent"], "--wheelhouse: /nonexistent is not a folder"),
        (["bogus"], "invalid choice"),
    ],
)
def test_bad_input_one_line(argv: list[str], fragment: str, capsys, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    rc = main(argv)
    err = _err(capsys)
    assert rc == 2
    assert fragment in err, err
    assert len(err.strip().splitlines()) == 1


def test_read_only_target(tmpfs, tmp_path: Path, capsys) -> None:
    ro = tmpfs(size="16m", name="ro")
    subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
    rc = main(["run", "--target", str(ro), "--scenario", str(TINY), "--results", str(tmp_path / "r")])
    err = _err(capsys)
    assert rc == 2 and "not writable" in err and str(ro) in err
    assert not (tmp_path / "r").exists()


def test_not_enough_space(tmpfs, tmp_path: Path, capsys) -> None:
    small = tmpfs(size="2m", name="small")
    rc = main(["run", "--target", str(small), "--scenario", str(TINY), "--results", str(tmp_path / "r")])
    err = _err(capsys)
    assert rc == 2 and "MB free" in err and "needs about" in err


def test_missing_role_for_scenario(tmp_path: Path, capsys) -> None:
    s = tmp_path / "s.toml"
    s.write_text(TINY.read_text().replace('wheels = "tiny-profile.toml"', f'wheels = "{TINY.parent}/tiny-profile.toml"').replace('venv = "tmp"', 'venv = "local"', 1))
    rc = main(["run", "--scenario", str(s), "--target", str(tmp_path), "--results", str(tmp_path / "r")])
    assert rc == 2 and "no --path local=DIR" in _err(capsys)


def test_version_and_module_entry() -> None:
    out = subprocess.run([sys.executable, "-m", "iobench", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == f"iobench {__version__}"
    out = subprocess.run(["iobench", "--version"], capture_output=True, text=True)
    assert out.stdout.strip() == f"iobench {__version__}"


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["run", "--index-url", "http://127.0.0.1:9/simple/"], "synthetic wheels"),
        (["run", "--sample-hz", "1000"], "at most 100"),
        (["run", "--lock-wait", "-5"], "--lock-wait"),
        (["run", "--python", "/nonexistent/python"], "no such interpreter"),
        (["run", "--resume", "x", "--scenario", "smoke"], "drop --scenario"),
    ],
)
def test_bad_combinations_one_line(argv: list[str], fragment: str, capsys, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = _err(capsys)
    assert fragment in err and len(err.strip().splitlines()) == 1, err


def test_credentials_never_reach_meta(tmp_path: Path) -> None:
    import json

    from conftest import only_run_dir

    from iobench.redact import redact

    assert redact("https://user:s3cret@host/simple") == "https://***@host/simple"
    rc = main(["run", "--scenario", str(TINY), "--configs", "naive", "--target", str(tmp_path),
               "--results", str(tmp_path / "r"), "--no-report", "--quiet", "--label", "x",
               "--package", "tiny-core @ https://user:s3cret@example.invalid/tiny.whl"])
    assert rc == 1  # the trial fails (no such host), and that is recorded
    meta = (only_run_dir(tmp_path / "r") / "meta.json").read_text()
    assert "s3cret" not in meta and "***@example.invalid" in meta
    assert json.loads(meta)["scenario"]["packages"] == ["tiny-core @ https://***@example.invalid/tiny.whl"]
