"""Helpers for tests of the emulated slow volume: skip markers, a volume factory, and the
check that nothing (mount, process, record) is left behind."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from iobench.lab import manage, state
from iobench.lab.testing import slow_volume
from iobench.system import procfs

FUSE_REASON = manage.lab_unavailable_reason("fuse")
SSHFS_REASON = manage.lab_unavailable_reason("sshfs")
needs_fuse = pytest.mark.skipif(FUSE_REASON is not None, reason=FUSE_REASON or "")
needs_sshfs = pytest.mark.skipif(SSHFS_REASON is not None, reason=SSHFS_REASON or "")


def procs_mentioning(text: str) -> list[int]:
    """Pids whose command line contains ``text`` (not this test process)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            if text in procfs.cmdline(int(entry)) and procfs.alive(int(entry)):
                found.append(int(entry))
    return found


def assert_nothing_left(mountpoint: Path) -> None:
    mp = manage.mount_path(mountpoint)
    assert not any(m.mountpoint == mp for m in procfs.mounts()), f"{mp} still mounted"
    assert procs_mentioning(mp) == [], f"processes left for {mp}"
    assert all(s.mountpoint != mp for s in manage.status())


def volume_factory(tmp_path: Path) -> Iterator[Callable[..., Path]]:
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
            assert_nothing_left(mp)


def live_ops(mountpoint: Path) -> dict[str, int]:
    """The daemon's operation counts (after its next refresh of the live stats)."""
    time.sleep(0.6)  # the daemon refreshes its live stats every 0.25 s
    stats = state.read_stats(mountpoint)
    assert stats is not None
    return {name: op["count"] for name, op in stats["ops"].items()}


def per_item(before: dict[str, int], after: dict[str, int], n: int) -> dict[str, float]:
    return {k: (after[k] - before.get(k, 0)) / n for k in after if after[k] != before.get(k, 0)}


def make_wheel(dest: Path, name: str = "labdemo", modules: int = 20) -> Path:
    """A tiny pure-Python wheel, built by hand so the test needs no build tools."""
    files = {f"{name}/__init__.py": b"VALUE = 42\n"}
    files.update({f"{name}/m{i}.py": f"I = {i}\n".encode() for i in range(modules)})
    info = f"{name}-1.0.dist-info"
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode()
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
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


def venv_and_pip(root: Path, wheel: Path) -> None:
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "virtualenv", "-q", str(venv)], check=True, timeout=300)
    assert os.path.isabs(os.readlink(venv / "bin" / "python"))  # absolute symlink kept
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--no-index", "--no-cache-dir", str(wheel)],
        check=True,
        timeout=300,
    )
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import labdemo, labdemo.m3; print(labdemo.VALUE)"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.stdout.strip() == "42"
