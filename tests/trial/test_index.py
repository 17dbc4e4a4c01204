"""The loopback package index: the simple API pip speaks, counters, and the rate cap."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from helpers.files import DATA

from iobench.errors import UsageError
from iobench.trial.index import LocalIndex


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


def test_a_kept_alive_connection_gets_each_page_without_the_delayed_ack_stall(
    tmp_path: Path,
) -> None:
    """pip keeps one connection open: with Nagle on, every response's body waited for the
    client's delayed ACK of its headers, 40-44 ms a request (0.5 ms with TCP_NODELAY); a
    discrete stall, not a speed target, so the bound is half of it."""
    import http.client
    import statistics
    import urllib.parse

    with LocalIndex(_house(tmp_path)) as ix:
        port = urllib.parse.urlsplit(ix.url).port
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        took = []
        for _ in range(9):
            t = time.perf_counter()
            conn.request("GET", "/simple/foo-bar/")
            resp = conn.getresponse()
            assert resp.status == 200 and resp.read()
            took.append(time.perf_counter() - t)
        conn.close()
    assert statistics.median(took[1:]) < 0.020, [round(x * 1000, 1) for x in took]


@pytest.mark.timing
def test_rate_cap(tmp_path: Path) -> None:
    with LocalIndex(_house(tmp_path), mbit_per_s=40) as ix:  # 5 MB/s
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
    house = _house(tmp_path)
    for bad in (0, -1, 1e-300, 0.001, float("inf"), float("nan"), 1e12):  # 1e-300: overflowed
        with pytest.raises(UsageError, match="--index-mbit must be a number of megabits/s"):
            LocalIndex(house, mbit_per_s=bad)


def _get(url: str) -> int:
    try:
        return urllib.request.urlopen(url).status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_serves_wheels_and_their_metadata_only(tmp_path: Path) -> None:
    """Before: any file of the wheelhouse was served to any local process, dotfiles included."""
    import zipfile

    house = tmp_path / "house"
    house.mkdir()
    with zipfile.ZipFile(house / "demo-1.0-py3-none-any.whl", "w") as zf:
        zf.writestr(
            "demo-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n"
        )
    (house / ".netrc").write_text("machine x login u password secret")
    (house / "notes.txt").write_text("private")
    (house / "demo-0.9.tar.gz").write_bytes(b"sdist")
    secret = tmp_path / "secret-1.0-py3-none-any.whl"
    secret.write_bytes(b"outside the wheelhouse")
    (house / "secret-1.0-py3-none-any.whl").symlink_to(secret)  # a link out: never served
    with LocalIndex(house) as ix:
        base = ix.url.replace("/simple/", "")
        assert _get(base + "/files/demo-1.0-py3-none-any.whl") == 200
        assert _get(base + "/files/demo-1.0-py3-none-any.whl.metadata") == 200
        for name in (
            ".netrc",
            "notes.txt",
            "demo-0.9.tar.gz",
            "secret-1.0-py3-none-any.whl",
            "..%2F..%2Fetc%2Fpasswd",
            "%2Enetrc",
            "notes.txt.metadata",
        ):
            assert _get(f"{base}/files/{name}") == 404, name
        assert "secret" not in urllib.request.urlopen(ix.url).read().decode()
        # a wheel swapped for a link after start is refused too
        (house / "demo-1.0-py3-none-any.whl").unlink()
        (house / "demo-1.0-py3-none-any.whl").symlink_to(secret)
        assert _get(base + "/files/demo-1.0-py3-none-any.whl") == 404


def test_index_and_lab_share_one_token_bucket() -> None:
    from iobench.system import shaping
    from iobench.trial import index

    assert not hasattr(index, "_Bucket")
    assert isinstance(index._Link(8.0).bucket, shaping.TokenBucket)
    assert index._Link(8.0).bucket.rate == 1e6  # 8 megabits/s is 1 MB/s


def test_index_flag_names_its_unit() -> None:
    from iobench.cli import build_parser

    parser = build_parser()
    ns = parser.parse_args(["run", "--index-mbit", "40"])
    assert ns.index_mbit == 40
    assert (
        parser.parse_args(["run", "--index-mbps", "40"]).index_mbit == 40
    )  # old spelling still works
    assert "--index-mbps" not in parser._subparsers._group_actions[0].choices["run"].format_help()


def test_a_huge_cap_is_refused_before_the_run_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from iobench.__main__ import main

    tiny = DATA / "tiny.toml"
    rc = main(
        [
            "run",
            "--scenario",
            str(tiny),
            "--target",
            str(tmp_path),
            "--results",
            str(tmp_path / "r"),
            "--index-mbit",
            "1e12",
            "--no-report",
            "--quiet",
        ]
    )
    assert rc == 2 and "--index-mbit must be a number of megabits/s" in capsys.readouterr().err
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())
