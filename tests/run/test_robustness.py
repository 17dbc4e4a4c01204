"""Never silent, never lost, with real installs: a disk that fills under pip, an installer that
fails, an index that cannot be reached, a lab volume that hangs mid-install. (The runner's
plumbing — signals, resume, stalls, locks, a full results disk — is tested on the stand-in
workload in tests/run/test_runner.py.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import standin
from helpers.files import DATA, TINY_PROFILE, only_run_dir, read_csv

from iobench.__main__ import main

TINY = DATA / "tiny.toml"

pytestmark = pytest.mark.e2e

HEAD = f"""
[scenario]
name = "robust"
packages = ["tiny-core"]
wheels = "{TINY_PROFILE}"
ready = "import tiny_core; tiny_core.check()"
repeats = 1
size_mb = 1
"""


def _scenario(tmp_path: Path, body: str, head: str = HEAD) -> Path:
    p = tmp_path / "s.toml"
    p.write_text(head + body)
    return p


def test_disk_full_mid_trial_is_recorded_and_run_goes_on(tmpfs, tmp_path: Path) -> None:
    small = tmpfs(
        size="6m", name="small"
    )  # passes the (declared 1 MB) space check, fills mid-trial
    s = _scenario(
        tmp_path,
        '[configs.full]\nvenv="target"\ntmpdir="tmp"\ncache="off"\n'
        '[configs.fine]\nvenv="tmp"\ntmpdir="tmp"\ncache="off"\n',
    )
    rc = main(
        [
            "run",
            "--scenario",
            str(s),
            "--target",
            str(small),
            "--tmp",
            str(tmp_path),
            "--results",
            str(tmp_path / "r"),
            "--no-report",
            "--no-probe",
            "--quiet",
        ]
    )
    rows = {r["config"]: r for r in read_csv(only_run_dir(tmp_path / "r") / "trials.csv")}
    assert rows["full"]["status"] == "failed"
    assert "ENOSPC" in rows["full"]["error"] and "No space left" in rows["full"]["error"]
    assert rows["fine"]["status"] == "ok"
    assert rc == 1  # a trial did not succeed
    scratch = small / ".iobench-scratch"
    assert not scratch.exists() or {p.name for p in scratch.iterdir()} <= {".iobench-sentinel"}
    st = os.statvfs(small)
    assert (st.f_blocks - st.f_bfree) * st.f_frsize < 512 * 1024  # the venv was removed


def test_failing_installer_recorded_with_output_tail(tmp_path: Path) -> None:
    head = HEAD.replace(
        'packages = ["tiny-core"]', 'packages = ["tiny-core", "no-such-package==9.9"]'
    )
    s = _scenario(
        tmp_path,
        '[configs.a]\nvenv="tmp"\ntmpdir="tmp"\ncache="off"\n'
        '[configs.b]\nvenv="target"\ntmpdir="tmp"\ncache="off"\n',
        head,
    )
    rc = main(
        [
            "run",
            "--scenario",
            str(s),
            "--target",
            str(tmp_path),
            "--tmp",
            str(tmp_path),
            "--results",
            str(tmp_path / "r"),
            "--no-report",
            "--no-probe",
            "--quiet",
        ]
    )
    rows = read_csv(only_run_dir(tmp_path / "r") / "trials.csv")
    assert [r["status"] for r in rows] == ["failed", "failed"]  # recorded, and the run went on
    assert "pip failed (exit 1)" in rows[0]["error"] and "no-such-package" in rows[0]["error"]
    assert rc == 1


def test_unreachable_index_fails_early(tmp_path: Path, capsys) -> None:
    rc = main(
        [
            "run",
            "--scenario",
            "torch",
            "--index-url",
            "http://127.0.0.1:9/simple/",
            "--target",
            str(tmp_path),
            "--results",
            str(tmp_path / "r"),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 1 and "cannot be reached" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


@pytest.mark.lab
@pytest.mark.timeout(600)
def test_hung_fuse_volume_during_install_ends_the_run_with_its_row(tmp_path: Path) -> None:
    """A SIGSTOPped FUSE daemon mid-install (issue 9, item 9): iobench ends within its limits,
    records the row, gives up deleting on the hung volume, says where, and exits."""
    from iobench.lab import manage
    from iobench.lab.options import VolumeOptions

    reason = manage.lab_unavailable_reason()
    if reason:
        pytest.skip(reason)
    tmp, results, vol = tmp_path / "tmp", tmp_path / "results", tmp_path / "vol"
    tmp.mkdir()
    s = _scenario(
        tmp_path,
        '[configs.naive]\nvenv="target"\ntmpdir="target"\ncache="off"\n'
        '[configs.local]\nvenv="tmp"\ntmpdir="tmp"\ncache="off"\n',
    )
    lab = manage.up(vol, options=VolumeOptions(latency_ms=2))
    proc = switch = None
    try:
        argv = [
            sys.executable,
            "-m",
            "iobench",
            "run",
            "--scenario",
            str(s),
            "--configs",
            "naive,local",
            "--target",
            str(vol),
            "--tmp",
            str(tmp),
            "--results",
            str(results),
            "--no-report",
            "--no-probe",  # and naive first (seed 1): the hang comes in its first trial
            "--order-seed",
            "1",
            "--trial-timeout",
            "8",
            "--hung-after",
            "3",
        ]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        standin.wait_for(
            lambda: list(results.glob("*/logs/naive-r1.install.out")), 120, "naive's install", proc
        )
        time.sleep(0.3)
        # a dead man's switch: the daemon continues after 200 s even if this test is killed
        # (a stopped daemon would hang every later walk of the temp folder)
        switch = subprocess.Popen(
            ["sh", "-c", f"sleep 200; kill -CONT {lab.pid}"], start_new_session=True
        )
        os.kill(lab.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        out, _ = proc.communicate(timeout=150)
        took = time.monotonic() - t0
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        if lab.pid:
            os.kill(lab.pid, signal.SIGCONT)
        if switch is not None:
            os.killpg(switch.pid, signal.SIGKILL)
            switch.wait()
        manage.down(vol)
    run = only_run_dir(results)
    rows = read_csv(run / "trials.csv")
    naive = [r for r in rows if r["config"] == "naive"]
    assert len(naive) == 1 and naive[0]["status"] == "failed", out
    assert "time limit" in naive[0]["error"], naive[0]["error"]
    assert proc.returncode == 1, out
    assert "stopped answering" in out and str(vol) in out, out
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "volume-hung" and str(vol) in meta["status_reason"]
    assert "no progress for 3 s" in out, out  # --hung-after
    assert took < 8 + 3 + 40, f"took {took:.0f} s after the hang"
    print(
        f"hung volume: iobench ended {took:.1f} s after SIGSTOP (trial limit 8 s, hung after 3 s)"
    )
