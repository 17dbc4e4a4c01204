"""iobench lab: rate-limit arithmetic with literal numbers, option validation, the CLI wiring,
and real mounts (marked ``lab``) checked against the physics they promise."""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from iobench import probe, procfs
from iobench.errors import LabError, UsageError
from iobench.lab import cli as lab_cli
from iobench.lab import manage
from iobench.lab.options import VolumeOptions
from iobench.lab.shaping import ByteLink, TokenBucket
from iobench.lab.testing import slow_volume

FUSE_REASON = manage.lab_unavailable_reason("fuse")
SSHFS_REASON = manage.lab_unavailable_reason("sshfs")
needs_fuse = pytest.mark.skipif(FUSE_REASON is not None, reason=FUSE_REASON or "")
needs_sshfs = pytest.mark.skipif(SSHFS_REASON is not None, reason=SSHFS_REASON or "")

# Requests the client does not wait for (FUSE sends release asynchronously), or that carry
# no metadata latency (entry_getattr is part of the create reply; read/write pay data latency).
NOT_WAITED = {"release", "releasedir", "entry_getattr", "read", "write"}


# ---- shaping: literal numbers -------------------------------------------------------------


def test_token_bucket_spaces_requests_after_its_depth() -> None:
    bucket = TokenBucket(rate=10.0, depth=2.0)
    start = bucket._stamp
    assert bucket.reserve(start) == start  # two tokens in the bucket
    assert bucket.reserve(start) == start
    assert bucket.reserve(start) == pytest.approx(start + 0.1)
    assert bucket.reserve(start) == pytest.approx(start + 0.2)
    # after a long idle period the bucket is full again (but not fuller than its depth)
    later = start + 10.0
    assert bucket.reserve(later) == later
    assert bucket.reserve(later) == later
    assert bucket.reserve(later) == pytest.approx(later + 0.1)


def test_byte_link_without_credits_is_a_serial_pipe() -> None:
    link = ByteLink(baseline_rate=10.0)
    assert link.reserve(100.0, 10) == pytest.approx(101.0)
    assert link.reserve(100.0, 10) == pytest.approx(102.0)  # queued behind the first
    assert link.reserve(105.0, 5) == pytest.approx(105.5)  # idle link: starts now


def test_byte_link_bursts_until_credits_are_spent_then_refills_only_when_idle() -> None:
    link = ByteLink(baseline_rate=10.0, burst_rate=100.0, credits=50.0)
    assert link.reserve(0.0, 50) == pytest.approx(0.5)  # 50 B of credit at 100 B/s
    assert link.credits == 0
    assert link.reserve(0.5, 10) == pytest.approx(1.5)  # baseline now
    assert link.reserve(1.5, 10) == pytest.approx(2.5)  # busy link earns nothing
    # 1 s idle earns 10 B of credit (the baseline's unused rate): 10 B at burst speed
    assert link.reserve(3.5, 20) == pytest.approx(3.5 + 10 / 100 + 10 / 10)
    # credits never exceed the initial balance
    link.reserve(1000.0, 1)
    assert link.credits == pytest.approx(49.0)


def test_byte_link_long_run_rate_is_bounded_by_credits_plus_baseline() -> None:
    link = ByteLink(baseline_rate=1e6, burst_rate=10e6, credits=5e6)
    t, moved = 0.0, 0
    while t < 20.0:  # a greedy writer with 1 ms gaps between 64 KiB requests
        t = link.reserve(t, 65536) + 0.001
        moved += 65536
    assert moved <= 5e6 + 1e6 * t + 65536
    assert moved >= 0.9 * (5e6 + 1e6 * t) - 10e6 * 0.001 * (t / 0.07)


# ---- options and CLI ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, kind, fragment",
    [
        ({"latency_ms": -1.0}, "fuse", "--latency-ms"),
        ({"data_latency_ms": float("nan")}, "fuse", "--data-latency-ms"),
        ({"iops": 0.0}, "fuse", "--iops"),
        ({"mbps": -5.0}, "fuse", "--mbps"),
        ({"mbps": 20.0, "burst_mbps": 200.0}, "fuse", "go together"),
        ({"burst_mbps": 200.0, "burst_credits_mb": 50.0}, "fuse", "needs --mbps"),
        ({"mbps": 20.0, "burst_mbps": 10.0, "burst_credits_mb": 5.0}, "fuse", "must be above"),
        ({"cache_s": -1.0}, "fuse", "--cache-s"),
        ({"latency_ms": 1.0}, "sshfs", "needs --kind fuse"),
        ({}, "nfs", "--kind"),
    ],
)
def test_bad_options_are_usage_errors(kwargs: dict[str, Any], kind: str, fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment):
        VolumeOptions(**kwargs).validate(kind)


def test_good_options_validate_and_describe_themselves() -> None:
    opts = VolumeOptions(latency_ms=1, mbps=20, burst_mbps=200, burst_credits_mb=50).validate()
    assert opts.describe() == "latency 1 ms, 20 MB/s (burst 200 MB/s for 50 MB)"
    assert "--burst-credits-mb" in opts.daemon_args()
    assert VolumeOptions().describe() == "no added delay"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="iobench")
    lab_cli.register(parser.add_subparsers(dest="command"))
    return parser


def test_cli_parses_every_subcommand() -> None:
    p = _parser()
    args = p.parse_args(
        "lab up /mnt/slow --latency-ms 1.5 --data-latency-ms 0.2 --iops 500 --mbps 20 "
        "--burst-mbps 200 --burst-credits-mb 50 --stats /tmp/s.json --backing /srv/b".split()
    )
    assert args.func is lab_cli.handle_up
    assert lab_cli.options_from_args(args) == VolumeOptions(1.5, 0.2, 500, 20, 200, 50)
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


def test_status_lines_show_health_and_counters() -> None:
    ok = manage.LabStatus("/mnt/a", "fuse", 42, {"latency_ms": 1.0}, True, True, None,
                          {"total_ops": 10, "delayed_s": 0.25})
    bad = manage.LabStatus("/mnt/b", "sshfs", None, {"mbps": 5.0}, False, False,
                           "stale: daemon gone, not mounted", None)
    lines = lab_cli.status_lines([ok, bad])
    assert lines[0] == "/mnt/a  fuse  latency 1 ms  pid 42  ok  10 ops, 0.2 s delayed"
    assert lines[1] == "/mnt/b  sshfs  5 MB/s  pid -  stale: daemon gone, not mounted"
    assert lab_cli.status_lines([]) == ["no iobench lab volumes"]


def test_mountinfo_escapes_are_undone() -> None:
    assert procfs.unescape(r"/tmp/with\040space\011tab") == "/tmp/with space\ttab"
    assert any(m.mountpoint == "/" for m in procfs.mounts())


# ---- probe on a local folder ----------------------------------------------------------------


def test_probe_measures_a_local_folder(tmp_path: Path) -> None:
    result = probe.probe(tmp_path, files=50, write_mb=4)
    assert result.create.count == 50 and result.create.seconds > 0
    assert result.stat.count == 50
    assert result.write is not None and result.write.total_mb == pytest.approx(4.0)
    assert result.write.timeline and result.write.timeline[-1].t == pytest.approx(result.write.seconds)
    assert list(tmp_path.iterdir()) == []  # scratch folder removed


# ---- real mounts ----------------------------------------------------------------------------


def _procs_mentioning(text: str) -> list[int]:
    """Pids whose command line contains ``text`` (not this test process)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            if text in procfs.cmdline(int(entry)) and procfs.alive(int(entry)):
                found.append(int(entry))
    return found


def _assert_nothing_left(mountpoint: Path) -> None:
    mp = manage.mount_path(mountpoint)
    assert not any(m.mountpoint == mp for m in procfs.mounts()), f"{mp} still mounted"
    assert _procs_mentioning(mp) == [], f"processes left for {mp}"
    assert all(s.mountpoint != mp for s in manage.status())


@pytest.fixture
def volume(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """Mount slow volumes under tmp_path; all are torn down (and checked) afterwards."""
    stack: list[Any] = []
    made: list[Path] = []

    def make(name: str = "slow", **options: Any) -> Path:
        cm = slow_volume(tmp_path, name, **options)
        made.append(cm.__enter__())
        stack.append(cm)
        return made[-1]

    try:
        yield make
    finally:
        while stack:
            stack.pop().__exit__(None, None, None)
        for mp in made:
            _assert_nothing_left(mp)


def _live_ops(mountpoint: Path) -> dict[str, int]:
    time.sleep(0.6)  # the daemon refreshes its live stats every 0.25 s
    stats = manage.read_stats(mountpoint)
    assert stats is not None
    return {name: op["count"] for name, op in stats["ops"].items()}


def _per_item(before: dict[str, int], after: dict[str, int], n: int) -> dict[str, float]:
    return {k: (after[k] - before.get(k, 0)) / n for k in after if after[k] != before.get(k, 0)}


def _round_trips(before: dict[str, int], after: dict[str, int], n: int) -> tuple[float, dict[str, float]]:
    """Requests per item that the client waits for, from the daemon's own counters."""
    per = _per_item(before, after, n)
    return sum(v for k, v in per.items() if k not in NOT_WAITED), per


@pytest.mark.lab
@needs_fuse
@pytest.mark.parametrize("latency_ms", [0.5, 1.0, 2.0])
def test_create_and_stat_rates_follow_the_configured_latency(
    volume: Callable[..., Path], latency_ms: float
) -> None:
    """creates/s ≈ 1 / (round trips per create × latency), within ±25%.

    Never faster than the latency allows; slower by the Python FUSE cost (~40 µs a request)
    and by CPU contention from other processes, so the best of three attempts counts.
    """
    mnt = volume(latency_ms=latency_ms, cache_s=0)  # every lookup reaches the daemon
    n = 300
    attempts = []
    for attempt in range(3):
        folder = mnt / f"files{attempt}"
        folder.mkdir()
        ops0 = _live_ops(mnt)
        created = probe.create_files_in(folder, n)
        ops1 = _live_ops(mnt)
        stated = probe.stat_files_in(folder, n)
        ops2 = _live_ops(mnt)
        rt_create, per_create = _round_trips(ops0, ops1, n)
        rt_stat, _ = _round_trips(ops1, ops2, n)
        assert per_create["create"] == pytest.approx(1.0, abs=0.02)
        assert 2 <= rt_create <= 6 and 1 <= rt_stat <= 4, per_create
        ratio_create = created.per_s * rt_create * latency_ms / 1000.0
        ratio_stat = stated.per_s * rt_stat * latency_ms / 1000.0
        attempts.append((round(ratio_create, 3), round(ratio_stat, 3), per_create))
        # the latency is really paid: never meaningfully faster than physics allows
        assert ratio_create < 1.1 and ratio_stat < 1.1, attempts
        if ratio_create > 0.75 and ratio_stat > 0.75:
            break
    else:
        pytest.fail(f"measured/expected rates below 0.75 in every attempt: {attempts}")


@pytest.mark.lab
@needs_fuse
def test_burst_credits_fall_from_burst_to_baseline(volume: Callable[..., Path]) -> None:
    burst, credits, baseline, total = 100.0, 25.0, 10.0, 40.0
    mnt = volume(mbps=baseline, burst_mbps=burst, burst_credits_mb=credits)
    result = probe.sequential_write(mnt, total_mb=total, bucket_s=0.1)
    rates = [p.mbps for p in result.timeline]
    assert rates[0] > 4 * baseline, rates  # bursting at first
    assert rates[-1] == pytest.approx(baseline, rel=0.2), rates  # baseline at the end
    # the fall happens after about `credits` MB: total time = C/B + (T-C)/M
    assert result.seconds == pytest.approx(credits / burst + (total - credits) / baseline, rel=0.15)
    moved = 0.0
    last_t = 0.0
    for point in result.timeline:
        if point.mbps < (burst + baseline) / 4:
            break
        moved += point.mbps * (point.t - last_t)
        last_t = point.t
    assert moved == pytest.approx(credits, abs=burst * 0.15), result.timeline


@pytest.mark.lab
@needs_fuse
def test_bandwidth_and_iops_caps(volume: Callable[..., Path]) -> None:
    mnt = volume("bw", mbps=50, cache_s=0)
    result = probe.sequential_write(mnt, total_mb=20)
    assert result.mean_mbps == pytest.approx(50, rel=0.2)

    mnt2 = volume("iops", iops=1000, cache_s=0)  # every op reaches the daemon's bucket
    folder = mnt2 / "d"
    folder.mkdir()
    probe.create_files_in(folder, 100)
    before = _live_ops(mnt2)
    t0 = time.perf_counter()
    for _ in range(3):
        probe.stat_files_in(folder, 100)
    elapsed = time.perf_counter() - t0
    ops = sum(_per_item(before, _live_ops(mnt2), 1).values())
    assert ops / elapsed == pytest.approx(1000, rel=0.25), (ops, elapsed)


@pytest.mark.lab
@needs_fuse
def test_cache_s_lets_the_kernel_skip_round_trips(volume: Callable[..., Path]) -> None:
    counts = {}
    for cache_s in (0.0, 30.0):
        mnt = volume(f"cache{cache_s:g}", cache_s=cache_s)
        (mnt / "f").write_text("x")
        before = _live_ops(mnt)
        for _ in range(100):
            os.stat(mnt / "f")
        counts[cache_s] = sum(_per_item(before, _live_ops(mnt), 1).values())
    assert counts[0.0] >= 200  # lookup + getattr, every time
    assert counts[30.0] <= 5, counts


@pytest.mark.lab
@needs_fuse
def test_passthrough_semantics(volume: Callable[..., Path]) -> None:
    mnt = volume(cache_s=0)  # uncached: a hard link's new nlink is seen at once
    d = mnt / "dir"
    d.mkdir(mode=0o755)
    f = d / "file.bin"
    payload = os.urandom(3 * 1024 * 1024 + 17)
    f.write_bytes(payload)
    assert f.read_bytes() == payload
    with open(f, "ab") as fh:
        fh.write(b"tail")
        fh.flush()
        os.fsync(fh.fileno())
    assert f.stat().st_size == len(payload) + 4
    os.truncate(f, 10)
    assert f.stat().st_size == 10
    os.chmod(f, 0o600)
    assert f.stat().st_mode & 0o777 == 0o600
    os.utime(f, ns=(1_000_000_001, 2_000_000_002))
    assert f.stat().st_mtime_ns == 2_000_000_002
    (d / "abs").symlink_to(sys.executable)  # absolute, pointing outside the volume
    assert os.readlink(d / "abs") == sys.executable
    assert (d / "abs").resolve() == Path(sys.executable).resolve()
    os.link(f, d / "hard")
    assert (d / "hard").stat().st_ino == f.stat().st_ino and f.stat().st_nlink == 2
    (d / "other").write_text("other")
    os.replace(d / "other", d / "hard")  # rename over an existing file
    assert (d / "hard").read_text() == "other"
    subprocess.run(["mv", "-n", str(d / "hard"), str(f)], check=True)  # renameat2 NOREPLACE
    assert f.stat().st_size == 10 and (d / "hard").exists()
    assert sorted(p.name for p in d.iterdir()) == ["abs", "file.bin", "hard"]
    assert {e.name: e.is_symlink() for e in os.scandir(d)}["abs"] is True
    for p in d.iterdir():
        p.unlink()
    d.rmdir()
    assert os.statvfs(mnt).f_bsize > 0
    assert list(mnt.iterdir()) == []


def _make_wheel(dest: Path, name: str = "labdemo", modules: int = 20) -> Path:
    """A tiny pure-Python wheel, built by hand so the test needs no build tools."""
    files = {f"{name}/__init__.py": b"VALUE = 42\n"}
    files.update({f"{name}/m{i}.py": f"I = {i}\n".encode() for i in range(modules)})
    info = f"{name}-1.0.dist-info"
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    files[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    wheel = dest / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
    return wheel


def _venv_and_pip(root: Path, wheel: Path) -> None:
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "virtualenv", "-q", str(venv)], check=True, timeout=300)
    assert os.path.isabs(os.readlink(venv / "bin" / "python"))  # absolute symlink kept
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--no-index", "--no-cache-dir", str(wheel)],
        check=True, timeout=300,
    )
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import labdemo, labdemo.m3; print(labdemo.VALUE)"],
        check=True, capture_output=True, text=True, timeout=60,
    )
    assert out.stdout.strip() == "42"


@pytest.mark.lab
@needs_fuse
def test_venv_and_pip_install_on_the_fuse_volume(volume: Callable[..., Path], tmp_path: Path) -> None:
    wheel = _make_wheel(tmp_path)
    _venv_and_pip(volume(), wheel)


@pytest.mark.lab
@pytest.mark.slow
@needs_fuse
def test_venv_and_pip_install_at_1ms(volume: Callable[..., Path], tmp_path: Path) -> None:
    wheel = _make_wheel(tmp_path)
    _venv_and_pip(volume(latency_ms=1.0), wheel)


@pytest.mark.lab
@needs_sshfs
def test_sshfs_kind_takes_a_venv_and_tears_everything_down(tmp_path: Path) -> None:
    wheel = _make_wheel(tmp_path)
    mnt = tmp_path / "ssh"
    lab = manage.up(mnt, kind="sshfs", mbps=200)
    net = dict(lab.net or {})
    try:
        assert procfs.mounted_at(str(mnt), "fuse.sshfs")
        _venv_and_pip(mnt, wheel)
    finally:
        manage.down(mnt)
    _assert_nothing_left(mnt)
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
    from iobench.lab import sshfs

    real_tools = sshfs.tools
    monkeypatch.setattr(sshfs, "tools", lambda: {**real_tools(), "sshd": "/bin/false"})
    netns_before = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links_before = set(os.listdir("/sys/class/net"))
    with pytest.raises(LabError, match="sshd exited in the lab namespace"):
        manage.up(tmp_path / "ssh", kind="sshfs")
    assert subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout == netns_before
    assert set(os.listdir("/sys/class/net")) == links_before
    _assert_nothing_left(tmp_path / "ssh")


@pytest.mark.lab
@needs_fuse
def test_down_ends_a_stopped_daemon_and_writes_stats(tmp_path: Path) -> None:
    mnt = tmp_path / "hung"
    stats_file = tmp_path / "stats.json"
    lab = manage.up(mnt, latency_ms=1.0, stats=stats_file)
    try:
        (mnt / "a").write_text("x")
        os.kill(lab.pid, signal.SIGSTOP)  # a hung daemon
        deadline = time.monotonic() + 5
        while procfs.proc_state(lab.pid) != "T" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [s.problem for s in manage.status() if s.mountpoint == lab.mountpoint] == [
            "daemon stopped (SIGSTOP)"
        ]
    finally:
        t0 = time.perf_counter()
        manage.down(mnt)
        assert time.perf_counter() - t0 < 10
    _assert_nothing_left(mnt)
    assert not procfs.alive(lab.pid)
    assert not Path(lab.state_dir).exists() and not mnt.exists()  # we made the mountpoint
    stats = json.loads(stats_file.read_text())
    assert stats["final"] is True and stats["ops"]["create"]["count"] == 1


@pytest.mark.lab
@needs_fuse
def test_killed_daemon_is_reported_stale_and_cleaned_up(tmp_path: Path) -> None:
    mnt = tmp_path / "dead"
    lab = manage.up(mnt)
    try:
        os.kill(lab.pid, signal.SIGKILL)
        assert procfs.wait_gone(lab.pid, 5)
        (entry,) = [s for s in manage.status() if s.mountpoint == lab.mountpoint]
        assert entry.stale and entry.problem == "stale: daemon gone, mount dead"
    finally:
        manage.down(mnt)
    _assert_nothing_left(mnt)


@pytest.mark.lab
@needs_fuse
def test_daemon_failure_is_one_line_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FUSE_LIBRARY_PATH", str(tmp_path / "no-such-libfuse3.so"))
    mnt = tmp_path / "broken"
    before = {m.mountpoint for m in procfs.mounts()}
    with pytest.raises(LabError, match="daemon exited before mounting.*no-such-libfuse3") as err:
        manage.up(mnt)
    assert "\n" not in str(err.value)
    assert {m.mountpoint for m in procfs.mounts()} == before  # tmpfs backing gone too
    assert not mnt.exists()
    assert all(s.mountpoint != manage.mount_path(mnt) for s in manage.status())


@pytest.mark.lab
@needs_fuse
def test_up_refuses_what_it_should(volume: Callable[..., Path], tmp_path: Path) -> None:
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    with pytest.raises(LabError, match="not empty"):
        manage.up(full)
    assert (full / "keep.txt").read_text() == "mine"
    mnt = volume("once")
    with pytest.raises(LabError, match="already"):
        manage.up(mnt)
    with pytest.raises(LabError, match="no iobench lab volume"):
        manage.down(tmp_path / "never-mounted")


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
    _assert_nothing_left(mnt)
