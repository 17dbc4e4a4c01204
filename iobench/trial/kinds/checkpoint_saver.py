"""The saver a ``checkpoint`` trial times: a trainer's save, the copy out, the restore and the
check of what was read back, each run as its own process.

Run as a script (``python -I saver.py MODE SETTINGS.json OUT.json``, MODE one of ``save``,
``copy``, ``restore``, ``check``), never imported by iobench (it imports nothing of iobench,
so the phase runner and sampler watch it like any training process).

The bytes come from one pre-made block (random, from ``seed``), made before anything is timed
and reused for every tensor: tensor ``i`` of shard ``s`` is a view of the block at its own
offset (``(s * 1000003 + i * 7919) % block``, never a multiple of 4 KiB apart, so no two
tensors share an aligned 4 KiB block a deduplicating volume could fold). Nothing is generated
while the clock runs: in mlcommons/storage #689 about a third of a checkpoint's chunks were
bound by the generator, not the storage.

- ``save``: one writer process per shard, started together (a barrier); each writes its
  tensors — ``torch.save`` of a dict of uint8 tensors over the views when ``format`` is
  ``torch`` (or ``auto`` and torch imports), else the views' bytes themselves, through the
  same open file — then ``fsync``s the file and closes it. The parent then ``fsync``s the
  checkpoint's folder and the folder holding it, so the new names are durable too.
- ``copy``: one copier per shard reads the saved file into a pre-made buffer and writes it to
  ``copy_to``, ``fsync``s it; then both folders are ``fsync``ed (a careful background copy).
- ``restore``: one reader per shard reads its file to the end into a pre-made buffer
  (``readinto``, no checksum while timed: the harness must not be what limits the rate).
- ``check``: each file read again and compared with the views it was made from — crc32 of the
  whole file for raw bytes; ``torch.load`` and crc32 of every tensor for torch's format.
  Exit 3 on a mismatch, naming the file.

The output is one JSON object; times are seconds since ``zero`` (a ``time.monotonic()`` reading
the trial passes). ``save`` gives per shard ``[start, written, fsynced, closed, bytes]``, the
folders' fsync ``[start, end]``, ``go`` and ``end``; ``copy`` and ``restore`` give per file
``[start, end, bytes]``.
"""

from __future__ import annotations

import ctypes
import json
import multiprocessing
import os
import random
import sys
import time
import zlib
from typing import Any

CHUNK = 4 << 20  # bytes per readinto/copy: large enough that the call overhead does not matter
#: the largest tensor (and so the block's size): larger layers are cut into pieces this big
MAX_TENSOR = 64 << 20
_OFFSET_STEP = 7919  # a prime: views at offsets that are never a multiple of 4 KiB apart
_SHARD_STEP = 1000003


# ------------------------------------------------------------------------------ the bytes


def block(seed: int, size: int) -> bytearray:
    """The pre-made bytes, twice over (so a view of ``size`` bytes may start anywhere in it)."""
    half = random.Random(seed).randbytes(size)
    return bytearray(half + half)


def layout(shard: int, nbytes: int, tensor: int, block_len: int) -> list[tuple[int, int]]:
    """(offset, length) of each tensor of one shard, in order: ``tensor`` bytes each, the last
    the remainder."""
    out, i, left = [], 0, nbytes
    while left > 0:
        n = min(tensor, left)
        out.append(((shard * _SHARD_STEP + i * _OFFSET_STEP) % block_len, n))
        left -= n
        i += 1
    return out


def views(buf: bytearray, plan: list[tuple[int, int]]) -> list[memoryview]:
    mv = memoryview(buf)
    return [mv[off : off + n] for off, n in plan]


def tensor_size(settings: dict[str, Any]) -> int:
    """The block's size: the settings' tensor size, or the largest shard when smaller."""
    return max(1, min(int(settings["tensor_bytes"]), MAX_TENSOR, max(settings["shard_bytes"])))


def has_torch() -> bool:
    try:
        import torch  # type: ignore[import-not-found, unused-ignore]  # noqa: F401
    except ImportError:
        return False
    return True


def use_torch(settings: dict[str, Any]) -> bool:
    wanted = settings["format"]
    return wanted == "torch" or (wanted == "auto" and has_torch())


def names(settings: dict[str, Any], torch: bool) -> list[str]:
    """The shards' file names: ``model.pt`` alone, or ``shard-00001-of-00004.pt``."""
    ext = "pt" if torch else "bin"
    n = len(settings["shard_bytes"])
    if n == 1:
        return [f"model.{ext}"]
    return [f"shard-{i + 1:05d}-of-{n:05d}.{ext}" for i in range(n)]


# ------------------------------------------------------------------------------ processes


def together(n: int, work: Any, args: list[tuple[Any, ...]]) -> tuple[float, list[list[float]]]:
    """Run ``work(*args[i])`` in ``n`` forked processes released at once; (go, results)."""
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(n + 1)
    queue = ctx.SimpleQueue()

    def child(i: int) -> None:
        barrier.wait()
        try:
            queue.put((i, work(*args[i]), ""))
        except BaseException as exc:  # reported by the parent, with the file named
            queue.put((i, None, f"{type(exc).__name__}: {exc}"))

    procs = [ctx.Process(target=child, args=(i,)) for i in range(n)]
    for p in procs:
        p.start()
    barrier.wait()
    go = time.monotonic()
    results: list[Any] = [None] * n
    errors = []
    for _ in range(n):
        i, value, error = queue.get()
        results[i] = value
        if error:
            errors.append(f"{args[i][0]}: {error}")
    for p in procs:
        p.join()
    if errors:
        raise RuntimeError("; ".join(errors))
    return go, results


def fsync_folders(*folders: str) -> list[float]:
    """``fsync`` each folder (its entries durable); [start, end] monotonic."""
    start = time.monotonic()
    for folder in folders:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return [start, time.monotonic()]


# ------------------------------------------------------------------------------ the modes


def save(settings: dict[str, Any], t0: float) -> dict[str, Any]:
    torch_mod: Any = None
    if use_torch(settings):
        import torch as torch_mod  # type: ignore[import-not-found, unused-ignore, no-redef]
    folder = settings["folder"]
    os.makedirs(folder, exist_ok=True)
    size = tensor_size(settings)
    buf = block(settings["seed"], size)
    files = names(settings, torch_mod is not None)

    def write(path: str, shard: int) -> list[float]:
        parts = views(buf, layout(shard, settings["shard_bytes"][shard], size, size))
        state = None
        if torch_mod is not None:  # made before the clock, as a trainer's tensors exist
            state = {f"layer.{i:05d}": torch_mod.frombuffer(v, dtype=torch_mod.uint8)
                     for i, v in enumerate(parts)}  # fmt: skip
        start = time.monotonic()
        with open(path, "wb") as fh:
            if state is not None:
                torch_mod.save(state, fh)
            else:  # the same bytes, in pieces (the sampler sees the rate, not 64 MB steps)
                for v in parts:
                    for at in range(0, len(v), CHUNK):
                        fh.write(v[at : at + CHUNK])
            fh.flush()
            written = time.monotonic()
            os.fsync(fh.fileno())
            fsynced = time.monotonic()
        closed = time.monotonic()
        return [start, written, fsynced, closed, float(os.stat(path).st_size)]

    paths = [os.path.join(folder, f) for f in files]
    go, shards = together(len(paths), write, [(p, i) for i, p in enumerate(paths)])
    dirsync = fsync_folders(folder, os.path.dirname(folder))
    return {
        "format": "torch" if torch_mod is not None else "raw",
        "torch": getattr(torch_mod, "__version__", ""),
        "files": files,
        "go": min(go, *(r[0] for r in shards)) - t0,  # the first writer's start
        "shards": [[s - t0 for s in r[:4]] + [r[4]] for r in shards],
        "dirsync": [x - t0 for x in dirsync],
        "fsync_calls": len(paths) + 2,
        "end": dirsync[1] - t0,
    }


def _read_all(path: str, buf: memoryview, sink: Any = None) -> int:
    total = 0
    with open(path, "rb", buffering=0) as fh:
        while True:
            n = fh.readinto(buf)
            if not n:
                return total
            if sink is not None:
                sink(buf[:n])
            total += n


def copy(settings: dict[str, Any], t0: float) -> dict[str, Any]:
    src, dst = settings["folder"], settings["copy_to"]
    os.makedirs(dst, exist_ok=True)
    files = settings["files"]

    def one(name: str) -> list[float]:
        buf = memoryview(bytearray(CHUNK))  # pre-made, reused for every chunk
        start = time.monotonic()
        with open(os.path.join(dst, name), "wb", buffering=0) as out:
            total = _read_all(os.path.join(src, name), buf, lambda b: _write_all(out, b))
            os.fsync(out.fileno())
        return [start, time.monotonic(), float(total)]

    go, done = together(len(files), one, [(f,) for f in files])
    dirsync = fsync_folders(dst, os.path.dirname(dst))
    go = min(go, *(a for a, _, _ in done))  # the first copier's start
    return {"go": go - t0, "files": [[a - t0, b - t0, n] for a, b, n in done],
            "dirsync": [x - t0 for x in dirsync], "end": dirsync[1] - t0}  # fmt: skip


def _write_all(fh: Any, data: memoryview) -> None:
    while data:
        n = fh.write(data)
        data = data[n:]


def restore(settings: dict[str, Any], t0: float) -> dict[str, Any]:
    folder, files = settings["folder"], settings["files"]

    def one(name: str) -> list[float]:
        buf = memoryview(bytearray(CHUNK))
        start = time.monotonic()
        total = _read_all(os.path.join(folder, name), buf)
        return [start, time.monotonic(), float(total)]

    go, done = together(len(files), one, [(f,) for f in files])
    go = min(go, *(a for a, _, _ in done))  # the first reader's start
    return {"go": go - t0, "files": [[a - t0, b - t0, n] for a, b, n in done],
            "end": max(b for _, b, _ in done) - t0}  # fmt: skip


def check(settings: dict[str, Any], t0: float) -> dict[str, Any]:
    """Each file against the views it was made from (exit 3 names the first that differs)."""
    folder, files = settings["folder"], settings["files"]
    torch_format = settings["saved_format"] == "torch"
    size = tensor_size(settings)
    buf = block(settings["seed"], size)

    def one(name: str, shard: int) -> list[float]:
        parts = views(buf, layout(shard, settings["shard_bytes"][shard], size, size))
        path = os.path.join(folder, name)
        if torch_format:
            return [float(_check_torch(path, parts)), 0.0]
        want = 0
        for v in parts:
            want = zlib.crc32(v, want)
        got = [0]

        def crc(b: memoryview) -> None:
            got[0] = zlib.crc32(b, got[0])

        n = _read_all(path, memoryview(bytearray(CHUNK)), crc)
        if got[0] != want or n != sum(len(v) for v in parts):
            raise ValueError(f"crc32 {got[0]:08x} of {n:,} bytes, expected {want:08x}")
        return [float(len(parts)), float(n)]

    _, done = together(len(files), one, [(f, i) for i, f in enumerate(files)])
    tensors = int(sum(d[0] for d in done))
    how = (f"torch.load and crc32 of {tensors} tensors in {len(files)} files" if torch_format
           else f"crc32 of {len(files)} files")  # fmt: skip
    return {"ok": True, "how": how}


def _check_torch(path: str, parts: list[memoryview]) -> int:
    import torch  # type: ignore[import-not-found, unused-ignore]

    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except TypeError:  # torch before 2.1: no mmap
        state = torch.load(path, map_location="cpu")
    if sorted(state) != [f"layer.{i:05d}" for i in range(len(parts))]:
        raise ValueError(f"tensors {sorted(state)[:3]}..., expected {len(parts)} layers")
    for i, v in enumerate(parts):
        t = state[f"layer.{i:05d}"].contiguous()
        got = zlib.crc32(ctypes.string_at(t.data_ptr(), t.numel() * t.element_size()))
        if got != zlib.crc32(v):
            raise ValueError(f"tensor layer.{i:05d}: crc32 {got:08x}, expected {zlib.crc32(v):08x}")
    return len(parts)


MODES = {"save": save, "copy": copy, "restore": restore, "check": check}


def main(argv: list[str]) -> int:
    mode, settings_path, out_path = argv[1], argv[2], argv[3]
    with open(settings_path) as fh:
        settings = json.load(fh)
    t0 = settings.get("zero") or time.monotonic()
    try:
        result = MODES[mode](settings, t0)
    except (RuntimeError, ValueError) as exc:
        print(f"{mode}: {exc}", file=sys.stderr)
        return 3
    with open(out_path, "w") as fh:
        json.dump(result, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
