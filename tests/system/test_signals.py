"""iobench.system.signals: the run's handler interrupts the run once, and never a forked child."""

from __future__ import annotations

import os
import signal

import pytest

from iobench.system import signals


def test_a_child_forked_as_the_signal_came_does_not_raise_it() -> None:
    """A phase starts with preexec_fn: its child runs Python (at-fork hooks) before exec. A
    Ctrl-C caught just before the fork is inherited as pending and ran this handler in the
    child, whose KeyboardInterrupt came out as "Exception ignored ... Traceback"."""
    previous = signals.catch()
    try:
        pid = os.fork()
        if pid == 0:  # the child: returns quietly, the parent deals with the signal
            try:
                signals._interrupt(signal.SIGINT, None)
            except BaseException:  # noqa: BLE001 - any escape is the bug
                os._exit(3)
            os._exit(0 if not signals.STOP.is_set() else 4)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        with pytest.raises(KeyboardInterrupt):  # the parent: the first signal interrupts
            signals._interrupt(signal.SIGINT, None)
        signals._interrupt(signal.SIGINT, None)  # the second is swallowed
        assert signals.STOP.is_set()
    finally:
        signals.restore(previous)
        signals.STOP.clear()
