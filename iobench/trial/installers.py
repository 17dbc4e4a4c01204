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

import functools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from iobench.errors import UsageError
from iobench.scenario.vocab import LINK_MODES, VENV_CREATORS

#: the oldest pip with ``--python`` (installing into a venv that has no pip of its own)
PIP_PYTHON_OPTION = (22, 3)


def uv_binary() -> str | None:
    """The uv executable: the ``uv`` extra's, else one on PATH."""
    try:
        import uv  # type: ignore[import-not-found, unused-ignore]  # the uv extra

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
        # a venv without pip (``venv --without-pip``, ``uv venv``) is installed into by the pip
        # of the interpreter running iobench, through ``pip --python VENV`` (pip >= 22.3):
        # what a user does who keeps pip outside the venv; preflight checks the version
        outer = [] if has_pip(venv) else ["--python", str(venv / "bin" / "python")]
        python = str(venv / "bin" / "python") if not outer else sys.executable
        argv = [
            python,
            "-m",
            "pip",
            *outer,
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

    def split(
        self, log: Path, start_wall: float, end_wall: float, output: str
    ) -> tuple[float | None, float | None]:
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


# uv writes a duration as ``850ms``, ``2.35s`` or, past a minute, ``1m 05s``
_UV_TIME = re.compile(
    r"^(Resolved|Prepared|Installed|Audited) \d+ packages? in "
    r"(?:(?P<min>\d+)m (?P<minsec>\d+)s|(?P<value>[\d.]+)(?P<unit>ms|s))",
    re.M,
)


def _uv_seconds(m: re.Match[str]) -> float:
    """The seconds of one of uv's timing lines (``_UV_TIME``)."""
    if m.group("min") is not None:
        return 60.0 * int(m.group("min")) + int(m.group("minsec"))
    return float(m.group("value")) * (1e-3 if m.group("unit") == "ms" else 1.0)


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
        env = dict(env)
        env.setdefault("UV_NO_PROGRESS", "1")
        if cache is not None:
            env["UV_CACHE_DIR"] = str(cache)
        if self.link_mode and self.link_mode != "default":
            env["UV_LINK_MODE"] = self.link_mode  # as users set it (uv --no-config still reads it)
        return InstallStep(argv + list(index.extra_args) + packages, env)

    def split(
        self, log: Path, start_wall: float, end_wall: float, output: str
    ) -> tuple[float | None, float | None]:
        """(download_s, install_s) from uv's "Installed N packages in T" line; (None, None)
        when the output has none (unknown, never zero)."""
        total = max(0.0, end_wall - start_wall)
        install = None
        for m in _UV_TIME.finditer(output):
            if m.group(1) == "Installed":
                install = _uv_seconds(m)
        if install is None:
            return None, None
        install = min(install, total)
        return total - install, install


def get_installer(name: str, link_mode: str = "default") -> Pip | Uv:
    if name == "pip":
        return Pip()
    if name == "uv":
        return Uv(link_mode)
    raise UsageError(f"unknown installer '{name}' (known: pip, uv)")


def venv_command(venv: Path, python: str | None = None, creator: str = "virtualenv") -> list[str]:
    """The venv command line people run, per creator (warm-up, priming and the timed phase
    alike; tools/independent_timing.py too):

    - ``virtualenv``: no periodic update, no setuptools (seeds pip from its app-data);
    - ``venv``: ``python -m venv``, which bootstraps pip through ensurepip (one more install
      of ~1,000 files onto wherever the venv lives);
    - ``venv-without-pip``: ``python -m venv --without-pip`` (pip must come from outside);
    - ``uv``: ``uv venv`` (no pip either).
    """
    if creator == "virtualenv":
        argv = [
            sys.executable,
            "-m",
            "virtualenv",
            "--quiet",
            "--no-periodic-update",
            "--no-setuptools",
        ]
        if python:
            argv += ["--python", python]
        return argv + [str(venv)]
    if creator in ("venv", "venv-without-pip"):
        argv = [python or sys.executable, "-m", "venv"]
        return argv + (["--without-pip"] if creator == "venv-without-pip" else []) + [str(venv)]
    if creator == "uv":
        uv = uv_binary()
        if uv is None:
            raise UsageError("venv creator 'uv' is not available: pip install 'iobench[uv]'")
        return [
            uv,
            "venv",
            "--quiet",
            "--no-config",
            "--python",
            python or sys.executable,
            str(venv),
        ]
    raise UsageError(f"unknown venv creator '{creator}' (known: {', '.join(VENV_CREATORS)})")


def has_pip(venv: Path) -> bool:
    """The venv holds its own pip (virtualenv and ``python -m venv`` seed one; the others do not)."""
    return any(venv.glob("lib/python3*/site-packages/pip/__init__.py"))


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
                found["python" if key.strip().startswith("version") else "virtualenv"] = (
                    value.strip()
                )
    for dist in venv.glob("lib/python*/site-packages/*.dist-info"):
        name, _, version = dist.name[: -len(".dist-info")].partition("-")
        found[name.lower()] = version
    return found


# ---------------------------------------------------------------- what uv's link mode did
_FALLBACK = re.compile(
    r"Failed to (?:clone|hardlink|symlink|reflink)[^\n]*?falling back to [^\n.]*", re.I
)
_LINK_SAMPLE = 8  # installed files looked at: enough to see a mode, cheap on a slow volume


def link_columns(
    output: str, site: Path, seeded: set[str], cache: Path | None, requested: str
) -> dict[str, str]:
    """The trial-row columns of what the install did with its files: ``link_observed``
    (from the files on disk) and ``link_fallback`` (uv's warning, when it printed one)."""
    found = _FALLBACK.search(output)
    fallback = found.group(0).strip() if found else ""
    return {
        "link_observed": observe_link(site, seeded, cache, requested, bool(fallback)),
        "link_fallback": fallback[:160],
    }


def sample_files(site: Path, seeded: set[str], most: int = _LINK_SAMPLE) -> list[Path]:
    """A few regular files the install added (from the RECORDs, outside ``*.dist-info``,
    whose RECORD and INSTALLER the installer writes itself)."""
    out: list[Path] = []
    for rec in sorted(site.glob("*.dist-info/RECORD")):
        if rec.parent.name in seeded:
            continue
        with open(rec, errors="replace") as fh:
            for line in fh:
                rel = line.split(",", 1)[0]
                if (
                    rel
                    and ".dist-info/" not in rel
                    and not rel.startswith(("..", "/"))
                    and "__pycache__" not in rel
                ):
                    out.append(site / rel)
                if len(out) >= most:
                    return out
    return out


def observe_link(
    site: Path,
    seeded: set[str],
    cache: Path | None,
    requested: str = "default",
    fell_back: bool = False,
) -> str:
    """How the installed files relate to the cache's, read from the disk: ``symlink`` (a
    link into the cache), ``hardlink`` (the cache's own inode), ``clone`` (an inode of its
    own, where a clone was asked for and uv reported no fall-back: a reflink shares the
    cache's blocks, not its inode), ``copy``, ``mixed`` when the files disagree, or ``""``
    when no installed file could be looked at."""
    kinds: set[str] = set()
    for path in sample_files(site, seeded):
        try:
            st = path.lstat()
        except OSError:
            continue
        if path.is_symlink():
            kinds.add("symlink")
        elif st.st_nlink > 1 or _cache_twin(path, site, cache, st):
            kinds.add("hardlink")
        else:
            kinds.add("clone" if requested == "clone" and not fell_back else "copy")
    if not kinds:
        return ""
    return kinds.pop() if len(kinds) == 1 else "mixed"


def _cache_twin(path: Path, site: Path, cache: Path | None, st: os.stat_result) -> bool:
    """The same file (device and inode) sits in uv's unpacked-wheel cache (``archive-v0``)."""
    if cache is None:
        return False
    rel = path.relative_to(site)
    for twin in cache.glob(f"archive-v*/*/{rel}"):
        try:
            t = twin.stat()
        except OSError:
            continue
        if (t.st_dev, t.st_ino) == (st.st_dev, st.st_ino):
            return True
    return False


# ---------------------------------------------------------------- tools the configs need
def tools_problem(installer: str, creator: str, python: str | None) -> str | None:
    """Why a config's installer and venv creator cannot run here, or None (checked before
    the first trial, so that a missing tool never fails a run midway)."""
    import importlib.util

    if installer == "uv" and uv_binary() is None:
        return "install with uv, which is not available: pip install 'iobench[uv]'"
    if creator == "uv" and uv_binary() is None:
        return "create venvs with `uv venv`, but uv is not available: pip install 'iobench[uv]'"
    if creator == "virtualenv" and importlib.util.find_spec("virtualenv") is None:
        return "create venvs with virtualenv, which is not installed: pip install virtualenv"
    if creator in ("venv", "venv-without-pip"):
        problem = _venv_module_problem(python or sys.executable, creator == "venv")
        if problem:
            return problem
    if installer == "pip" and creator in ("venv-without-pip", "uv"):
        return _outer_pip_problem()
    return None


@functools.lru_cache(maxsize=8)
def _venv_module_problem(python: str, ensurepip: bool) -> str | None:
    """``python -m venv`` needs the venv module (and ensurepip, to seed pip): Debian splits
    them into python3-venv."""
    probe = "import venv, ensurepip" if ensurepip else "import venv"
    r = subprocess.run(
        [python, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    if r.returncode != 0:
        return (
            f"create venvs with `python -m venv`, which {python} cannot run ({probe} fails; "
            "on Debian/Ubuntu: apt install python3-venv)"
        )
    return None


def _outer_pip_problem() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    from packaging.version import Version

    try:
        have = Version(version("pip"))
    except PackageNotFoundError:
        have = None
    need = ".".join(map(str, PIP_PYTHON_OPTION))
    if have is None or have < Version(need):
        return (
            f"install with pip into a venv without pip, which needs pip >= {need} beside iobench "
            f"(pip --python VENV); found {have or 'none'} in {sys.executable}"
        )
    return None


def check_tools(configs: Iterable[Any], python: str | None) -> None:
    """Every installer and venv creator the configs use can run; else one line naming them."""
    problems: dict[str, list[str]] = {}
    for c in configs:
        problem = tools_problem(c.installer, getattr(c, "venv_creator", "virtualenv"), python)
        if problem:
            problems.setdefault(problem, []).append(c.name)
    for problem, names in problems.items():
        raise UsageError(f"configs {', '.join(names)} {problem}")


__all__ = [
    "LINK_MODES",
    "VENV_CREATORS",
    "check_tools",
    "has_pip",
    "link_columns",
    "observe_link",
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
