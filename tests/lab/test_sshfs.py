"""--kind sshfs: a real network filesystem in a private namespace, and nothing left after it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.lab import assert_nothing_left, make_wheel, needs_sshfs, venv_and_pip

from iobench.errors import LabError
from iobench.lab import manage
from iobench.lab.options import VolumeOptions
from iobench.system import procfs

pytestmark = pytest.mark.lab


@pytest.mark.lab
@needs_sshfs
def test_sshfs_kind_takes_a_venv_and_tears_everything_down(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path)
    mnt = tmp_path / "ssh"
    lab = manage.up(mnt, "sshfs", VolumeOptions(mb_per_s=200))
    net = dict(lab.net or {})
    try:
        assert procfs.mounted_at(str(mnt), "fuse.sshfs")
        venv_and_pip(mnt, wheel)
    finally:
        manage.down(mnt)
    assert_nothing_left(mnt)
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert net["netns"] not in netns
    assert not Path("/sys/class/net", net["veth_host"]).exists()
    assert not procfs.alive(net["sshd_pid"])
    assert not Path(lab.state_dir).exists()


@pytest.mark.lab
@needs_sshfs
def test_sshfs_failure_removes_namespace_and_veth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from iobench.lab.kinds import sshfs

    real_tools = sshfs.tools
    monkeypatch.setattr(sshfs, "tools", lambda: {**real_tools(), "sshd": "/bin/false"})
    netns_before = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links_before = set(os.listdir("/sys/class/net"))
    with pytest.raises(LabError, match="sshd exited in the lab namespace"):
        manage.up(tmp_path / "ssh", kind="sshfs")
    assert (
        subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        == netns_before
    )
    assert set(os.listdir("/sys/class/net")) == links_before
    assert_nothing_left(tmp_path / "ssh")


def _blocked_in_fuse() -> list[int]:
    """Pids with a thread waiting in the kernel for a FUSE daemon's answer."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                wchan = Path(f"/proc/{pid}/task/{tid}/wchan").read_text()
            except OSError:
                continue
            if wchan == "request_wait_answer":
                found.append(int(pid))
                break
    return found


@pytest.mark.lab
@needs_sshfs
@pytest.mark.timeout(240)
def test_a_stopped_sftp_server_does_not_hold_iobench_at_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 23, item 4, as it was done: the SFTP server SIGSTOPped mid-trial. Before, iobench
    said "stopped answering" and then stayed a zombie, its threads blocked in the kernel
    (request_wait_answer: sshfs had sent the requests on, no signal ends such a wait) until the
    server was continued. Now what touches the volume runs in child processes: iobench exits
    within its limits while they wait. ssh's keepalive is off here, so only that is tested."""
    from iobench.lab.kinds import sshfs

    monkeypatch.setattr(sshfs, "KEEPALIVE_S", 0)  # 0: ssh sends no keepalive
    mnt = tmp_path / "ssh"
    lab = manage.up(mnt, "sshfs")
    try:
        took, out, returncode, blocked = _stop_the_server_mid_trial(tmp_path, mnt, lab)
        assert returncode == 1, out
        assert "stopped answering" in out and "rows kept" in out, out
        assert blocked, "nothing waited on the server: the hang this test needs did not happen"
        assert took < 6 + 3 + 30, f"iobench ended {took:.1f} s after the server stopped"
        run = next((tmp_path / "results").iterdir())
        meta = json.loads((run / "meta.json").read_text())
        assert meta["status"] == "volume-hung", meta["status"]
        print(f"sshfs server stopped: iobench exited after {took:.1f} s, "
              f"{len(blocked)} process(es) still waiting on the server")  # fmt: skip
        deadline = time.monotonic() + 30  # continued: the helpers' calls return, they end
        while set(_blocked_in_fuse()) & set(blocked) and time.monotonic() < deadline:
            time.sleep(0.1)
        from iobench.__main__ import main

        assert main(["clean", str(mnt)]) == 0
        assert not (mnt / ".iobench-scratch").exists()
    finally:
        manage.down(mnt)
    assert_nothing_left(mnt)


def _stop_the_server_mid_trial(
    tmp_path: Path, mnt: Path, lab: object
) -> tuple[float, str, int | None, list[int]]:
    """Run the stand-in on ``mnt``, SIGSTOP the lab's SFTP server in its first trial; how
    long iobench took to exit after that, its output and status, who was left waiting."""
    from helpers import standin

    netns = dict(getattr(lab, "net", None) or {})["netns"]
    path = standin.scenario(tmp_path, "rate = 4", standin.NAIVE, repeats=3)  # 20 files: 5 s
    argv = standin.argv(tmp_path, path, "--trial-timeout", "6", "--hung-after", "3")
    argv[argv.index("--target") + 1] = str(mnt)
    server: list[int] = []
    proc = subprocess.Popen([sys.executable, "-m", "iobench", *argv], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    switch = None
    try:
        deadline = time.monotonic() + 60
        while not list(mnt.glob(".iobench-scratch/*/naive-r1/files/f3")):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
            time.sleep(0.05)
        server = [int(p) for p in subprocess.run(  # sshd and the session serving SFTP
            ["ip", "netns", "pids", netns], capture_output=True, text=True
        ).stdout.split()]  # fmt: skip
        # a dead man's switch: the server continues even if this test is killed
        pids = " ".join(map(str, server))
        switch = subprocess.Popen(["sh", "-c", f"sleep 150; kill -CONT {pids}"],
                                  start_new_session=True)  # fmt: skip
        for pid in server:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        t0 = time.monotonic()
        out, _ = proc.communicate(timeout=90)
        return time.monotonic() - t0, out, proc.returncode, _blocked_in_fuse()
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in server:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        if switch is not None:
            os.killpg(switch.pid, signal.SIGKILL)
            switch.wait()
        proc.wait()


@pytest.mark.lab
@needs_sshfs
def test_the_lab_s_sshfs_drops_a_server_that_stops_answering(tmp_path: Path) -> None:
    """ssh's keepalive: a stopped server costs its callers seconds, not until it returns."""
    from iobench.lab.kinds import sshfs

    mnt = tmp_path / "ssh"
    lab = manage.up(mnt, "sshfs")
    try:
        argv = Path(f"/proc/{lab.pid}/cmdline").read_bytes().decode().split("\0")
        options = argv[argv.index("-o") + 1].split(",")
        assert f"ServerAliveInterval={sshfs.KEEPALIVE_S}" in options
        assert f"ServerAliveCountMax={sshfs.KEEPALIVE_COUNT}" in options
    finally:
        manage.down(mnt)
    assert_nothing_left(mnt)
