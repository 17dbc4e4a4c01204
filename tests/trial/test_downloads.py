"""downloads.py: real packages fetched once from a real index, then served on loopback.

The "real" index here is iobench's own loopback index over synthetic wheels, used as any
index (``--index-url``): its counters say how often each wheel was fetched from it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers.files import TINY_PROFILE

from iobench.__main__ import main
from iobench.trial import downloads
from iobench.trial.index import LocalIndex
from iobench.wheels.profile import load_profile
from iobench.wheels.synth import synthesize

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture
def remote(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """A package index standing in for PyPI; pip's own configuration switched off."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
    wheels = tmp_path_factory.mktemp("wheels")
    synthesize(load_profile(str(TINY_PROFILE)), wheels)
    with LocalIndex(wheels).start() as index:
        yield index


def _run(tmp_path: Path, index: LocalIndex, *extra: str) -> tuple[int, Path | None]:
    results = tmp_path / "r"
    before = set(results.iterdir()) if results.exists() else set()
    (tmp_path / "t").mkdir(exist_ok=True)
    rc = main(["run", "--scenario", str(DATA / "tiny.toml"), "--configs", "naive,venv-on-tmp",
               "--repeats", "1", "--target", str(tmp_path / "t"), "--results", str(results),
               "--index-url", index.url, "--package", "tiny-core", "--no-probe", "--no-report",
               "--quiet", *extra])  # fmt: skip
    made = set(results.iterdir()) - before if results.exists() else set()
    return rc, (made.pop() if made else None)


def _wheels(index: LocalIndex) -> int:
    return len(index.files)


@pytest.mark.run
def test_the_packages_are_fetched_once_and_every_trial_installs_them_from_loopback(
    tmp_path: Path, remote: LocalIndex
) -> None:
    rc, run = _run(tmp_path, remote)
    assert rc == 0 and run is not None
    # each wheel crossed the "network" once, for both cold installs
    assert remote.counters.file_requests == _wheels(remote)
    meta = json.loads((run / "meta.json").read_text())
    index = meta["index"]
    assert index["kind"] == "local" and index["downloaded_from"] == remote.url
    kept = downloads.default_dir()
    (folder,) = [p for p in kept.iterdir() if not p.name.startswith(".")]
    on_disk = sum(p.stat().st_size for p in folder.glob("*.whl"))
    assert index["download_bytes"] == on_disk > 0
    # the loopback cap is that download's rate (bytes over its wall time)
    assert index["mbps"] == pytest.approx(on_disk * 8 / 1e6 / index["download_s"], rel=0.01)
    assert "downloaded by this run" in index["source"]
    rows = (run / "trials.csv").read_text().splitlines()
    assert len(rows) == 3 and all(",ok," in r for r in rows[1:]), rows

    # a second run reuses the wheels and their rate: nothing more from the index
    served = remote.counters.file_requests
    rc, again = _run(tmp_path, remote)
    assert rc == 0 and again is not None
    assert remote.counters.file_requests == served
    second = json.loads((again / "meta.json").read_text())["index"]
    assert "downloaded by an earlier run" in second["source"]
    assert second["mbps"] == pytest.approx(index["mbps"])
    # nothing half-made is left in the cache
    assert [p.name for p in kept.iterdir()] == [folder.name]


@pytest.mark.run
def test_no_reuse_sends_every_cold_install_to_the_index(tmp_path: Path, remote: LocalIndex) -> None:
    rc, run = _run(tmp_path, remote, "--no-reuse-downloads")
    assert rc == 0 and run is not None
    assert json.loads((run / "meta.json").read_text())["index"]["kind"] == "remote"
    assert remote.counters.file_requests >= 2  # each trial fetched tiny-core at least
    assert not downloads.default_dir().exists()


@pytest.mark.run
def test_a_failed_download_is_one_line_and_creates_no_run(
    tmp_path: Path, remote: LocalIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "t").mkdir()
    rc = main(["run", "--scenario", str(DATA / "tiny.toml"), "--configs", "naive",
               "--target", str(tmp_path / "t"), "--results", str(tmp_path / "r"),
               "--index-url", remote.url, "--package", "no-such-package", "--no-probe"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0
    assert len(err) == 1 and "pip download failed" in err[0] and "--no-reuse-downloads" in err[0]
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())
    assert not any(downloads.default_dir().iterdir())  # the temp folder went with it


def test_the_key_tells_requirements_indexes_and_interpreters_apart() -> None:
    a = downloads.download_key(["torch"], [], "cpython-311 linux-x86_64")
    assert a == downloads.download_key(["torch"], [], "cpython-311 linux-x86_64")
    assert a != downloads.download_key(["torch==2.13.0"], [], "cpython-311 linux-x86_64")
    assert a != downloads.download_key(
        ["torch"], ["--index-url", "http://x/"], "cpython-311 linux-x86_64"
    )
    assert a != downloads.download_key(["torch"], [], "cpython-312 linux-x86_64")


def test_the_rate_is_bytes_over_the_whole_download(tmp_path: Path) -> None:
    got = downloads.Downloaded(tmp_path, 3, 125_000_000, 10.0, "https://pypi.org/simple", False)
    assert got.mbit_per_s == pytest.approx(100.0)
    assert "3 wheels (125.0 MB) downloaded by this run" in got.source()
    assert "1 wheel (10 bytes)" in downloads.Downloaded(tmp_path, 1, 10, 1.0, "x", True).source()
    assert downloads.Downloaded(tmp_path, 1, 10, 0.0, "x", True).mbit_per_s == 0.01
