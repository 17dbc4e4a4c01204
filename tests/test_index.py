"""The loopback package index: the simple API pip speaks, counters, and the rate cap."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

import pytest

from iobench.errors import UsageError
from iobench.index import LocalIndex


def _house(tmp_path: Path, size: int = 2_000_000) -> Path:
    house = tmp_path / "house"
    house.mkdir()
    (house / "Foo_Bar-1.0-py3-none-any.whl").write_bytes(b"x" * size)
    (house / "notes.txt").write_text("ignored")
    return house


def test_simple_api_and_counters(tmp_path: Path) -> None:
    with LocalIndex(_house(tmp_path)) as ix:
        root = urllib.request.urlopen(ix.url).read().decode()
        assert 'href="/simple/foo-bar/"' in root
        page = urllib.request.urlopen(ix.url + "foo-bar/").read().decode()
        assert "Foo_Bar-1.0-py3-none-any.whl#sha256=" in page
        assert urllib.request.urlopen(ix.url + "Foo.Bar/").status == 200  # normalised name
        href = page.split('href="')[1].split("#")[0]
        resp = urllib.request.urlopen(ix.url.replace("/simple/", "") + href)
        assert "immutable" in resp.headers["Cache-Control"]
        assert len(resp.read()) == 2_000_000
        snap = ix.snapshot()
        assert snap.file_bytes == 2_000_000 and snap.file_requests == 1
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(ix.url + "nope/")


def test_rate_cap(tmp_path: Path) -> None:
    with LocalIndex(_house(tmp_path), mbps=40) as ix:  # 5 MB/s
        page = urllib.request.urlopen(ix.url + "foo-bar/").read().decode()
        href = page.split('href="')[1].split("#")[0]
        t = time.monotonic()
        urllib.request.urlopen(ix.url.replace("/simple/", "") + href).read()
        took = time.monotonic() - t
    assert took == pytest.approx(2_000_000 / 5e6, rel=0.25)


def test_bad_wheelhouse(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no wheels"):
        LocalIndex(tmp_path)
    with pytest.raises(UsageError, match="not a folder"):
        LocalIndex(tmp_path / "missing")
    with pytest.raises(UsageError, match="index-mbps"):
        LocalIndex(_house(tmp_path), mbps=0)
