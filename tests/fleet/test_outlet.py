"""A rank's output when the launcher stops reading it: dropped, never a blocked rank."""

from __future__ import annotations

import os
import time
from pathlib import Path

from iobench.cli.outlet import Outlet


def test_a_write_nobody_reads_is_dropped_within_its_patience() -> None:
    read, write = os.pipe()
    try:
        with os.fdopen(os.dup(write), "w") as stream:
            out = Outlet(stream, patience_s=0.2)
            t = time.monotonic()
            out.write("x" * 200_000)  # more than a pipe holds (64 KiB)
            first = time.monotonic() - t
            t = time.monotonic()
            out.write("y" * 1000)  # stuck: no wait at all
            second = time.monotonic() - t
            drained = len(os.read(read, 1 << 20))
            out.write("z")  # the reader drained: written again
        assert drained == 65536
        assert os.read(read, 10) == b"z"
        assert 0.15 < first < 2.0
        assert second < 0.1
        assert out.dropped == 200_000 + 1000 - 65536
    finally:
        os.close(read)
        os.close(write)


def test_a_file_gets_every_byte(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    with open(path, "w") as stream:
        out = Outlet(stream, patience_s=0.01)
        for _ in range(100):
            out.write("é" * 10_000 + "\n")
    assert out.dropped == 0
    assert path.read_text() == ("é" * 10_000 + "\n") * 100
