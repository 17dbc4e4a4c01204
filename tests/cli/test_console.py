"""What the terminal shows (issue 38): the answer last and in 80 columns, plain lines under
a launcher, and a `--help` that imports only the command line."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _hermetic(**extra: str) -> dict[str, str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "TERM": "dumb",
           "PYTHONPATH": str(ROOT), "PIP_CONFIG_FILE": os.devnull}  # fmt: skip
    return {**env, **extra}


def test_help_imports_only_the_cli_wing_and_the_standard_library() -> None:
    """`iobench --help` in a fresh interpreter: every module it imported beyond the ones the
    interpreter starts with is the standard library's, or iobench's cli wing (with the
    package, its __main__ and errors)."""
    probe = (
        "import sys; before = set(sys.modules)\n"
        "from iobench.__main__ import main\n"
        "import contextlib, io\n"
        "with contextlib.redirect_stdout(io.StringIO()): main(['--help'])\n"
        "new = sorted(set(sys.modules) - before)\n"
        "own = {'iobench', 'iobench.__main__', 'iobench.errors'}\n"
        "bad = [m for m in new if m.startswith('iobench') and m not in own\n"
        "       and not m.startswith('iobench.cli')\n"
        "       or not m.startswith('iobench') and m.split('.')[0] not in sys.stdlib_module_names]\n"
        "print(' '.join(bad))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=_hermetic(), cwd=ROOT, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [], f"--help imported {proc.stdout}"


def test_a_launched_rank_writes_plain_lines_where_no_person_watches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from iobench.cli import emphasis

    monkeypatch.delenv("OMPI_COMM_WORLD_RANK", raising=False)
    monkeypatch.delenv("PMIX_RANK", raising=False)
    monkeypatch.delenv("PMI_RANK", raising=False)
    assert not emphasis.plain()  # not launched: the terminal decides
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "0")
    assert emphasis.plain()  # launched, no mpirun above us on a terminal: a log


@pytest.mark.run
def test_a_rank_on_a_pty_of_its_launcher_writes_no_terminal_escapes(tmp_path: Path) -> None:
    """Open MPI gives a rank a pty even when `mpirun ... > log` captures it: a run there
    (a stand-in, no report) writes plain lines, no colour, no live area."""
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers import standin

    path = standin.scenario(tmp_path, repeats=1)
    argv = [sys.executable, "-m", "iobench", *standin.argv(tmp_path, path)]
    env = _hermetic(OMPI_COMM_WORLD_RANK="0", TERM="xterm-256color", COLUMNS="80")
    pid, fd = pty.fork()
    if pid == 0:  # the child: the run on the pty
        os.chdir(tmp_path)
        os.execve(argv[0], argv, env)
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    text = out.decode("utf-8", "replace")
    assert os.waitstatus_to_exitcode(status) == 0, text
    assert "\x1b" not in text, text[:400]
    assert "[1/2]" in text


@pytest.mark.run
@pytest.mark.slow
@pytest.mark.venv
def test_the_default_job_at_80_columns_ends_with_its_verdict_and_every_line_fits(
    tmp_path: Path,
) -> None:
    """The README's main command (`iobench run`, the embedded offline smoke scenario) with
    COLUMNS=80, TERM=dumb: every line fits, the table comes before the verdict, and the last
    non-empty line is the verdict's end (where the start script and the report are)."""
    env = _hermetic(COLUMNS="80", TMPDIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-m", "iobench", "run"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=280, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines()]
    assert all(len(ln) <= 80 for ln in lines), [ln for ln in lines if len(ln) > 80]
    out = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    head = next(i for i, ln in enumerate(out) if ln.split()[:3] == ["config", "n", "median"])
    assert out[-1].endswith("report.html."), out[head:]
    assert not any(ln.startswith(("    ", "#!", "note:")) for ln in out), out
    run = next((tmp_path / "results").iterdir())
    assert (run / "notes.txt").is_file()
    if any("Start script: " in ln for ln in out[head:]):
        assert (run / "start.sh").read_text().startswith("#!/bin/bash")
    quiet = subprocess.run([sys.executable, "-m", "iobench", "report", str(run), "--script"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, check=False)  # fmt: skip
    assert quiet.returncode in (0, 1), quiet.stderr
