"""Lab options: every number validated before anything is mounted, and described in one line."""

from __future__ import annotations

from typing import Any

import pytest

from iobench.errors import UsageError
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
        ({"mb_per_s": 1e300}, "fuse", "--mb-per-s must be a positive number up to"),
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
    assert "--burst-credits-mb" in opts.daemon_args()
    assert VolumeOptions().describe() == "no added delay"


def test_state_files_with_the_old_names_still_read() -> None:
    old = {"latency_ms": 1.0, "mbps": 5.0, "burst_mbps": None, "retired_key": 3}
    assert VolumeOptions.from_dict(old) == VolumeOptions(latency_ms=1.0, mb_per_s=5.0)


def test_daemon_defaults_to_the_same_kernel_cache() -> None:
    """Before: the daemon's --cache-timeout-s defaulted to 0 while the lab's default is 1 s."""
    from iobench.lab.daemon import _parser

    args = _parser().parse_args(["/mnt/x", "--backing", "/b"])
    assert args.cache_timeout_s == DEFAULT_CACHE_S
    assert "--cache-timeout-s" in VolumeOptions().daemon_args()
