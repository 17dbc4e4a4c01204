"""Real venvs for the tests that need one: a tiny wheel with a module and a console script,
a virtualenv with it installed from the file (no index), and the check that it works; all
with a hermetic environment (no pip configuration, a HOME of their own)."""

from __future__ import annotations

import atexit
import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

_HOME = tempfile.mkdtemp(prefix="iobench-test-home-")
atexit.register(shutil.rmtree, _HOME, True)

HERMETIC_ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "PIP_CONFIG_FILE": os.devnull,
    "PIP_NO_INDEX": "1",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "HOME": _HOME,  # a private folder: virtualenv writes its app data under HOME
}


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(out: Path) -> Path:
    """A tiny pure-Python wheel with a module and a console script (a bin/ shebang)."""
    files = {
        "h8pkg/__init__.py": b"VALUE = 42\n\ndef main():\n    print('hello', VALUE)\n",
        "h8pkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: h8pkg\nVersion: 1.0\n",
        "h8pkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        "h8pkg-1.0.dist-info/entry_points.txt": b"[console_scripts]\nh8hello = h8pkg:main\n",
    }
    record = [_record_line(n, d) for n, d in files.items()] + ["h8pkg-1.0.dist-info/RECORD,,"]
    wheel = out / "h8pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr("h8pkg-1.0.dist-info/RECORD", "\n".join(record) + "\n")
    return wheel


def make_venv(venv: Path, wheel: Path) -> None:
    """A real virtualenv with the wheel installed from the local file, no index."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "virtualenv",
            "--quiet",
            "--no-periodic-update",
            "--no-setuptools",
            str(venv),
        ],
        check=True,
        env=HERMETIC_ENV,
        capture_output=True,
    )
    subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--isolated",
            "--no-index",
            "--no-deps",
            "--quiet",
            str(wheel),
        ],
        check=True,
        env=HERMETIC_ENV,
        capture_output=True,
    )


def check_venv(venv: Path) -> None:
    """The venv's python imports the package, knows its prefix, and the console script runs."""
    r = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import h8pkg, sys; print(h8pkg.VALUE, sys.prefix)"],
        capture_output=True,
        text=True,
        env=HERMETIC_ENV,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["42", str(venv)]
    r = subprocess.run(
        [str(venv / "bin" / "h8hello")], capture_output=True, text=True, env=HERMETIC_ENV
    )
    assert r.returncode == 0 and r.stdout.strip() == "hello 42", r.stderr
