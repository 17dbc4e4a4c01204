"""The way into a host: the rsh agent Open MPI calls as it calls ssh, run with a stand-in
``nsenter`` that prints what it was asked (no root, no namespaces)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from iobench.__main__ import main
from iobench.fleet import hosts, netns, serve


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    fake = tmp_path / "nsenter"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n')
    fake.chmod(0o755)
    monkeypatch.setattr(netns, "tool", lambda name: str(fake) if name == "nsenter" else name)
    ns = {"h-1": {"net": Path("/run/x/h-1/net"), "mnt": Path("/run/x/h-1/mnt"),
                  "uts": Path("/run/x/h-1/uts")}}  # fmt: skip
    path = tmp_path / "enter"
    path.write_text(serve.agent_script("x", ns))
    path.chmod(0o700)
    return path


def test_the_agent_enters_the_host_and_runs_the_command_as_ssh_would(agent: Path) -> None:
    """Open MPI's call: options first (as to ssh), the host, then the command as words,
    joined and run by sh -c in a fresh login environment."""
    out = subprocess.run([str(agent), "-x", "h-1", "orted", "-mca", "ess", "env"],
                         capture_output=True, text=True, check=True).stdout.splitlines()  # fmt: skip
    assert out[:4] == [
        "--net=/run/x/h-1/net",
        "--mount=/run/x/h-1/mnt",
        "--uts=/run/x/h-1/uts",
        "--",
    ]
    assert out[4:6] == ["env", "-i"] and f"PATH={serve.LOGIN_PATH}" in out
    assert out[-3:] == ["/bin/sh", "-c", "cd; orted -mca ess env"]
    assert not [a for a in out if a.startswith("PYTEST") or a.startswith("VIRTUAL_ENV")]


def test_an_unknown_host_is_one_line_and_ssh_s_failure_status(agent: Path) -> None:
    r = subprocess.run([str(agent), "h-9", "true"], capture_output=True, text=True)
    assert r.returncode == 255 and r.stderr.strip() == "iobench lab hosts x: no host h-9"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["65"], f"from 1 to {hosts.MAX_HOSTS}"),
        (["2", "--name", "Bad_Name"], "a lower-case letter"),
        (["2", "--volume", "/nonexistent-iobench"], "not a folder"),
    ],
)
def test_bad_input_is_one_line_before_anything_is_made(
    argv: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    volume = [] if "--volume" in argv else ["--volume", str(tmp_path)]
    assert main(["lab", "hosts", "up", *argv, *volume]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and says in err, err
    assert not os.path.exists(hosts.ROOT / "Bad_Name")


def test_taking_down_hosts_that_are_not_there_is_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["lab", "hosts", "down", "nosuchset"]) == 2
    assert capsys.readouterr().err.strip() == (
        "iobench: error: no hosts named 'nosuchset' (iobench lab hosts status)"
    )
