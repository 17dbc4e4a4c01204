"""Served from the loopback index, downloads go through the config's TMPDIR and fill its cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.files import TINY_PROFILE, only_run_dir, read_csv, wheel_bytes

from iobench.__main__ import main

pytestmark = pytest.mark.e2e

SCENARIO = f"""
[scenario]
name = "paths"
packages = ["tiny-core"]
wheels = "{TINY_PROFILE}"
ready = "import tiny_core; tiny_core.check()"
repeats = 1
size_mb = 10

[configs.cold]
venv = "target"
tmpdir = "tmp"
cache = "cachefs"

[configs.off]
venv = "target"
tmpdir = "tmp"
cache = "off"

[configs.warm]
venv = "target"
tmpdir = "tmp"
cache = "cachefs"
cache_state = "warm"
"""


def _used(path: Path) -> int:
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def test_tmpdir_and_cache_really_used(tmpfs, tmp_path: Path, monkeypatch) -> None:
    target, tmp, cachefs = tmpfs(name="target"), tmpfs(name="tmp"), tmpfs(name="cache")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))  # pip's default cache would land here if used
    scenario = tmp_path / "paths.toml"
    scenario.write_text(SCENARIO)
    whl_bytes, _ = wheel_bytes()
    cache_before = _used(cachefs)
    rc = main(
        [
            "run",
            "--scenario",
            str(scenario),
            "--target",
            str(target),
            "--tmp",
            str(tmp),
            "--path",
            f"cachefs={cachefs}",
            "--results",
            str(tmp_path / "r"),
            "--sample-hz",
            "50",
            "--no-report",
            "--no-probe",
            "--quiet",
        ]
    )
    assert rc == 0
    rows = {r["config"]: r for r in read_csv(only_run_dir(tmp_path / "r") / "trials.csv")}
    assert all(r["status"] == "ok" for r in rows.values()), rows
    # TMPDIR's filesystem (holding nothing else) held at least every downloaded wheel
    for name in ("cold", "off"):
        assert int(rows[name]["tmpdir_peak_bytes"]) >= whl_bytes, rows[name]
        assert int(rows[name]["index_bytes"]) == whl_bytes
    # the cold trial filled the cache role with (at least) the wheels' bytes
    assert int(rows["cold"]["cache_bytes"]) >= whl_bytes
    # a warm trial downloads nothing (pip still copies each cached wheel into TMPDIR)
    assert int(rows["warm"]["index_bytes"]) == 0
    # cache = off: no cache anywhere (not the cache role, not pip's default under HOME)
    assert rows["off"]["cache_role"] == "off" and rows["off"]["cache_bytes"] == ""
    assert not (home / ".cache" / "pip").exists()
    assert _used(cachefs) - cache_before < 64 * 1024  # trial scratch removed, no cache left


def test_uv_installer_cold_and_warm(tmp_path: Path) -> None:
    from iobench.trial.installers import uv_binary

    if uv_binary() is None:
        import pytest

        pytest.skip("uv is not installed (pip install 'iobench[uv]')")
    scenario = tmp_path / "uv.toml"
    scenario.write_text(
        SCENARIO.replace('cache = "cachefs"', 'cache = "target"')
        .replace("[configs.cold]", '[configs.cold]\ninstaller = "uv"')
        .replace('cache_state = "warm"', 'cache_state = "warm"\ninstaller = "uv"')
    )
    rc = main(
        [
            "run",
            "--scenario",
            str(scenario),
            "--configs",
            "cold,warm",
            "--target",
            str(tmp_path),
            "--tmp",
            str(tmp_path),
            "--results",
            str(tmp_path / "r"),
            "--no-report",
            "--no-probe",
            "--quiet",
        ]
    )
    assert rc == 0
    rows = {r["config"]: r for r in read_csv(only_run_dir(tmp_path / "r") / "trials.csv")}
    whl_bytes, _ = wheel_bytes()
    assert rows["cold"]["installer"] == rows["warm"]["installer"] == "uv"
    assert int(rows["cold"]["index_bytes"]) == whl_bytes and int(rows["warm"]["index_bytes"]) == 0
    for r in rows.values():
        assert r["status"] == "ok", r["error"]
        assert (
            float(r["install_s"]) > 0 and float(r["download_s"]) > 0 and float(r["compile_s"]) > 0
        )
