"""Signals during a run: the first Ctrl-C, SIGTERM or SIGHUP interrupts, the rest are swallowed.

The handler stays installed and returns rather than being swapped for SIG_IGN: a signal
already caught by the C handler would then raise "signal ignored due to race condition"
anywhere. While the clean-up runs every signal is swallowed, so it always finishes; under
nohup an ignored SIGHUP stays ignored.
"""

from __future__ import annotations

import os
import signal
import threading

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
STOP = threading.Event()  # the first signal asked the run to stop
_CLEANING = threading.Event()  # the clean-up runs: every signal is swallowed
_PID: list[int] = []  # the process that installed the handler


def catch() -> dict[int, object]:
    """Install the run's handler; return the previous handlers for :func:`restore`."""
    STOP.clear()
    _CLEANING.clear()
    _PID[:] = [os.getpid()]
    previous: dict[int, object] = {sig: signal.getsignal(sig) for sig in SIGNALS}
    for sig in SIGNALS:
        if previous[sig] != signal.SIG_IGN:  # under nohup a hangup must not stop us
            signal.signal(sig, _interrupt)
    return previous


def cleaning() -> None:
    """From here on every signal is ignored: the clean-up must finish."""
    _CLEANING.set()


def restore(previous: dict[int, object]) -> None:
    """Put back the handlers :func:`catch` replaced."""
    for sig, handler in previous.items():
        signal.signal(sig, handler)  # type: ignore[arg-type]


def _interrupt(signum: int, frame: object) -> None:
    if _PID and os.getpid() != _PID[0]:
        # a child forked as the signal came (a phase started with preexec_fn) inherits it
        # already caught and runs this handler in its first Python code, an at-fork hook:
        # raising there printed "Exception ignored ... Traceback" into the user's terminal.
        # The child is about to exec; the parent handles the signal.
        return
    if STOP.is_set() or _CLEANING.is_set():
        return
    STOP.set()  # also seen where the KeyboardInterrupt is lost (an at-fork hook swallows it)
    raise KeyboardInterrupt


__all__ = ["SIGNALS", "STOP", "catch", "cleaning", "restore"]
