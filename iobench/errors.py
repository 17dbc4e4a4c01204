"""The project's one user-facing error type and its few subclasses.

Library code raises these; only ``iobench.__main__.main`` catches them and prints one line.
"""

from __future__ import annotations


class IOBenchError(Exception):
    """An error the user can act on; its message is printed as one line.

    Exit status 1 (a runtime failure: a held lock, the lab, a run directory) unless a
    subclass says 2 (the command line itself was wrong).
    """

    exit_code = 1
    run_status = "failed"  # meta.json's status for a run this error ended


class UsageError(IOBenchError):
    """Bad command-line input: a missing path, a bad number, an unknown name (exit 2)."""

    exit_code = 2


class ScenarioError(IOBenchError):
    """A scenario file that cannot be read or does not validate (names file and key; exit 2)."""

    exit_code = 2


class RunDirError(IOBenchError):
    """A folder that is not a readable iobench run directory (or of an unknown schema)."""


class LabError(IOBenchError):
    """The emulated slow volume cannot be mounted, found or unmounted."""


class SafetyError(IOBenchError):
    """iobench refused to touch a path it did not create, or a dangerous target (exit 2)."""

    exit_code = 2


class LockHeldError(IOBenchError):
    """The target is locked by another live iobench run (the message names the holder)."""

    def __init__(self, message: str, holder: object | None = None) -> None:
        super().__init__(message)
        self.holder = holder  # the holder's iobench.system.lock.LockInfo, when readable


class LockLostError(IOBenchError):
    """Our lock was taken over (we stopped refreshing it for longer than its ttl)."""

    run_status = "lock-lost"


class VolumeHungError(IOBenchError):
    """A role's volume stopped answering (a removal made no progress): the run ends there,
    its rows kept, and the message says what was left where. ``volume``: the scratch
    folder that hung, when known (nothing more is attempted under it)."""

    run_status = "volume-hung"

    def __init__(self, message: str, volume: object | None = None) -> None:
        super().__init__(message)
        self.volume = volume


class VolumeLostError(IOBenchError):
    """A role's scratch folder vanished mid-run (its volume unmounted, its server gone): the
    run ends there, its rows kept."""

    run_status = "volume-lost"
