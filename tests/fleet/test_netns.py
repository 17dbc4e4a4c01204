"""What a new host lets go of from the mounts it was copied from (no root needed)."""

from __future__ import annotations

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
