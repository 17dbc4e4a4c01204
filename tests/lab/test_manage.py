"""Mounting, listing and unmounting lab volumes for real: hung and killed daemons, failures
in one line, refusals, --backing folders, and one command per mountpoint at a time."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.lab import (
    assert_nothing_left,
    needs_fuse,
)

from iobench.errors import LabError
from iobench.lab import manage, state
from iobench.lab.options import VolumeOptions
from iobench.system import procfs


@pytest.mark.lab
@needs_fuse
def test_down_ends_a_stopped_daemon_and_writes_stats(tmp_path: Path) -> None:
    mnt = tmp_path / "hung"
    stats_file = tmp_path / "stats.json"
    lab = manage.up(mnt, options=VolumeOptions(latency_ms=1.0), stats=stats_file)
    try:
        (mnt / "a").write_text("x")
        os.kill(lab.pid, signal.SIGSTOP)  # a hung daemon
        deadline = time.monotonic() + 5
        while procfs.proc_state(lab.pid) != "T" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [s.problem for s in manage.status() if s.mountpoint == lab.mountpoint] == [
            "daemon stopped (SIGSTOP)"
        ]
    finally:
        t0 = time.perf_counter()
        manage.down(mnt)
        assert time.perf_counter() - t0 < 10
    assert_nothing_left(mnt)
    assert not procfs.alive(lab.pid)
    assert not Path(lab.state_dir).exists() and not mnt.exists()  # we made the mountpoint
    stats = json.loads(stats_file.read_text())
    assert stats["final"] is True and stats["ops"]["create"]["count"] == 1


@pytest.mark.lab
@needs_fuse
def test_killed_daemon_is_reported_stale_and_cleaned_up(tmp_path: Path) -> None:
    mnt = tmp_path / "dead"
    lab = manage.up(mnt)
    try:
        os.kill(lab.pid, signal.SIGKILL)
        assert procfs.wait_gone(lab.pid, 5)
        (entry,) = [s for s in manage.status() if s.mountpoint == lab.mountpoint]
        assert entry.stale and entry.problem == "stale: daemon gone, mount dead"
    finally:
        manage.down(mnt)
    assert_nothing_left(mnt)


@pytest.mark.lab
@needs_fuse
def test_daemon_failure_is_one_line_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FUSE_LIBRARY_PATH", str(tmp_path / "no-such-libfuse3.so"))
    mnt = tmp_path / "broken"

    def ours() -> set[str]:  # other tests on this machine may mount elsewhere meanwhile
        roots = (str(tmp_path), str(state.state_root()))
        return {m.mountpoint for m in procfs.mounts() if m.mountpoint.startswith(roots)}

    before = ours()
    with pytest.raises(LabError, match="daemon exited before mounting.*no-such-libfuse3") as err:
        manage.up(mnt)
    assert "\n" not in str(err.value)
    assert ours() == before  # tmpfs backing gone too
    assert not mnt.exists()
    assert all(s.mountpoint != manage.mount_path(mnt) for s in manage.status())


@pytest.mark.lab
@needs_fuse
def test_up_refuses_what_it_should(volume: Callable[..., Path], tmp_path: Path) -> None:
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    with pytest.raises(LabError, match="not empty"):
        manage.up(full)
    assert (full / "keep.txt").read_text() == "mine"
    mnt = volume("once")
    with pytest.raises(LabError, match="already"):
        manage.up(mnt)
    with pytest.raises(LabError, match="no iobench lab volume"):
        manage.down(tmp_path / "never-mounted")


# ---- issue 9 item 11 and the concurrency class ---------------------------------------------


def test_backing_may_not_contain_the_mountpoint_nor_be_root(tmp_path: Path) -> None:
    """Before: `--backing /` passed the overlap check ('/' + '/' is no prefix of anything)."""
    (tmp_path / "mnt").mkdir()
    mp = manage.mount_path(tmp_path / "mnt")
    for bad in ("/", str(tmp_path), mp):
        with pytest.raises(LabError, match="must not contain each other"):
            manage._check_backing(bad, mp)
    inner = tmp_path / "mnt" / "inner"
    inner.mkdir()
    with pytest.raises(LabError, match="must not contain each other"):
        manage._check_backing(inner, mp)
    other = tmp_path / "other"
    other.mkdir()
    assert manage._check_backing(other, mp) == str(other.resolve())


@pytest.mark.lab
@needs_fuse
def test_a_backing_folder_that_is_a_mount_point_can_be_taken_down(tmp_path: Path) -> None:
    """Before: `down` saw the backing still mounted, kept the state and failed, every time."""
    import subprocess

    backing = tmp_path / "disk"
    backing.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "iobench-test-backing", str(backing)],
        check=True,
    )
    try:
        mnt = tmp_path / "mnt"
        lab = manage.up(mnt, backing=backing)
        (mnt / "f").write_text("x")
        manage.down(mnt)
        assert_nothing_left(mnt)
        assert not Path(lab.state_dir).exists()
        assert procfs.mounted_at(str(backing), "tmpfs")  # not ours: left mounted
        assert (backing / "f").read_text() == "x"
    finally:
        subprocess.run(["umount", str(backing)], check=False)


@pytest.mark.lab
@needs_fuse
def test_one_lab_command_per_mountpoint_at_a_time(tmp_path: Path) -> None:
    mnt = tmp_path / "busy"
    with state.exclusive(state.mount_path(mnt)):  # another `lab up` is half-way through
        with pytest.raises(LabError, match="another `iobench lab` command is working on"):
            manage.up(mnt)
        with pytest.raises(LabError, match="another `iobench lab` command is working on"):
            manage.down(mnt)
    assert not mnt.exists()
    assert_nothing_left(mnt)


@pytest.mark.lab
@needs_fuse
def test_concurrent_ups_on_one_folder_leave_one_volume(tmp_path: Path) -> None:
    """Before: racing `lab up`s removed each other's state folder and stacked mounts."""
    import subprocess
    import sys

    mnt = tmp_path / "race"
    cmd = [sys.executable, "-m", "iobench", "lab", "up", str(mnt), "--latency-ms", "0.1"]
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    results = [(p.wait(timeout=60), p.stderr.read().strip()) for p in procs]
    try:
        assert sorted(rc == 0 for rc, _ in results) == [False, False, True], results
        for rc, err in results:
            if rc:
                assert err.count("\n") == 0 and (
                    "another `iobench lab`" in err or "already" in err
                ), err
        mp = manage.mount_path(mnt)
        assert [m.mountpoint for m in procfs.mounts()].count(mp) == 1
    finally:
        manage.down(mnt)
    assert_nothing_left(mnt)


def test_the_state_folder_must_be_private_and_ours(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its records name folders `down` deletes and pids it ends: a folder another user
    could write (a pre-made /tmp/iobench-lab-0) is never used."""
    shared = tmp_path / "state"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setenv(state.STATE_ENV, str(shared))
    monkeypatch.setattr(state.tempfile, "gettempdir", lambda: "/proc/iobench-impossible")
    monkeypatch.setattr(state, "Path", _no_run(state.Path))
    with pytest.raises(LabError, match=r"no private, writable folder .*writable by other users"):
        state.state_root()
    os.chmod(shared, 0o700)
    assert state.state_root() == shared


def _no_run(real: type) -> Callable[..., Path]:
    """Path, but /run/iobench-lab points somewhere that cannot be made (only the candidates under test)."""

    def make(*parts: object) -> Path:
        if parts and str(parts[0]) == "/run/iobench-lab":
            return real("/proc/iobench-lab-impossible")
        return real(*parts)

    return make


def test_a_state_file_naming_other_folders_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "state"
    root.mkdir(mode=0o700)
    monkeypatch.setenv(state.STATE_ENV, str(root))
    victim = tmp_path / "precious"
    victim.mkdir()
    record = root / "x-1234" / "state.json"
    record.parent.mkdir()
    good = {
        "id": "x-1234",
        "kind": "fuse",
        "mountpoint": str(tmp_path / "m"),
        "state_dir": str(record.parent),
        "backing": str(record.parent / "backing"),
        "backing_tmpfs": True,
        "created_mountpoint": False,
        "options": {},
        "schema": state.STATE_SCHEMA,
    }
    record.write_text(json.dumps(good))
    assert state.LabMount.load(record).state_dir == str(record.parent)
    for bad in ({"state_dir": str(victim)}, {"backing": str(victim)}, {"kind": "nfs"}):
        record.write_text(json.dumps(good | bad))
        with pytest.raises(ValueError):
            state.LabMount.load(record)
        assert all(
            s.mountpoint != str(tmp_path / "m") for s in manage.status()
        )  # not listed, not acted on
    assert victim.is_dir()
