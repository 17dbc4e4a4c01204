"""Real packages downloaded once, then served to every cold trial from a loopback index.

Why: a run of the torch scenario installs torch cold in most of its trials; from the network
that is tens of GB on a pod that bills by the minute, and each trial's time would carry the
index's mood of that minute. So the run downloads the packages once (``pip download`` with
the trials' interpreter, the user's pip configuration and index options: what the trials
would have fetched), keeps the wheels in iobench's cache, and serves them on loopback capped
at the rate that first download reached (``--index-mbit`` sets another cap;
``--no-reuse-downloads`` sends every trial to the network instead).

The rate is the wheels' bytes over the whole ``pip download``'s wall time, resolution and
index pages included: a lower bound on the link's rate, close for a large download (torch's
GB) and low for a small one, where pip's own start dominates (docs/cli.md says so).

Kept in ``<XDG cache>/iobench/downloads/<key>`` (the key hashes the requirements, the index
options and the interpreter's tag and platform), made in a private temp folder and renamed
into place once complete, as the synthetic wheels are (:mod:`iobench.wheels.cache`): a later
run with the same key reuses the wheels and the rate recorded with them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from iobench import files, redact
from iobench.errors import IOBenchError
from iobench.trial.index import check_mbit
from iobench.units import fmt_bytes

#: written last into a complete download folder: what was fetched, and how fast
RECORD = "download.json"
#: the slowest cap the loopback index takes (check_mbit's floor)
_MIN_MBIT = 0.01


class DownloadError(IOBenchError):
    """The one download could not be made; the message names the fix."""


@dataclass(frozen=True)
class Downloaded:
    """A folder of wheels fetched once, and what that fetch measured."""

    folder: Path
    wheels: int
    bytes: int
    seconds: float  # the first download's wall time (pip download, resolution included)
    index: str  # where from, credentials redacted
    reused: bool  # found complete in the cache (this run downloaded nothing)

    @property
    def mbit_per_s(self) -> float:
        """The first download's rate, the loopback index's cap."""
        if self.seconds <= 0:
            return _MIN_MBIT
        return max(_MIN_MBIT, self.bytes * 8 / 1e6 / self.seconds)

    def source(self) -> str:
        """meta.json's ``index.source``: what the loopback index served."""
        when = "downloaded by an earlier run" if self.reused else "downloaded by this run"
        return (
            f"{_count(self.wheels)} ({fmt_bytes(self.bytes)}) {when} from {self.index} in "
            f"{self.seconds:.1f} s ({self.mbit_per_s:,.2f} Mbit/s), kept in {self.folder}"
        )


def _count(n: int) -> str:
    return f"{n} wheel" + ("" if n == 1 else "s")


def default_dir() -> Path:
    """Where downloads are kept between runs (XDG cache, beside the synthetic wheels)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "iobench" / "downloads"


def _interpreter(python: str) -> str:
    """The interpreter's cache tag and platform ("cpython-311 linux-x86_64"): which wheels fit."""
    code = "import sys, sysconfig; print(sys.implementation.cache_tag, sysconfig.get_platform())"
    r = subprocess.run([python, "-c", code], capture_output=True, text=True)
    if r.returncode != 0:
        raise DownloadError(f"{python} does not run: {r.stderr.strip()[-200:] or 'no output'}")
    return r.stdout.strip()


def download_key(packages: Sequence[str], index_args: Sequence[str], interpreter: str) -> str:
    """One folder per requirement list, index options and interpreter."""
    text = json.dumps([list(packages), list(index_args), interpreter])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _wheels(folder: Path) -> tuple[int, int]:
    found = [p for p in folder.iterdir() if p.suffix == ".whl" and p.is_file()]
    return len(found), sum(p.stat().st_size for p in found)


def _read(folder: Path) -> Downloaded | None:
    """A complete download folder's record, or None when there is none."""
    try:
        data = json.loads((folder / RECORD).read_text())
        return Downloaded(
            folder,
            int(data["wheels"]),
            int(data["bytes"]),
            float(data["seconds"]),
            str(data["index"]),
            True,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def pip_download_argv(
    python: str, dest: Path, packages: Sequence[str], index_args: Sequence[str]
) -> list[str]:
    """The one download: wheels only (the loopback index serves nothing else)."""
    return [python, "-m", "pip", "download", "--only-binary=:all:", "--no-input",
            "--disable-pip-version-check", "--progress-bar", "off", "--dest", str(dest),
            *index_args, *packages]  # fmt: skip


def fetch(
    packages: Sequence[str],
    python: str,
    index_args: Sequence[str],
    index: str,
    say: Callable[[str], None] = lambda _: None,
    parent: Path | None = None,
) -> Downloaded:
    """The wheels of ``packages`` in a folder of iobench's cache: found there from an earlier
    run, or downloaded now (``index``: where from, already redacted, for the record)."""
    parent = parent or default_dir()
    folder = parent / download_key(packages, index_args, _interpreter(python))
    found = _read(folder)
    if found is not None:
        say(f"downloads: reused {_count(found.wheels)} ({fmt_bytes(found.bytes)}) from {folder}")
        return found
    if os.path.lexists(folder):
        raise DownloadError(
            f"{folder} exists but holds no complete download; remove it (it is iobench's "
            "cache) or give --no-reuse-downloads"
        )
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".tmp", dir=parent))
    say(f"downloads: {' '.join(packages)} from {index}, once, into {folder}")
    try:  # the temp folder is ours alone (mkdtemp): removed whole unless renamed into place
        t0 = time.monotonic()
        r = subprocess.run(
            pip_download_argv(python, tmp, packages, index_args),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        seconds = time.monotonic() - t0
        if r.returncode != 0:
            last = ((r.stderr or r.stdout).strip().splitlines() or ["no output"])[-1]
            raise DownloadError(
                f"pip download failed ({redact.redact(last)}); give --no-reuse-downloads to "
                "install from the index in every trial, or --wheelhouse DIR with wheels you built"
            )
        wheels, size = _wheels(tmp)
        record = {"wheels": wheels, "bytes": size, "seconds": seconds, "index": index,
                  "packages": [redact.redact(p) for p in packages], "when": time.time()}  # fmt: skip
        files.write(tmp / RECORD, json.dumps(record, indent=1) + "\n")
        os.chmod(tmp, 0o755)  # mkdtemp makes it 0700
        try:
            os.rename(tmp, folder)
        except OSError:  # another run renamed its copy in first: use theirs
            theirs = _read(folder)
            if theirs is None:
                raise DownloadError(f"{folder}: cannot be put in place") from None
            return theirs
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    got = Downloaded(folder, wheels, size, seconds, index, False)
    check_mbit(got.mbit_per_s)
    say(f"downloads: {_count(wheels)}, {fmt_bytes(size)} in {seconds:.1f} s "
        f"({got.mbit_per_s:,.2f} Mbit/s): the cold trials install from loopback at that rate")  # fmt: skip
    return got


__all__ = ["RECORD", "DownloadError", "Downloaded", "default_dir", "download_key", "fetch"]
