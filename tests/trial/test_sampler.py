"""The sampler against real processes: exact I/O counters, tree membership, stalls, rate."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iobench.trial.sampler import Sampler, read_process, tree_pids

WRITER = (
    "import os, sys, time\n"
    "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)\n"
    "for _ in range(int(sys.argv[2])):\n"
    "    os.write(fd, b'x' * 1000)\n"
    "time.sleep(float(sys.argv[3]))\n"
)


def _run_and_read(argv: list[str]) -> tuple:
    proc = subprocess.Popen(argv)
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    counters = read_process(proc.pid)
    proc.wait()
    return counters


def test_exact_counters_include_reaped_grandchildren(tmp_path: Path) -> None:
    out = tmp_path / "f"
    base, _, _ = _run_and_read(["bash", "-c", f'{sys.executable} -c "$0" {out} 0 0; true', WRITER])
    many, _, _ = _run_and_read(
        ["bash", "-c", f'{sys.executable} -c "$0" {out} 500 0; true', WRITER]
    )
    # the python grandchild did the writes; bash reaped it, so its counts are folded in
    assert many.write_calls - base.write_calls == 500
    assert many.write_bytes - base.write_bytes == 500_000
    assert many.cpu_s >= 0


def test_samples_follow_the_tree_and_its_phase(tmp_path: Path) -> None:
    s = Sampler(hz=20, stall_after=60).start()
    proc = subprocess.Popen(
        ["bash", "-c", f'{sys.executable} -c "$0" {tmp_path / "f"} 3000 0.6; true', WRITER]
    )
    s.watch(proc.pid, "install")
    time.sleep(0.3)
    assert len(tree_pids(proc.pid)) == 2  # bash and its python child
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    c, _, _ = read_process(proc.pid)
    proc.wait()
    s.finish(c)
    time.sleep(0.1)
    res = s.stop()
    assert res.stalls == []
    rows = res.rows
    assert 10 <= len(rows) <= 30  # ~0.75 s at 20 Hz
    assert max(r["tree_procs"] for r in rows) == 2
    assert {r["phase"] for r in rows} == {"install"}
    assert rows[-1]["tree_write_calls"] == c.write_calls >= 3000
    assert res.self_cpu_s < 0.5


def test_stall_is_detected_and_closed() -> None:
    s = Sampler(hz=20, stall_after=0.4).start()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.2)"])
    s.watch(proc.pid, "install")
    time.sleep(0.8)
    assert s.current_stall_s() > 0.3  # seen live, while it lasts
    proc.wait()
    res = s.stop()
    assert len(res.stalls) == 1
    st = res.stalls[0]
    assert st.phase == "install"
    assert st.length_s == pytest.approx(s.elapsed(), abs=0.3)


def test_rate_is_kept_without_drift() -> None:
    s = Sampler(hz=50).start()
    time.sleep(1.0)
    res = s.stop()
    assert 45 <= res.ticks <= 52
