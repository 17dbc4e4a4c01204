"""Safety: iobench deletes only inside its own sentinel-marked scratch, never through symlinks."""

from __future__ import annotations

import json
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
from helpers import standin
from helpers.files import DATA, only_run_dir

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
    # runuser lives in /usr/sbin, which a plain PATH (the suite under env -i) leaves out
    runuser = shutil.which("runuser", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
    if os.geteuid() != 0 or runuser is None or not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("needs root, runuser and /usr/bin/python3 to act as a second user")
    return [runuser, "-u", "nobody", "--", "/usr/bin/python3"]


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


# ------------------------------------------------------------- issue 23 items 1-2: StrictModes
def _nobody_owns(folder: Path) -> Path:
    _runuser_nobody()  # skips where there is no second user to be
    folder.mkdir(parents=True, exist_ok=True)
    os.chown(folder, 65534, 65534)
    os.chmod(folder, 0o755)
    return folder


def test_a_role_another_user_owns_is_refused_naming_the_owner_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: a --target owned by uid 65534 (mode 0755) was accepted; its owner could rename
    root's scratch folder mid-trial, plant their own, and have root run their venv's python."""
    role = _nobody_owns(tmp_path / "theirs")
    rc = main(standin.argv(tmp_path, standin.scenario(tmp_path), "--target", str(role)))
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) <= 2, err
    assert f"{role} belongs to user nobody (uid 65534)" in err and "--trust-owner nobody" in err
    assert not (role / SCRATCH_NAME).exists() and not (tmp_path / "results").exists()
    # a folder of theirs above the role: the same refusal (they could swap the whole role)
    inner = role / "mine"
    inner.mkdir()
    assert main(standin.argv(tmp_path, tmp_path / "standin.toml", "--tmp", str(inner))) == 2
    assert f"{role} belongs to user nobody" in capsys.readouterr().err
    assert not (inner / SCRATCH_NAME).exists()


def test_a_writable_folder_above_a_role_is_refused_unless_sticky(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: only the role folder's own mode was looked at; a world-writable, non-sticky
    folder above it let its users swap the whole role folder during a trial."""
    above = tmp_path / "open"
    role = above / "role"
    role.mkdir(parents=True)
    os.chmod(above, 0o777)
    path = standin.scenario(tmp_path)
    assert main(standin.argv(tmp_path, path, "--target", str(role))) == 2
    err = capsys.readouterr().err
    assert f"{above} is writable by other users and not sticky (mode 0777)" in err
    os.chmod(above, 0o1777)  # sticky, as /tmp: others cannot rename what is not theirs
    assert main(standin.argv(tmp_path, path, "--target", str(role), "--quiet")) == 0


def test_a_trusted_owner_s_role_is_used_and_the_trust_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    role = _nobody_owns(tmp_path / "theirs")
    path = standin.scenario(tmp_path, repeats=1)
    rc = main(
        standin.argv(tmp_path, path, "--target", str(role), "--trust-owner", "nobody", "--quiet")
    )
    run = only_run_dir(tmp_path / "results")
    assert rc == 0 and json.loads((run / "meta.json").read_text())["trusted_owners"] == ["nobody"]
    # the run folder's word is not trust (it may be received, or edited): said again, it is
    assert main(["run", "--resume", str(run), "--no-report"]) == 2
    assert "--trust-owner nobody" in capsys.readouterr().err
    assert main(["run", "--resume", str(run), "--no-report", "--trust-owner", "nobody"]) == 0
    assert (
        main(standin.argv(tmp_path, path, "--target", str(role), "--trust-owner", "no-such-user"))
        == 2
    )


def test_a_run_folder_another_user_owns_is_not_resumed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The second re-test: root resumed a run folder uid 65534 owned, writing its logs there;
    that user could swap a log for a link between iobench's making it and pip's appending."""
    path = standin.scenario(tmp_path, repeats=1)
    assert main(standin.argv(tmp_path, path, "--quiet")) == 0
    run = only_run_dir(tmp_path / "results")
    meta = json.loads((run / "meta.json").read_text())
    meta.update(status="interrupted", repeats=2)
    (run / "meta.json").write_text(json.dumps(meta))
    _nobody_owns(run)
    capsys.readouterr()
    assert main(["run", "--resume", str(run), "--no-report"]) == 2
    err = capsys.readouterr().err
    assert "--resume" in err and "belongs to" in err and "could swap the run's logs" in err


# ------------------------------------------------------------- issue 23 item 3: mounts inside
def _bind(source: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "--bind", str(source), str(target)], check=True)


def _unmount_all_under(folder: Path) -> None:
    real = os.path.realpath(folder)
    for line in reversed(Path("/proc/self/mounts").read_text().splitlines()):
        point = line.split()[1].encode().decode("unicode_escape")
        if point.startswith(real + "/"):
            subprocess.run(["umount", "-l", point], check=False)


@pytest.mark.lab
def test_a_bind_mount_inside_a_trial_folder_is_never_deleted_through(tmp_path: Path) -> None:
    """Before: a user's folder bind-mounted inside a trial folder went into the run's trash
    with it, and its removal could walk into it (32 entries -> 2 in the hostile test)."""
    from iobench.system.removal import TRASH, Remover

    user = tmp_path / "user-data"
    user.mkdir()
    for i in range(32):
        (user / f"f{i}").write_text("mine")
    scratch = Scratch(tmp_path / "role", "run-1")
    (tmp_path / "role").mkdir()
    scratch.ensure().claim()
    trial = scratch.trial_dir("t1")
    _bind(user, trial / "venv" / "lib" / "site packages")  # a space, escaped in the mount table
    try:
        remover = Remover()
        said = remover.defer(trial, scratch.run_root / TRASH, scratch.root)
        assert "is mounted inside; left in place" in said and trial.is_dir()  # not moved
        assert not (scratch.run_root / TRASH).exists() or not list(
            (scratch.run_root / TRASH).iterdir()
        )
        with pytest.raises(SafetyError, match="is mounted there"):
            remove(trial)
        assert remover.remove(trial, scratch.root) != ""
        (scratch.run_root / ".iobench-owner").unlink()  # its run is gone: `clean` may act
        count, kept = remove_scratch(scratch.root)
        assert any("mounted inside" in k for k in kept), kept
    finally:
        _unmount_all_under(tmp_path / "role")
    assert len(list(user.iterdir())) == 32  # every one of the user's files is still there


@pytest.mark.lab
@pytest.mark.parametrize("kind", ["tmpfs", "bind mount of the same disk"])
def test_a_deleting_walk_never_leaves_its_filesystem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """The walk's own check: a mount the mount table did not show (one made between the
    look and the walk) stops the walk there, and what is on it is untouched. A bind mount of
    the same disk keeps the device number; its mount id tells it apart."""
    from iobench.system import scratch as scratch_module

    role = tmp_path / "role"
    role.mkdir()
    s = Scratch(role, "run-1").ensure().claim()
    trial = s.trial_dir("t1")
    inner = trial / "venv" / "deep"
    inner.mkdir(parents=True)
    if kind == "tmpfs":
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "iobench-test", str(inner)], check=True
        )
    else:
        user = tmp_path / "user-data"
        user.mkdir()
        subprocess.run(["mount", "--bind", str(user), str(inner)], check=True)
        assert os.stat(inner).st_dev == os.stat(trial).st_dev  # the device check alone: blind
    try:
        (inner / "theirs").write_text("keep")
        monkeypatch.setattr(
            scratch_module, "mount_inside", lambda path: None
        )  # the table missed it
        with pytest.raises(SafetyError, match="another filesystem is mounted there"):
            remove(trial)
        assert (inner / "theirs").read_text() == "keep"
    finally:
        subprocess.run(["umount", "-l", str(inner)], check=False)


@pytest.mark.lab
@pytest.mark.parametrize("seen", [True, False])
def test_a_parallel_removal_never_splits_a_tree_into_a_bind_mount(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seen: bool
) -> None:
    """Before: the run's own removal split a trial tree into pieces (threads each) by
    walking it, into a bind mount of the same disk, and each piece passed its own check, as
    seen from inside the mount: the user's subfolders went. ``seen``: the mount table shows
    the mount (refused before any piece goes); else a piece is checked against the scratch
    folder's own mount."""
    from iobench.system import removal

    user = tmp_path / "user-data"
    for sub in ("d1/deep", "d2", "d3/x/y"):
        (user / sub).mkdir(parents=True)
        (user / sub / "f").write_text("mine")
    s = Scratch(tmp_path / "role", "run-1")
    (tmp_path / "role").mkdir()
    s.ensure().claim()
    trial = s.trial_dir("t1")
    for sub in ("a/b", "c", "e/f/g"):
        (trial / "files" / sub).mkdir(parents=True)
    _bind(user, trial / "files" / "bm")
    try:
        if not seen:
            monkeypatch.setattr(removal, "mount_inside", lambda path: None)
        with pytest.raises(SafetyError, match="mount"):
            removal.remove_tree(trial, workers=8)
    finally:
        _unmount_all_under(tmp_path / "role")
    assert sorted(str(p.relative_to(user)) for p in user.rglob("f")) == [
        "d1/deep/f", "d2/f", "d3/x/y/f"
    ]  # fmt: skip


@pytest.mark.lab
def test_an_image_a_killed_run_left_mounted_is_unmounted_by_resume_and_clean(
    tmp_path: Path,
) -> None:
    """Before: a SIGKILL during a packed venv's restore left its squashfs mounted (and its
    loop device); --resume's trial folder and `iobench clean` refused to touch it for good.
    iobench mounts its images nosuid,nodev; they are its own, so it unmounts them."""
    if not shutil.which("mksquashfs"):
        pytest.skip("needs mksquashfs")
    from iobench.trial import strategies

    role = tmp_path / "role"
    role.mkdir()
    s = Scratch(role, "run-1").ensure().claim()
    trial = s.trial_dir("packed-r1")
    tree = trial / "build"
    tree.mkdir()
    (tree / "pyvenv.cfg").write_text("home = x\n")
    image = tmp_path / "venv.sqfs"
    subprocess.run(["mksquashfs", str(tree), str(image), "-quiet", "-noappend"], check=True)
    venv = trial / "venv"
    commands, _ = strategies._unpack_commands("squashfs", "mount -t squashfs", image, venv)
    for argv in commands:
        subprocess.run(argv, check=True)
    mounts = Path("/proc/self/mounts").read_text()
    line = next(x for x in mounts.splitlines() if f" {venv} " in x)
    assert "nosuid" in line and "nodev" in line and " ro," in f" {line.split()[3]},"
    again = s.trial_dir("packed-r1")  # what --resume does with the killed trial's folder
    assert again.is_dir() and not list(again.iterdir())
    assert f" {venv} " not in Path("/proc/self/mounts").read_text()
    # the same left by a crash and found by `iobench clean`
    trial = s.trial_dir("packed-r2")
    (trial / "venv").mkdir()
    subprocess.run(["mount", "-t", "squashfs", "-o", "loop,ro,nosuid,nodev", str(image),
                    str(trial / "venv")], check=True)  # fmt: skip
    (s.run_root / ".iobench-owner").unlink()  # its run was killed: `clean` may act
    assert main(["clean", str(role)]) == 0
    assert (
        not (role / SCRATCH_NAME).exists()
        and f" {trial}" not in Path("/proc/self/mounts").read_text()
    )


@pytest.mark.parametrize("run_id", ["lock.json", "lock.json.takeover", ".iobench-sentinel"])
def test_a_run_id_naming_the_scratch_s_own_files_is_refused(run_id: str, tmp_path: Path) -> None:
    """Issue 23 (low): a received meta.json's run_id named lock.json: the run's folder was the lock."""
    with pytest.raises(SafetyError, match="names one of the scratch folder's own files"):
        Scratch(tmp_path, run_id)


# ------------------------------------------- the hostile round after the fix: HOME and XDG
def test_a_home_another_user_owns_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: with ``HOME`` a folder of uid 65534 (``sudo`` without ``-H``), root kept
    iobench's generated wheels and virtualenv's seed wheels under it: their owner could swap
    them and have root install and import their code."""
    home = _nobody_owns(tmp_path / "their-home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    path = standin.scenario(tmp_path, repeats=1)
    assert main(standin.argv(tmp_path, path)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"iobench: error: HOME={home}: {home} belongs to user nobody"), err
    assert "(sudo -H)" in err and "--trust-owner nobody" in err and len(err.splitlines()) == 1
    assert not (home / ".cache").exists() and not (tmp_path / "results").exists()
    # an XDG folder of theirs, below a home of ours: the same refusal
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "cache"))
    assert main(standin.argv(tmp_path, path)) == 2
    assert f"XDG_CACHE_HOME={home / 'cache'}: {home} belongs to" in capsys.readouterr().err
    # trusted on purpose: the run goes ahead
    assert main(standin.argv(tmp_path, path, "--trust-owner", "nobody", "--quiet")) == 0


@pytest.mark.parametrize("var", ["PIP_CONFIG_FILE", "UV_CONFIG_FILE", "VIRTUALENV_CONFIG_FILE"])
def test_a_tool_configuration_another_user_can_change_is_refused(
    var: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hostile round of stop 43: ``PIP_CONFIG_FILE`` naming a file in a folder of uid
    65534 was read by the run's pip as root (with a remote index, their ``extra-index-url``
    is what root installs and the ready check imports); their file in a folder of ours, too.
    /dev/null (no configuration) and a file of ours go ahead."""
    theirs = _nobody_owns(tmp_path / "theirs")
    conf = theirs / "tool.conf"
    conf.write_text("[global]\n")
    path = standin.scenario(tmp_path, repeats=1)
    monkeypatch.setenv(var, str(conf))
    assert main(standin.argv(tmp_path, path)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"iobench: error: {var}={conf}: {theirs} belongs to user nobody"), err
    assert len(err.splitlines()) == 1 and not (tmp_path / "results").exists()
    ours = tmp_path / "ours.conf"
    ours.write_text("[global]\n")
    os.chown(ours, 65534, 65534)  # their file in our folder: they can rewrite it
    monkeypatch.setenv(var, str(ours))
    assert main(standin.argv(tmp_path, path)) == 2
    assert f"{var}={ours}: " in capsys.readouterr().err
    os.chown(ours, os.geteuid(), os.getegid())
    for fine in (str(ours), os.devnull):
        monkeypatch.setenv(var, fine)
        assert (
            main(
                standin.argv(
                    tmp_path, path, "--quiet", "--results", str(tmp_path / fine.replace("/", "-"))
                )
            )
            == 0
        )


def test_runs_creating_one_scratch_at_once_all_adopt_it(tmp_path: Path) -> None:
    """A fleet's ranks on one host make the same scratch folder at the same moment: none may
    read the other's folder between its mkdir and its sentinel as "not iobench's" (seen under
    mpirun); threads stand in for the ranks (each call waits in the kernel, so they
    interleave), and a foreign folder is still refused at once."""
    import threading

    for round_ in range(30):
        role = tmp_path / f"role{round_}"
        role.mkdir()
        gate, errors = threading.Barrier(6), []

        def make(
            i: int, role: Path = role, gate: threading.Barrier = gate, errors: list = errors
        ) -> None:
            gate.wait()
            try:
                Scratch(role, f"run-{i}").ensure().claim()
            except Exception as exc:  # collected, asserted below
                errors.append(exc)

        threads = [threading.Thread(target=make, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == [], (round_, errors)
        names = sorted(p.name for p in (role / SCRATCH_NAME).iterdir())
        assert names == [".iobench-sentinel", *(f"run-{i}" for i in range(6))]
    foreign = tmp_path / "foreign"
    (foreign / SCRATCH_NAME).mkdir(parents=True)
    began = time.monotonic()
    with pytest.raises(SafetyError, match="no iobench sentinel"):
        Scratch(foreign).ensure()  # empty and young, but nobody is writing a sentinel
    assert time.monotonic() - began < 5
