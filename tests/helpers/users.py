"""A second user to attack as: user nobody (uid 65534), through runuser and the system's
Python (the tests' venv may sit where nobody cannot enter)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

NOBODY = 65534


def runuser_nobody() -> list[str]:
    """The command prefix that runs /usr/bin/python3 as user nobody; skips the test where
    there is no second user to be (not root, no runuser)."""
    # runuser lives in /usr/sbin, which a plain PATH (the suite under env -i) leaves out
    runuser = shutil.which("runuser", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
    if os.geteuid() != 0 or runuser is None or not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("needs root, runuser and /usr/bin/python3 to act as a second user")
    return [runuser, "-u", "nobody", "--", "/usr/bin/python3"]


def theirs(path: Path, mode: int = 0o755) -> Path:
    """``path``, a folder user nobody owns (made if missing)."""
    runuser_nobody()
    path.mkdir(parents=True, exist_ok=True)
    os.chown(path, NOBODY, NOBODY)
    os.chmod(path, mode)
    return path
