"""Safety: iobench deletes only inside its own sentinel-marked scratch, never through symlinks."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.files import DATA

from iobench.__main__ import main
from iobench.errors import SafetyError, UsageError
from iobench.system.scratch import SCRATCH_NAME, Scratch, check_role_dir, remove, remove_scratch


def test_dangerous_targets_refused(tmp_path: Path) -> None:
    for bad in (Path("/"), Path.home(), Path("/usr"), Path("/etc"), Path("/usr/lib")):
        with pytest.raises(SafetyError):
            check_role_dir("target", bad)
    with pytest.raises(UsageError, match="does not exist"):
        check_role_dir("target", tmp_path / "missing")
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(UsageError, match="not a directory"):
        check_role_dir("target", f)
    assert check_role_dir("tmp", Path("/dev/shm")) == Path("/dev/shm")


def test_user_files_and_outside_symlinks_survive(tmp_path: Path) -> None:
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "data.txt").write_text("keep me")
    target = tmp_path / "target"
    target.mkdir()
    (target / "user-file").write_text("mine")
    scratch = Scratch(target).ensure()
    trial = scratch.trial_dir("t1")
    (trial / "venv").mkdir()
    (trial / "venv" / "link-to-dir").symlink_to(outside)
    (trial / "venv" / "link-to-file").symlink_to(outside / "data.txt")
    (trial / "venv" / "ro").mkdir()
    (trial / "venv" / "ro" / "f").write_text("x")
    os.chmod(trial / "venv" / "ro", 0o500)
    remove(trial)
    assert not trial.exists()
    assert (outside / "data.txt").read_text() == "keep me"
    assert (target / "user-file").read_text() == "mine"
    # a symlinked trial folder pointing outside: the link goes, the target stays
    (scratch.root / "t2").symlink_to(outside)
    remove(scratch.root / "t2")
    assert (outside / "data.txt").exists()
    # nothing outside a scratch folder can be removed
    with pytest.raises(SafetyError):
        remove(outside)
    with pytest.raises(SafetyError):
        remove(target / "user-file")
    # a scratch folder reached through a symlink from elsewhere is not trusted for paths outside it
    with pytest.raises(SafetyError):
        remove(scratch.root / ".." / "user-file")
    assert (target / "user-file").exists()


def test_foreign_scratch_name_is_not_ours(tmp_path: Path) -> None:
    (tmp_path / SCRATCH_NAME).mkdir()
    (tmp_path / SCRATCH_NAME / "theirs").write_text("x")
    with pytest.raises(SafetyError, match="no iobench sentinel"):
        Scratch(tmp_path).ensure()
    with pytest.raises(SafetyError):
        remove(tmp_path / SCRATCH_NAME / "theirs")
    with pytest.raises(SafetyError):
        remove_scratch(tmp_path / SCRATCH_NAME)
    assert (tmp_path / SCRATCH_NAME / "theirs").exists()


def test_clean_command_removes_leftovers_only(tmp_path: Path, capsys) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("k")
    target = tmp_path / "target"
    target.mkdir()
    (target / "mine").write_text("m")
    scratch = Scratch(target, "crashed-run").ensure()
    left = scratch.trial_dir("naive-r1")
    assert left == target / SCRATCH_NAME / "crashed-run" / "naive-r1"
    (left / "venv").mkdir()
    (left / "venv" / "out").symlink_to(outside)
    assert main(["clean", str(target), "--dry-run"]) == 0
    assert "crashed-run" in capsys.readouterr().out
    assert left.exists()
    assert main(["clean", str(target)]) == 0
    assert not (target / SCRATCH_NAME).exists()
    assert (target / "mine").exists() and (outside / "keep").exists()


def test_clean_spares_the_folder_of_a_live_run(tmp_path: Path, capsys) -> None:
    import json

    tmp_role = tmp_path / "tmp"
    tmp_role.mkdir()
    live = Scratch(tmp_role, "live-run").ensure().claim()  # owned by this (alive) process
    (live.trial_dir("naive-r1") / "venv").mkdir()
    dead = Scratch(tmp_role, "crashed-run").ensure().claim()
    owner = json.loads((dead.run_root / ".iobench-owner").read_text())
    owner["pid"] = 2**22 + 1  # no such process
    (dead.run_root / ".iobench-owner").write_text(json.dumps(owner))
    assert main(["clean", str(tmp_role)]) == 0
    out = capsys.readouterr().out
    assert "kept what live runs use" in out and "live-run" in out
    assert (live.run_root / "naive-r1" / "venv").is_dir()
    assert not dead.run_root.exists()
    assert (tmp_role / SCRATCH_NAME / ".iobench-sentinel").exists()  # still marked as ours


# ------------------------------------------------------------------ issue 9 item 1: a second user
# the sentinel's text is public: the attacker writes a valid one
NOBODY_PLANTS = """
import json, os, sys
root = os.path.join(sys.argv[1], sys.argv[2])
os.mkdir(root, 0o755)
with open(os.path.join(root, sys.argv[3]), "w") as f:
    f.write(json.dumps({"magic": sys.argv[4]}))
os.mkdir(os.path.join(root, "run-of-root"))
print(os.getuid(), flush=True)
"""


def _runuser_nobody() -> list[str]:
    """The command prefix that runs a system Python as user nobody (the test venv may sit
    under a home folder nobody cannot enter)."""
    if (
        os.geteuid() != 0
        or shutil.which("runuser") is None
        or not os.access("/usr/bin/python3", os.X_OK)
    ):
        pytest.skip("needs root, runuser and /usr/bin/python3 to act as a second user")
    return ["runuser", "-u", "nobody", "--", "/usr/bin/python3"]


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A world-writable sticky folder like /tmp, reachable by other users."""
    path = Path(tempfile.mkdtemp(prefix="iobench-shared-", dir="/tmp"))
    os.chmod(path, 0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_scratch_planted_by_another_user_is_refused(
    shared_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ensure() adopted nobody's folder because its sentinel was valid (root code execution)."""
    from iobench.system.scratch import _SENTINEL_MAGIC, SENTINEL

    argv = [
        *_runuser_nobody(),
        "-c",
        NOBODY_PLANTS,
        str(shared_tmp),
        SCRATCH_NAME,
        SENTINEL,
        _SENTINEL_MAGIC,
    ]
    out = subprocess.run(argv, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "65534"
    root = shared_tmp / SCRATCH_NAME
    assert root.stat().st_uid == 65534
    with pytest.raises(
        SafetyError, match=r"belongs to user nobody \(uid 65534\), not to you"
    ) as err:
        Scratch(shared_tmp, "run-1").ensure()
    assert "\n" not in str(err.value)
    with pytest.raises(SafetyError):
        remove(root / "run-of-root")
    with pytest.raises(SafetyError, match="belongs to user nobody"):
        remove_scratch(root)
    assert main(["clean", str(shared_tmp)]) != 0
    assert "belongs to user nobody" in capsys.readouterr().err
    assert (root / "run-of-root").is_dir()  # nothing of theirs deleted either


def test_another_user_cannot_enter_our_scratch(shared_tmp: Path) -> None:
    scratch = Scratch(shared_tmp, "run-1").ensure().claim()
    trial = scratch.trial_dir("t1")
    mode = stat.S_IMODE(scratch.root.stat().st_mode)
    assert scratch.root.stat().st_uid == os.geteuid() and mode & 0o022 == 0, oct(mode)
    attack = f"import os; os.rename({str(trial)!r}, {str(trial)!r} + '.x')"
    done = subprocess.run([*_runuser_nobody(), "-c", attack], capture_output=True, text=True)
    assert done.returncode != 0 and "Permission denied" in done.stderr
    assert trial.is_dir()


def test_scratch_is_checked_on_every_use(tmp_path: Path) -> None:
    role = tmp_path / "role"
    role.mkdir()
    scratch = Scratch(role, "run-1").ensure().claim()
    os.chmod(scratch.root, 0o777)  # made writable by others after creation
    with pytest.raises(SafetyError, match=r"writable by other users \(mode 0777\)"):
        scratch.trial_dir("t1")
    with pytest.raises(SafetyError):
        remove(scratch.run_root)
    os.chmod(scratch.root, 0o755)  # 0755 is fine: others may read, not write
    assert scratch.trial_dir("t1").is_dir()
    # swapped for a symlink to a look-alike folder: refused, not followed
    elsewhere = tmp_path / "elsewhere"
    scratch.root.rename(elsewhere)
    scratch.root.symlink_to(elsewhere)
    with pytest.raises(SafetyError, match="is a symlink"):
        scratch.trial_dir("t2")
    with pytest.raises(SafetyError, match="is a symlink"):
        Scratch(role, "run-2").ensure()
    assert not (elsewhere / "run-1" / "t2").exists()


def test_role_folder_writable_by_others_must_be_sticky(tmp_path: Path) -> None:
    role = tmp_path / "open"
    role.mkdir()
    os.chmod(role, 0o777)
    with pytest.raises(SafetyError, match="writable by other users and not sticky"):
        Scratch(role).ensure()
    assert not (role / SCRATCH_NAME).exists()
    os.chmod(role, 0o1777)  # like /tmp: others cannot rename what is ours
    assert Scratch(role).ensure().root.is_dir()


# ------------------------------------------------------------------ clean: live processes and mounts
def test_clean_spares_folders_a_live_process_works_in(tmp_path: Path) -> None:
    role = tmp_path / "role"
    role.mkdir()
    crashed = Scratch(role, "crashed").ensure().claim()
    (crashed.run_root / ".iobench-owner").unlink()  # its owner record is lost
    busy = crashed.trial_dir("t1")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], cwd=busy)
    try:
        deadline = time.monotonic() + 5
        while (
            os.path.realpath(f"/proc/{proc.pid}/cwd") != str(busy.resolve())
            and time.monotonic() < deadline
        ):
            time.sleep(0.01)
        n, kept = remove_scratch(crashed.root)
        assert n == 0 and kept and f"live process {proc.pid}" in kept[0]
        assert busy.is_dir()
    finally:
        proc.kill()
        proc.wait()
    n, kept = remove_scratch(crashed.root)
    assert kept == [] and not crashed.root.exists()


@pytest.mark.lab
def test_removal_never_descends_into_a_mount(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to mount")
    role = tmp_path / "role"
    role.mkdir()
    scratch = Scratch(role, "run-1").ensure()  # not claimed: a crashed run's leftovers
    trial = scratch.trial_dir("t1")
    mnt = trial / "venv"
    mnt.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "iobench-test", str(mnt)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount tmpfs here: {done.stderr.decode().strip()}")
    try:
        (mnt / "precious").write_text("on another filesystem")
        with pytest.raises(SafetyError, match="is mounted there"):
            remove(trial)
        n, kept = remove_scratch(scratch.root)
        assert any("mounted inside" in k for k in kept)
        assert (mnt / "precious").read_text() == "on another filesystem"
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
    remove(trial)
    assert not trial.exists()


@pytest.mark.e2e
def test_iobench_run_refuses_a_tmp_scratch_planted_by_another_user(
    shared_tmp: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The attack end to end: nobody pre-creates /tmp/.iobench-scratch; `iobench run` as root
    stops in one line before any installer runs in it."""
    from iobench.system.scratch import _SENTINEL_MAGIC, SENTINEL

    argv = [
        *_runuser_nobody(),
        "-c",
        NOBODY_PLANTS,
        str(shared_tmp),
        SCRATCH_NAME,
        SENTINEL,
        _SENTINEL_MAGIC,
    ]
    subprocess.run(argv, capture_output=True, text=True, check=True)
    target = tmp_path / "target"
    target.mkdir()
    tiny = DATA / "tiny.toml"
    rc = main(
        [
            "run",
            "--scenario",
            str(tiny),
            "--configs",
            "venv-on-tmp",
            "--target",
            str(target),
            "--tmp",
            str(shared_tmp),
            "--results",
            str(tmp_path / "results"),
            "--no-report",
            "--quiet",
        ]
    )
    err = capsys.readouterr().err.strip()
    assert rc != 0
    assert (
        err.count("\n") == 0
        and "--tmp: " in err
        and "belongs to user nobody (uid 65534), not to you" in err
    ), err
    planted = shared_tmp / SCRATCH_NAME
    assert sorted(p.name for p in planted.iterdir()) == sorted(
        [SENTINEL, "run-of-root"]
    )  # nothing of ours in it
    assert not (tmp_path / "results").exists() or not any(
        (tmp_path / "results").iterdir()
    )  # a refused run leaves nothing


def test_an_empty_scratch_folder_goes_but_one_another_run_uses_stays(tmp_path: Path) -> None:
    """A clean run leaves no empty `.iobench-scratch`; one that holds another run's folder
    (or anything else) is kept, sentinel and all."""
    mine = Scratch(tmp_path, "run-a").ensure().claim()
    other = Scratch(tmp_path, "run-b").ensure().claim()
    remove(mine.run_root)
    mine.drop_if_empty()
    assert other.run_root.is_dir() and (mine.root / ".iobench-sentinel").exists()
    remove(other.run_root)
    other.drop_if_empty()
    assert not mine.root.exists()
    other.drop_if_empty()  # already gone: nothing to do
