"""Shared fixtures and the test tiers: real tmpfs mounts, an isolated wheel cache, the tiny
scenario; markers set from the fixtures a test uses, and a guard that fails an unmarked test
which spawns an installer, a venv creator, a mount or an `iobench run` process (as nox's own
tests refuse an unmarked test that starts conda). ``nox -s quick`` runs the unmarked tier.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import threading
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


# ------------------------------------------------------------------------------- the tiers
#: the markers of the tiers beyond the quick one (pyproject.toml registers them)
HEAVY = ("e2e", "lab", "slow", "timing", "venv", "run", "charts")
#: fixtures whose use marks a test: a mount needs root (lab), a real run is an e2e test
FIXTURE_MARKS = {"tmpfs": "lab", "volume": "lab", "real_run": "e2e", "tiny_run_dir": "e2e"}
#: what an unmarked test must not start: (words of the command line) -> the marker it needs
_PROGRAMS = {
    "pip": "venv", "pip3": "venv", "uv": "venv", "virtualenv": "venv",
    "mount": "lab", "umount": "lab", "fusermount3": "lab", "sshfs": "lab", "sshd": "lab",
}  # fmt: skip
_MODULES = {"pip": "venv", "virtualenv": "venv", "venv": "venv", "iobench.lab.daemon": "lab"}


def heavy_command(argv: object) -> str | None:
    """The marker a command needs, or None for a light one (mkdir, true, a short python -c)."""
    if isinstance(argv, (str, bytes)):
        words = shlex.split(argv if isinstance(argv, str) else argv.decode())
    else:
        try:
            words = [os.fspath(a) if not isinstance(a, str) else a for a in argv]  # type: ignore[union-attr]
        except TypeError:
            return None
    words = [w.decode() if isinstance(w, bytes) else str(w) for w in words]
    if not words:
        return None
    name = os.path.basename(words[0])
    asks_help = bool({"--help", "-h"} & set(words))  # `iobench run --help` runs nothing
    if name in _PROGRAMS:
        return _PROGRAMS[name]
    if "-m" in words[:-1]:
        module = words[words.index("-m") + 1]
        if module in _MODULES:
            return _MODULES[module]
        if module == "iobench" and "run" in words and not asks_help:
            return "run"
    if name == "iobench" and words[1:2] == ["run"] and not asks_help:
        return "run"
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test by the fixtures it uses (a mount: lab; a real run: e2e); a timing test
    must say so in its file's text (the noxfile's timing phase collects those files only)."""
    for item in items:
        if item.get_closest_marker("timing") and "mark.timing" not in item.path.read_text():
            raise pytest.UsageError(
                f"{item.nodeid} is marked timing, but its file never says `pytest.mark.timing`"
                " (nox's timing phase collects only the files that do)"
            )
        for fixture in getattr(item, "fixturenames", ()):
            mark = FIXTURE_MARKS.get(fixture)
            if mark is not None:
                item.add_marker(getattr(pytest.mark, mark))
    # the files with heavy tests first, whole and in their order, the quick files last: the
    # workers then end on short tests and share them, where a 30 s run or launch drawn last
    # kept one worker busy while the other had nothing left
    heavy = {item.path for item in items if any(item.get_closest_marker(m) for m in HEAVY)}
    items.sort(key=lambda item: item.path not in heavy)


@pytest.fixture(autouse=True)
def _spawn_guard(request: pytest.FixtureRequest) -> Iterator[None]:
    """An unmarked test that starts an installer, a venv creator, a mount or a run fails,
    naming the command and the marker it needs: the quick tier stays quick by construction."""
    if any(request.node.get_closest_marker(m) for m in HEAVY):
        yield
        return
    real = subprocess.Popen.__init__
    seen: list[str] = []
    test = threading.get_ident()

    def guarded(self: subprocess.Popen, args: object, *a: object, **kw: object) -> None:
        mark = heavy_command(args)
        if mark is not None:
            seen.append(f"{args!r} (mark the test @pytest.mark.{mark})")
            if threading.get_ident() == test:
                pytest.fail(f"an unmarked test spawned {seen[-1]}", pytrace=False)
        real(self, args, *a, **kw)  # type: ignore[arg-type]

    subprocess.Popen.__init__ = guarded  # type: ignore[method-assign]
    try:
        yield
    finally:
        subprocess.Popen.__init__ = real  # type: ignore[method-assign]
    if seen:
        pytest.fail(f"an unmarked test spawned {seen[0]}", pytrace=False)


@pytest.fixture(autouse=True)
def _fresh_run_facts(_spawn_guard: None) -> Iterator[None]:
    """Each test starts without another's prefetched machine facts (``pip config list``,
    ``uv --version``: a run in an earlier test that ended early leaves its answers behind),
    and a prefetch a test started ends with it (inside the spawn guard, which it follows)."""
    from iobench.run import facts

    facts._PREFETCHED.clear()
    facts._LATE.clear()
    yield
    thread = facts._PREFETCHED.get("thread")
    if thread is not None:
        thread.join(timeout=60)


@pytest.fixture(autouse=True)
def _no_trusted_owners() -> Iterator[None]:
    """``--trust-owner`` lasts one run: no test inherits another's trust."""
    from iobench.system import trust

    trust.TRUSTED_UIDS.clear()
    yield
    trust.TRUSTED_UIDS.clear()
