"""The data loader a ``dataset`` trial times: a training loop's reads, run as its own process.

Run as a script (``python -I loader.py SETTINGS.json OUT.json``), never imported by iobench
(it imports nothing of iobench, so the phase runner and sampler watch it like any training
process). It lists the data folder, then for each epoch reads every file once in a shuffled
order, in batches of ``batch`` files, with ``workers`` worker processes reading ahead at most
``prefetch`` batches each — the shape of ``torch.utils.data.DataLoader``, whose own workers
it uses when ``loader`` is ``torch`` (or ``auto`` and torch imports). The main process stands
in for the accelerator: after each batch arrives it "computes" for a set time (a sleep, as
DLIO emulates one), constant or drawn from a normal distribution (mean, sd; never below 0).

Workers read into one pre-made buffer each (``readinto``, 1 MiB at a time) and hand back only
the byte and file counts, so no copy and no pickling of the data sits between the storage
and the figure: the harness must never be what limits the rate it reports.

The output is one JSON object: the loader used, the listing time, per epoch its start and
end, and per batch ``[arrived_s, wait_s, compute_s, bytes, files]`` (``wait_s`` is how long
the loop waited for that batch). Times are seconds since ``zero`` (a ``time.monotonic()``
reading the trial passes: its own start, so the batches line up with its samples), or since
the loader started when none is given.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import sys
import time
from typing import Any, Protocol

CHUNK = 1 << 20  # bytes per readinto: large enough that the call overhead does not matter

#: one batch as the output records it: [arrived_s, wait_s, compute_s, bytes, files]
Batch = list[float]

_buf: memoryview | None = None  # the worker's pre-made buffer (one per process)


def read_files(paths: list[str]) -> tuple[int, int]:
    """Read each file to its end into this worker's buffer; (bytes, files)."""
    global _buf
    if _buf is None:
        _buf = memoryview(bytearray(CHUNK))
    total = 0
    for path in paths:
        with open(path, "rb", buffering=0) as fh:
            while True:
                n = fh.readinto(_buf)
                if not n:
                    break
                total += n
    return total, len(paths)


def listing(folder: str) -> list[str]:
    """Every file under ``folder`` but hidden ones (``.complete``, editors' and sync tools'
    dot files), sorted (the order is then shuffled per epoch)."""
    found: list[str] = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found.extend(os.path.join(root, f) for f in sorted(files) if not f.startswith("."))
    return found


def batches_of(files: list[str], size: int, rng: random.Random) -> list[list[str]]:
    order = list(files)
    rng.shuffle(order)
    return [order[i : i + size] for i in range(0, len(order), size)]


class Compute:
    """The emulated accelerator's time per batch: constant, or normal(mean, sd) clipped at 0."""

    def __init__(self, mean_s: float, sd_s: float, seed: int) -> None:
        self.mean_s, self.sd_s = mean_s, sd_s
        self.rng = random.Random(seed + 1)

    def run(self) -> float:
        want = max(0.0, self.rng.gauss(self.mean_s, self.sd_s)) if self.sd_s else self.mean_s
        t0 = time.monotonic()
        if want > 0:
            time.sleep(want)
        return time.monotonic() - t0


class Result(Protocol):
    def get(self) -> tuple[int, int]: ...


class Readers(Protocol):
    def apply_async(self, fn: Any, args: tuple[list[str]]) -> Any: ...


class Inline:
    """``num_workers=0``: each batch read by the loop itself when it asks for it (no overlap)."""

    def apply_async(self, fn: Any, args: tuple[list[str]]) -> Result:
        return Later(fn, args)


class Later:
    def __init__(self, fn: Any, args: tuple[list[str]]) -> None:
        self.fn, self.args = fn, args

    def get(self) -> tuple[int, int]:
        return self.fn(*self.args)


def plain_epoch(
    pool: Readers,
    batches: list[list[str]],
    depth: int,
    compute: Compute,
    t0: float,
    out: list[Batch],
) -> None:
    """One epoch through a process pool, at most ``depth`` batches in flight."""
    pending: list[Result] = []
    nxt = 0
    for _ in range(len(batches)):
        while nxt < len(batches) and len(pending) < depth:
            pending.append(pool.apply_async(read_files, (batches[nxt],)))
            nxt += 1
        w0 = time.monotonic()
        nbytes, nfiles = pending.pop(0).get()
        arrived = time.monotonic()
        out.append([arrived - t0, arrived - w0, compute.run(), nbytes, nfiles])


def torch_epochs(
    settings: dict[str, Any], files: list[str], compute: Compute, t0: float, result: dict[str, Any]
) -> None:
    """The same epochs through a real ``torch.utils.data.DataLoader`` (its workers, its prefetch)."""
    import torch  # type: ignore[import-not-found, unused-ignore]
    from torch.utils.data import DataLoader, Dataset  # type: ignore[import-not-found, unused-ignore]

    class Files(Dataset):  # type: ignore[misc, unused-ignore]
        def __len__(self) -> int:
            return len(files)

        def __getitem__(self, i: int) -> tuple[int, int]:
            return read_files([files[i]])

    def collate(items: list[tuple[int, int]]) -> tuple[int, int]:
        return sum(b for b, _ in items), sum(f for _, f in items)

    gen = torch.Generator()
    gen.manual_seed(settings["seed"])
    workers = settings["workers"]
    loader = DataLoader(Files(), batch_size=settings["batch"], shuffle=True, generator=gen,
                        num_workers=workers, collate_fn=collate,
                        prefetch_factor=settings["prefetch"] if workers else None)  # fmt: skip
    for _ in range(settings["epochs"]):
        start = time.monotonic() - t0
        out: list[Batch] = []
        it = iter(loader)
        while True:
            w0 = time.monotonic()
            try:
                nbytes, nfiles = next(it)
            except StopIteration:
                break
            arrived = time.monotonic()
            out.append([arrived - t0, arrived - w0, compute.run(), nbytes, nfiles])
        result["epochs"].append([start, time.monotonic() - t0])
        result["batches"].extend(out)
    result["torch"] = torch.__version__


def has_torch() -> bool:
    try:
        import torch  # type: ignore[import-not-found, unused-ignore]  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv: list[str]) -> int:
    settings_path, out_path = argv[1], argv[2]
    with open(settings_path) as fh:
        settings = json.load(fh)
    started = time.monotonic()
    t0 = settings.get("zero") or started
    files = listing(settings["folder"])
    epochs: list[list[float]] = []
    batches: list[Batch] = []
    result: dict[str, Any] = {"loader": "plain", "list_s": time.monotonic() - started,
                              "files": len(files), "epochs": epochs, "batches": batches}  # fmt: skip
    if not files:
        print(f"no files under {settings['folder']}", file=sys.stderr)
        return 2
    compute = Compute(settings["compute_ms"] / 1000.0, settings["compute_sd_ms"] / 1000.0,
                      settings["seed"])  # fmt: skip
    wanted = settings["loader"]
    if wanted == "torch" or (wanted == "auto" and has_torch()):
        result["loader"] = "torch"
        torch_epochs(settings, files, compute, t0, result)
    else:
        rng = random.Random(settings["seed"])
        workers = settings["workers"]
        depth = max(1, workers * settings["prefetch"])
        pool = multiprocessing.get_context("fork").Pool(workers) if workers else None
        readers: Readers = pool if pool is not None else Inline()
        try:
            for _ in range(settings["epochs"]):
                start = time.monotonic() - t0
                out: list[Batch] = []
                plain_epoch(
                    readers, batches_of(files, settings["batch"], rng), depth, compute, t0, out
                )
                epochs.append([start, time.monotonic() - t0])
                batches.extend(out)
        finally:
            if pool is not None:
                pool.close()
                pool.join()
    with open(out_path, "w") as fh:
        json.dump(result, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
