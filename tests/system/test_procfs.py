"""Linux facts from /proc, with real processes: mountinfo, liveness, pid reuse, ending trees."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iobench.system import procfs

MOUNTINFO = (
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro\n"
    r"40 22 0:35 / /mnt/with\040space\011tab rw - tmpfs my\134dev rw,size=10k"
    "\n"
    "41 40 0:36 / /mnt/with\\040space\\011tab/inner ro - fuse.iobench-lab lab rw\n"
    "garbage line without separator\n"
)


def test_mountinfo_is_unescaped_once() -> None:
    table = procfs.parse_mountinfo(MOUNTINFO)
    assert [m.mountpoint for m in table] == [
        "/",
        "/mnt/with space\ttab",
        "/mnt/with space\ttab/inner",
    ]
    assert table[1].source == "my\\dev" and table[1].options == "rw,size=10k"
    assert table[2].fstype == "fuse.iobench-lab" and table[2].options == "ro,rw"
    assert table[0].options == "rw,relatime,errors=remount-ro"
    assert procfs.unescape(r"a\134b\040c") == "a\\b c"


def test_mount_of_takes_the_longest_mount_point() -> None:
    table = procfs.parse_mountinfo(MOUNTINFO)
    m = procfs.mount_of("/mnt/with space\ttab/inner/x", table)
    assert m is not None and m.mountpoint.endswith("/inner")
    assert (
        procfs.mount_of("/mnt/with space\ttabular", table).mountpoint == "/"
    )  # not a prefix match
    here = procfs.mount_of(Path.cwd())
    assert here is not None and procfs.is_within(os.path.realpath(Path.cwd()), here.mountpoint)
    assert any(m.mountpoint == "/" for m in procfs.mounts())


@pytest.mark.parametrize(
    "bad", [0, -1, 2**22 + 1, 2**70, 1.5, float("inf"), float("nan"), "x", True, None, "1e3"]
)
def test_valid_pid_refuses_what_is_not_a_pid(bad: object) -> None:
    assert procfs.valid_pid(bad) is None


def test_valid_pid_accepts_pids() -> None:
    assert procfs.valid_pid(1) == 1 and procfs.valid_pid("42") == 42 and procfs.valid_pid(7.0) == 7


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_is_ours_follows_a_real_process_through_exit() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "needle-xyz"])
    try:
        deadline = time.monotonic() + 10  # the child shows its own command line once it execs
        while b"needle-xyz" not in _cmdline(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        started = procfs.start_time(proc.pid)
        assert started is not None
        assert procfs.is_ours(proc.pid, ["needle-xyz"], started)
        assert (
            procfs.why_not_ours(proc.pid, started - 5)
            == "is gone (the pid now belongs to another process)"
        )
        assert "another command" in procfs.why_not_ours(proc.pid, needles=["not-there"])
        stamp = procfs.ProcessStamp(proc.pid, started, os.uname().nodename, procfs.pid_namespace())
        assert stamp.gone_reason() is None
        assert procfs.ProcessStamp.from_dict(stamp.to_dict()) == stamp
        proc.kill()
        deadline = time.monotonic() + 5
        while procfs.proc_state(proc.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert procfs.why_not_ours(proc.pid, started) == "has exited"  # an unreaped zombie
        assert stamp.gone_reason() == f"its process {proc.pid} has exited"
    finally:
        proc.kill()
        proc.wait()
    assert procfs.why_not_ours(proc.pid) == "is gone" and not procfs.alive(proc.pid)
    other_host = procfs.ProcessStamp(proc.pid, started, "another-host")
    assert other_host.gone_reason() is None  # cannot be checked from here: counts as alive


@pytest.mark.parametrize(
    "raw",
    [
        None,
        [],
        {"pid": 2**40, "host": "h"},
        {"pid": 5, "host": 3},
        {"pid": 5, "host": "h", "started": float("inf")},
        {"pid": 5, "host": "h", "started": -1},
    ],
)
def test_stamps_read_from_disk_are_checked(raw: object) -> None:
    assert procfs.ProcessStamp.from_dict(raw) is None


TREE = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)          # the root ignores SIGTERM
kid = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"])
gone = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
os.kill(gone.pid, signal.SIGSTOP)                        # a stopped member outside the group
print(kid.pid, gone.pid, flush=True)
time.sleep(60)
"""


def test_end_tree_ends_stubborn_stopped_and_escaped_members() -> None:
    root = subprocess.Popen(
        [sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    kid, escaped = (int(x) for x in root.stdout.readline().split())
    t0 = time.monotonic()
    left = procfs.end_tree(root.pid, wait_s=1.0)
    took = time.monotonic() - t0
    assert left == []
    assert procfs.proc_state(root.pid) == "Z"  # left unreaped: its counters stay readable
    assert not procfs.alive(kid) and not procfs.alive(escaped)
    assert took < 5
    root.wait()
    assert root.returncode == -signal.SIGKILL


def test_end_tree_with_grace_lets_a_clean_exit_happen() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.2)"])
    assert procfs.end_tree(proc.pid, group=False, grace_s=5.0) == []
    proc.wait()
    assert proc.returncode == 0  # not signalled


def test_tail_and_tail_file(tmp_path: Path) -> None:
    assert procfs.tail("a\n\n b \nc\n", 2) == "b | c"
    assert procfs.last_line("") == "(no output)"
    log = tmp_path / "log"
    log.write_text("x" * 100_000 + "\nfirst\nsecond\n")
    assert procfs.tail_file(log, 2, max_bytes=64) == "first | second"
    assert procfs.tail_file(tmp_path / "missing") == ""


def test_paths_in_use_sees_a_process_working_in_a_folder(tmp_path: Path) -> None:
    work = tmp_path / "busy"
    work.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], cwd=work)
    try:
        deadline = time.monotonic() + 5
        while (
            os.path.realpath(f"/proc/{proc.pid}/cwd") != str(work.resolve())
            and time.monotonic() < deadline
        ):
            time.sleep(0.01)
        assert procfs.paths_in_use().get(str(work.resolve())) == proc.pid
    finally:
        proc.kill()
        proc.wait()
