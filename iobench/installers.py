"""Installers (pip, uv): the command, the environment, and the phase split from their logs.

Phase boundaries (documented in the README):
- pip: ``download`` runs from the pip process start to the ``Installing collected packages``
  line of its timestamped ``--log`` (resolution, index pages, downloads into TMPDIR or reads
  from the HTTP cache); ``install`` from that line to the pip process exit (unpacking every
  file into site-packages). pip always runs with ``--no-compile``; bytecode, when the
  config says ``compile = "on"``, is a separate timed ``compileall`` over what was
  installed, serial as pip does it.
- uv: uv prints ``Resolved``/``Prepared``/``Installed N packages in T`` lines; ``install``
  is the ``Installed`` time, ``download`` the rest of uv's wall time. Bytecode is compiled by
  ``compileall -j0`` (parallel, as uv's ``--compile-bytecode`` does).

A local index (synthetic wheels or ``--wheelhouse``) isolates the installer from the
machine's configuration (``PIP_CONFIG_FILE=/dev/null``, no ``PIP_*``/``UV_*`` variables,
``uv --no-config``) so results do not depend on it; a remote index honours it, as the
user's own installs would, and meta.json records it.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from iobench.errors import UsageError


def uv_binary() -> str | None:
    """The uv executable: the ``uv`` extra's, else one on PATH."""
    try:
        import uv  # type: ignore[import-not-found]

        return uv.find_uv_bin()
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")


@dataclass(frozen=True)
class IndexSpec:
    """Where packages come from."""

    url: str | None  # None: the installer's own configuration decides
    local: bool  # served by iobench on loopback (isolate from machine config)
    extra_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class InstallStep:
    """What to run for one install, and the environment to run it in."""

    argv: list[str]
    env: dict[str, str]


def base_environment(tmpdir: Path, isolated: bool) -> dict[str, str]:
    """The process environment for every phase of a trial: TMPDIR points where the config says."""
    env = dict(os.environ)
    if isolated:
        env = {k: v for k, v in env.items() if not k.startswith(("PIP_", "UV_"))}
        env["PIP_CONFIG_FILE"] = os.devnull
    for var in ("TMPDIR", "TEMP", "TMP"):
        env[var] = str(tmpdir)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("VIRTUAL_ENV", None)
    return env


class Pip:
    name = "pip"

    def command(
        self,
        venv: Path,
        packages: list[str],
        index: IndexSpec,
        cache: Path | None,
        log: Path,
        env: dict[str, str],
    ) -> InstallStep:
        argv = [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--no-compile",
            "--progress-bar",
            "off",
            "--disable-pip-version-check",
            "--no-input",
            "--log",
            str(log),
        ]
        argv += ["--cache-dir", str(cache)] if cache is not None else ["--no-cache-dir"]
        if index.url:
            argv += ["--index-url", index.url]
            if index.local:
                # pip caches plain-HTTP responses only for trusted hosts
                argv += ["--trusted-host", "127.0.0.1"]
        argv += list(index.extra_args)
        env = dict(env)
        env["TZ"] = "UTC0"  # pip's --log stamps local time without a zone: make it UTC (no DST)
        if cache is not None:
            env["PIP_CACHE_DIR"] = str(cache)
        return InstallStep(argv + packages, env)

    def split(self, log: Path, start_wall: float, end_wall: float, output: str) -> tuple[float | None, float | None]:
        """(download_s, install_s) from pip's timestamped log; (None, None) when the log has
        no mark to split at (unreadable, e.g. on a full disk): unknown, never zero."""
        mark = None
        try:
            with open(log, errors="replace") as fh:
                for line in fh:
                    if "Installing collected packages" in line:
                        mark = _pip_ts(line)
        except OSError:
            pass
        total = max(0.0, end_wall - start_wall)
        if mark is None:
            return None, None
        download = min(total, max(0.0, mark - start_wall))
        return download, total - download


def _pip_ts(line: str) -> float | None:
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d),(\d{3})", line)
    if not m:
        return None
    # pip runs with TZ=UTC0 (see Pip.command): its zone-less stamps are UTC
    stamp = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    return stamp.timestamp() + int(m.group(2)) / 1000


_UV_TIME = re.compile(r"^(Resolved|Prepared|Installed|Audited) \d+ packages? in ([\d.]+)(ms|s|m)", re.M)


class Uv:
    name = "uv"

    def __init__(self, link_mode: str | None = None) -> None:
        self.link_mode = link_mode

    def command(
        self,
        venv: Path,
        packages: list[str],
        index: IndexSpec,
        cache: Path | None,
        log: Path,
        env: dict[str, str],
    ) -> InstallStep:
        uv = uv_binary()
        if uv is None:
            raise UsageError("installer 'uv' is not available: pip install 'iobench[uv]'")
        argv = [uv, "pip", "install", "--python", str(venv / "bin" / "python")]
        argv += ["--cache-dir", str(cache)] if cache is not None else ["--no-cache"]
        if index.url:
            argv += ["--index-url", index.url]
        if index.local:
            argv += ["--no-config"]
        if self.link_mode:
            argv += ["--link-mode", self.link_mode]
        env = dict(env)
        env.setdefault("UV_NO_PROGRESS", "1")
        return InstallStep(argv + list(index.extra_args) + packages, env)

    def split(self, log: Path, start_wall: float, end_wall: float, output: str) -> tuple[float | None, float | None]:
        """(download_s, install_s) from uv's "Installed N packages in T" line; (None, None)
        when the output has none (unknown, never zero)."""
        total = max(0.0, end_wall - start_wall)
        install = None
        for m in _UV_TIME.finditer(output):
            if m.group(1) == "Installed":
                install = float(m.group(2)) * {"ms": 1e-3, "s": 1.0, "m": 60.0}[m.group(3)]
        if install is None:
            return None, None
        install = min(install, total)
        return total - install, install


def get_installer(name: str) -> Pip | Uv:
    if name == "pip":
        return Pip()
    if name == "uv":
        return Uv()
    raise UsageError(f"unknown installer '{name}' (known: pip, uv)")


def venv_command(venv: Path, python: str | None = None) -> list[str]:
    """The one venv command line: virtualenv, no periodic update, no setuptools (warm-up,
    priming and the timed phase alike; tools/independent_timing.py too)."""
    argv = [sys.executable, "-m", "virtualenv", "--quiet", "--no-periodic-update", "--no-setuptools"]
    if python:
        argv += ["--python", python]
    return argv + [str(venv)]


def compile_command(venv: Path, paths: list[Path], parallel: bool) -> list[str]:
    """Bytecode compilation of what the install added (not of the seeded pip)."""
    return [
        str(venv / "bin" / "python"),
        "-m",
        "compileall",
        "-q",
        "-j",
        "0" if parallel else "1",
        *map(str, paths),
    ]


def site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3*/site-packages"))
    if not found:
        raise FileNotFoundError(f"no site-packages under {venv}")
    return found[0]


def record_file_count(site: Path, exclude: set[str]) -> int:
    """Files listed in the RECORDs of distributions installed into ``site`` (minus ``exclude``)."""
    total = 0
    for rec in site.glob("*.dist-info/RECORD"):
        if rec.parent.name in exclude:
            continue
        try:
            with open(rec, errors="replace") as fh:
                total += sum(1 for line in fh if line.strip())
        except OSError:
            continue
    return total


def venv_contents(venv: Path) -> dict:
    """What a fresh venv is made of: its Python, virtualenv and seeded distributions."""
    found: dict = {}
    cfg = venv / "pyvenv.cfg"
    if cfg.is_file():
        for line in cfg.read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() in ("version", "version_info", "virtualenv"):
                found["python" if key.strip().startswith("version") else "virtualenv"] = value.strip()
    for dist in venv.glob("lib/python*/site-packages/*.dist-info"):
        name, _, version = dist.name[: -len(".dist-info")].partition("-")
        found[name.lower()] = version
    return found


__all__ = [
    "IndexSpec",
    "InstallStep",
    "Pip",
    "Uv",
    "base_environment",
    "compile_command",
    "get_installer",
    "record_file_count",
    "site_packages",
    "uv_binary",
    "venv_command",
    "venv_contents",
]

