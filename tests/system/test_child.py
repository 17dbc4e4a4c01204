"""iobench.system.child: steps in a child process, watched by its progress, on real processes."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from iobench.errors import SafetyError
from iobench.system import child
from iobench.trial import process


def test_the_value_and_the_exception_come_back_from_the_child() -> None:
    assert child.call(lambda: ("pid", os.getpid()), 5)[1] != os.getpid()
    with pytest.raises(FileNotFoundError) as info:
        child.call(lambda: os.stat("/no/such/path"), 5)
    assert info.value.errno == errno.ENOENT and info.value.filename == "/no/such/path"

    def refuse() -> None:
        raise SafetyError("refusing to delete /etc")

    with pytest.raises(SafetyError, match="refusing to delete /etc"):
        child.call(refuse, 5)
    assert not child.HELPERS, "every child reaped"


def test_what_the_step_changes_in_memory_stays_in_the_child() -> None:
    seen: list[int] = []
    child.call(lambda: seen.append(1), 5)
    assert seen == []  # why every caller takes what it needs from the return value


def test_a_child_without_progress_is_given_up_and_killed() -> None:
    """A sleep makes no system call that completes: as a call blocked on a hung volume."""
    t0 = time.monotonic()
    with pytest.raises(
        child.Hung, match=r"no progress for 1 s \(a hung volume\?\) while removing x"
    ):
        child.call(lambda: time.sleep(60), 1.0, what="removing x")
    assert time.monotonic() - t0 < 5
    deadline = time.monotonic() + 5
    while child.HELPERS and time.monotonic() < deadline:  # killed, reaped at the next call
        child._reap_abandoned()
        time.sleep(0.05)
    assert not child.HELPERS


def test_a_slow_step_that_keeps_making_calls_is_waited_for() -> None:
    def busy() -> int:
        end = time.monotonic() + 2.5
        n = 0
        while time.monotonic() < end:
            os.stat("/")
            n += 1
            time.sleep(0.01)
        return n

    assert child.call(busy, 1.0) > 50  # 2.5 s, longer than quiet_s, never quiet for 1 s


def test_the_child_holds_none_of_the_parent_s_descriptors(tmp_path: Path) -> None:
    """A pipe the child kept would keep a reader of iobench's output (`| tee`) waiting
    until a hung volume answered."""
    read, write = os.pipe()
    try:

        def look() -> tuple[bool, str]:
            try:
                os.fstat(write)
                kept = True
            except OSError:
                kept = False
            return kept, os.readlink("/proc/self/fd/1")

        kept, stdout = child.call(look, 5)
    finally:
        os.close(read)
        os.close(write)
    assert not kept and stdout == "/dev/null"


def test_stop_ends_the_child_and_says_so() -> None:
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    t0 = time.monotonic()
    with pytest.raises(child.Stopped):
        child.call(lambda: [os.stat("/") or time.sleep(0.01) for _ in range(10**6)], 5, stop)
    assert time.monotonic() - t0 < 3


def test_helpers_die_with_iobench(tmp_path: Path) -> None:
    """A helper outliving a killed iobench would look like a live user of its scratch."""
    marker = tmp_path / "pid"
    script = (
        "import os, sys, time\n"
        "from iobench.system import child\n"
        "p = child.Poller(lambda: time.time(), 0.05).start()\n"
        f"open({str(marker)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 20
        while not marker.exists() or not marker.read_text():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        helper = int(marker.read_text())
        assert Path(f"/proc/{helper}").exists()
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 5
    while Path(f"/proc/{helper}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{helper}").exists(), "the helper outlived its iobench"


def test_the_poller_streams_its_newest_result() -> None:
    poller = child.Poller(lambda: time.monotonic(), 0.02).start()
    try:
        deadline = time.monotonic() + 5
        while poller.latest() is None:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        first = poller.latest()
        time.sleep(0.2)
        assert isinstance(first, float) and poller.latest() > first  # type: ignore[operator]
    finally:
        poller.close()


def test_ending_a_phase_s_strays_leaves_iobench_s_helpers_alone() -> None:
    """The runner kills the children a trial's phase left (orphans of a ready check);
    a removal under way in a helper is not one of them."""
    keep = process.our_children()
    poller = child.Poller(lambda: 1, 0.05).start()
    stray = subprocess.Popen(["sleep", "30"])
    try:
        ended = process.end_strays(keep, grace_s=2)
        assert stray.pid in ended and poller.pid not in ended
        assert Path(f"/proc/{poller.pid}").exists()
    finally:
        poller.close()
        stray.wait()
