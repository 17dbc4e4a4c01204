"""Reading back what a test's run wrote: CSV rows, and the one run folder under a results folder."""

from __future__ import annotations

import csv
import zipfile
from pathlib import Path

from iobench.wheels.cache import cached_wheels
from iobench.wheels.profile import load_profile

DATA = Path(__file__).resolve().parents[1] / "data"
TINY_PROFILE = DATA / "tiny-profile.toml"


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def only_run_dir(results: Path) -> Path:
    dirs = [d for d in results.iterdir() if d.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def python3_shim(folder: Path, python: str) -> Path:
    """``folder/python3``: runs ``python`` as given. A wrapper, not a symlink: a symlink to a
    venv's interpreter resolves to the base one (a venv made from Debian's /usr/bin/python3
    links straight to it), which lacks what the venv has (virtualenv); the pasted scripts
    need a python3 that has it."""
    folder.mkdir(parents=True, exist_ok=True)
    shim = folder / "python3"
    shim.write_text(f'#!/bin/sh\nexec "{python}" "$@"\n')
    shim.chmod(0o755)
    return folder


STOCK_PYTHON3 = Path("/usr/bin/python3")


def stock_python3(folder: Path) -> Path:
    """``folder/python3``: Debian's /usr/bin/python3 as a stock machine has it, without
    virtualenv even where this machine's has it (a ``virtualenv`` package that cannot be
    imported comes first on its path), so a pasted script meets what a new pod has."""
    hide = folder / "hide"
    (hide / "virtualenv").mkdir(parents=True, exist_ok=True)
    (hide / "virtualenv" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'virtualenv'\", name='virtualenv')\n"
    )
    shim = folder / "python3"
    shim.write_text(f'#!/bin/sh\nPYTHONPATH="{hide}" exec "{STOCK_PYTHON3}" "$@"\n')
    shim.chmod(0o755)
    return folder


def wheel_bytes() -> tuple[int, int]:
    """(total .whl bytes, files in the wheels) of the tiny profile as the index serves them."""
    house = cached_wheels(load_profile(str(TINY_PROFILE)))
    wheels = sorted(house.glob("*.whl"))
    files = sum(len(zipfile.ZipFile(w).infolist()) for w in wheels)
    return sum(w.stat().st_size for w in wheels), files
