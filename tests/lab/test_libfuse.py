"""The lab's data path (iobench/lab/libfuse.py): reads answered with the backing file's
descriptor, writes copied by libfuse into it, never through Python — the same bytes at every
offset, whole 1 MiB requests, and the ceiling it lifts."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.lab import needs_fuse

from iobench.lab import state


def _stats(mnt: Path) -> dict[str, int]:
    """(read requests, write requests, bytes read, bytes written), after the next refresh."""
    time.sleep(0.6)
    s = state.read_stats(mnt)
    assert s is not None
    ops = s["ops"]
    return {
        "reads": ops.get("read", {}).get("count", 0),
        "writes": ops.get("write", {}).get("count", 0),
        "bytes_read": s["bytes_read"],
        "bytes_written": s["bytes_written"],
    }


@pytest.mark.lab
@needs_fuse
def test_the_same_bytes_at_every_offset_and_none_past_the_end(
    volume: Callable[..., Path],
) -> None:
    """Unaligned writes and reads, a hole, reads that cross and start past the end, and four
    threads at once on four files: what the volume answers is what the model says."""
    mnt = volume()
    path = mnt / "f.bin"
    model = bytearray()
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        for offset, size in ((0, 3 << 20), (12_345, 777_777), (5 << 20, 4097), (1, 1)):
            data = os.urandom(size)
            assert os.pwrite(fd, data, offset) == size
            if len(model) < offset:
                model.extend(bytes(offset - len(model)))  # the hole reads as zeros
            model[offset : offset + size] = data
    finally:
        os.close(fd)
    assert path.stat().st_size == len(model)
    with open(path, "rb", buffering=0) as fh:
        for offset, size in ((0, 1), (4095, 3), (1 << 20, 1 << 20), (len(model) - 10, 100)):
            assert os.pread(fh.fileno(), size, offset) == bytes(model[offset : offset + size])
        assert os.pread(fh.fileno(), 4096, len(model) + 1) == b""  # past the end: nothing
        assert fh.read() == bytes(model)

    payloads = {i: os.urandom((2 << 20) + i * 1001) for i in range(4)}

    def copy(i: int) -> None:
        (mnt / f"t{i}").write_bytes(payloads[i])
        assert (mnt / f"t{i}").read_bytes() == payloads[i]

    threads = [threading.Thread(target=copy, args=(i,)) for i in payloads]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert all((mnt / f"t{i}").read_bytes() == p for i, p in payloads.items())


@pytest.mark.lab
@needs_fuse
def test_a_large_write_reaches_the_daemon_in_whole_mebibytes(volume: Callable[..., Path]) -> None:
    """libfuse 3's buffer holds 1 MiB, so the kernel sends writes of 1 MiB (NFS's wsize on
    EFS): a 4 MiB write() is 4 requests, and a cold read of it moves exactly its bytes."""
    mnt = volume()
    before = _stats(mnt)
    with open(mnt / "big", "wb", buffering=0) as fh:
        fh.write(os.urandom(4 << 20))
    with open(mnt / "big", "rb", buffering=0) as fh:  # no kernel_cache: read from the daemon
        while fh.read(1 << 20):
            pass
    after = _stats(mnt)
    assert after["writes"] - before["writes"] == 4
    assert after["bytes_written"] - before["bytes_written"] == 4 << 20
    assert after["bytes_read"] - before["bytes_read"] == 4 << 20
    assert 4 <= after["reads"] - before["reads"] <= 32  # the kernel's readahead windows


def _four_streams(folder: Path, mb: int) -> tuple[float, float]:
    """(write, cold read) MB/s of four threads, each one file of ``mb`` MB in 1 MiB blocks."""
    block = os.urandom(1 << 20)
    n = mb * 10**6 // len(block)

    def write(i: int) -> None:
        with open(folder / f"s{i}", "wb", buffering=0) as fh:
            for _ in range(n):
                fh.write(block)
            os.fsync(fh.fileno())

    def read(i: int) -> None:
        with open(folder / f"s{i}", "rb", buffering=0) as fh:
            while fh.read(1 << 20):
                pass

    rates = []
    for fn in (write, read):
        threads = [threading.Thread(target=fn, args=(i,)) for i in range(4)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        rates.append(4 * n * len(block) / 1e6 / (time.perf_counter() - t0))
    for i in range(4):
        (folder / f"s{i}").unlink()
    return rates[0], rates[1]


@pytest.mark.lab
@pytest.mark.timing
@needs_fuse
def test_four_streams_through_the_uncapped_lab_move_far_more_than_before(
    volume: Callable[..., Path],
) -> None:
    """Four streams of 1 MiB requests, 128 MB each: at least 600 MB/s written and read (the
    Python copies held the lab to 0.8-1.1 GB/s on an idle 2-core VM and ~0.4 GB/s under load;
    without them it moved 1.4-2.8 GB/s). Best of three: other work only slows it."""
    mnt = volume()
    best = (0.0, 0.0)
    for _ in range(3):
        got = _four_streams(mnt, 128)
        best = (max(best[0], got[0]), max(best[1], got[1]))
        if min(best) >= 600:
            break
    assert min(best) >= 600, best
