"""The per-target lock, with real processes: held, waited for, dead, expired, raced."""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from iobench.errors import IOBenchError
from iobench.system.lock import LOCK_NAME, LockHeldError, LockLostError, TargetLock, read_lock

HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from iobench.system.lock import TargetLock
    root, run_id, ttl, mode = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
    lock = TargetLock(Path(root), run_id, ttl_s=ttl).acquire()
    print("held", flush=True)
    if mode == "crash":
        import os; os._exit(0)  # no release: a crashed run
    sys.stdin.readline()  # hold until told
    lost = lock.lost
    lock.release()
    print("lost" if lost else "released", flush=True)
    """
)


def _holder(root: Path, run_id: str, ttl: float = 120.0, mode: str = "hold") -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(root), run_id, str(ttl), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def _finish(proc: subprocess.Popen) -> str:
    out, _ = proc.communicate("\n", timeout=10)
    return out.strip()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "target" / ".iobench-scratch"
    r.mkdir(parents=True)
    return r


def test_second_acquirer_fails_naming_the_holder_then_gets_it_after_release(root: Path) -> None:
    holder = _holder(root, "run-A")
    try:
        t0 = time.monotonic()
        with pytest.raises(LockHeldError) as err:
            TargetLock(root, "run-B").acquire()
        assert time.monotonic() - t0 < 1.0  # wait_s=0: no waiting
        msg = str(err.value)
        assert isinstance(err.value, IOBenchError)
        for part in (
            f"pid {holder.pid}",
            f"host {socket.gethostname()}",
            "run run-A",
            "user ",
            "since ",
            str(root.parent),
        ):
            assert part in msg, msg
        assert err.value.holder is not None and err.value.holder.pid == holder.pid
    finally:
        assert _finish(holder) == "released"
    assert not (root / LOCK_NAME).exists()
    with TargetLock(root, "run-B") as lock:
        assert read_lock(root).token == lock.token
    assert not (root / LOCK_NAME).exists()
    assert sorted(p.name for p in root.iterdir()) == []  # no temporary files left behind


def test_waiter_gets_the_lock_when_the_holder_releases(root: Path) -> None:
    holder = _holder(root, "run-A")

    def let_go() -> None:
        holder.stdin.write("\n")
        holder.stdin.flush()

    threading.Timer(0.4, let_go).start()
    t0 = time.monotonic()
    with TargetLock(root, "run-B", wait_s=5, poll_s=0.05) as lock:
        waited = time.monotonic() - t0
        assert read_lock(root).run_id == "run-B" and lock.took_over is None
    assert 0.3 < waited < 3.0
    assert _finish(holder) == "released"


def test_a_crashed_holders_lock_is_taken_over(root: Path) -> None:
    crashed = _holder(root, "run-A", mode="crash")
    crashed.wait(timeout=10)
    assert read_lock(root).pid == crashed.pid  # left behind, not released
    with TargetLock(root, "run-B") as lock:
        assert read_lock(root).pid == os.getpid()
        assert f"pid {crashed.pid}" in lock.took_over and "gone" in lock.took_over


def test_expiry_frozen_holder_is_taken_over_and_learns_it(root: Path) -> None:
    holder = _holder(root, "run-A", ttl=0.4)  # heartbeat every 0.1 s
    try:
        time.sleep(0.6)  # longer than the ttl: only the heartbeat keeps it valid
        with pytest.raises(LockHeldError):
            TargetLock(root, "run-B").acquire()
        os.kill(holder.pid, signal.SIGSTOP)  # a frozen run stops refreshing
        time.sleep(0.6)
        with TargetLock(root, "run-B", heartbeat=False) as lock:
            assert "expired" in lock.took_over
            os.kill(holder.pid, signal.SIGCONT)
            time.sleep(0.3)  # its heartbeat finds the lock is no longer its own
            assert read_lock(root).run_id == "run-B"  # and it did not overwrite ours
        assert _finish(holder) == "lost"
    finally:
        if holder.poll() is None:
            os.kill(holder.pid, signal.SIGCONT)
            holder.kill()
            holder.wait()


def test_a_holder_frozen_between_its_check_and_its_refresh_does_not_undo_a_takeover(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race CI caught: the holder reads the file, finds its token, and stops; its lock
    expires and another run takes it over; the holder, continued, refreshes. Its refresh
    must not put its lock back over the new holder's, and it must learn it lost."""
    from iobench.system import lock as lock_module

    a = TargetLock(root, "run-A", ttl_s=0.3, heartbeat=False).acquire()
    time.sleep(0.4)  # expired: only a refresh would have kept it
    parse = lock_module.LockInfo.from_json
    taken: list[TargetLock | None] = []

    def frozen_here(raw: bytes) -> lock_module.LockInfo | None:
        info = parse(raw)
        if not taken and info is not None and info.token == a.token:
            taken.append(None)  # once: run-B's own reads pass through
            taken[0] = TargetLock(root, "run-B", ttl_s=60, heartbeat=False).acquire()
        return info

    with monkeypatch.context() as m:
        m.setattr(lock_module.LockInfo, "from_json", staticmethod(frozen_here))
        with pytest.raises(LockLostError, match="run run-B"):
            a.refresh(force=True)
    (b,) = taken
    assert b is not None and "expired" in b.took_over
    held = read_lock(root)
    assert held.run_id == "run-B" and held.token == b.token and held == b.info
    a.release()  # not ours any more: left alone
    assert read_lock(root).token == b.token
    b.release()
    assert not (root / LOCK_NAME).exists()


@pytest.mark.parametrize("fs", ["refuses", "ignores"])
def test_where_a_filesystem_keeps_no_set_time_the_refresh_rewrites_the_file(
    root: Path, monkeypatch: pytest.MonkeyPatch, fs: str
) -> None:
    """Some FUSE filesystems refuse to set times, some accept and drop them: either way a
    refresh must still move the expiry others read, or a live run's lock would expire."""
    lock = TargetLock(root, "run-A", ttl_s=100, heartbeat=False).acquire()
    first = read_lock(root)
    real = os.utime

    def utime(path: object, *args: object, **kwargs: object) -> None:
        if fs == "refuses":
            raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(os, "utime", utime)
    time.sleep(0.05)
    assert lock.refresh(force=True) is True
    again = read_lock(root)
    assert again.expires > first.expires and again.token == lock.token
    assert again == lock.info and lock._by_mtime is False
    monkeypatch.setattr(os, "utime", real)
    lock.release()
    assert not (root / LOCK_NAME).exists()


def test_a_refresh_moves_only_the_files_modification_time(root: Path) -> None:
    lock = TargetLock(root, "run-A", ttl_s=100, heartbeat=False).acquire()
    path = root / LOCK_NAME
    before, inode = path.read_bytes(), path.stat().st_ino
    time.sleep(0.05)
    assert lock.refresh(force=True) is True
    assert path.read_bytes() == before and path.stat().st_ino == inode  # never rewritten
    assert read_lock(root).expires == pytest.approx(path.stat().st_mtime)
    assert json.loads(before)["refreshed_by"] == "mtime"
    lock.release()


def test_foreign_host_lock_expires(root: Path) -> None:
    now = time.time()
    content = {
        "owner": "bob",
        "pid": 1,
        "host": "other-pod",
        "run_id": "run-X",
        "created": now - 500,
        "ttl_s": 120,
        "token": "abc",
        "expires": now + 60,
    }
    (root / LOCK_NAME).write_text(json.dumps(content))
    with pytest.raises(LockHeldError, match="user bob, pid 1 on host other-pod, run run-X"):
        TargetLock(root, "run-B").acquire()
    content["expires"] = now - 5
    (root / LOCK_NAME).write_text(json.dumps(content))
    with TargetLock(root, "run-B") as lock:
        assert "expired" in lock.took_over


def test_unreadable_lock_waits_while_fresh_and_is_taken_over_when_old(root: Path) -> None:
    (root / LOCK_NAME).write_text("{half")
    with pytest.raises(LockHeldError, match="corrupt lock file .*not JSON"):
        TargetLock(root, "run-B").acquire()
    old = time.time() - 60
    os.utime(root / LOCK_NAME, (old, old))
    with TargetLock(root, "run-B") as lock:
        assert "corrupt lock file" in lock.took_over


def _valid_lock() -> dict:
    now = time.time()
    return {
        "owner": "bob",
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "run_id": "run-X",
        "created": now,
        "expires": now + 100,
        "ttl_s": 100,
        "token": "t",
    }


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("pid", 2**70, "is not a process id"),
        ("pid", -1, "is not a process id"),
        ("pid", 0, "is not a process id"),
        ("pid", "12; rm", "is not a process id"),
        ("pid", 1.5, "is not a process id"),
        ("expires", "Infinity", "expires .* is not a time"),
        ("created", "NaN", "created .* is not a time"),
        ("expires", 1e300, "expires .* is not a time"),
        ("ttl_s", "-Infinity", "ttl_s .* is not a number"),
        ("ttl_s", 0, "ttl_s .* is not a number"),
        ("pid_started", "Infinity", "pid_started .* is not a time"),
        ("expires", "soon", "expires .* is not a time"),
    ],
)
def test_every_number_in_a_lock_file_is_checked(
    root: Path, field: str, value: object, why: str
) -> None:
    """Before: a huge pid raised OverflowError from psutil and an Infinity expiry never went stale."""
    content = _valid_lock()
    raw = json.dumps(content | {field: value})  # NaN/Infinity as JSON literals, not strings:
    raw = (
        raw.replace('"Infinity"', "Infinity")
        .replace('"-Infinity"', "-Infinity")
        .replace('"NaN"', "NaN")
    )
    (root / LOCK_NAME).write_text(raw)
    with pytest.raises(LockHeldError, match=f"corrupt lock file .*{why}") as err:
        TargetLock(root, "run-B").acquire()
    assert "\n" not in str(err.value)
    old = time.time() - 60  # an old corrupt lock is taken over, naming why
    os.utime(root / LOCK_NAME, (old, old))
    with TargetLock(root, "run-B", heartbeat=False) as lock:
        assert "corrupt lock file" in lock.took_over and lock.held


def test_a_sane_lock_parses(root: Path) -> None:
    from iobench.system.lock import LockInfo

    info = LockInfo.parse(json.dumps(_valid_lock()).encode())
    assert isinstance(info, LockInfo) and info.pid == os.getpid()
    assert info.stale_reason() is None  # this very process holds it


def test_lock_errors_live_in_errors_module() -> None:
    from iobench import errors

    assert LockHeldError is errors.LockHeldError and LockLostError is errors.LockLostError


@pytest.mark.parametrize("quiet_s", [None, 5.0], ids=["in-process", "in-a-child"])
def test_refresh_extends_expiry_and_release_keeps_a_foreign_lock(
    root: Path, quiet_s: float | None
) -> None:
    """The same with the file I/O in a child process (what a run does: quiet_s): what
    the child learnt comes back, and the lock names iobench, not the child."""
    lock = TargetLock(root, "run-A", ttl_s=100, heartbeat=False, quiet_s=quiet_s).acquire()
    first = read_lock(root).expires
    assert lock.refresh() is False  # rate-limited: written less than ttl/4 ago
    time.sleep(0.05)
    assert lock.refresh(force=True) is True
    assert read_lock(root).expires > first and read_lock(root).token == lock.token
    assert read_lock(root).pid == os.getpid() and lock.info == read_lock(root)
    # someone else's lock now stands there: refresh says so, release leaves it alone
    foreign = json.loads((root / LOCK_NAME).read_text()) | {"token": "other", "run_id": "run-Z"}
    (root / LOCK_NAME).write_text(json.dumps(foreign))
    with pytest.raises(LockLostError, match="run run-Z"):
        lock.refresh(force=True)
    lock.release()
    assert read_lock(root).run_id == "run-Z"
    ours = TargetLock(root / "again", "run-B", heartbeat=False, quiet_s=quiet_s)
    (root / "again").mkdir()
    ours.acquire().release()
    assert read_lock(root / "again") is None


RACER = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from iobench.system.lock import TargetLock
    root, log = Path(sys.argv[1]), sys.argv[2]
    for _ in range(3):
        with TargetLock(root, f"run-{os.getpid()}", wait_s=20, poll_s=0.01):
            fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            os.write(fd, f"in {os.getpid()}\\n".encode())
            time.sleep(0.02)
            os.write(fd, f"out {os.getpid()}\\n".encode())
            os.close(fd)
    """
)


def test_racing_processes_never_hold_it_together(root: Path, tmp_path: Path) -> None:
    # start from a crashed run's lock, so the racers also race on the takeover
    crashed = _holder(root, "run-dead", mode="crash")
    crashed.wait(timeout=10)
    log = tmp_path / "log"
    procs = [subprocess.Popen([sys.executable, "-c", RACER, str(root), str(log)]) for _ in range(4)]
    assert [p.wait(timeout=30) for p in procs] == [0] * 4
    lines = log.read_text().split()
    pairs = [lines[i : i + 4] for i in range(0, len(lines), 4)]
    assert len(pairs) == 12
    for enter, pid_a, leave, pid_b in pairs:
        assert (enter, leave) == ("in", "out") and pid_a == pid_b, lines
    assert not (root / LOCK_NAME).exists()
