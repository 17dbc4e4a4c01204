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
import stat
import sys
import time
from typing import Any, Protocol

CHUNK = 1 << 20  # bytes per readinto: large enough that the call overhead does not matter

#: one batch as the output records it: [arrived_s, wait_s, compute_s, bytes, files]
Batch = list[float]

_buf: memoryview | None = None  # the worker's pre-made buffer (one per process)


class NotData(OSError):
    """A listed file that is no longer a regular file (swapped since the listing)."""


def read_files(paths: list[str]) -> tuple[int, int]:
    """Read each file to its end into this worker's buffer; (bytes, files). Each is opened
    without following a link and without blocking (a FIFO's open would wait for a writer)
    and read only when ``fstat`` of that descriptor says it is a regular file."""
    global _buf
    if _buf is None:
        _buf = memoryview(bytearray(CHUNK))
    total = 0
    for path in paths:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise NotData(0, "no longer a regular file (changed since the listing)", path)
        with open(fd, "rb", buffering=0) as fh:
            while True:
                n = fh.readinto(_buf)
                if not n:
                    break
                total += n
    return total, len(paths)


def listing(folder: str) -> tuple[list[str], list[str]]:
    """Every regular file under ``folder`` but hidden ones (``.complete``, editors' and sync
    tools' dot files), sorted (the order is then shuffled per epoch); and what was left
    out, one ``name (why)`` each: anything else (a FIFO's read waits for a writer, a device
    never ends) and links that lead out of the folder (a link to /etc/shadow is not
    data). A link to a regular file inside the folder is read as that file."""
    top = os.path.realpath(folder)
    found: list[str] = []
    skipped: list[str] = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for d in [d for d in dirs if os.path.islink(os.path.join(root, d))]:  # never walked
            skipped.append(f"{os.path.relpath(os.path.join(root, d), folder)} (a link to a folder)")
        for name in sorted(n for n in names if not n.startswith(".")):
            path = os.path.join(root, name)
            why = not_data(path, top)
            if why:
                skipped.append(f"{os.path.relpath(path, folder)} ({why})")
            else:
                found.append(os.path.realpath(path) if os.path.islink(path) else path)
    return found, skipped


def not_data(path: str, top: str) -> str:
    """Why ``path`` is not read ('' when it is a regular file, or a link to one inside
    ``top``)."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        real = os.path.realpath(path)
        if os.path.commonpath([real, top]) != top:
            return "a link out of the folder"
        try:
            st = os.stat(real, follow_symlinks=False)
        except OSError:
            return "a broken link"
    if stat.S_ISREG(st.st_mode):
        return ""
    kinds = {stat.S_ISFIFO: "a FIFO", stat.S_ISCHR: "a device", stat.S_ISBLK: "a device",
             stat.S_ISSOCK: "a socket", stat.S_ISDIR: "a folder"}  # fmt: skip
    return next((w for test, w in kinds.items() if test(st.st_mode)), "not a regular file")


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
    files, skipped = listing(settings["folder"])
    epochs: list[list[float]] = []
    batches: list[Batch] = []
    result: dict[str, Any] = {"loader": "plain", "list_s": time.monotonic() - started,
                              "files": len(files), "epochs": epochs, "batches": batches,
                              "skipped": skipped}  # fmt: skip
    if skipped:
        print(f"skipped {len(skipped)}: {', '.join(skipped[:5])}", file=sys.stderr)
    if not files:
        print(f"no regular files under {settings['folder']}", file=sys.stderr)
        return 2
    try:
        read_epochs(settings, files, t0, result)
    except OSError as exc:  # one line naming the file, not a traceback
        print(f"cannot read {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    with open(out_path, "w") as fh:
        json.dump(result, fh)
    return 0


def read_epochs(settings: dict[str, Any], files: list[str], t0: float, result: dict) -> None:
    """Every epoch, through torch's DataLoader or the plain pool, into ``result``."""
    epochs, batches = result["epochs"], result["batches"]
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


if __name__ == "__main__":
    sys.exit(main(sys.argv))
