"""The project's one user-facing error type and its few subclasses.

Library code raises these; only ``iobench.__main__.main`` catches them and prints one line.
"""

from __future__ import annotations


class IOBenchError(Exception):
    """An error the user can act on; its message is printed as one line (exit 2)."""

    exit_code = 2


class UsageError(IOBenchError):
    """Bad command-line input: a missing path, a bad number, an unknown name."""


class ScenarioError(IOBenchError):
    """A scenario file that cannot be read or does not validate (names file and key)."""


class RunDirError(IOBenchError):
    """A folder that is not a readable iobench run directory (or of an unknown schema)."""


class LabError(IOBenchError):
    """The emulated slow volume cannot be mounted, found or unmounted."""


class SafetyError(IOBenchError):
    """iobench refused to touch a path it did not create, or a dangerous target."""
