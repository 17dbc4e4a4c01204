"""iobench.files, and every command that writes a file: a link planted at the name is
replaced or refused, never written through (issue 23, item 5, as it was done: links to a
victim file in a received run folder, at an --export path, at `wheels profile --out`)."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.runs import make_run_dir
from helpers.users import runuser_nobody

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


def _foreign_link(link: Path, target: Path) -> Path:
    """``link`` -> ``target``, owned by another user (uid 65534), as one planted in /tmp."""
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    try:
        os.lchown(link, 65534, 65534)
    except PermissionError:
        pytest.skip("changing a link's owner needs root")
    return link


@pytest.mark.charts  # the report draws its charts before it writes them
def test_a_folder_link_of_another_user_on_the_way_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: a folder link another user planted in a sticky folder (where the kernel's
    protected_symlinks is off) took `--export-json /tmp/x/ndir/out.json` into the folder it
    points at, and root overwrote a file there."""
    victims = tmp_path / "victims"
    victims.mkdir(mode=0o700)
    (victims / "out.json").write_text(VICTIM)
    ndir = _foreign_link(tmp_path / "shared" / "ndir", victims)
    with pytest.raises(files.SafetyError, match="a link owned by uid 65534"):
        files.write(ndir / "out.json", "{}")
    with pytest.raises(files.SafetyError):
        files.fresh(ndir / "log.txt")
    with pytest.raises(files.SafetyError), files.appending(ndir / "trials.csv"):
        pass
    assert (victims / "out.json").read_text() == VICTIM and len(list(victims.iterdir())) == 1
    # the re-test's variants: `..` after the link (the kernel follows the link first), and
    # a link of one's own that leads through theirs
    (victims / "inner").mkdir()
    inner = _foreign_link(tmp_path / "shared" / "ndin", victims / "inner")
    with pytest.raises(files.SafetyError, match="ndin: a link owned by uid 65534"):
        files.write(inner / ".." / "out.json", "{}")
    chained = tmp_path / "chained"
    chained.symlink_to(ndir)
    with pytest.raises(files.SafetyError, match="ndir: a link owned by uid 65534"):
        files.write(chained / "out.json", "{}")
    assert (victims / "out.json").read_text() == VICTIM
    # links of one's own (or root's) are a path like any other
    mine = tmp_path / "mine"
    mine.symlink_to(victims)
    files.write(mine / "new.json", "{}")
    assert (victims / "new.json").read_text() == "{}"
    # through the command line: one line, the victim unchanged
    run = make_run_dir(tmp_path / "results")
    rc = main(["report", str(run), "--out", str(ndir)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0 and len(err) == 1 and "owned by uid 65534" in err[0]
    assert (victims / "out.json").read_text() == VICTIM


def test_resuming_a_run_whose_samples_folder_is_a_link_refuses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: a received run whose samples/ linked to another folder had the resumed
    trials' sample files written there, over what it held."""
    import json

    from helpers import standin

    rc, run = standin.run(tmp_path, "", "--repeats", "1")
    assert rc == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "naive-r2.csv").write_text(VICTIM)
    for f in (run / "samples").iterdir():
        f.unlink()
    (run / "samples").rmdir()
    (run / "samples").symlink_to(elsewhere)
    meta = json.loads((run / "meta.json").read_text())
    meta.update(status="interrupted", repeats=2)
    (run / "meta.json").write_text(json.dumps(meta))
    capsys.readouterr()
    assert main(["run", "--resume", str(run), "--no-report"]) != 0
    assert "is a link" in capsys.readouterr().err
    assert (elsewhere / "naive-r2.csv").read_text() == VICTIM


# ------------------------------------------------------------- issue 35: a race on the way
#: user nobody's side: a folder of theirs and a link of theirs to root's private folder,
#: exchanged in a loop (renameat2(RENAME_EXCHANGE): at every instant one name is a folder)
EXCHANGER = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
shared, secret = sys.argv[1], sys.argv[2]
a, b = os.path.join(shared, "rep"), os.path.join(shared, ".lnk")
os.mkdir(a)
os.symlink(secret, b)
print("ready", flush=True)
end = time.time() + 300
while time.time() < end:
    if libc.renameat2(-100, a.encode(), -100, b.encode(), 2) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")
"""


@pytest.fixture
def exchanging(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(shared/rep, root's private folder): shared is a sticky folder of root's, as /tmp;
    user nobody swaps rep, a folder of theirs, with their link to the private folder."""
    secret = tmp_path / "secret"
    secret.mkdir(mode=0o700)
    for name in ("summary.json", "summary.csv"):
        (secret / name).write_text(VICTIM)
    shared = Path(tempfile.mkdtemp(prefix="iobench-shared-", dir="/tmp"))
    os.chmod(shared, 0o1777)
    attacker = subprocess.Popen(
        [*runuser_nobody(), "-c", EXCHANGER, str(shared), str(secret)],
        stdout=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        assert attacker.stdout is not None and attacker.stdout.readline() == "ready\n"
        yield shared / "rep", secret
        assert attacker.poll() is None  # it exchanged all along
    finally:
        os.killpg(attacker.pid, signal.SIGKILL)
        attacker.wait()
        shutil.rmtree(shared, ignore_errors=True)


def test_a_folder_exchanged_with_a_link_in_a_loop_never_takes_a_write_elsewhere(
    exchanging: tuple[Path, Path],
) -> None:
    """Before: ``check_links`` looked at the path, then ``write`` opened it again by name;
    between the two the folder became the link (3 of 16 runs of ``report --out``). Now each
    component is opened once, without following, and judged on its descriptor: every write
    is refused (the folder and the link are nobody's), and the private folder is untouched."""
    rep, secret = exchanging
    refused, seen = 0, set()
    for i in range(1000):
        seen.add(stat.S_ISLNK(os.lstat(rep).st_mode))
        time.sleep(0.0002)  # the attacker's turn, on a busy machine too
        with contextlib.suppress(files.SafetyError):
            files.write(rep / ("summary.json" if i % 2 else "summary.csv"), "{}\n")
            continue
        refused += 1
    assert seen == {True, False}  # the exchange ran all along
    assert sorted(p.name for p in secret.iterdir()) == ["summary.csv", "summary.json"]
    assert all(p.read_text() == VICTIM for p in secret.iterdir())
    assert refused == 1000


@pytest.mark.charts  # the report draws its charts
def test_report_out_through_an_exchange_loop_refuses_in_one_line(
    exchanging: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Medium as it was done: ``report GOOD --out shared/rep`` 16 times."""
    rep, secret = exchanging
    run = make_run_dir(tmp_path / "results")
    for _ in range(16):
        assert main(["report", str(run), "--out", str(rep)]) != 0
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "65534" in err[0], err
    assert all(p.read_text() == VICTIM for p in secret.iterdir())
    assert len(list(secret.iterdir())) == 2
