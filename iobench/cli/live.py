"""Live terminal progress for ``iobench run``: the run's bar and the running trial's vitals.

Why: the freeze iobench measures is silent, so iobench itself must show, at a glance, that
bytes and write calls are (or are not) advancing. This implements the same hooks as
``iobench.trial.progress.PlainProgress`` with a ``rich.live.Live`` area of two or three lines:

- the run: a bar of finished trials, ``k/n``, run time, and an ETA (mean duration of the
  trials finished in this session × trials left, minus the running trial's time);
- the running trial: phase, phase and trial time, MB and write calls so far
  (``tree_write_bytes``, ``tree_write_calls``), the write rate over the last second of
  samples, iowait % and D-state threads;
- a red stall line while ``stall_s > 0``.

Finished trials are printed above the live area as permanent lines (``trial_line``).

Cost: hooks only store numbers (``tick`` is O(1): a few dict reads and a deque append);
rich's own thread renders the area at ``refresh_per_second`` from those numbers, so the
spinner and clocks keep moving even while the runner is busy between ticks (warm-up,
cache priming). With ``auto_refresh=False`` every hook renders at once instead (tests).
"""

from __future__ import annotations

import atexit
import time
from collections import deque
from dataclasses import dataclass, field

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from iobench.rundir.records import STALL_WORDS, TrialRow
from iobench.trial.progress import fit, is_internal, shown, trial_line
from iobench.units import fmt_bytes

_RATE_WINDOW_S = 1.0  # write rate: bytes advanced over the newest second of samples
_BAD = {"failed": "red", "stalled": "bold red", "interrupted": "yellow"}


def fmt_duration(seconds: float | None) -> str:
    """``m:ss`` (or ``h:mm:ss``) for clocks and ETAs; ``-`` when unknown."""
    if seconds is None or seconds != seconds or seconds < 0:
        return "-"
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


@dataclass
class _Trial:
    """What the live area knows about the running trial (written by hooks, read by render)."""

    trial_id: str
    k: int
    t0: float
    phase: str = "starting"
    phase_t0: float = 0.0
    write_bytes: int | None = None
    write_calls: int | None = None
    rate_bps: float | None = None
    iowait_pct: float | None = None
    dstate: int | None = None
    stall_s: float = 0.0
    stall_warned: bool = False
    window: deque[tuple[float, int]] = field(default_factory=deque)  # (sample t, write bytes)


class LiveProgress:
    """Progress hooks drawn with rich on a terminal (see module docstring)."""

    def __init__(
        self,
        verbose: bool = False,
        console: Console | None = None,
        *,
        refresh_per_second: float = 4.0,
        auto_refresh: bool = True,
    ) -> None:
        self.verbose = verbose
        self.console = console if console is not None else Console()
        self._auto = auto_refresh
        self._rps = refresh_per_second
        self._redirect = console is None  # only capture sys.stdout when we draw on it
        self._live: Live | None = None
        self._spinner = Spinner("dots", style="cyan")
        self.run_dir = ""
        self.n_trials = 0
        self.done_before = 0  # trials already in the run dir (--resume)
        self.finished = 0  # trials finished in this session
        self.durations: list[float] = []
        self.run_t0 = time.monotonic()
        self.trial: _Trial | None = None
        self._notes: list[str] = []  # a trial's notes, printed under its line (--verbose)
        self.notes: list[str] = []  # the run's internals, for its notes line and notes.txt

    # ------------------------------------------------------------------ live area
    def _start(self) -> None:
        if self._live is not None:
            return
        self._live = Live(
            console=self.console,
            get_renderable=self.render,
            auto_refresh=self._auto,
            refresh_per_second=self._rps,
            transient=True,
            redirect_stdout=self._redirect,
            redirect_stderr=self._redirect,
        )
        self._live.start(refresh=True)
        atexit.register(self.close)  # a crash must not leave the cursor hidden

    def close(self) -> None:
        """Stop the live area (idempotent); the permanent lines stay on screen."""
        live, self._live = self._live, None
        if live is not None:
            live.stop()
            atexit.unregister(self.close)

    def _redraw(self) -> None:
        if self._live is not None and not self._auto:
            self._live.refresh()

    def _print(self, text: str | Text) -> None:
        if isinstance(text, str):  # wrapped as the plain lines are: later lines indented
            text = fit(text, self.console.width)
        self.console.print(text, markup=False, highlight=False)  # wrapped to the terminal

    def eta_s(self, now: float | None = None, trial: _Trial | None = None) -> float | None:
        """Seconds left: mean finished-trial duration × trials left − the running one's time.

        A running trial that is already longer than the mean counts as done (the display
        then marks the ETA as a lower bound with ``+``).
        """
        if not self.durations:
            return None
        now = time.monotonic() if now is None else now
        trial = trial or self.trial
        left = self.n_trials - self.done_before - self.finished
        mean = sum(self.durations) / len(self.durations)
        running = min(now - trial.t0, mean) if trial is not None else 0.0
        return max(0.0, mean * left - running)

    def render(self) -> RenderableType:
        """The live area from the stored numbers; called by rich's refresh thread."""
        try:
            return self._render(time.monotonic(), self.trial)
        except Exception as exc:  # noqa: BLE001 - a display bug must never end the run
            return Text(f"(progress display error: {exc})", style="dim")

    def _render(self, now: float, t: _Trial | None) -> RenderableType:
        # ``t`` is read once: the main thread may replace self.trial while we draw
        completed = self.done_before + self.finished
        head = Table.grid(padding=(0, 1))
        head.add_column(width=30)
        head.add_column(no_wrap=True)
        eta = self.eta_s(now, t)
        late = bool(
            self.durations
            and t is not None
            and now - t.t0 > sum(self.durations) / len(self.durations)
        )
        head.add_row(
            ProgressBar(total=max(self.n_trials, 1), completed=completed, width=30),
            Text.assemble(
                (f"{completed}/{self.n_trials} trials", "bold"),
                f" · run {fmt_duration(now - self.run_t0)}",
                f" · ETA {fmt_duration(eta)}{'+' if late else ''}"
                if eta is not None
                else " · ETA after the first trial",
            ),
        )
        if t is None:
            return head
        line = Table.grid(padding=(0, 1))
        line.add_column(width=1)
        line.add_column(no_wrap=True, overflow="ellipsis")
        line.add_row(self._spinner, self.trial_text(t, now))
        parts: list[RenderableType] = [head, line]
        if t.stall_s > 0:
            parts.append(
                Text(
                    self.stall_text(t), style="bold white on red", no_wrap=True, overflow="ellipsis"
                )
            )
        return Group(*parts)

    def trial_text(self, t: _Trial, now: float) -> Text:
        """The running trial's line: what it does, for how long, and what it has written."""
        text = Text.assemble(
            (f"[{t.k}/{self.n_trials}] ", "dim"),
            (t.trial_id, "bold"),
            "  ",
            (t.phase, "cyan"),
            f" {now - t.phase_t0:5.1f} s (trial {fmt_duration(now - t.t0)})",
        )
        if t.write_bytes is not None:
            text.append(f"  wrote {fmt_bytes(t.write_bytes)} in {t.write_calls or 0:,} calls")
            rate = "-" if t.rate_bps is None else f"{fmt_bytes(t.rate_bps)}/s"
            text.append(f"  {rate}", style="green" if t.rate_bps else "yellow")
        if t.iowait_pct is not None:
            text.append(f"  iowait {t.iowait_pct:.0f} %")
        if t.dstate is not None:
            text.append(f"  D {t.dstate}", style="red" if t.dstate else "")
        return text

    @staticmethod
    def stall_text(t: _Trial) -> str:
        return (
            f" STALL: {STALL_WORDS} for {t.stall_s:.0f} s in {t.phase}"
            f" (D-state {t.dstate or 0}, iowait {t.iowait_pct or 0:.0f} %) "
        )

    # ------------------------------------------------------------------ hooks
    def run_started(self, run_dir: str, n_trials: int, done: int) -> None:
        self.run_dir, self.n_trials, self.done_before = run_dir, n_trials, done
        self.run_t0 = time.monotonic()
        extra = f" ({done} already done)" if done else ""
        self._print(f"iobench: {n_trials} trials{extra} -> {shown(run_dir)}")
        self._start()

    def trial_started(self, k: int, n: int, trial_id: str) -> None:
        now = time.monotonic()
        self.n_trials = n
        self.trial = _Trial(trial_id=trial_id, k=k, t0=now, phase_t0=now)
        if self.verbose:
            self._print(f"[{k}/{n}] {trial_id}: started")
        self._redraw()

    def phase(self, trial_id: str, phase: str) -> None:
        t = self.trial
        if t is not None and t.trial_id == trial_id:
            t.phase, t.phase_t0 = phase, time.monotonic()
        if self.verbose:
            self._print(f"  {trial_id}: {phase}")
        self._redraw()

    def tick(
        self, trial_id: str, phase: str, elapsed: float, sample: dict | None, stall_s: float
    ) -> None:
        t = self.trial
        if t is None or t.trial_id != trial_id:
            return
        t.phase, t.phase_t0 = phase, time.monotonic() - elapsed
        if sample:
            st, wb = sample.get("t"), sample.get("tree_write_bytes")
            if st is not None and wb is not None and (not t.window or st > t.window[-1][0]):
                t.window.append((st, wb))
                while len(t.window) > 2 and st - t.window[1][0] >= _RATE_WINDOW_S:
                    t.window.popleft()
                (t_a, b_a), (t_b, b_b) = t.window[0], t.window[-1]
                if t_b - t_a > 0:
                    t.rate_bps = max(0.0, (b_b - b_a) / (t_b - t_a))
            t.write_bytes = wb
            t.write_calls = sample.get("tree_write_calls")
            t.iowait_pct = sample.get("iowait_pct")
            t.dstate = sample.get("tree_dstate")
        t.stall_s = stall_s
        if stall_s > 0 and not t.stall_warned:
            t.stall_warned = True
            self._print(
                Text(
                    f"  {trial_id}: {STALL_WORDS} for {stall_s:.0f} s in {phase} (stall)",
                    style="red",
                )
            )
        self._redraw()

    def rank_finished(self, k: int, n: int, row: TrialRow) -> None:
        """Another fleet rank's share of trial k, gathered by rank 0: its line, as wide as ours."""
        line = trial_line(k, n, row, self.console.width)
        self._print(Text(line, style=_BAD.get(row.status, "")))
        self._redraw()

    def trial_finished(self, k: int, n: int, row: TrialRow) -> None:
        t = self.trial
        if t is not None:
            self.durations.append(time.monotonic() - t.t0)
        self.trial = None
        self.finished += 1
        line = trial_line(k, n, row, self.console.width)
        self._print(Text(line, style=_BAD.get(row.status, "")))
        for note in self._notes:  # a trial's notes after its line, where they belong
            self._print(note)
        self._notes = []
        self._redraw()

    def message(self, text: str) -> None:
        if is_internal(text):
            self.notes.append(text.strip())
            if not self.verbose:
                return
        if self.trial is not None and text.startswith("  "):
            self._notes.append(text)  # said during a trial: printed under its line
        else:
            self._print(text)

    def run_finished(self) -> None:
        self.close()
        self._print(
            f"iobench: {self.finished} trial(s) in {fmt_duration(time.monotonic() - self.run_t0)}"
        )


def demo(seconds: float = 10.0, trials: int = 3, console: Console | None = None) -> None:
    """Feed LiveProgress synthetic ticks (a trial that writes, then stalls): for eyes and tests."""
    p = LiveProgress(console=console)
    p.run_started("results/demo", trials, 0)
    per = seconds / trials
    for k in range(1, trials + 1):
        tid = f"demo-r{k}"
        p.trial_started(k, trials, tid)
        p.phase(tid, "install")
        t0 = time.monotonic()
        written = calls = 0
        while (el := time.monotonic() - t0) < per:
            stalled = k == trials and el > per / 2
            if not stalled:
                written += 3_000_000
                calls += 700
            sample = {
                "t": el,
                "tree_write_bytes": written,
                "tree_write_calls": calls,
                "iowait_pct": 40.0 if stalled else 3.0,
                "tree_dstate": 1 if stalled else 0,
            }
            p.tick(tid, "install", el, sample, 30 + el - per / 2 if stalled else 0.0)
            time.sleep(0.1)
        p.trial_finished(
            k,
            trials,
            TrialRow(
                run_id="demo",
                trial_id=tid,
                config="demo",
                repeat=k,
                status="ok",
                time_to_ready_s=per,
                write_bytes=written,
                write_calls=calls,
            ),
        )
    p.run_finished()


if __name__ == "__main__":
    demo()
