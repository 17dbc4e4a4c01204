"""iobench.system.removal: parallel removal, the trash, and the Reaper, on real folders."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from iobench.system.removal import (
    BACKGROUND_MIN_CPUS,
    TRASH,
    Reaper,
    Remover,
    _subtrees,
    remove_tree,
)
from iobench.system.scratch import Scratch


def _venv_like(root: Path, packages: int = 12, files: int = 30) -> int:
    """A tree shaped like a venv's site-packages; returns how many files it holds."""
    site = root / "lib" / "python3.11" / "site-packages"
    for p in range(packages):
        sub = site / f"pkg{p}" / "sub"
        sub.mkdir(parents=True)
        for f in range(files):
            (sub / f"m{f}.py").write_text("x = 1\n")
        (site / f"pkg{p}" / "__init__.py").write_text("")
    (root / "pyvenv.cfg").write_text("home = /usr\n")
    return packages * (files + 1) + 1


def _scratch(tmp_path: Path, name: str, run: str = "run-1") -> Scratch:
    role = tmp_path / name
    role.mkdir()
    return Scratch(role, run).ensure().claim()


def test_subtrees_split_a_tree_into_disjoint_folders(tmp_path: Path) -> None:
    _venv_like(tmp_path / "venv")
    units = _subtrees(tmp_path / "venv", want=8)
    assert len(units) >= 8
    for a in units:  # none inside another: each is removed once, by one worker
        assert not any(a != b and str(a).startswith(str(b) + os.sep) for b in units)


def test_remove_tree_in_parallel_leaves_nothing_and_keeps_what_is_outside(tmp_path: Path) -> None:
    s = _scratch(tmp_path, "target")
    outside = tmp_path / "users-file.txt"
    outside.write_text("keep me")
    venv = s.run_root / "t-r1" / "venv"
    assert _venv_like(venv) > 300
    (venv / "link").symlink_to(outside)  # a link inside goes, what it points to stays
    remove_tree(s.run_root / "t-r1", workers=4)
    assert not (s.run_root / "t-r1").exists()
    assert outside.read_text() == "keep me"


def test_remove_refuses_what_is_not_in_a_scratch_folder(tmp_path: Path) -> None:
    mine = tmp_path / "not-scratch"
    _venv_like(mine)
    error = Remover().remove(mine, tmp_path)
    assert "not inside an iobench scratch folder" in error
    assert (mine / "pyvenv.cfg").is_file()


def test_defer_renames_into_the_trash_and_empty_removes_it(tmp_path: Path) -> None:
    s = _scratch(tmp_path, "target")
    trial = s.run_root / "naive-r1"
    _venv_like(trial / "venv")
    remover = Remover()
    assert remover.defer(trial, s.run_root / TRASH, s.root) == ""
    assert not trial.exists()  # gone from its place at once: one rename
    waiting = list((s.run_root / TRASH).iterdir())
    assert [p.name for p in waiting] == ["1-naive-r1"] and list(remover.trash) == waiting
    assert remover.defer(s.run_root / "never-made", s.run_root / TRASH, s.root) == ""
    assert remover.empty() == []
    assert list((s.run_root / TRASH).iterdir()) == [] and remover.trash == {}


def _two_volumes_with_trash(tmp_path: Path) -> tuple[Scratch, Scratch, Remover]:
    """Two roles' scratch folders, each with a finished trial's folders in its trash."""
    a, b = _scratch(tmp_path, "vol-a"), _scratch(tmp_path, "vol-b")
    remover = Remover()
    for s in (a, b):
        _venv_like(s.run_root / "x-r1" / "venv", packages=4)
        remover.defer(s.run_root / "x-r1", s.run_root / TRASH, s.root)
    return a, b, remover


def test_reaper_removes_only_on_volumes_no_trial_holds(tmp_path: Path) -> None:
    a, b, remover = _two_volumes_with_trash(tmp_path)
    # one real filesystem here: the two roles are told apart as the runner would see two
    reaper = Reaper(remover, {a.root: 1, b.root: 2}, background=True)
    assert reaper.hold([a.root]) == []  # before a trial on vol-a: its trash goes first, here
    assert list((a.run_root / TRASH).iterdir()) == []
    assert list((b.run_root / TRASH).iterdir()), "removed on a volume no trial asked for yet"
    _venv_like(a.run_root / "x-r2" / "venv", packages=4)  # the trial on vol-a runs, ends
    remover.defer(a.run_root / "x-r2", a.run_root / TRASH, a.root)
    reaper.work()  # the thread's body, run here: it empties what it may, then returns
    assert list((a.run_root / TRASH).iterdir()), "removed on a volume a trial was using"
    assert list((b.run_root / TRASH).iterdir()) == []
    reaper.release()  # the trial ended: vol-a's trash goes in the background
    assert reaper.drain() == []
    assert list((a.run_root / TRASH).iterdir()) == [] and remover.trash == {}


def _trials_back_to_back(reaper: Reaper, remover: Remover, s: Scratch, n: int) -> None:
    """``n`` trials on the scratch folder ``s``, held and released as the runner does; each
    finds no earlier trial's trash beside it."""
    for r in range(1, n + 1):
        assert reaper.hold([s.root]) == []
        trash = s.run_root / TRASH
        assert not trash.exists() or not list(trash.iterdir()), f"trial {r} beside old trash"
        _venv_like(s.run_root / f"naive-r{r}" / "venv", packages=3)
        remover.defer(s.run_root / f"naive-r{r}", s.run_root / TRASH, s.root)
        reaper.release()


def test_trials_on_one_volume_never_hold_more_than_one_trial_s_trash(tmp_path: Path) -> None:
    s = _scratch(tmp_path, "target")
    remover = Remover()
    reaper = Reaper(remover, {s.root: 3}, background=True)
    _trials_back_to_back(reaper, remover, s, 4)  # every trial on the one volume
    assert reaper.drain() == [] and not list((s.run_root / TRASH).iterdir())


def test_hold_stops_a_background_removal_and_finishes_it_itself(tmp_path: Path) -> None:
    s = _scratch(tmp_path, "vol")
    _venv_like(s.run_root / "big-r1" / "venv", packages=40, files=40)
    remover = Remover(workers=2)
    remover.defer(s.run_root / "big-r1", s.run_root / TRASH, s.root)
    reaper = Reaper(remover, {s.root: 7}, background=True)
    reaper.release()  # the background thread starts on it
    assert reaper.hold([s.root]) == []  # stops the thread there, then empties the rest here
    assert reaper.current is None and remover.trash == {}
    assert not list((s.run_root / TRASH).iterdir())
    reaper.release()
    assert reaper.drain() == []


def test_without_cores_to_spare_everything_is_removed_between_trials(tmp_path: Path) -> None:
    """Below BACKGROUND_MIN_CPUS nothing is removed while a trial runs: before a trial on
    vol-a, vol-b's trash goes too, and no thread is started after it."""
    a, b, remover = _two_volumes_with_trash(tmp_path)
    reaper = Reaper(remover, {a.root: 1, b.root: 2}, background=False)
    assert reaper.hold([a.root]) == []
    assert not list((a.run_root / TRASH).iterdir()) and not list((b.run_root / TRASH).iterdir())
    remover.defer(b.run_root / "nothing", b.run_root / TRASH, b.root)
    reaper.release()
    assert reaper.thread is None
    assert reaper.drain() == [] and remover.trash == {}
    assert Reaper(remover, {}).background == ((os.cpu_count() or 1) >= BACKGROUND_MIN_CPUS)


@pytest.mark.parametrize("workers", [1, 8])
def test_remover_remove_is_the_same_serial_or_parallel(tmp_path: Path, workers: int) -> None:
    s = _scratch(tmp_path, f"w{workers}")
    _venv_like(s.run_root / "t-r1")
    assert Remover(workers=workers).remove(s.run_root / "t-r1", s.root) == ""
    assert not (s.run_root / "t-r1").exists()


def test_local_removals_use_threads_on_a_disk_and_one_in_memory(tmp_path: Path) -> None:
    """On this VM's ext4, 12,000 small files went in 1.24-1.51 s with one thread and 0.53-0.71 s
    with four (the kernel waits on inode-table blocks); on tmpfs more threads only contend
    for Python's lock. A remover that knows its volumes removes in place with that many."""
    from iobench.system import procfs
    from iobench.system.removal import DISK_WORKERS, local_workers

    fstype = procfs.mount_of(tmp_path).fstype  # type: ignore[union-attr]
    if Path("/dev/shm").is_dir() and procfs.mount_of("/dev/shm").fstype == "tmpfs":  # type: ignore[union-attr]
        assert local_workers(Path("/dev/shm")) == 1
    if fstype in ("ext4", "xfs", "btrfs"):
        assert local_workers(tmp_path) == DISK_WORKERS
    s = _scratch(tmp_path, "local")
    _venv_like(s.run_root / "t-r1")
    remover = Remover()
    remover.know([s.root])
    assert remover._threads[s.root] == local_workers(tmp_path)
    assert remover.remove(s.run_root / "t-r1", s.root) == ""
    assert not (s.run_root / "t-r1").exists()


@pytest.mark.e2e
def test_a_killed_run_leaves_only_its_own_scratch_which_clean_removes(tmp_path: Path) -> None:
    """SIGKILL after the first trial (its folders in the trash, maybe half removed): the roles
    hold the users' files and iobench's scratch with this run's folder only; `iobench clean`
    removes that, and nothing else."""
    from helpers.files import DATA

    from iobench.__main__ import main
    from iobench.system.scratch import SCRATCH_NAME, SENTINEL

    roles = {name: tmp_path / name for name in ("target", "tmp")}
    for role in roles.values():
        role.mkdir()
        (role / "users-file.txt").write_text("not iobench's")
    results = tmp_path / "results"
    argv = [sys.executable, "-m", "iobench", "run", "--scenario", str(DATA / "tiny.toml"),
            "--repeats", "2", "--no-report", "--no-probe", "--target", str(roles["target"]),
            "--tmp", str(roles["tmp"]), "--results", str(results)]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 240
        while not any(len(p.read_text().splitlines()) > 1 for p in results.glob("*/trials.csv")):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()
    run_id = next(results.iterdir()).name
    for role in roles.values():
        assert sorted(p.name for p in role.iterdir()) == sorted([SCRATCH_NAME, "users-file.txt"])
        inside = {p.name for p in (role / SCRATCH_NAME).iterdir()}
        assert inside - {SENTINEL, "lock.json"} == {run_id}, inside
        assert main(["clean", str(role)]) == 0
        assert [p.name for p in role.iterdir()] == ["users-file.txt"]
        assert (role / "users-file.txt").read_text() == "not iobench's"


def test_local_trees_go_here_by_one_thread_in_memory_a_volume_s_by_several_in_a_child(
    tmp_path: Path, tmpfs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On this machine's memory threads only contend for Python's lock (a smoke venv on
    tmpfs: 0.13 s with 8, 0.03 s with one), on its disks they overlap the kernel's waits
    (DISK_WORKERS), and nothing local hangs, so no child is forked (10-40 ms each, four a
    trial); on a FUSE volume the unlinks' waits overlap, watched."""
    from helpers.lab import volume_factory

    from iobench.system import procfs, removal

    log = tmp_path / "workers.log"  # a removal in a child says so in a file
    real = removal.remove_tree

    def spy(path: Path, workers: int = 8) -> None:
        with open(log, "a") as fh:
            fh.write(f"{workers} {os.getpid()}\n")
        real(path, workers)

    monkeypatch.setattr(removal, "remove_tree", spy)
    (tmp_path / "disk").mkdir()
    (tmp_path / "lab").mkdir()
    volumes = volume_factory(tmp_path / "lab")
    make_volume = next(volumes)
    try:
        places = [tmpfs(), tmp_path / "disk", make_volume(latency_ms=0.0)]
        for where in places:
            s = _scratch(where, "x")
            _venv_like(s.run_root / "t-r1" / "venv")
            remover = Remover(workers=8)
            remover.know([s.root])
            assert remover.defer(s.run_root / "t-r1", s.run_root / TRASH, s.root) == ""
            assert remover.empty() == [] and not list((s.run_root / TRASH).iterdir())
    finally:
        next(volumes, None)  # the volume's teardown checks nothing holds it
    mount = procfs.mount_of(tmp_path)
    disk_local = mount is not None and mount.fstype in removal.LOCAL_FSTYPES
    got = [line.split() for line in log.read_text().splitlines()]
    here = str(os.getpid())
    assert got[0] == ["1", here]  # tmpfs
    assert got[1] == ([str(removal.DISK_WORKERS), here] if disk_local else ["8", got[1][1]])
    assert got[2][0] == "8" and got[2][1] != here  # FUSE: threads, in a watched child


def test_on_a_disk_the_trash_waits_for_the_run_s_end_while_there_is_room(
    disk_dir: Path, tmpfs: Any
) -> None:
    """Removed between trials on this machine's ext4 (no journal), the default run's naive
    trials slowed from 1.6 to 3.3 s across its rounds: each create scanned past the inodes
    freed in the last minutes. On a disk the trash now waits for the run's end (room
    allowing); on tmpfs a removal leaves nothing behind, and it goes between trials as before."""
    from iobench.system import procfs
    from iobench.system.removal import WAIT_FSTYPES

    mount = procfs.mount_of(disk_dir)
    if mount is None or mount.fstype not in WAIT_FSTYPES:
        pytest.skip(f"{disk_dir} is not on a disk filesystem ({mount and mount.fstype})")
    disk, mem = _scratch(disk_dir, "target"), _scratch(tmpfs(size="64m", name="tmp"), "tmp")
    remover = Remover()
    reaper = Reaper(remover, {}, background=False)
    reaper.watch([disk.root, mem.root])
    for r in range(1, 4):
        assert reaper.hold([disk.root, mem.root]) == []
        assert not list((mem.run_root / TRASH).glob("*")), f"tmpfs trash beside trial {r}"
        for s in (disk, mem):
            _venv_like(s.run_root / f"naive-r{r}" / "venv", packages=4)
            remover.defer(s.run_root / f"naive-r{r}", s.run_root / TRASH, s.root)
        reaper.release()
    kept = sorted(p.name.split("-", 1)[1] for p in (disk.run_root / TRASH).iterdir())
    assert kept == ["naive-r1", "naive-r2", "naive-r3"]
    # what a trial took there is known (4 packages of 31 files: a block each, at least)
    assert reaper.largest[os.stat(disk.root).st_dev] >= 4 * 31 * 512
    assert reaper.drain() == [] and remover.trash == {}
    assert not list((disk.run_root / TRASH).iterdir())


def test_a_disk_without_room_for_its_trash_empties_it_between_trials(
    disk_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trash of earlier torch trials once filled an 8 GB target: where the volume would
    keep less room than ``ROOM_TRIALS`` of its largest trials (here: asked for more than it
    has), the trash goes before each trial, as on any other volume."""
    from iobench.system import removal

    s = _scratch(disk_dir, "target")
    monkeypatch.setattr(removal, "ROOM_MIN_BYTES", removal.free_bytes(s.root) * 2)
    remover = Remover()
    reaper = Reaper(remover, {}, background=False)
    reaper.watch([s.root])
    _trials_back_to_back(reaper, remover, s, 3)
    assert reaper.drain() == []
