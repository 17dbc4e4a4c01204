"""Runs of the stand-in workload (iobench/trial/standin.py): the runner's plumbing at about
a second a run, through the same `iobench run` a user types, in-process or as a process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers.files import only_run_dir
from iobench.__main__ import main

#: one config, writing on the target
NAIVE = """
[configs.naive]
venv = "target"
tmpdir = "target"
cache = "off"
"""
#: two configs: naive writes on the target, venv-on-tmp on tmp
CONFIGS = (
    NAIVE
    + """
[configs.venv-on-tmp]
venv = "tmp"
tmpdir = "tmp"
cache = "off"
"""
)


def scenario(tmp_path: Path, workload: str = "", configs: str = CONFIGS, repeats: int = 2) -> Path:
    """A stand-in scenario file: its ``[workload]`` table's lines and its configs."""
    path = tmp_path / "standin.toml"
    path.write_text(
        f'[scenario]\nname = "standin"\nkind = "standin"\nrepeats = {repeats}\n\n'
        f"[workload]\nfiles = 20\nkb = 4\n{workload}\n{configs}"
    )
    return path


def roles(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(target, tmp, results) folders under tmp_path (the first two made)."""
    target, tmp, results = tmp_path / "target", tmp_path / "tmp", tmp_path / "results"
    target.mkdir(exist_ok=True)
    tmp.mkdir(exist_ok=True)
    return target, tmp, results


def argv(tmp_path: Path, path: Path, *options: str, target: Path | None = None) -> list[str]:
    """`iobench run` of scenario ``path`` on the roles of :func:`roles` (or on ``target``,
    a volume), without a report."""
    made, tmp, results = roles(tmp_path)
    target = target or made
    return ["run", "--scenario", str(path), "--target", str(target), "--tmp", str(tmp),
            "--results", str(results), "--no-report", *options]  # fmt: skip


def run(tmp_path: Path, workload: str = "", *options: str, **kw: object) -> tuple[int, Path]:
    """Run a stand-in scenario in-process; its exit status and run folder."""
    path = scenario(tmp_path, workload, **kw)  # type: ignore[arg-type]
    rc = main(argv(tmp_path, path, *options))
    return rc, only_run_dir(tmp_path / "results")


def process(
    tmp_path: Path, path: Path, *options: str, target: Path | None = None
) -> subprocess.Popen[str]:
    """`python -m iobench run` of a stand-in scenario as a process of its own (stdout and
    stderr piped, unbuffered), for what only a real process shows: signals, exit status."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "iobench", *argv(tmp_path, path, *options, target=target)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        preexec_fn=ctrl_c_as_in_a_terminal,
    )  # fmt: skip


def ctrl_c_as_in_a_terminal() -> None:
    """A child's SIGINT at its default, as a terminal's command has it: a shell without job
    control starts background commands (a suite run with `&`) with SIGINT ignored, which
    the child would inherit, and Python keeps an ignored SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def scratch_left(*folders: Path) -> dict[str, set[str]]:
    """What is left in each role's scratch folder besides its sentinel (a clean run: nothing)."""
    out = {}
    for folder in folders:
        scratch = folder / ".iobench-scratch"
        names = {p.name for p in scratch.iterdir()} if scratch.exists() else set()
        out[str(folder)] = names - {".iobench-sentinel"}
    return out


def wait_for(pred, timeout: float, what: str, proc: subprocess.Popen | None = None):  # noqa: ANN001, ANN201
    """``pred()``'s first truthy value within ``timeout`` seconds; an AssertionError when
    the run ``proc`` ended first (naming its exit status) or the time ran out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = pred()
        if found:
            return found
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"iobench ended (exit {proc.returncode}) before {what}")
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")
