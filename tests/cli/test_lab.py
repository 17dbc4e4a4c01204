"""``iobench lab``'s command line: parsing, validation before mounting, status lines, and a real up/status/down."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from helpers.lab import assert_nothing_left, needs_fuse

from iobench.cli import lab as lab_cli
from iobench.errors import UsageError
from iobench.lab import manage, state
from iobench.lab.options import VolumeOptions


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="iobench")
    lab_cli.register(parser.add_subparsers(dest="command"))
    return parser


def test_cli_parses_every_subcommand() -> None:
    p = _parser()
    args = p.parse_args(
        "lab up /mnt/slow --latency-ms 1.5 --data-latency-ms 0.2 --iops 500 --mb-per-s 20 "
        "--burst-mb-per-s 200 --burst-credits-mb 50 --stats /tmp/s.json --backing /srv/b".split()
    )
    assert args.func is lab_cli.handle_up
    assert lab_cli.options_from_args(args) == (VolumeOptions(1.5, 0.2, 500, 20, 200, 50), [])
    assert (args.kind, args.backing, args.stats) == ("fuse", "/srv/b", "/tmp/s.json")
    assert p.parse_args(["lab", "down", "/mnt/slow"]).func is lab_cli.handle_down
    assert p.parse_args(["lab", "status"]).func is lab_cli.handle_status
    with pytest.raises(SystemExit):
        p.parse_args(["lab"])  # a subcommand is required


def test_cli_rejects_bad_numbers_before_mounting(monkeypatch: pytest.MonkeyPatch) -> None:
    def must_not_run(*a: Any, **k: Any) -> None:
        raise AssertionError("manage.up ran despite a bad number")

    monkeypatch.setattr(manage, "up", must_not_run)
    args = _parser().parse_args(["lab", "up", "/mnt/x", "--latency-ms", "-1"])
    with pytest.raises(UsageError, match="--latency-ms"):
        args.func(args)
    args = _parser().parse_args(["lab", "up", "/mnt/x", "--kind", "sshfs", "--iops", "10"])
    with pytest.raises(UsageError, match="--iops"):
        args.func(args)


def test_a_preset_with_flags_beside_it_says_what_they_replaced() -> None:
    p = _parser()
    options, changed = lab_cli.options_from_args(
        p.parse_args("lab up /m --preset efs-elastic --latency-ms 2".split())
    )
    assert options.preset == "efs-elastic" and options.latency_ms == 2
    assert options.write_latency_ms == 2.7 and changed == ["--latency-ms 2 instead of 1.0"]
    options, _ = lab_cli.options_from_args(
        p.parse_args("lab up /m --preset efs-bursting --size-gib 100 --credits-gib 0.5".split())
    )
    assert options.burst_credits_mb == pytest.approx(0.5 * 2**30 / 1e6)
    for argv, says in [
        ("lab up /m --size-gib 100", "--size-gib needs --preset"),
        ("lab up /m --preset efs-elastic --credits-gib 1", "efs-elastic has no credits"),
        ("lab up /m --preset efs-bursting --throughput-mib-s 9", "efs-provisioned's"),
        ("lab up /m --preset efs", "unknown --preset 'efs'; known: efs-bursting"),
    ]:
        with pytest.raises(UsageError, match=says):
            lab_cli.options_from_args(p.parse_args(argv.split()))


def test_lab_presets_lists_every_preset_within_80_columns(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = _parser().parse_args(["lab", "presets"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    for name in (
        "efs-bursting",
        "efs-provisioned",
        "efs-elastic",
        "runpod-volume",
        "nfs-lan",
        "local-nvme",
    ):
        assert f"\n{name} " in out and f"{name}: " in out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "25.6 (burst 104.9)" in out  # 500 GiB: 25 MiB/s baseline, 100 MiB/s burst, in MB/s


def test_status_lines_show_health_and_counters() -> None:
    ok = manage.LabStatus(
        "/mnt/a",
        "fuse",
        42,
        {"latency_ms": 1.0},
        True,
        True,
        None,
        {"total_ops": 10, "delayed_s": 0.25},
    )
    bad = manage.LabStatus(
        "/mnt/b",
        "sshfs",
        None,
        {"mb_per_s": 5.0},
        False,
        False,
        "stale: daemon gone, not mounted",
        None,
    )
    lines = lab_cli.status_lines([ok, bad])
    assert lines[0] == "/mnt/a  fuse  latency 1 ms  pid 42  ok  10 ops, 0.2 s delayed"
    assert lines[1] == "/mnt/b  sshfs  5 MB/s  pid -  stale: daemon gone, not mounted"
    assert lab_cli.status_lines([]) == ["no iobench lab volumes"]


def test_unit_names_and_their_old_spellings() -> None:
    """--mb-per-s names its unit; --mbps (the same MB/s) still parses but is not shown."""
    p = _parser()
    new, _ = lab_cli.options_from_args(
        p.parse_args("lab up /m --mb-per-s 20 --burst-mb-per-s 90 --burst-credits-mb 5".split())
    )
    old, _ = lab_cli.options_from_args(
        p.parse_args("lab up /m --mbps 20 --burst-mbps 90 --burst-credits-mb 5".split())
    )
    assert new == old == VolumeOptions(mb_per_s=20, burst_mb_per_s=90, burst_credits_mb=5)
    up_help = (
        p._subparsers._group_actions[0]
        .choices["lab"]
        ._subparsers._group_actions[0]
        .choices["up"]
        .format_help()
    )
    assert "--mb-per-s" in up_help and "--mbps" not in up_help


@pytest.mark.lab
@needs_fuse
def test_cli_up_status_down(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = _parser()
    mnt = tmp_path / "cli"
    backing = tmp_path / "backing"
    backing.mkdir()
    args = p.parse_args(["lab", "up", str(mnt), "--latency-ms", "0.5", "--backing", str(backing)])
    try:
        assert args.func(args) == 0
        assert "mounted" in capsys.readouterr().out
        (mnt / "hello").write_text("hi")
        assert (backing / "hello").read_text() == "hi"  # a passthrough of the backing folder
        args = p.parse_args(["lab", "status"])
        assert args.func(args) == 0
        assert f"{manage.mount_path(mnt)}  fuse  latency 0.5 ms" in capsys.readouterr().out
    finally:
        args = p.parse_args(["lab", "down", str(mnt)])
        assert args.func(args) == 0
    assert "unmounted" in capsys.readouterr().out
    assert (backing / "hello").exists()  # a given backing folder is left alone
    assert_nothing_left(mnt)
    assert not list(state.state_root().glob(f"{state.mount_id(manage.mount_path(mnt))}*"))


def test_status_says_what_each_direction_delivered_against_what_its_options_allow() -> None:
    """Issue 39: under a volume's line, its reads and writes since mounting."""
    meter = {"requests": 100, "bytes": 100_000_000, "busy_s": 2.0, "span_s": 2.0, "intended_s": 1.0}
    stats = {
        "total_ops": 200,
        "delayed_s": 0.0,
        "options": {"mb_per_s": 100.0, "preset": "nfs-lan"},
        "data": {
            "read": {**meter, "pipe_s": 1.0},  # 50 of the 100 MB/s it allows
            "write": {**meter, "busy_s": 1.02, "span_s": 1.02, "pipe_s": 1.0},  # 98: faithful
        },
    }
    e = manage.LabStatus("/mnt/a", "fuse", 42, {"mb_per_s": 100.0, "preset": "nfs-lan"}, True,
                         True, None, stats)  # fmt: skip
    lines = lab_cli.status_lines([e])
    assert lines[1:] == [
        "  reads: 50 MB/s while busy (the lab gave 50 of the preset's 100 MB/s)",
        "  writes: 98 MB/s while busy, of 100 MB/s its options allow",
    ]
    small = {**stats, "data": {"read": {**meter, "bytes": 10**6, "pipe_s": 0.01}}}
    assert lab_cli.status_lines([dataclasses.replace(e, stats=small)])[1] == (
        "  reads: 0.5 MB/s while busy (1.0 MB moved: under 8.0 MB, too little to judge)"
    )
