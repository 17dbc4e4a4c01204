"""iobench.trial.process: a phase's tree is watched, bounded in time and ended whole — for real."""

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

from iobench.system import procfs
from iobench.trial.process import Limits, end_strays, our_children, run_phase, set_subreaper
from iobench.trial.sampler import Sampler

PY = sys.executable


def _phase(
    tmp_path: Path,
    code: str,
    limits: Limits | None = None,
    hz: float = 20.0,
    stall_after: float = 0.5,
):
    limits = limits or Limits()
    sampler = Sampler(hz, stall_after=stall_after).start()
    try:
        return run_phase(
            "test",
            [PY, "-c", textwrap.dedent(code)],
            dict(os.environ),
            tmp_path,
            sampler,
            tmp_path / "test.out",
            limits,
        )
    finally:
        sampler.stop()


def _wait_gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while procfs.alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_phase_that_succeeds_gives_its_output_and_counters(tmp_path: Path) -> None:
    r = _phase(tmp_path, "import sys; sys.stdout.write('x' * 100000); print('done')")
    assert r.ok and r.returncode == 0 and r.stopped == "" and r.error == ""
    assert r.output.endswith("done\n") and len(r.output) <= 20_000  # only the tail is kept
    assert r.counters.write_bytes >= 100000  # read from the zombie, children folded in
    assert not (tmp_path / "test.out").exists()  # kept only when the phase fails
    assert r.seconds > 0


def test_a_failing_phase_keeps_its_output_file(tmp_path: Path) -> None:
    r = _phase(tmp_path, "import sys; print('boom'); sys.exit(3)")
    assert not r.ok and r.returncode == 3 and r.stopped == ""
    assert "boom" in (tmp_path / "test.out").read_text()


def test_an_unstartable_phase_is_a_result_not_an_exception(tmp_path: Path) -> None:
    sampler = Sampler(10).start()
    try:
        r = run_phase(
            "x",
            [str(tmp_path / "no-such-program")],
            {},
            tmp_path,
            sampler,
            tmp_path / "x.out",
            Limits(),
        )
    finally:
        sampler.stop()
    assert not r.ok and r.returncode is None and "cannot start" in r.error


def test_stall_timeout_ends_a_silent_tree(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    code = f"""
        import subprocess, time
        p = subprocess.Popen(['sleep', '300'])
        open({str(pidfile)!r}, 'w').write(str(p.pid))
        time.sleep(300)
    """
    t0 = time.monotonic()
    r = _phase(tmp_path, code, Limits(stall_timeout_s=1.5))
    assert r.stopped == "stalled" and "--stall-timeout" in r.error and not r.ok
    assert time.monotonic() - t0 < 30
    assert _wait_gone(int(pidfile.read_text()))  # the grandchild went with the tree


def test_a_stalled_phase_s_line_names_the_file_it_waits_on(tmp_path: Path) -> None:
    """Issue 35: a loader blocked on a FIFO in its data said only "no read or write
    progress"; the line now names what the tree holds open (a real FIFO, read forever)."""
    fifo = tmp_path / "pipe.bin"
    os.mkfifo(fifo)
    code = f"""
        import os
        fd = os.open({str(fifo)!r}, os.O_RDWR)  # its own writer: the read waits, never fails
        os.read(fd, 1)
    """
    r = _phase(tmp_path, code, Limits(stall_timeout_s=1.5))
    assert r.stopped == "stalled" and f"holding {fifo} open" in r.error, r.error
    assert "\n" not in r.error


def test_wall_clock_limit_ends_a_phase_that_keeps_doing_io(tmp_path: Path) -> None:
    """A hung phase that still writes never stalls; the deadline ends it (issue 9, item 8)."""
    code = """
        import time
        while True:
            print('still busy', flush=True)
            time.sleep(0.02)
    """
    t0 = time.monotonic()
    r = _phase(tmp_path, code, Limits(stall_timeout_s=1.0, deadline=time.monotonic() + 2.0))
    took = time.monotonic() - t0
    assert r.stopped == "timeout" and "time limit" in r.error and not r.ok
    assert 1.5 < took < 30
    assert "still busy" in r.output


def test_a_daemon_started_in_a_new_session_ends_with_the_phase(tmp_path: Path) -> None:
    """A ready check that leaves a process in its own session: the subreaper adopts it and
    the phase's end kills it (it escaped the process group)."""
    pidfile = tmp_path / "daemon.pid"
    code = f"""
        import subprocess
        p = subprocess.Popen(['sleep', '300'], start_new_session=True)
        open({str(pidfile)!r}, 'w').write(str(p.pid))
    """
    assert set_subreaper(True)
    try:
        r = _phase(tmp_path, code)
    finally:
        set_subreaper(False)
    assert r.ok
    assert _wait_gone(int(pidfile.read_text()))


def test_end_strays_leaves_older_children_alone(tmp_path: Path) -> None:
    old = subprocess.Popen(["sleep", "300"])
    try:
        keep = our_children()
        young = subprocess.Popen(["sleep", "300"])
        killed = end_strays(keep)
        assert young.pid in killed and old.pid not in killed
        assert young.poll() is not None and old.poll() is None
    finally:
        old.kill()
        old.wait()


def test_installer_dies_when_iobench_is_killed(tmp_path: Path) -> None:
    """SIGKILL of iobench must not leave its installer running (PR_SET_PDEATHSIG)."""
    pidfile = tmp_path / "phase.pid"
    driver = tmp_path / "driver.py"
    driver.write_text(
        textwrap.dedent(f"""
        import os, sys
        from pathlib import Path
        from iobench.trial.process import Limits, run_phase
        from iobench.trial.sampler import Sampler
        s = Sampler(10).start()
        code = "import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(300)"
        run_phase('install', [sys.executable, '-c', code], dict(os.environ), Path({str(tmp_path)!r}), s,
                  Path({str(tmp_path / "p.out")!r}), Limits())
    """)
    )
    proc = subprocess.Popen([PY, str(driver)])
    try:
        deadline = time.monotonic() + 30
        while not (pidfile.exists() and pidfile.read_text()):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        phase_pid = int(pidfile.read_text())
        assert psutil.Process(phase_pid).ppid() == proc.pid
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert _wait_gone(phase_pid), "the installer outlived a SIGKILLed iobench"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("signum", [signal.SIGINT])
def test_ctrl_c_ends_the_tree_and_is_raised_again(tmp_path: Path, signum: int) -> None:
    pidfile = tmp_path / "p.pid"
    code = f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(300)"
    # a shell without job control starts background commands with SIGINT ignored, and Python
    # then keeps it ignored: Ctrl-C's own handler, whatever started the suite
    previous = signal.signal(signum, signal.default_int_handler)
    sampler = Sampler(10).start()
    calls = []

    def tick(elapsed: float) -> None:
        calls.append(elapsed)
        if pidfile.exists() and pidfile.read_text() and len(calls) > 2:
            os.kill(os.getpid(), signum)

    try:
        with pytest.raises(KeyboardInterrupt):
            run_phase(
                "x",
                [PY, "-c", code],
                dict(os.environ),
                tmp_path,
                sampler,
                tmp_path / "x.out",
                Limits(),
                tick,
            )
    finally:
        sampler.stop()
        signal.signal(signum, previous)
    assert _wait_gone(int(pidfile.read_text()))
