"""Noisy neighbours: real background writers are named, idle and own processes are not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from iobench.trial.contention import Contender, ContentionWatch, format_contended, parse_contended

# writes MB_BEFORE, says "ready", waits for GO, writes MB_AFTER (both fsynced), says "done", idles
WRITER = textwrap.dedent(
    """
    import os, sys, time
    path, before, after, flags = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    chunk = os.urandom(1 << 20)
    def write(n, name):
        with open(f"{path}.{name}", "wb") as f:
            for _ in range(n):
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
    write(before, "before")
    open(f"{flags}.ready", "w").close()
    deadline = time.monotonic() + 30  # never outlive a broken test by long
    while not os.path.exists(os.path.join(os.path.dirname(flags), "go")):
        if time.monotonic() > deadline:
            sys.exit(1)
        time.sleep(0.01)
    write(after, "after")
    open(f"{flags}.done", "w").close()
    time.sleep(30)
    """
)


class Procs:
    """Writers this test starts; detached ones are not our descendants, like real neighbours."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.pids: list[int] = []
        self.children: list[subprocess.Popen] = []

    def start(self, name: str, before: int, after: int, detached: bool = True) -> tuple[int, Path]:
        flags = self.tmp / name
        argv = [
            sys.executable,
            "-c",
            WRITER,
            str(self.tmp / f"{name}.data"),
            str(before),
            str(after),
            str(flags),
        ]
        if detached:  # a short-lived parent starts it and exits: it is reparented away from us
            spawn = (
                "import subprocess, sys; print(subprocess.Popen(sys.argv[1:], start_new_session=True,"
                " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)"
            )
            pid = int(
                subprocess.run(
                    [sys.executable, "-c", spawn, *argv], capture_output=True, text=True, check=True
                ).stdout
            )
        else:
            child = subprocess.Popen(argv)
            self.children.append(child)
            pid = child.pid
        self.pids.append(pid)
        return pid, flags

    def stop(self) -> None:
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for child in self.children:
            child.wait()


def _wait_for(paths: list[Path], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not all(p.exists() for p in paths):
        assert time.monotonic() < deadline, f"writers did not finish: {paths}"
        time.sleep(0.01)


@pytest.fixture
def procs(tmp_path: Path):  # noqa: ANN201
    p = Procs(tmp_path)
    yield p
    p.stop()


def test_busy_neighbours_are_named_idle_and_own_are_not(procs: Procs, tmp_path: Path) -> None:
    # already running before the trial: one already wrote a lot but is quiet during it
    quiet_pid, quiet = procs.start("quiet", before=30, after=1)
    noisy_pid, noisy = procs.start("noisy", before=0, after=20)
    idle_pid, idle = procs.start("idle", before=0, after=0)
    _wait_for(
        [quiet.with_suffix(".ready"), noisy.with_suffix(".ready"), idle.with_suffix(".ready")]
    )
    assert noisy_pid not in {p.pid for p in psutil.Process().children(recursive=True)}

    late: list[int] = []
    watch = ContentionWatch(exclude_pids=lambda: late, threshold_bytes=5_000_000).start()
    # appear during the trial: a neighbour, our own child (the installer), one we exclude
    new_pid, new = procs.start("new", before=20, after=0)
    child_pid, child = procs.start("child", before=0, after=20, detached=False)
    excl_pid, excl = procs.start("excluded", before=0, after=20)
    late.append(excl_pid)
    (tmp_path / "go").touch()
    _wait_for([p.with_suffix(".done") for p in (quiet, noisy, idle, new, child, excl)])
    found = watch.stop()

    by_pid = {c.pid: c for c in found}
    assert noisy_pid in by_pid and new_pid in by_pid, found
    assert 19e6 < by_pid[noisy_pid].write_bytes < 26e6  # the interval's 20 MB, not a total
    assert by_pid[new_pid].write_bytes > 19e6
    for pid in (quiet_pid, idle_pid, child_pid, excl_pid, os.getpid()):
        assert pid not in by_pid, (pid, found)
    assert found == sorted(found, key=lambda c: c.bytes, reverse=True)
    assert watch.scan_s < 1.0


def test_format_and_parse_contended() -> None:
    cs = [
        Contender("dd", 10, 0, 52_400_000),
        Contender("python3", 11, 1_000_000, 5_500_000),
        Contender("python3", 12, 0, 6_000_000),
        Contender("we:ird;name", 13, 0, 7_000_000),
    ]
    text = format_contended(cs)  # issue 21: the pid, so that another iobench run is found
    assert text == "dd[10]:52;python3[x2]:12;we_ird_name[13]:7.0"
    assert parse_contended(text) == [
        ("dd[10]", 52.0),
        ("python3[x2]", 12.0),
        ("we_ird_name[13]", 7.0),
    ]
    assert format_contended([]) == "" and parse_contended("") == [] and parse_contended(None) == []
    assert format_contended(cs, limit=1) == "dd[10]:52"


def test_stop_before_start_is_an_error() -> None:
    with pytest.raises(RuntimeError):
        ContentionWatch().stop()
