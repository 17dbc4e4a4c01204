"""The lab's presets (iobench/lab/presets.py): EFS's published figures turned into volume
options, the price presets that name the same products, and a real efs-bursting volume whose
read rate falls where its credit balance (in the stats file's history) runs out."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from helpers.lab import needs_fuse

from iobench.cost.prices import find_storage_preset
from iobench.errors import UsageError
from iobench.lab import manage
from iobench.lab.presets import PRESETS, bursting_figures, preset_options

MIB_MB = 2**20 / 1e6


def test_bursting_follows_the_stored_size_as_aws_says() -> None:
    # AWS: 50 KiB/s per GiB stored, 1 GiB at least; burst 100 MiB/s, per TiB above 1 TiB;
    # credit cap 2.1 TiB, per TiB above 1 TiB
    assert bursting_figures(100) == pytest.approx((100 * 50 / 1024, 100, 2.1 * 1024))
    assert bursting_figures(512) == pytest.approx((25, 100, 2.1 * 1024))  # the guide's table
    assert bursting_figures(2048) == pytest.approx((100, 200, 4.2 * 1024))
    assert bursting_figures(0.1)[0] == pytest.approx(50 / 1024)  # the 1 GiB minimum
    o = preset_options("efs-bursting", size_gib=100)
    assert o.mb_per_s == pytest.approx(100 * 50 / 1024 * MIB_MB)  # 5.12 MB/s
    assert o.burst_mb_per_s == pytest.approx(100 * MIB_MB)
    assert o.burst_credits_mb == o.burst_cap_mb == pytest.approx(2.1 * 2**40 / 1e6)  # a new fs
    assert preset_options("efs-bursting", 100, credits_gib=1).burst_credits_mb == pytest.approx(
        2**30 / 1e6
    )
    assert o.metered and o.write_latency_ms == 2.7 and o.latency_ms == o.data_latency_ms == 1.0


def test_every_preset_validates_and_says_what_is_estimated() -> None:
    for name, p in PRESETS.items():
        options = preset_options(name).validate()
        assert options.preset == name and p.source and p.date
        assert set(p.estimates) <= set(options.to_dict()), p.estimates
    assert preset_options("efs-provisioned", throughput_mib_s=250).mb_per_s == pytest.approx(
        250 * MIB_MB
    )
    assert preset_options("efs-elastic").client_mb_per_s == pytest.approx(1500 * MIB_MB)
    assert preset_options("efs-provisioned").client_mb_per_s == pytest.approx(500 * MIB_MB)
    assert not preset_options("efs-elastic").metered  # no credits to meter against
    with pytest.raises(UsageError, match="--throughput-mib-s must be from 1 to 3414"):
        preset_options("efs-provisioned", throughput_mib_s=5000)


@pytest.mark.parametrize(
    "kwargs, says",
    [  # issue 35 (low): each was accepted (the default volume, or a capped balance)
        ({"size_gib": float("nan")}, "--size-gib must be a number above 0"),
        ({"size_gib": -1.0}, "--size-gib must be a number above 0"),
        ({"size_gib": 0.0}, "--size-gib must be a number above 0"),
        ({"size_gib": 5e6}, "at most 4,000,000"),
        ({"credits_gib": 1e308}, r"--credits-gib must be from 0 to 2,150.4 \(the credit cap"),
        ({"credits_gib": float("nan")}, "--credits-gib must be from 0"),
        ({"credits_gib": -0.5}, "--credits-gib must be from 0"),
    ],
)
def test_a_bursting_volume_s_size_and_credits_are_finite_and_bounded(
    kwargs: dict[str, float], says: str
) -> None:
    with pytest.raises(UsageError, match=says):
        preset_options("efs-bursting", **kwargs)


def test_a_provisioned_rate_is_one_aws_sells() -> None:
    """Issue 35 (low): 1e-300 MiB/s mounted a volume where every create failed with EINVAL."""
    for bad in (1e-300, 0.5, float("nan"), float("inf")):
        with pytest.raises(UsageError, match="--throughput-mib-s must be from 1 to 3414"):
            preset_options("efs-provisioned", throughput_mib_s=bad)


def test_a_bursting_volume_may_start_with_no_credit() -> None:
    """At its baseline from the first byte: a valid volume (before, 0 credits failed validation
    with a message about --burst-credits-mb, a flag not given)."""
    options = preset_options("efs-bursting", size_gib=100, credits_gib=0).validate()
    assert options.burst_credits_mb == 0 and options.burst_cap_mb == pytest.approx(
        2.1 * 2**40 / 1e6
    )


def test_the_rented_presets_have_price_presets_of_the_same_name() -> None:
    """`iobench run --storage NAME` and `iobench lab up --preset NAME` name one product."""
    for name, p in PRESETS.items():
        if p.rented:
            assert (
                find_storage_preset(name)
                .name.lower()
                .replace(" ", "-")
                .startswith(name.split("-")[0])
            )
    assert find_storage_preset("efs-elastic").usd_per_gb_read > 0  # Elastic bills reads
    assert find_storage_preset("efs-bursting").usd_per_gb_read == 0  # Bursting does not
    assert find_storage_preset("efs").name == "EFS Standard"  # the old names still work


@needs_fuse
@pytest.mark.lab
@pytest.mark.timing  # rates through the daemon: a loaded machine blurs the edge
def test_an_efs_bursting_volume_falls_to_its_baseline_when_the_credits_run_out(
    tmp_path: Path,
) -> None:
    """A 100 GiB Bursting volume with 20 MB of credit: reads meter at a third, so about
    60 MB pass at the 104.9 MB/s burst (while the balance also earns 5.12 MB/s), then reads
    move at 3 x 5.12 MB/s; the stats file's history shows the balance reaching zero."""
    backing = tmp_path / "backing"
    backing.mkdir()
    for i in range(10):
        (backing / f"f{i}").write_bytes(os.urandom(10_000_000))
    options = preset_options("efs-bursting", size_gib=100, credits_gib=20e6 / 2**30)
    stats = tmp_path / "stats.json"
    mnt = tmp_path / "efs"
    manage.up(mnt, "fuse", options, backing=backing, stats=stats)
    try:
        marks = []
        t0 = time.monotonic()
        for i in range(10):  # 100 MB, 10 MB a file, timed one file at a time
            with open(mnt / f"f{i}", "rb", buffering=0) as fh:
                while fh.read(1 << 20):
                    pass
            marks.append(time.monotonic() - t0)
    finally:
        manage.down(mnt)
    rates = [10 / (b - a) for a, b in zip([0.0, *marks], marks, strict=False)]
    assert max(rates[:3]) > 40  # at the burst rate (the daemon's own cost keeps it under 105)
    assert min(rates[-3:]) == pytest.approx(3 * 5.12, rel=0.2)  # the baseline, reads at a third
    history = json.loads(stats.read_text())["credits_history"]
    assert history[0][1] == pytest.approx(20, abs=0.5)  # the balance it was given, at mount
    assert any(mb < 1 for _, mb in history)  # and it ran out
    assert json.loads(stats.read_text())["schema"] == 3
