"""What a new host lets go of from the mounts it was copied from (no root needed)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from iobench.fleet import serve
from iobench.fleet.netns import foreign_mounts

MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
23 27 0:22 / /sys rw,relatime - sysfs sysfs rw
30 23 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw
24 27 0:6 / /dev rw,relatime - devtmpfs devtmpfs rw
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw
26 25 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
31 27 0:30 / /run rw - tmpfs tmpfs rw
32 31 0:31 / /run/user/0 rw - tmpfs tmpfs rw
40 31 0:40 / /run/iobench-lab/x/backing rw - tmpfs iobench-lab-backing rw
41 27 0:41 / /tmp/labwork/mnt rw - fuse.iobench-lab iobench rw
42 27 0:42 / /home/u/vol rw - fuse.sshfs root@h:/x rw
43 31 0:4 net:[4026532175] /run/netns/other rw - nsfs nsfs rw
44 27 7:0 / /tmp/img rw - squashfs /dev/loop0 ro
45 27 254:1 / /data rw - xfs /dev/vdb rw
"""


def test_a_host_lets_go_of_volumes_namespaces_and_test_mounts_deepest_first() -> None:
    gone = foreign_mounts(MOUNTINFO)
    assert gone == [
        "/run/iobench-lab/x/backing", "/home/u/vol", "/run/netns/other", "/tmp/labwork/mnt",
        "/dev/shm", "/dev/shm", "/tmp/img",
    ]  # fmt: skip
    # the system's own stay: the root, /run, /dev, /sys and cgroups, a user's runtime
    # folder, and block devices (a /home or /data holds what the hosts run)
    kept = {"/", "/proc", "/sys", "/sys/fs/cgroup", "/dev", "/run", "/run/user/0", "/data"}
    assert not kept & set(gone)


@pytest.mark.lab
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root")
def test_a_mount_gone_since_the_list_was_read_does_not_stop_a_new_host(tmp_path: Path) -> None:
    """The list is read a moment before the host lets go: a mount another test removed in
    between (its folder too, which detaches it in every namespace) is already let go of; one
    still there goes, and the host's set-up runs on (the CI failure of stop 42)."""
    there, gone = tmp_path / "there", tmp_path / "gone"
    there.mkdir()
    script = serve.setup_script("h", [str(gone), str(there)], str(tmp_path / "vol"), Path("/x"))
    lets_go = [line for line in script.splitlines() if line.startswith("umount")]
    inside = "\n".join([
        "set -e",
        f"mount -t tmpfs iobench-test {there}",
        *lets_go,
        f"! mountpoint -q {there}",
        "echo held",
    ])  # fmt: skip
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", inside],
                       capture_output=True, text=True, timeout=30)  # fmt: skip
    assert r.returncode == 0 and r.stdout.strip() == "held", r.stderr
