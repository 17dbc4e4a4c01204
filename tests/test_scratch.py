"""Safety: iobench deletes only inside its own sentinel-marked scratch, never through symlinks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from iobench.__main__ import main
from iobench.errors import SafetyError, UsageError
from iobench.scratch import SCRATCH_NAME, Scratch, check_role_dir, remove, remove_scratch


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
