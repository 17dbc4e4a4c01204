"""Storage probes: every micro-probe on a real folder, their time bounds, a folder that
hangs, the lock check across processes, the JSON document, and the lab volume."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from iobench.__main__ import main
from iobench.predict import probe, probes

RATES = ("create", "stat", "stat_miss", "open_read", "read4k", "chmod", "rename", "unlink", "mkdir")


def test_every_probe_on_a_local_folder(tmp_path: Path) -> None:
    r = probe.probe(
        tmp_path, files=300, write_mb=8, file_bytes=1400, seconds=5, write_seconds=5, bucket_s=0.01
    )
    for op in RATES:
        got = getattr(r, op)
        assert got is not None and got.count == 300 and got.seconds > 0, op
        lat = got.latency  # each operation timed: its distribution, in order
        assert lat is not None and lat.count == 300, op
        assert 0 < lat.min_ns <= lat.percentiles_ns[0] <= lat.percentiles_ns[-1] <= lat.max_ns
        assert list(lat.percentiles_ns) == sorted(lat.percentiles_ns), op
        # the timed calls are the op's whole time, less the loop's own
        assert lat.mean_ns * lat.count <= got.seconds * 1e9, op
    assert r.fsync is not None and r.fsync.count > 0 and r.fsync.p99_ms >= r.fsync.p50_ms > 0
    assert r.write is not None and r.write.total_mb == pytest.approx(8.0)
    assert r.read is not None and r.read.count == 8_000_000 and r.read_mbps and r.read_mbps > 0
    assert r.locks == {"flock": "works", "fcntl": "works"}
    st = os.statvfs(tmp_path)
    assert r.space is not None and r.space.total_bytes == st.f_blocks * st.f_frsize
    assert r.hung is None and r.file_bytes == 1400
    assert list(tmp_path.iterdir()) == []  # scratch folder removed


def test_probes_stop_at_their_deadline(tmp_path: Path) -> None:
    r = probe.probe(
        tmp_path, files=10**7, write_mb=10**6, seconds=0.05, write_seconds=0.3, bucket_s=0.05
    )
    assert 0 < r.create.count < 10**7 and 0 < r.mkdir.count < 10**7  # cut off, not finished
    # one fsync of what the page cache took in may itself outlast the deadline (a busy disk
    # did: 187 MB in the first 0.05 s bucket, flushed at 0.30 s), so one bucket is enough here
    w = r.write
    assert w is not None and w.total_mb < 10**6 and len(w.timeline) >= 1
    assert w.timeline[-1].t == w.seconds
    assert list(tmp_path.iterdir()) == []


def test_a_write_records_one_point_per_bucket_and_the_points_add_up(tmp_path: Path) -> None:
    # a zero-length bucket ends after every block: four 1 MiB blocks make four points
    w = probes.write_file(str(tmp_path / "seq"), 4 * 1.048576, 1024, 0.0, None)
    assert len(w.timeline) == 4 and w.total_mb == pytest.approx(4 * 1.048576)
    ts = [p.t for p in w.timeline]
    assert ts == sorted(ts) and ts[-1] == w.seconds
    starts = [0.0, *ts[:-1]]
    written = sum(p.mbps * (t - t0) for p, t, t0 in zip(w.timeline, ts, starts))
    assert written == pytest.approx(w.total_mb, rel=1e-6)


def test_a_probe_that_blocks_is_abandoned(tmp_path: Path) -> None:
    """Opening a FIFO with no writer blocks in the kernel, like a call on a hung volume."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    steps = [("first", lambda: 1), ("blocks", lambda: open(fifo).close()), ("never", lambda: 3)]
    try:
        out, hung = probe._run_steps(steps, lambda name: 0.3)
        assert out == {"first": 1} and hung == "blocks"
    finally:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # lets the abandoned thread finish
        os.close(fd)


def test_lock_check_sees_a_lock_held_by_another_process(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    assert probes.lock_works(str(lock), "flock") == "works"
    assert probes.lock_works(str(lock), "fcntl") == "works"
    # a lock this process already holds is no test of exclusion: the child must be refused
    import fcntl

    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert probes.lock_works(str(lock), "flock").startswith("error")
    finally:
        os.close(fd)


def test_median_file_of_a_profile() -> None:
    # smoke: 100 x 800 B, 20 x 1100 B, 650 x 1400 B, ... of 1202 files: the 601st is 1400 B
    assert probe.median_file_bytes("smoke") == 1400


def test_cli_json_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    argv = [
        "probe",
        str(tmp_path / "a"),
        str(tmp_path / "b"),
        "--format",
        "json",
        "--seconds",
        "0.05",
        "--write-seconds",
        "0.3",
        "--files",
        "100",
    ]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "iobench-probe" and doc["schema_version"] == probe.SCHEMA_VERSION == 2
    assert [p["path"] for p in doc["paths"]] == [str(tmp_path / "a"), str(tmp_path / "b")]
    one = doc["paths"][0]
    expected = {
        "path",
        "file_bytes",
        "seconds_per_probe",
        "hung",
        *RATES,
        "fsync",
        "write",
        "read",
        "tree",
        "locks",
        "space",
    }
    assert set(one) == expected and one["tree"] is None  # no --tree asked
    fio_keys = {"total_ios", "runtime", "iops", "clat_ns"}  # fio's JSON names, beside the old
    clat = {"min", "max", "mean", "stddev", "N", "percentile"}
    for op in RATES:
        opened = {"open_clat_ns"} if op == "create" else set()  # fio's filecreate clat
        assert set(one[op]) == {"count", "seconds", "ms_each", *fio_keys, *opened}
        assert one[op]["count"] > 0
        assert set(one[op]["clat_ns"]) == clat and one[op]["clat_ns"]["N"] == one[op]["count"]
        assert set(one[op]["clat_ns"]["percentile"]) == {
            "50.000000", "95.000000", "99.000000", "99.900000"
        }  # fmt: skip
        assert one[op]["total_ios"] == one[op]["count"]
        assert one[op]["iops"] == pytest.approx(one[op]["count"] / one[op]["seconds"], rel=1e-3)
    assert one["create"]["open_clat_ns"]["N"] == one["create"]["count"]
    opened, whole = one["create"]["open_clat_ns"], one["create"]["clat_ns"]
    assert 0 < opened["min"] <= whole["min"] and opened["mean"] < whole["mean"]
    assert set(one["fsync"]) == {"count", "p50_ms", "p99_ms", "clat_ns"}
    assert one["write"]["timeline"] and all(len(pt) == 2 for pt in one["write"]["timeline"])
    assert set(one["space"]) == {"free_bytes", "total_bytes", "free_inodes", "total_inodes"}
    assert one["locks"] == {"flock": "works", "fcntl": "works"}


def test_cli_text_and_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", str(tmp_path), "--seconds", "0.05", "--write-seconds", "0.2"]) == 0
    out = capsys.readouterr().out
    for word in (
        "create",
        "stat of a missing name",
        "cold open+read+close",
        "cold random 4 KiB read",
        "p99.9",
        "rename",
        "unlink",
        "mkdir",
        "fsync of 4 KiB",
        "write",
        "read",
        "flock locks: works",
        "fcntl locks: works",
        "inodes",
    ):
        assert word in out, word
    assert main(["probe", str(tmp_path), "--seconds", "0"]) == 2
    assert main(["probe", str(tmp_path / "missing")]) == 2
    assert main(["probe", str(tmp_path), "--tree", "2,x,3"]) == 2
    assert main(["probe", str(tmp_path), "--tree", "2,0,3"]) == 2  # levels of no folders
    assert main(["probe", str(tmp_path), "--tree", "5,20,10"]) == 2  # 3.4 M folders
    assert main(["probe", str(tmp_path), "--streams", "4"]) == 2  # streams of what?
    assert main(["probe", str(tmp_path), "--tree", "1,2,3", "--tree-bytes", "-1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") >= 7 and "iobench" in err and "DEPTH,BRANCH,FILES" in err


def test_probe_roles_probes_a_shared_folder_once(tmp_path: Path) -> None:
    doc = probe.probe_roles(
        {"target": tmp_path, "tmp": tmp_path, "cache": tmp_path / "."}, seconds=0.05
    )
    assert len(doc["paths"]) == 1 and set(doc["roles"]) == {"target", "tmp", "cache"}
    assert doc["paths"][0]["path"] == doc["roles"]["target"] == os.path.realpath(tmp_path)


def test_probe_roles_probes_each_filesystem_once(tmp_path: Path, tmpfs) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    ram = tmpfs(size="64m", name="ram")
    doc = probe.probe_roles({"target": tmp_path / "a", "tmp": tmp_path / "b", "cache": ram}, 0.05)
    # a and b share a filesystem: one probe, in the first role's folder, serves both
    assert sorted(p["path"] for p in doc["paths"]) == sorted(
        [os.path.realpath(tmp_path / "a"), os.path.realpath(ram)]
    )
    assert doc["roles"] == {
        "target": os.path.realpath(tmp_path / "a"),
        "tmp": os.path.realpath(tmp_path / "a"),
        "cache": os.path.realpath(ram),
    }


@pytest.fixture
def slow(tmp_path: Path):  # noqa: ANN201 - a generator fixture
    from iobench.lab.manage import lab_unavailable_reason
    from iobench.lab.testing import slow_volume

    reason = lab_unavailable_reason()
    if reason:
        pytest.skip(reason)
    # a 200 MB/s cap: the 64 MB write spans several buckets however fast the backing tmpfs is
    with slow_volume(tmp_path, latency_ms=1, data_latency_ms=1, mb_per_s=200) as mnt:
        yield mnt


@pytest.mark.lab
def test_lab_volume_every_operation_pays_the_latency(slow: Path) -> None:
    """On the 1 ms lab volume each operation waits for at least one round trip, a create
    (lookup, create, flush) for three; the write shows several buckets, the locks are
    checked across processes, and the volume is left empty."""
    r = probe.probe(slow, files=2000, write_mb=64, seconds=0.3, write_seconds=1.0, bucket_s=0.1)
    for op in RATES:
        got = getattr(r, op)
        assert got is not None and got.count > 0, op
        assert got.ms_each >= 0.9, (op, got.ms_each)
    assert r.create.ms_each >= 2.7
    assert r.fsync is not None and r.fsync.p50_ms >= 0.9
    assert r.write is not None and len(r.write.timeline) >= 3
    assert set(r.locks) == {"flock", "fcntl"} and all(v for v in r.locks.values())
    assert r.hung is None and list(slow.iterdir()) == []
    # the deadline holds on a slow volume too: 0.3 s of creates at >= 3 ms each
    assert r.create.count <= 0.3 / 0.0027 + 1


def test_no_thread_is_left_after_a_normal_probe(tmp_path: Path) -> None:
    before = {t.name for t in threading.enumerate()}
    probe.probe(tmp_path, files=50, write_mb=1, seconds=0.05, write_seconds=0.1)
    assert "iobench-probe" not in {t.name for t in threading.enumerate()} - before


def test_the_probe_says_what_it_writes_and_sizes_the_write_to_the_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 21: `iobench probe` silently wrote 1 GB into each folder (RAM on /dev/shm,
    metered I/O on a network volume). It says what it writes, and the default follows the
    filesystem: 256 MB on tmpfs, 64 MB on network and FUSE volumes."""
    from iobench.cli.probe import AUTO_WRITE_MB, auto_write_mb

    assert (
        AUTO_WRITE_MB["memory"] == 256 and AUTO_WRITE_MB["network"] == AUTO_WRITE_MB["fuse"] == 64
    )
    if Path("/dev/shm").is_dir():
        assert auto_write_mb(Path("/dev/shm")) <= 256
    assert (
        main(["probe", str(tmp_path), "--seconds", "0.05", "--write-mb", "1", "--files", "20"]) == 0
    )
    err = capsys.readouterr().err
    assert f"probe {tmp_path}: up to 20 small files" in err and "up to 1 MB" in err
    assert "all removed afterwards" in err and list(tmp_path.iterdir()) == []


@pytest.mark.lab
@pytest.mark.timing  # latencies: nothing else may share the cores
def test_the_percentiles_are_the_undelayed_lab_s_plus_the_added_latency(tmp_path: Path) -> None:
    """Issue 39: on the lab at 1 ms, the probe's stat and cold 4 KiB read p50 are the same
    volume's with nothing added, plus 1 ms for each round trip the daemon counted per
    operation, within 10 %. Best of three: interference only ever slows an operation."""
    from helpers.lab import live_ops, needs_fuse, per_item

    from iobench.lab.testing import slow_volume

    if needs_fuse.args[0]:
        pytest.skip(needs_fuse.kwargs["reason"])

    waited = {"release", "releasedir", "entry_getattr"}  # asynchronous, or free (test_fs)

    def round_trips(before: dict[str, int], after: dict[str, int], n: int) -> float:
        return sum(v for k, v in per_item(before, after, n).items() if k not in waited)

    def p50s(mnt: Path) -> tuple[float, float, float, float]:
        """(stat p50, read4k p50 in ms, round trips per stat, per read) on ``mnt``."""
        (mnt / "d").mkdir()
        probes.create_files_in(mnt / "d", 400)
        path = probes.make_read_file(str(mnt / "r.bin"))
        ops = [live_ops(mnt)]
        stat = probes.stat_files_in(mnt / "d", 400)
        ops.append(live_ops(mnt))
        reads = probes.read_latency(path, 300, None)
        ops.append(live_ops(mnt))
        assert stat.latency is not None and reads.latency is not None
        return (stat.latency.p50_ms, reads.latency.p50_ms,
                round_trips(ops[0], ops[1], 400), round_trips(ops[1], ops[2], 300))  # fmt: skip

    attempts = []
    for _ in range(3):
        with slow_volume(tmp_path, "bare", cache_s=0) as bare:
            b = p50s(bare)
        with slow_volume(tmp_path, "slow", latency_ms=1, data_latency_ms=1, cache_s=0) as slow:
            d = p50s(slow)
        # every round trip an operation waits for pays 1 ms (a stat's lookup; a read's
        # getattr, with no attribute cache, and its read)
        want_stat, want_read = b[0] + d[2] * 1.0, b[1] + d[3] * 1.0
        attempts.append((round(d[0] / want_stat, 3), round(d[1] / want_read, 3), d, b))
        if abs(d[0] / want_stat - 1) <= 0.1 and abs(d[1] / want_read - 1) <= 0.1:
            return
    pytest.fail(f"p50 / (undelayed + 1 ms per round trip) outside 0.9-1.1: {attempts}")


def _fio(args: list[str]) -> dict[str, float]:
    """One fio job's (the direction it reported) count, iops, p50 and p99 in ms."""
    import subprocess

    out = subprocess.run(
        ["fio", *args, "--output-format=json"], check=True, capture_output=True, text=True
    ).stdout
    job = json.loads(out[out.index("{") :])["jobs"][0]
    d = job["write"] if job["write"]["total_ios"] else job["read"]
    q = d["clat_ns"]["percentile"]
    return {"n": d["total_ios"], "iops": d["iops"],
            "p50": q["50.000000"] / 1e6, "p99": q["99.000000"] / 1e6}  # fmt: skip


@pytest.mark.lab
@pytest.mark.timing  # latencies and rates: nothing else may share the cores
def test_create_and_stat_agree_with_fio_on_the_same_lab_volume(tmp_path: Path) -> None:
    """Issue 39: on one lab volume at 1 ms, fio's filecreate and filestat engines and the
    probe: the open(O_CREAT) p50 (fio's filecreate clat: the open alone) and the stat p50
    within 10 %, the create and stat rates (files over the whole loop, the write and close
    included in both) within 15 %. The p99s are shown, not held: on the shared 2-core
    machine they are the other work's, not a tool's (the same fio job's filecreate p99 was
    3.98, 9.50 and 4.49 ms in three runs at load 3.8-4.9; probe/fio p99 0.38-1.38). The volume keeps no attributes (--cache-s 0): fio's
    filestat lays its files out (stat, unlink, create, write, lstat) just before it stats
    them, so with any attribute cache its stats are the client's cache (3 us) and never a
    round trip; the probe's follow a create whose write made the kernel forget the
    attributes. Recorded (load 1.6-5.5): create p50 2.24-2.47 ms (fio) / 2.27-2.39 (probe),
    stat p50 2.18-2.31 / 2.16-2.20; probe/fio p50 0.97-1.03, rates 0.90-1.06.
    Best of three: interference only ever slows an operation."""
    import shutil

    from helpers.lab import needs_fuse

    from iobench.lab.testing import slow_volume

    if needs_fuse.args[0]:
        pytest.skip(needs_fuse.kwargs["reason"])
    if shutil.which("fio") is None:
        pytest.skip("fio is not installed (Debian: fio)")
    n = 400
    attempts = []
    with slow_volume(tmp_path, "cmp", latency_ms=1, cache_s=0) as mnt:
        for k in range(3):
            common = [f"--name=f{k}", f"--directory={mnt}", f"--nrfiles={n}", "--filesize=4k",
                      "--bs=4k", "--openfiles=1"]  # fmt: skip
            fc = _fio([*common, "--ioengine=filecreate", "--fallocate=none"])
            fs = _fio([*common, "--ioengine=filestat"])
            (mnt / f"d{k}").mkdir()
            create = probes.create_files_in(mnt / f"d{k}", n)
            stat = probes.stat_files_in(mnt / f"d{k}", n)
            assert create.opened is not None and stat.latency is not None
            assert fc["n"] == fs["n"] == create.count == stat.count == n
            ratios = {
                "create p50": create.opened.p50_ms / fc["p50"],
                "stat p50": stat.latency.p50_ms / fs["p50"],
                "create rate": create.per_s / fc["iops"],
                "stat rate": stat.per_s / fs["iops"],
            }
            p99 = {  # shown, not held: see the docstring
                "create p99": create.opened.p99_ms / fc["p99"],
                "stat p99": stat.latency.p99_ms / fs["p99"],
            }
            attempts.append({k: round(v, 3) for k, v in {**ratios, **p99}.items()})
            for f in mnt.iterdir():
                shutil.rmtree(f) if f.is_dir() else f.unlink()
            if all(abs(v - 1) <= (0.15 if "rate" in k else 0.1) for k, v in ratios.items()):
                return
    pytest.fail(f"probe / fio p50 outside 0.9-1.1 or rates outside 0.85-1.15: {attempts}")
