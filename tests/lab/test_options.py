"""Lab options: every number validated before anything is mounted, and described in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from iobench.errors import LabError, UsageError
from iobench.lab.options import DEFAULT_CACHE_S, VolumeOptions


@pytest.mark.parametrize(
    "kwargs, kind, fragment",
    [
        ({"latency_ms": -1.0}, "fuse", "--latency-ms"),
        ({"data_latency_ms": float("nan")}, "fuse", "--data-latency-ms"),
        ({"iops": 0.0}, "fuse", "--iops"),
        ({"mb_per_s": -5.0}, "fuse", "--mb-per-s"),
        ({"mb_per_s": 20.0, "burst_mb_per_s": 200.0}, "fuse", "go together"),
        ({"burst_mb_per_s": 200.0, "burst_credits_mb": 50.0}, "fuse", "needs --mb-per-s"),
        (
            {"mb_per_s": 20.0, "burst_mb_per_s": 10.0, "burst_credits_mb": 5.0},
            "fuse",
            "must be above",
        ),
        ({"cache_s": -1.0}, "fuse", "--cache-s"),
        # every number finite and sane (before: inf rates and 1e300 credits were accepted)
        ({"iops": float("inf")}, "fuse", "--iops"),
        # issue 35 (low): a rate this small made every request's wait overflow (EINVAL)
        ({"iops": 1e-300}, "fuse", "--iops must be a number from 1 to"),
        ({"mb_per_s": 1e-300}, "fuse", "--mb-per-s must be a number from 0.001 to"),
        (
            {"mb_per_s": 1.0, "client_mb_per_s": 1e-9},
            "fuse",
            "--client-mb-per-s must be a number from 0.001",
        ),
        ({"mb_per_s": 1e300}, "fuse", "--mb-per-s must be a number from 0.001 to"),
        (
            {"mb_per_s": 10.0, "burst_mb_per_s": 20.0, "burst_credits_mb": float("inf")},
            "fuse",
            "--burst-credits-mb",
        ),
        ({"cache_s": float("inf")}, "fuse", "--cache-s"),
        ({"latency_ms": True}, "fuse", "--latency-ms"),
        ({"latency_ms": 1.0}, "sshfs", "needs --kind fuse"),
        ({}, "nfs", "--kind"),
    ],
)
def test_bad_options_are_usage_errors(kwargs: dict[str, Any], kind: str, fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment):
        VolumeOptions(**kwargs).validate(kind)


def test_good_options_validate_and_describe_themselves() -> None:
    opts = VolumeOptions(
        latency_ms=1, mb_per_s=20, burst_mb_per_s=200, burst_credits_mb=50
    ).validate()
    assert opts.describe() == "latency 1 ms, 20 MB/s (burst 200 MB/s for 50 MB)"
    assert VolumeOptions.from_dict(opts.to_dict()) == opts  # the daemon's one dialect
    assert VolumeOptions().describe() == "no added delay"


def test_state_files_with_the_old_names_still_read() -> None:
    old = {"latency_ms": 1.0, "mbps": 5.0, "burst_mbps": None, "retired_key": 3}
    assert VolumeOptions.from_dict(old) == VolumeOptions(latency_ms=1.0, mb_per_s=5.0)


def test_the_daemon_reads_the_options_the_kind_writes(tmp_path: Path) -> None:
    """One spelling of every option: the fuse kind writes the daemon's configuration from
    ``VolumeOptions.to_dict()`` and the daemon reads it back into the same options (before,
    two flag dialects: ``--mb-per-s`` for the CLI, ``--mbps`` for the daemon)."""
    from iobench.lab.daemon import DaemonConfig, main

    opts = VolumeOptions(latency_ms=0.5, mb_per_s=20, burst_mb_per_s=90, burst_credits_mb=5)
    path = tmp_path / "daemon.json"
    path.write_text(json.dumps({"mountpoint": "/m", "backing": "/b", "options": opts.to_dict()}))
    config = DaemonConfig.read(path)
    assert VolumeOptions.from_dict(config.options) == opts
    assert VolumeOptions.from_dict({}).cache_s == DEFAULT_CACHE_S  # the same kernel cache
    assert main([]) == 2 and main([str(tmp_path / "missing.json")]) == 2


@pytest.mark.parametrize("folder", ["/etc", "/usr", "/usr/local", "/boot", "/var/lib", "/var/log"])
def test_a_system_folder_is_never_a_lab_backing(folder: str, tmp_path: Path) -> None:
    """Issue 23 (low): `lab up --backing /etc` was accepted; the volume writes into it.
    Issue 35 (low): `/var/lib` still was."""
    from iobench.lab import manage

    with pytest.raises(LabError, match="refusing the (system|root) folder"):
        manage._check_backing(folder, str(tmp_path / "mnt"))


def test_a_folder_other_users_can_write_is_never_a_lab_backing(tmp_path: Path) -> None:
    """Issue 35 (low): `lab up --backing /tmp` was accepted: the daemon, as root, would serve
    and write through whatever another user planted there. Sticky or not, a folder others can
    write is refused; one of your own inside it is not."""
    from iobench.lab import manage

    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    below = tmp_path / "open" / "inner"  # a folder of one's own below a non-sticky 0777 one
    below.mkdir(parents=True, mode=0o700)
    (tmp_path / "open").chmod(0o777)
    mnt = "/mnt/iobench-test-never-mounted"  # a name only: beside /tmp, not inside it
    assert manage._check_backing(mine, mnt) == str(mine)
    for folder in (shared, "/tmp"):
        with pytest.raises(LabError, match=r"other users can write in .* \(mode 1777\)"):
            manage._check_backing(folder, mnt)
    with pytest.raises(LabError, match="writable by other users and not sticky"):
        manage._check_backing(below, mnt)
