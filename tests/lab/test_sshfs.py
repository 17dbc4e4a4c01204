"""--kind sshfs: a real network filesystem in a private namespace, and nothing left after it."""

from __future__ import annotations

import os
import subprocess
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
