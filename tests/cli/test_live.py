"""Live progress: values visibly move between ticks on a terminal; plain output stays plain."""

from __future__ import annotations

import io
import itertools
import os
import pty
import re
import select
import subprocess
import sys
import time

import pytest
from rich.console import Console

from iobench.cli.live import LiveProgress, fmt_duration
from iobench.rundir.kinds.install import Row as InstallRow
from iobench.rundir.records import TrialRow
from iobench.trial.progress import PlainProgress, trial_line

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def _row(trial_id: str, status: str, **columns: object) -> TrialRow:
    return InstallRow(
        run_id="r",
        trial_id=trial_id,
        config=trial_id.rsplit("-r", 1)[0],
        repeat=1,
        status=status,
        **columns,
    )


def _sample(t: float, mb: int, calls: int, iowait: float = 2.0, dstate: int = 0) -> dict:
    return {
        "t": t,
        "tree_write_bytes": mb * 1_000_000,
        "tree_write_calls": calls,
        "iowait_pct": iowait,
        "tree_dstate": dstate,
    }


@pytest.fixture(autouse=True)
def _a_real_terminal_type(monkeypatch: pytest.MonkeyPatch) -> None:
    """rich draws no live area for TERM=dumb (as the suite runs in CI); these tests draw one."""
    monkeypatch.setenv("TERM", "xterm-256color")


def _live(buf: io.StringIO) -> LiveProgress:
    console = Console(file=buf, force_terminal=True, width=160, color_system="standard")
    return LiveProgress(console=console, auto_refresh=False)


def _frames(out: str) -> list[str]:
    """Each redraw of the live area (rich erases the previous one first), escape codes removed."""
    return [ANSI.sub("", f) for f in out.split("\r\x1b[2K") if f]


def test_fmt_duration() -> None:
    assert fmt_duration(0) == "0:00"
    assert fmt_duration(75.4) == "1:15"
    assert fmt_duration(3725) == "1:02:05"
    assert fmt_duration(None) == "-"
    assert fmt_duration(float("nan")) == "-"


def test_ticks_move_the_numbers_and_finished_trials_stay() -> None:
    buf = io.StringIO()
    p = _live(buf)
    p.run_started("results/x", 2, 0)
    p.trial_started(1, 2, "naive-r1")
    p.phase("naive-r1", "install")
    seen = []
    for i in range(1, 5):
        start = len(buf.getvalue())
        p.tick("naive-r1", "install", 0.25 * i, _sample(0.25 * i, 10 * i, 100 * i), 0.0)
        seen.append(ANSI.sub("", buf.getvalue()[start:]))
    assert "\x1b[" in buf.getvalue()  # drawn as a live area, not as lines
    for i, frame in enumerate(seen, start=1):
        assert f"wrote {10 * i:.1f} MB in {100 * i:,} calls" in frame, frame
        assert "[1/2] naive-r1" in frame and "install" in frame
    assert "40.0 MB/s" in seen[-1]  # 10 MB per 0.25 s of samples
    assert "STALL" not in buf.getvalue()

    # a stall shows a warning line in the live area (and once as a permanent line)
    start = len(buf.getvalue())
    p.tick("naive-r1", "install", 31.0, _sample(31.0, 40, 400, iowait=55.0, dstate=3), 30.0)
    stalled = ANSI.sub("", buf.getvalue()[start:])
    assert (
        "STALL: no read or write progress for 30 s in install (D-state 3, iowait 55 %)" in stalled
    )
    assert "0 bytes/s" in stalled  # rate fell to zero (units.fmt_bytes, as everywhere)
    assert stalled.count("naive-r1: no read or write progress") == 1

    p.trial_finished(
        1, 2, _row("naive-r1", "ok", time_to_ready_s=1.5, write_bytes=40_000_000, write_calls=400)
    )
    start = len(buf.getvalue())
    p.trial_started(2, 2, "naive-r2")
    last = ANSI.sub("", buf.getvalue()[start:])
    assert "1/2 trials" in last and "ETA" in last and "after the first trial" not in last
    assert "STALL" not in last  # the new trial starts clean
    p.run_finished()
    text = ANSI.sub("", buf.getvalue())
    assert "[1/2] naive-r1" in text and "ready    1.50 s" in text
    assert buf.getvalue().endswith("\n") and "\x1b[?25h" in buf.getvalue()  # cursor shown again


def test_eta_uses_finished_trial_durations() -> None:
    p = LiveProgress(console=Console(file=io.StringIO()), auto_refresh=False)
    p.n_trials, p.done_before = 10, 2
    assert p.eta_s() is None
    p.durations, p.finished = [10.0, 20.0], 2
    assert p.eta_s() == 6 * 15.0
    p.trial_started(5, 10, "x-r3")
    now = p.trial.t0
    assert p.eta_s(now + 5.0) == 6 * 15.0 - 5.0
    assert p.eta_s(now + 40.0) == 5 * 15.0  # past the mean: counted as done, shown with "+"
    p.trial.t0 -= 40.0
    buf = io.StringIO()
    Console(file=buf, width=200).print(p.render())
    assert "ETA 1:15+" in buf.getvalue()


def test_plain_progress_has_no_escape_codes() -> None:
    buf = io.StringIO()
    p = PlainProgress(stream=buf, verbose=True)
    p.run_started("results/x", 1, 0)
    p.trial_started(1, 1, "naive-r1")
    p.phase("naive-r1", "install")
    for i in range(1, 4):
        p.tick("naive-r1", "install", i, _sample(i, i, i), 0.0)
    p.tick("naive-r1", "install", 40, _sample(40, 3, 3), 31.0)
    p.trial_finished(1, 1, _row("naive-r1", "failed", error="boom"))
    p.run_finished()
    out = buf.getvalue()
    assert "\x1b" not in out and "\r" not in out
    assert "naive-r1" in out and "stall" in out


def _run_in_pty(code: str, timeout: float = 8.0) -> tuple[int, str]:
    """Run python code with stdout on a real pseudo-terminal; return exit code and output."""
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "150", "LINES": "30", "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=slave, stderr=slave, stdin=subprocess.DEVNULL, env=env
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    return proc.returncode, b"".join(chunks).decode(errors="replace")


def test_live_progress_moves_on_a_real_terminal() -> None:
    # the production path: rich's own refresh thread, stdout a real tty
    rc, out = _run_in_pty("from iobench.cli.live import demo; demo(seconds=1.8, trials=2)")
    assert rc == 0, out
    assert "\x1b[?25l" in out and out.rstrip().endswith(
        "trial(s) in 0:02"
    )  # live area, then closed
    frames = _frames(out)
    written = {m for f in frames for m in re.findall(r"wrote (\d+\.\d MB)", f)}
    assert len(written) >= 4, written  # the MB figure changed between refreshes
    assert any("STALL" in f for f in frames)
    assert "[1/2] demo-r1" in ANSI.sub("", out) and "[2/2] demo-r2" in ANSI.sub("", out)


def test_plain_progress_on_a_real_terminal_has_no_escape_codes() -> None:
    code = (
        "from iobench.trial.progress import PlainProgress\n"
        "p = PlainProgress()\n"
        "p.run_started('r', 1, 0); p.trial_started(1, 1, 't-r1')\n"
        "p.tick('t-r1', 'install', 1.0, {'tree_write_bytes': 5}, 0.0)\n"
        "from iobench.rundir.kinds.install import Row as TrialRow\n"
        "p.trial_finished(1, 1, TrialRow(run_id='r', trial_id='t-r1', config='t', repeat=1, status='ok',"
        " time_to_ready_s=1.0))\n"
        "p.run_finished()\n"
    )
    rc, out = _run_in_pty(code)
    assert rc == 0, out
    assert "t-r1" in out and "\x1b" not in out


def test_trial_line_says_unknown_phases_are_unknown() -> None:
    row = _row(
        "naive-r1",
        "ok",
        time_to_ready_s=2.0,
        venv_s=0.5,
        download_s=None,
        install_s=None,
        compile_s=0.25,
        import_s=0.1,
        write_bytes=1_500_000,
        write_calls=30,
    )
    line = trial_line(3, 4, row)
    assert line.startswith("[3/4] naive-r1 ") and "ready    2.00 s" in line
    assert "(venv 0.50 + download ? + install ? + compile 0.25 + import 0.10)" in line
    assert "wrote 1.5 MB in 30 calls" in line
    assert trial_line(1, 1, _row("x-r1", "failed", error="pip failed")).endswith(
        "ready       -  pip failed"
    )


def test_trial_lines_fit_a_terminal_s_width_and_keep_everything_when_piped() -> None:
    """Issue 21: each trial line was ~163 characters and wrapped at 160 columns (3 rows at
    80): on a terminal the details go first, then the phases; piped, nothing is dropped."""
    row = _row("warm-cache-on-target-r1", "ok", time_to_ready_s=2.14, venv_s=0.5, download_s=0.1,
               install_s=1.2, compile_s=0.25, import_s=0.1, write_bytes=1_500_000, write_calls=30)  # fmt: skip
    full = trial_line(4, 8, row)
    assert "wrote 1.5 MB" in full and "(venv 0.50" in full and len(full) > 120
    for width in (160, 120, 80, 40):
        line = trial_line(4, 8, row, width)
        assert len(line) < width and line.startswith("[4/8] warm-cache-on-target-r1"), (width, line)
    assert "(venv 0.50" in trial_line(4, 8, row, 130) and "wrote" not in trial_line(4, 8, row, 130)
    assert trial_line(4, 8, row, 80).endswith("ready    2.14 s")
    assert trial_line(4, 8, row, 30).endswith("…")


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_winner_is_emphasised_on_a_terminal_plain_when_piped_and_lines_kept_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from iobench.cli.emphasis import print_answer

    script = "Start script: " + "/very/long/path" * 8
    lines = ["config  n  median", "naive  3  4.9 s  baseline", "fast  3  2.5 s  1.9× faster",
             "fast is 1.9× faster than naive.", script]  # fmt: skip
    monkeypatch.delenv("OMPI_COMM_WORLD_RANK", raising=False)
    piped = io.StringIO()
    print_answer(lines, "fast", lines[3:4], piped)
    assert piped.getvalue() == "\n".join(lines) + "\n"  # plain, every line as it was
    monkeypatch.setenv("COLUMNS", "60")
    monkeypatch.delenv("NO_COLOR", raising=False)
    tty = _Tty()
    print_answer(lines, "fast", lines[3:4], tty)
    text = tty.getvalue()
    assert "\x1b[1" in text and script in text  # bold somewhere; the script line unbroken
    plain = [ln for ln in text.splitlines() if "naive  3" in ln]
    assert plain and "\x1b[1" not in plain[0]


def test_a_trial_s_notes_are_kept_not_printed_and_verbose_prints_them_under_its_line() -> None:
    """Issue 38: a trial's notes (contention...) are internals: kept for the run's notes
    line; with --verbose under the trial's line (issue 21: not before it)."""
    out = io.StringIO()
    p = PlainProgress(out)
    p.trial_started(1, 2, "naive-r1")
    p.message("  naive-r1: other processes did disk I/O meanwhile (MB): iobench[4242]:7.5")
    p.trial_finished(1, 2, _row("naive-r1", "ok", time_to_ready_s=1.0))
    assert len(out.getvalue().splitlines()) == 1 and len(p.notes) == 1
    out = io.StringIO()
    p = PlainProgress(out, verbose=True)
    p.trial_started(1, 2, "naive-r1")
    p.message("  naive-r1: other processes did disk I/O meanwhile (MB): iobench[4242]:7.5")
    p.message("warning: a run-level line prints at once")
    p.trial_finished(1, 2, _row("naive-r1", "ok", time_to_ready_s=1.0))
    lines = out.getvalue().splitlines()
    lines = [ln for ln in lines if "started" not in ln]
    assert lines[0].startswith("warning:") and lines[1].startswith("[1/2] naive-r1")
    assert lines[2] == "  naive-r1: other processes did disk I/O meanwhile (MB): iobench[4242]:7.5"


def test_a_long_message_on_a_live_terminal_wraps_as_the_plain_lines_do() -> None:
    """A warning wider than the terminal: every line fits and the later ones are indented, as
    PlainProgress writes them (rich's own wrap started them at column 0)."""
    buf = io.StringIO()
    p = _live(buf)
    p.run_started("results/x", 1, 0)
    text = ("warning: target is ext4 without a journal, and run 20261206-055546-vm-smoke-3597 "
            "there ended 4 s ago: until the files it deleted are 6 minutes old, the kernel looks "
            "past them at every file created there")  # fmt: skip
    p.message(text)
    p.run_finished()
    lines = [ln for ln in ANSI.sub("", buf.getvalue()).splitlines() if ln.strip()]
    start = next(i for i, ln in enumerate(lines) if ln.startswith("warning: target"))
    said = [lines[start]]
    said += [ln for ln in itertools.takewhile(lambda ln: ln.startswith("  "), lines[start + 1 :])]
    assert len(said) >= 2 and all(len(ln) <= p.console.width for ln in said), said
    assert " ".join(ln.strip() for ln in said) == text, said
