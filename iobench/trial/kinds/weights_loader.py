"""The loader a ``weights`` trial times: a model's weights loaded cold into memory, as a server
does at its start, run as its own process; then every tensor's bytes checked.

Run as a script (``python -I weights_loader.py MODE SETTINGS.json OUT.json``, MODE ``load`` or
``manifest``), never imported by iobench (it imports nothing of iobench, so the phase runner
and sampler watch it like any server process; it needs numpy, and safetensors for ``mmap``;
torch where the interpreter has it). The folder is a model's: a snapshot of a Hugging Face
cache (``config.json``, ``model-0000N-of-0000M.safetensors`` and
``model.safetensors.index.json``), or any folder of ``.safetensors`` files.

``load`` reads the weights one of three ways (``load``):

- ``mmap``: what transformers does: ``safetensors.safe_open`` on each file (memory-mapped),
  every tensor taken with ``get_tensor`` in the index's order (its ``weight_map``: sorted by
  name, so the loader moves between files as the names do; without an index, each file's own
  order), each page a fault the volume serves; numpy's tensors are copies of the mapped bytes,
  torch's views of them, copied here as ``load_state_dict`` or a move to the GPU copies them
  (else the clock would stop before a byte was read);
- ``sequential``: each file read whole into memory first, from start to end (requests of
  ``read_bytes``), then its tensors made from that memory (what ``safetensors.torch.load(
  open(f, "rb").read())`` does, without its copy of every tensor);
- ``concurrent``: what the streamers do (Run:ai Model Streamer, fastsafetensors): ``readers``
  threads read ranges of ``read_bytes`` of every file at once into one buffer a file, then the
  tensors are made from it. The header (8 bytes of length, then JSON: each tensor's dtype,
  shape and byte range) is read first, as they read it.

The clock runs from before the index is read until the last tensor exists (``go``, ``end``,
seconds since ``zero``, a ``time.monotonic()`` reading the trial passes); the process's major
and minor page faults over it are recorded. Then, untimed, every tensor's bytes are checked:
crc32 of each against the manifest (the generator's, or one made from a real model by
``manifest``), exit 3 naming the first that differs.

``manifest`` reads every tensor's bytes of a folder (by its header) and writes
``{"tensors": {name: [crc32, bytes]}}``.
"""

from __future__ import annotations

import json
import os
import resource
import struct
import sys
import threading
import time
import zlib
from typing import Any

import numpy as np

INDEX = "model.safetensors.index.json"
HEADER_MAX = 100 << 20  # a header longer than this is not a safetensors file
#: each safetensors dtype as numpy holds it (bfloat16 and float8 as integers of their width)
NUMPY = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16,
         "F8_E4M3": np.uint8, "F8_E5M2": np.uint8, "I64": np.int64, "I32": np.int32,
         "I16": np.int16, "I8": np.int8, "U64": np.uint64, "U32": np.uint32, "U16": np.uint16,
         "U8": np.uint8, "BOOL": np.bool_}  # fmt: skip
TORCH = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
         "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "I64": "int64", "I32": "int32",
         "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool"}  # fmt: skip


# ------------------------------------------------------------------------------ the folder


def plan(folder: str) -> tuple[list[str], list[tuple[str, str]] | None]:
    """The model's files (relative paths, in load order) and, when it has an index, every
    tensor with its file in the index's order."""
    index = os.path.join(folder, INDEX)
    if os.path.isfile(index):
        with open(index) as fh:
            weight_map = json.load(fh)["weight_map"]
        order = [(str(k), str(v)) for k, v in weight_map.items()]
        return list(dict.fromkeys(sorted(f for _, f in order))), order
    found = []
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        found += [os.path.relpath(os.path.join(root, n), folder) for n in sorted(names)
                  if n.endswith(".safetensors")]  # fmt: skip
    if not found:
        raise ValueError(f"no .safetensors file in {folder}")
    return found, None


def header(fd: int, path: str) -> tuple[dict[str, Any], int]:
    """A file's tensors ({name: {dtype, shape, data_offsets}}) and where their bytes start."""
    raw = os.pread(fd, 8, 0)
    n = struct.unpack("<Q", raw)[0] if len(raw) == 8 else 0
    if not 2 <= n <= HEADER_MAX:
        raise ValueError(f"{path}: not a safetensors file (header length {n})")
    table = json.loads(os.pread(fd, n, 8))
    table.pop("__metadata__", None)
    return table, 8 + n


# ------------------------------------------------------------------------------ the loaders


def use_torch(wanted: str) -> Any:
    """torch when ``wanted`` is ``torch``, or ``auto`` and it imports; else None."""
    if wanted == "numpy":
        return None
    try:
        import torch  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        if wanted == "torch":
            raise
        return None
    return torch


def load_mmap(folder: str, torch: Any) -> dict[str, Any]:
    """safetensors' own loader: safe_open each file, get_tensor in the index's order."""
    from safetensors import safe_open  # type: ignore[import-not-found, unused-ignore]

    files, order = plan(folder)
    framework = "pt" if torch is not None else "np"
    handles = {f: safe_open(os.path.join(folder, f), framework=framework) for f in files}
    if order is None:
        order = [(k, f) for f in files for k in handles[f].keys()]
    state = {}
    for name, f in order:
        try:
            tensor = handles[f].get_tensor(name)
            # torch's are views of the mapped file, read only when touched: copied, as a
            # model's load_state_dict (or a move to the GPU) copies them (numpy's are copies)
            state[name] = tensor.clone() if torch is not None else tensor
        except (TypeError, ValueError) as exc:  # numpy has no bfloat16
            raise ValueError(f"{name}: {exc} (bfloat16 needs torch: framework = 'torch')") from None
    return state


def read_files(folder: str, readers: int, chunk: int) -> list[tuple[str, Any, dict, int]]:
    """Every file read into one buffer each by ``readers`` threads, ``chunk`` bytes a request,
    the ranges handed out in file order: (file, buffer, header, where its data starts)."""
    files, _ = plan(folder)
    out, work = [], []
    fds = []
    try:
        for f in files:
            fd = os.open(os.path.join(folder, f), os.O_RDONLY | os.O_CLOEXEC)
            fds.append(fd)
            table, start = header(fd, f)
            size = os.fstat(fd).st_size - start
            buf = np.empty(size, dtype=np.uint8)
            out.append((f, buf, table, start))
            view = memoryview(buf.data)
            work += [(fd, f, start + at, view[at : at + chunk]) for at in range(0, size, chunk)]
        failed: list[str] = []
        nxt = iter(work)
        lock = threading.Lock()

        def reader() -> None:
            while not failed:
                with lock:
                    item = next(nxt, None)
                if item is None:
                    return
                fd, f, pos, view = item
                try:
                    while view:
                        n = os.preadv(fd, [view], pos)
                        if n <= 0:
                            raise OSError(f"{f}: the file ended at byte {pos}")
                        view, pos = view[n:], pos + n
                except OSError as exc:
                    failed.append(str(exc))

        threads = [threading.Thread(target=reader) for _ in range(max(1, readers))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if failed:
            raise OSError(failed[0])
    finally:
        for fd in fds:
            os.close(fd)
    return out


def tensors_from(buffers: list[tuple[str, Any, dict, int]], torch: Any) -> dict[str, Any]:
    """The tensors as views of the files' buffers (no copy), by their headers."""
    state = {}
    for f, buf, table, _ in buffers:
        for name, spec in table.items():
            a, b = spec["data_offsets"]
            if not 0 <= a <= b <= len(buf):
                raise ValueError(f"{f}: {name}'s bytes {a}-{b} lie outside the file")
            if torch is not None:
                dtype = getattr(torch, TORCH[spec["dtype"]])
                t = torch.frombuffer(buf, dtype=torch.uint8, count=b - a, offset=a)
                state[name] = t.view(dtype).reshape(spec["shape"])
            else:
                dtype = np.dtype(NUMPY[spec["dtype"]])
                count = (b - a) // dtype.itemsize
                state[name] = np.frombuffer(buf, dtype, count, a).reshape(spec["shape"])
    return state


def load(settings: dict[str, Any], t0: float) -> dict[str, Any]:
    torch = use_torch(settings["framework"])
    folder, method = settings["folder"], settings["load"]
    readers = int(settings["readers"]) if method == "concurrent" else 1
    before = resource.getrusage(resource.RUSAGE_SELF)
    go = time.monotonic()
    if method == "mmap":
        state = load_mmap(folder, torch)
    else:
        buffers = read_files(folder, readers, int(settings["read_bytes"]))
        state = tensors_from(buffers, torch)
    end = time.monotonic()
    after = resource.getrusage(resource.RUSAGE_SELF)
    files, _ = plan(folder)
    result = {
        "framework": "torch" if torch is not None else "numpy",
        "torch": getattr(torch, "__version__", ""),
        "files": files,
        "file_bytes": sum(os.path.getsize(os.path.join(folder, f)) for f in files),
        "tensors": len(state),
        "bytes": sum(nbytes(t) for t in state.values()),
        "readers": readers,
        "go": go - t0,
        "end": end - t0,
        "major_faults": after.ru_majflt - before.ru_majflt,
        "minor_faults": after.ru_minflt - before.ru_minflt,
    }
    if settings.get("manifest"):
        with open(settings["manifest"]) as fh:
            result["verified"] = check(state, json.load(fh)["tensors"])
    return result


# ------------------------------------------------------------------------------ the check


def raw(t: Any) -> Any:
    """A tensor's bytes as a flat buffer (no copy for a contiguous one)."""
    if isinstance(t, np.ndarray):
        return np.ascontiguousarray(t).reshape(-1).view(np.uint8)
    import torch  # type: ignore[import-not-found, unused-ignore]

    return t.contiguous().reshape(-1).view(torch.uint8).numpy()


def nbytes(t: Any) -> int:
    return int(t.nbytes) if isinstance(t, np.ndarray) else int(t.numel() * t.element_size())


def check(state: dict[str, Any], want: dict[str, list[int]]) -> str:
    """crc32 of every tensor against the manifest; a ValueError names the first that differs."""
    missing = sorted(set(want) - set(state))
    extra = sorted(set(state) - set(want))
    if missing or extra:
        raise ValueError(f"tensors missing {missing[:3]}, not in the manifest {extra[:3]}")
    for name in want:
        data = raw(state[name])
        crc, n = zlib.crc32(data), len(data)
        if [crc, n] != [int(x) for x in want[name]]:
            raise ValueError(f"tensor {name}: crc32 {crc:08x} of {n:,} bytes, expected "
                             f"{int(want[name][0]):08x} of {int(want[name][1]):,}")  # fmt: skip
    return f"crc32 of all {len(want)} tensors"


def manifest(settings: dict[str, Any], t0: float) -> dict[str, Any]:
    """crc32 and size of every tensor of a folder, read by its headers."""
    folder = settings["folder"]
    out: dict[str, list[int]] = {}
    for _, buf, table, _ in read_files(folder, 4, 8 << 20):
        for name, spec in table.items():
            a, b = spec["data_offsets"]
            out[name] = [zlib.crc32(buf[a:b]), b - a]
    return {"tensors": out}


MODES = {"load": load, "manifest": manifest}


def main(argv: list[str]) -> int:
    mode, settings_path, out_path = argv[1], argv[2], argv[3]
    with open(settings_path) as fh:
        settings = json.load(fh)
    t0 = settings.get("zero") or time.monotonic()
    try:
        result = MODES[mode](settings, t0)
    except (ValueError, OSError, KeyError, ImportError) as exc:
        print(f"{mode}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 3
    with open(out_path, "w") as fh:
        json.dump(result, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
