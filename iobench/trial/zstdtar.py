"""tar+zstd through the zstandard module, for a machine with no zstd binary: what
``tar -I zstd`` does, run as ``python -m iobench.trial.zstdtar`` by the strategies' pack and
restore steps (a process of its own, so that it is sampled and watched like ``tar``)."""

from __future__ import annotations

import importlib
import subprocess
import sys


def _zstd_pack(parent: str, name: str, archive: str) -> None:
    zstandard = importlib.import_module("zstandard")  # optional: no hard dependency, no stubs
    tar = subprocess.Popen(["tar", "-C", parent, "-cf", "-", name], stdout=subprocess.PIPE)
    assert tar.stdout is not None
    with open(archive, "wb") as out:
        zstandard.ZstdCompressor(threads=-1).copy_stream(tar.stdout, out)
    if tar.wait() != 0:
        raise SystemExit(f"tar failed (exit {tar.returncode})")


def _zstd_unpack(archive: str, parent: str) -> None:
    zstandard = importlib.import_module("zstandard")
    tar = subprocess.Popen(["tar", "-C", parent, "-xf", "-"], stdin=subprocess.PIPE)
    assert tar.stdin is not None
    with open(archive, "rb") as src:
        zstandard.ZstdDecompressor().copy_stream(src, tar.stdin)
    tar.stdin.close()
    if tar.wait() != 0:
        raise SystemExit(f"tar failed (exit {tar.returncode})")


def _main(argv: list[str]) -> int:
    if argv[:1] == ["zstd-pack"] and len(argv) == 4:
        _zstd_pack(*argv[1:])
    elif argv[:1] == ["zstd-unpack"] and len(argv) == 3:
        _zstd_unpack(*argv[1:])
    else:
        print(
            "usage: python -m iobench.trial.zstdtar zstd-pack PARENT NAME ARCHIVE | zstd-unpack ARCHIVE PARENT",
            file=sys.stderr,
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
