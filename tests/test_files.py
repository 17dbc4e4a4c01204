"""iobench.files, and every command that writes a file: a link planted at the name is
replaced or refused, never written through (issue 23, item 5, as it was done: links to a
victim file in a received run folder, at an --export path, at `wheels profile --out`)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest
from helpers.runs import make_run_dir

from iobench import files
from iobench.__main__ import main

VICTIM = "a system file iobench must never overwrite\n"


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim.conf"
    path.write_text(VICTIM)
    return path


def _planted(link: Path, victim: Path) -> Path:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(victim)
    return link


def test_write_replaces_a_link_and_leaves_its_target(tmp_path: Path, victim: Path) -> None:
    link = _planted(tmp_path / "out.json", victim)
    files.write(link, "{}\n")
    assert victim.read_text() == VICTIM
    assert not link.is_symlink() and link.read_text() == "{}\n"
    assert stat.S_IMODE(link.stat().st_mode) == files.PRIVATE


def test_write_is_private_whatever_the_umask_and_leaves_no_temporary(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        files.write(tmp_path / "a.csv", "x\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.csv").stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["a.csv"]


def test_a_full_disk_keeps_the_old_file_names_it_and_leaves_no_temporary(tmpfs) -> None:  # type: ignore[no-untyped-def]
    disk = tmpfs(size="64k")
    (disk / "summary.json").write_text("old\n")
    with pytest.raises(OSError) as info:
        files.write(disk / "summary.json", "x" * 200_000)
    assert info.value.errno == errno.ENOSPC
    assert str(disk / "summary.json") in str(info.value)
    assert (disk / "summary.json").read_text() == "old\n"
    assert [p.name for p in disk.iterdir()] == ["summary.json"]


def test_appending_refuses_a_link(tmp_path: Path, victim: Path) -> None:
    link = _planted(tmp_path / "trials.csv", victim)
    with pytest.raises(OSError) as info, files.appending(link) as fh:
        fh.write("row\n")
    assert info.value.errno == errno.ELOOP and str(link) in str(info.value)
    assert victim.read_text() == VICTIM


@pytest.mark.charts
def test_report_of_a_received_run_folder_writes_through_none_of_its_links(
    tmp_path: Path, victim: Path
) -> None:
    """`iobench report RUN_DIR` on a folder someone sent: its report.html, summary.* and
    PNGs were links to a system file; root overwrote the file."""
    run = make_run_dir(tmp_path / "received")
    names = ["report.html", "summary.csv", "summary.json", "time_to_ready.png"]
    for name in names:
        _planted(run / name, victim)
    assert main(["report", str(run)]) == 0
    assert victim.read_text() == VICTIM
    for name in names:
        assert not (run / name).is_symlink() and (run / name).stat().st_size > 0
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in run.glob("*.png"))


@pytest.mark.charts  # the run's report draws its charts
def test_exports_and_profiles_replace_a_planted_link(tmp_path: Path, victim: Path) -> None:
    from helpers import standin

    out = tmp_path / "shared"
    links = {fmt: _planted(out / f"x.{fmt}", victim) for fmt in ("json", "markdown", "csv")}
    argv = standin.argv(tmp_path, standin.scenario(tmp_path, repeats=1), "--no-probe")
    argv.remove("--no-report")  # the exports need the report
    for fmt, link in links.items():
        argv += [f"--export-{fmt}", str(link)]
    assert main(argv) == 0
    assert victim.read_text() == VICTIM
    assert all(not p.is_symlink() and p.read_text() for p in links.values())

    from helpers.files import TINY_PROFILE

    assert main(["wheels", "synth", str(TINY_PROFILE), "--out", str(tmp_path / "wh")]) == 0
    profile = _planted(out / "profile.toml", victim)
    wheels = sorted(map(str, (tmp_path / "wh").glob("*.whl")))
    assert main(["wheels", "profile", *wheels, "--shape-only", "--out", str(profile)]) == 0
    assert victim.read_text() == VICTIM and "[profile]" in profile.read_text()


def test_resuming_a_run_whose_trials_csv_is_a_link_refuses_it(
    tmp_path: Path, victim: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Appends cannot be atomic renames: a link at trials.csv is refused, not followed."""
    from helpers import standin

    rc, run = standin.run(tmp_path, "", "--repeats", "1")
    assert rc == 0
    (run / "trials.csv").unlink()
    _planted(run / "trials.csv", victim)
    import json

    meta = json.loads((run / "meta.json").read_text())
    meta["status"] = "interrupted"
    (run / "meta.json").write_text(json.dumps(meta))
    capsys.readouterr()
    rc = main(["run", "--resume", str(run), "--no-report"])
    assert rc != 0
    assert victim.read_text() == VICTIM
    assert "trials.csv" in capsys.readouterr().err


def test_fresh_removes_a_planted_link_and_makes_an_empty_private_file(
    tmp_path: Path, victim: Path
) -> None:
    """pip's ``--log`` opens its path for appending and follows a link: iobench hands it a
    file it made itself."""
    log = _planted(tmp_path / "logs" / "naive-r1.log", victim)
    assert files.fresh(log) == log
    st = os.lstat(log)
    assert stat.S_ISREG(st.st_mode) and st.st_size == 0 and stat.S_IMODE(st.st_mode) == 0o600
    assert victim.read_text() == VICTIM
    (tmp_path / "logs" / "dir.log").mkdir()
    with pytest.raises(OSError, match="dir.log"):
        files.fresh(tmp_path / "logs" / "dir.log")


@pytest.mark.e2e
def test_a_resumed_pip_trial_writes_its_log_through_no_planted_link(
    tmp_path: Path, victim: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: a link planted at ``logs/naive-r1.log`` of a run folder to be resumed had pip
    append its whole log to the link's target (the hostile round after the fix)."""
    import csv
    import json

    (tmp_path / "t").mkdir()
    (tmp_path / "tmp").mkdir()
    argv = ["run", "--scenario", "smoke", "--configs", "naive", "--repeats", "1", "--no-report",
            "--target", str(tmp_path / "t"), "--tmp", str(tmp_path / "tmp"),
            "--results", str(tmp_path / "results"), "--quiet"]  # fmt: skip
    assert main(argv) == 0
    (run,) = (tmp_path / "results").iterdir()
    with (run / "trials.csv").open() as fh:
        header = next(csv.reader(fh))
    (run / "trials.csv").write_text(",".join(header) + "\n")  # the trial is to run again
    meta = json.loads((run / "meta.json").read_text())
    meta["status"] = "interrupted"
    (run / "meta.json").write_text(json.dumps(meta))
    (run / "logs" / "naive-r1.log").unlink()
    _planted(run / "logs" / "naive-r1.log", victim)
    assert main(["run", "--resume", str(run), "--no-report", "--quiet"]) == 0, capsys.readouterr()
    assert victim.read_text() == VICTIM
    log = run / "logs" / "naive-r1.log"
    assert not log.is_symlink() and "smoke" in log.read_text()
