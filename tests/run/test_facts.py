"""What a run records about its machine: mounts from procfs, an allow-listed redacted
environment, pip's configuration without credentials, and private files for all of it."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from iobench.run import facts
from iobench.rundir.folder import RunDir
from iobench.rundir.meta import RunMeta

SECRET = "s3cr@t-tok"


def test_mount_of_describes_the_filesystem_of_a_path(tmp_path: Path) -> None:
    info = facts.mount_of(tmp_path)
    assert info["path"] == str(tmp_path.resolve())
    assert (
        info["fstype"]
        and info["mountpoint"]
        and str(tmp_path.resolve()).startswith(info["mountpoint"])
    )
    assert info["total_bytes"] >= info["free_bytes"] >= 0
    assert facts.fstype_of(tmp_path) == info["fstype"]


def test_recorded_environment_is_allow_listed_and_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {
        "DB_PASS": SECRET,
        "GH_PAT": SECRET,
        "CI_JOB_JWT": SECRET,
        "NPM_AUTH": SECRET,
        "AZURE_CONN": f"AccountName=a;AccountKey={SECRET}",
        "PIP_INDEX_URL": f"https://u:{SECRET}@h/simple",
        "PIP_EXTRA_INDEX_URL": f"https://h/simple?token={SECRET}",
        "TMPDIR": "/fast",
    }
    out = facts.redact_env(env)
    assert SECRET not in json.dumps(out)
    assert out == {
        "PIP_EXTRA_INDEX_URL": "https://h/simple?***",
        "PIP_INDEX_URL": "https://***@h/simple",
        "TMPDIR": "/fast",
    }


@pytest.mark.venv
def test_pip_config_hides_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "pip.conf"
    conf.write_text(
        f"[global]\nindex-url = https://user:{SECRET}@idx.example/simple?token={SECRET}\n"
    )
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", f"https://x:{SECRET}@other/simple")
    found = facts.pip_config(isolated=False)
    assert str(conf) in found["files"]
    assert any("idx.example" in line for line in found["config_list"])  # the setting is still shown
    assert SECRET not in json.dumps(found)


def test_meta_json_and_logs_are_private_whatever_the_umask(tmp_path: Path) -> None:
    """Before: meta.json was written 0644 (world-readable) with the user's umask."""
    old = os.umask(0o022)
    try:
        rd = RunDir.create(
            tmp_path, "run-1", RunMeta(env={"PIP_INDEX_URL": "https://***@h/simple"})
        )
    finally:
        os.umask(old)
    assert stat.S_IMODE(rd.meta_json.stat().st_mode) == 0o600
    assert stat.S_IMODE((rd.path / "logs").stat().st_mode) == 0o700
    assert not list(rd.path.glob("*.tmp"))
    assert json.loads(rd.meta_json.read_text())["env"] == {"PIP_INDEX_URL": "https://***@h/simple"}


def test_redact_file_rewrites_a_kept_log(tmp_path: Path) -> None:
    from iobench.redact import redact_file

    log = tmp_path / "t1.install.out"
    log.write_text(f"Collecting torch @ https://u:{SECRET}@files/torch.whl\nok\n")
    os.chmod(log, 0o644)
    redact_file(log)
    assert SECRET not in log.read_text() and log.read_text().endswith("ok\n")
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


@pytest.mark.venv
def test_pip_host_is_what_pip_version_prints_and_prefetch_gives_the_same_facts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """versions() names pip without starting one, exactly as ``pip --version`` does; the
    prefetched ``pip config list`` equals a direct one and is used once (a later run asks again)."""
    import subprocess
    import sys

    printed = subprocess.run(
        [sys.executable, "-m", "pip", "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert facts.versions()["pip_host"] == printed
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\ntimeout = 7\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    direct = facts.pip_config(isolated=False)["config_list"]
    assert any("timeout" in line for line in direct)
    facts.prefetch()
    assert facts.pip_config(isolated=False)["config_list"] == direct
    conf.write_text("[global]\ntimeout = 9\n")  # not the prefetched answer again: asked anew
    assert any("'9'" in line for line in facts.pip_config(isolated=False)["config_list"])


@pytest.mark.venv
def test_facts_not_ready_when_meta_json_is_written_come_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run writes meta.json without waiting for pip (~0.4 s): what the prefetch has not
    answered yet is None there and ``with_late_facts`` fills it in once it has."""
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\ntimeout = 5\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    direct = facts.pip_config(isolated=True)["config_list"]
    facts.prefetch()
    written = facts.pip_config(isolated=True, wait=False)
    first = written["config_list"]
    _, late = facts.with_late_facts({}, written)
    if first is None:  # pip had not answered: the answer comes late, and only once
        assert late["config_list"] == direct and written["config_list"] is None
        assert facts.with_late_facts({}, written) == ({}, written)
    else:  # a fast machine: it was ready in time
        assert first == direct and late == written
