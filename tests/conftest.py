"""Shared fixtures: real tmpfs mounts, an isolated wheel cache, the tiny scenario."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
TINY = DATA / "tiny.toml"


@pytest.fixture(scope="session", autouse=True)
def _isolated_wheel_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Generated wheels go to a per-session cache, never the user's ~/.cache."""
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old


def _can_mount() -> str | None:
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    return None


class TmpfsFactory:
    """Mount real tmpfs filesystems for a test and always unmount them."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.mounts: list[Path] = []

    def __call__(self, size: str = "256m", name: str | None = None) -> Path:
        reason = _can_mount()
        if reason:
            pytest.skip(reason)
        mnt = self.base / (name or f"tmpfs-{uuid.uuid4().hex[:6]}")
        mnt.mkdir(parents=True)
        r = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "iobench-test", str(mnt)],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            pytest.skip(f"cannot mount tmpfs: {r.stderr.strip()}")
        self.mounts.append(mnt)
        return mnt

    def cleanup(self) -> None:
        for mnt in reversed(self.mounts):
            r = subprocess.run(["umount", str(mnt)], capture_output=True)
            if r.returncode != 0:
                subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[TmpfsFactory]:
    factory = TmpfsFactory(tmp_path / "mnt")
    try:
        yield factory
    finally:
        factory.cleanup()


@pytest.fixture
def disk_dir(tmp_path: Path) -> Path:
    """A folder on the disk's filesystem (tmp_path may itself be a tmpfs on some hosts)."""
    d = tmp_path / "disk"
    d.mkdir()
    return d


@pytest.fixture(autouse=True)
def _fresh_run_facts() -> Iterator[None]:
    """Each test starts without another's prefetched machine facts (``pip config list``,
    ``uv --version``): a run in an earlier test that ended early leaves its answers behind."""
    from iobench.run import facts

    facts._PREFETCHED.clear()
    facts._LATE.clear()
    yield
