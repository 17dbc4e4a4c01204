"""The start script's building blocks, derived from what was measured on this machine: the
variables of a config's places, the caveats of those places, making the venv the trials' way
where the machine can (else as a stock ``python3`` does), the Dockerfile fragment, and a start-up
strategy's measured persist and restore lines moved into the user's own folders.

Every script starts ``#!/bin/bash`` + ``set -euo pipefail``, makes each folder it uses a
private one of the user's (``iobench.shell.PRIVATE_DIR``: places on the tmp role inside a
per-user folder, nothing reused that another user made), sets ``PATH`` once after the venv
exists, and ends by running the command it was given (``exec "$@"``), so a Dockerfile can
make it the entrypoint (docs/verdicts.md, "Start scripts").
"""

from __future__ import annotations

import math
import posixpath
import shlex
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from iobench import shell
from iobench.report.placement import same_filesystem
from iobench.report.places import SCRATCH, iobench_clone, user_path
from iobench.report.starts import (
    EXEC_LINE,
    PATH_LINE,
    PREWARM_LIST,
    PREWARM_RECORD,
    RESTORED,
    SCRIPTED,
    STRICT,
    fan_out_lines,
    kept_path,
    kept_venv_lines,
    packed_cache_lines,
    prewarm_lines,
    restore_lines,
    strategy_lines,
    user_command,
)
from iobench.rundir.meta import RoleInfo, RunMeta
from iobench.units import fmt_s

#: the names this module gives (the strategies' bodies and the places live beside it)
__all__ = [
    "EXEC_LINE", "PATH_LINE", "PREWARM_LIST", "PREWARM_RECORD", "RESTORED", "SCRATCH",
    "SCRIPTED", "SCRIPT_NAME", "STOCK_VENV", "STRICT", "VENV_COMMANDS", "caveats", "creator_of",
    "dockerfile_lines", "env_for", "export_lines", "fan_out_lines", "iobench_clone",
    "install_command", "install_hint", "kept_path", "packed_cache_lines", "prewarm_lines",
    "restore_lines", "shell_lines", "stock_difference", "strategy_lines", "user_command",
    "user_path", "uv_needed", "venv_lines", "venv_note",
]  # fmt: skip

DOCKER_SHM_MB = 64


def env_for(
    config: Mapping[str, Any], roles: Mapping[str, RoleInfo], own: Path | None = None
) -> tuple[list[tuple[str, str]], list[str]]:
    """(variable, value) pairs for one config's placement, and notes about them."""
    installer = str(config.get("installer") or "pip")
    pairs: list[tuple[str, str]] = []
    notes: list[str] = []

    def place(role: str, sub: str | None) -> str:
        path, note = user_path(roles, role, own)
        if note and note not in notes:
            notes.append(note)
        return posixpath.join(path, sub) if sub else path

    venv_role = str(config.get("venv_role") or "target")
    pairs.append(("VIRTUAL_ENV", place(venv_role, "venv")))
    tmp_role = str(config.get("tmpdir_role") or "")
    if tmp_role:
        pairs.append(("TMPDIR", place(tmp_role, None if tmp_role == "tmp" else "tmp")))
    cache_role = str(config.get("cache_role") or "")
    cached = cache_role not in ("", "off")
    if installer == "uv":
        if not cached:
            pairs.append(("UV_NO_CACHE", "1"))
        else:
            pairs.append(("UV_CACHE_DIR", place(cache_role, "uv-cache")))
            link = str(config.get("link_mode") or "default")
            if link != "default":  # the measured link mode (iobench.scenario.vocab.LINK_MODES)
                pairs.append(("UV_LINK_MODE", link))
                if link == "symlink":
                    notes.append(
                        f"UV_LINK_MODE=symlink: the venv's files point into the uv cache "
                        f"({cache_role}); the venv breaks when that cache is cleaned or, on a "
                        "local disk, gone at the next start"
                    )
            elif same_filesystem(roles, cache_role, venv_role) is False:
                pairs.append(("UV_LINK_MODE", "copy"))
                notes.append(
                    f"the uv cache ({cache_role}) and the venv ({venv_role}) are on different "
                    "filesystems, so uv cannot hard-link; UV_LINK_MODE=copy says so up front"
                )
        if str(config.get("compile")) == "on":
            pairs.append(("UV_COMPILE_BYTECODE", "1"))
    else:
        pairs.append(("PIP_NO_CACHE_DIR", "1") if not cached
                     else ("PIP_CACHE_DIR", place(cache_role, "pip-cache")))  # fmt: skip
        if str(config.get("compile")) == "off":
            pairs.append(("PIP_NO_COMPILE", "1"))
    if str(config.get("pycache") or "beside") == "local":  # bytecode on local disk, private
        pairs.append(("PYTHONPYCACHEPREFIX", place(tmp_role or "tmp", "pycache")))
    if str(config.get("compile")) == "off":
        notes.append(
            "bytecode is not compiled at install: that cost moves to the first import, which every "
            "cold restart with a fresh venv pays again (measured here in the import phase)"
        )
    return pairs, notes


def caveats(config: Mapping[str, Any], roles: Mapping[str, RoleInfo]) -> list[str]:
    """What a user must know about the places the script uses (one sentence each)."""
    out = []
    used = {str(config.get(c) or "") for c in ("venv_role", "tmpdir_role", "cache_role")}
    for name in sorted(used - {"", "off"}):
        role = roles.get(name)
        if role is not None and role.fstype == "tmpfs":
            out.append(
                f"{role.path or name} is tmpfs: it is RAM (it counts against the pod's "
                "memory), it is emptied at every restart, and in a Docker container /dev/shm "
                f"holds only {DOCKER_SHM_MB} MB unless started with --shm-size (e.g. --shm-size=16g)"
            )
    cache_role = str(config.get("cache_role") or "")
    if str(config.get("cache_state")) == "warm" and cache_role not in ("", "off"):
        out.append(
            f"this was measured with a warm cache on '{cache_role}': it only pays off if that "
            "cache survives between starts (a persistent volume); a fresh pod starts cold"
        )
    venv_role = str(config.get("venv_role") or "")
    restored = str(config.get("strategy") or "") in RESTORED
    venv_fs = roles[venv_role].fstype if venv_role in roles else ""
    if not restored and (venv_role == "tmp" or venv_fs == "tmpfs"):
        out.append(
            "the venv lives on tmp, which does not survive a restart: the start script must "
            "rebuild it (and reinstall every package) at every start"
        )
    return out


#: the measured command per venv creator (iobench.trial.installers.venv_command), as a user runs it
VENV_COMMANDS = {
    "virtualenv": 'python3 -m virtualenv --no-periodic-update --no-setuptools "$VIRTUAL_ENV"',
    "venv": 'python3 -m venv "$VIRTUAL_ENV"',
    "venv-without-pip": 'python3 -m venv --without-pip "$VIRTUAL_ENV"',
    "uv": 'uv venv --python python3 "$VIRTUAL_ENV"',
}


#: what a stock python3 (Debian/Ubuntu with python3-venv, PEP 668) makes the venv with
STOCK_VENV = VENV_COMMANDS["venv"]


#: the shell test that the measured creator is on this machine (none: a stock python3 has it)
_CREATOR_PRESENT = {
    "virtualenv": "python3 -m virtualenv --version >/dev/null 2>&1",
    "venv-without-pip": "python3 -m pip --version >/dev/null 2>&1",
    "uv": "command -v uv >/dev/null",
}


_CREATOR_NAMES = {
    "virtualenv": "virtualenv",
    "venv": "python3 -m venv",
    "venv-without-pip": "python3 -m venv --without-pip (pip from outside the venv)",
    "uv": "uv venv",
}


#: the file name the Dockerfile fragment copies the start script from
SCRIPT_NAME = "iobench-start.sh"


def creator_of(config: Mapping[str, Any]) -> str:
    """The venv creator a config measured (runs before the column: virtualenv)."""
    creator = str(config.get("venv_creator") or "")
    return creator if creator in VENV_COMMANDS else "virtualenv"


def stock_difference(table: pd.DataFrame, config: Mapping[str, Any], creator: str) -> str:
    """How ``python3 -m venv`` compared with ``creator`` in this run on the same role (the
    venv phase's median over the configs that made their venvs each way), or that it was not
    measured."""
    role = str(config.get("venv_role") or "")
    same = table[table["venv_role"].astype(str) == role] if "venv_role" in table else table[:0]
    made = same.apply(creator_of, axis=1) if len(same) else pd.Series(dtype=str)
    stock = float(same["median_venv_s"][made == "venv"].median()) if len(same) else math.nan
    used = float(same["median_venv_s"][made == creator].median()) if len(same) else math.nan
    if math.isfinite(stock) and math.isfinite(used):
        return (
            f"measured here on the same role, the venv phase took {fmt_s(stock)} with "
            f"python3 -m venv against {fmt_s(used)} with {_CREATOR_NAMES[creator]} (medians)"
        )
    return (
        "that way was not measured in this run (iobench run --venv-creator "
        f"{creator},venv measures both)"
    )


def venv_lines(meta: RunMeta, creator: str = "virtualenv", difference: str = "") -> list[str]:
    """Make the venv the way the trials did where this machine can, else as a stock python3
    does (``python3 -m venv``). Which versions the trials used, and how the two ways compared
    (``difference``), are the report's to say (:func:`venv_note`), not the script's."""
    test = _CREATOR_PRESENT.get(creator)
    if test is None:  # python3 -m venv: what a stock python3 has (Debian/Ubuntu: python3-venv)
        return ["# Debian/Ubuntu: apt-get install python3-venv", STOCK_VENV]
    return [
        f"if {test}; then  # as the trials made it",
        f"    {VENV_COMMANDS[creator]}",
        "else  # as a stock python3 does (Debian/Ubuntu: apt-get install python3-venv)",
        f"    {STOCK_VENV}",
        "fi",
    ]


def venv_note(meta: RunMeta, creator: str = "virtualenv", difference: str = "") -> str:
    """What the trials made their venvs with (versions), and how python3 -m venv compared."""
    venv = meta.versions.get("venv") or {}
    venv = venv if isinstance(venv, Mapping) else {}
    made = _CREATOR_NAMES[creator]
    if creator == "virtualenv" and venv.get("virtualenv"):
        made = f"virtualenv {venv['virtualenv']}"
    pip = venv.get("pip") if creator == "virtualenv" else None
    said = f"The trials made venvs with {made}" + (f", seeded with pip {pip}" if pip else "")
    said += f"; {difference}" if difference else ""
    if pip:
        said += f"; to match the trials' pip: python3 -m pip install 'pip=={pip}'"
    return said + "."


#: what the install line says when the run's packages are iobench's own synthetic wheels
SYNTHETIC = (
    "# {names}: iobench's synthetic stand-in ({wheels}), served by the run's own index, not on "
    "PyPI: EDIT this line to install your packages (e.g. -r requirements.txt)"
)


def extra_indexes(meta: RunMeta) -> list[str]:
    """The ``--extra-index-url`` values of the run's command line (e.g. the torch CUDA index)."""
    argv, out = list(meta.command or []), []
    for i, word in enumerate(argv):
        if word == "--extra-index-url" and i + 1 < len(argv):
            out.append(argv[i + 1])
        elif word.startswith("--extra-index-url="):
            out.append(word.split("=", 1)[1])
    return out


def index_words(meta: RunMeta) -> tuple[list[str], str]:
    """The index arguments of the measured install, and a comment when the script cannot name
    the index the run used (a loopback index over a wheelhouse, a redacted URL)."""
    index = meta.index
    url = ""
    if index is not None and index.kind == "remote":
        url = index.url
    elif index is not None and index.downloaded_from:
        url = index.downloaded_from
    elif index is not None and index.kind == "local":
        return [], (f"# the run installed from {index.source or 'a wheelhouse'} on a loopback "
                    "index: add --find-links DIR or --index-url URL where this pod finds them")  # fmt: skip
    words = [] if not url or url == "pip's configured index" else ["--index-url", url]
    for extra in extra_indexes(meta):
        words += ["--extra-index-url", extra]
    if any("***" in w for w in words):
        return [w for w in words if "***" not in w], (
            "# the run's index URL held credentials (not printed): add --index-url with yours"
        )
    return words, ""


def install_command(meta: RunMeta, installer: str = "pip", creator: str = "virtualenv") -> str:
    """What the run installed, as the script's install (its comment lines above the command):
    the scenario's packages or the user's ``--package``/``-r`` requirements, from the index the
    run used, with the installer it measured; for a synthetic scenario, a line to edit."""
    scenario = meta.scenario or {}
    packages = [str(p) for p in scenario.get("packages") or ()]
    words, said = index_words(meta)
    if scenario.get("wheels"):
        words, said = [], SYNTHETIC.format(names=", ".join(packages) or "nothing",
                                           wheels=scenario["wheels"])  # fmt: skip
    if installer == "uv" or creator == "uv":  # uv venv makes no pip: uv installs into it
        tool = ["uv", "pip", "install"]
    else:
        tool = ["python3", "-m", "pip", "install"]
    command = " ".join(shlex.quote(w) for w in [*tool, *words, *packages])
    return "\n".join(filter(None, [*_comments([said.lstrip("# ")] if said else []), command]))


def uv_needed(installer: str) -> list[str]:
    """A uv install needs uv: stop before anything is made when it is missing, saying how to get it."""
    if installer != "uv":
        return []
    return [
        "command -v uv >/dev/null || { echo 'this script installs with uv, which is not on PATH: "
        "pipx install uv (or see docs.astral.sh/uv)' >&2; exit 1; }"
    ]


def install_hint(installer: str, creator: str) -> str:
    """Where the user's own install goes (iobench measured its own package list)."""
    if installer == "uv":
        return "# install your packages here, e.g.: uv pip install -r requirements.txt"
    if creator == "uv":  # uv venv makes no pip: uv installs into it
        return "# install your packages here, e.g.: uv pip install -r requirements.txt (the venv has no pip)"
    return "# install your packages here, e.g.: python3 -m pip install -r requirements.txt"


def _comments(texts: list[str], width: int = 92) -> list[str]:
    """Sentences as ``#`` comment lines wrapped to ``width``."""
    out = []
    for text in texts:
        out += textwrap.wrap(
            text,
            width,
            initial_indent="# ",
            subsequent_indent="#   ",
            break_on_hyphens=False,
            break_long_words=False,
        )
    return out


def shell_lines(
    pairs: list[tuple[str, str]],
    installer: str,
    meta: RunMeta,
    comments: list[str],
    creator: str = "virtualenv",
    difference: str = "",
) -> list[str]:
    """The start script: caveats as comments, exports, folders, then the venv (made once in a
    boot) and what the run installed into it (installed once)."""
    make = [f"    {x}" for x in venv_lines(meta, creator, difference)]
    return [
        *export_lines(pairs, comments, installer),
        *kept_venv_lines(make, install_command(meta, installer, creator)),
    ]


def export_lines(
    pairs: list[tuple[str, str]], comments: list[str], installer: str = "pip"
) -> list[str]:
    lines = [*STRICT, *_comments(comments), *uv_needed(installer)]
    lines += [f"export {name}={shell.quote(value)}" for name, value in pairs]
    lines += shell.PRIVATE_DIR
    bases = sorted({v.split(shell.USER_MARK)[0] + shell.USER_MARK for _, v in pairs
                    if shell.USER_MARK in v})  # fmt: skip
    lines += [shell.private_dir(base) for base in bases]  # the per-user folder first
    lines += [shell.private_dir(variable=n) for n, v in pairs if n in _FOLDERS and v not in bases]
    if any(n == "VIRTUAL_ENV" for n, _ in pairs):  # made by the venv tool, a restore, or earlier
        lines.append(_VENV_IS_YOURS)
    return lines


#: the variables that name a folder the script makes (and checks) before anything runs
_FOLDERS = ("TMPDIR", "PIP_CACHE_DIR", "UV_CACHE_DIR", "PYTHONPYCACHEPREFIX")
#: a venv folder already there (a dangling link included) must be the user's own
_VENV_IS_YOURS = (
    'if [ -e "$VIRTUAL_ENV" ] || [ -L "$VIRTUAL_ENV" ]; then private_dir "$VIRTUAL_ENV"; fi'
)


def dockerfile_lines(pairs: list[tuple[str, str]], comments: list[str]) -> list[str]:
    """A Dockerfile fragment: the same variables for every process in the container, and the
    start script (saved as ``iobench-start.sh`` beside the Dockerfile) as its entrypoint, which
    makes the venv when the container starts (a volume is mounted then, not at build time) and
    then runs the image's command."""
    out = _comments(
        [
            *comments,
            f"save the start script above as {SCRIPT_NAME} beside this Dockerfile: the venv is "
            "made when the container starts, where the volume is mounted, then the container's "
            "command runs in it",
        ]
    )
    fixed = [(n, v) for n, v in pairs if shell.USER_MARK not in v]
    if len(fixed) < len(pairs):
        out += _comments([
            "the script puts some places in a per-user folder it makes at start, which a "
            "Dockerfile cannot name: they reach the container's command through the script "
            f"(for another shell: docker exec CONTAINER /usr/local/bin/{SCRIPT_NAME} bash)"
        ])  # fmt: skip
    out += [f"ENV {name}={shell.quote(value)}" for name, value in fixed]
    if any(n == "VIRTUAL_ENV" for n, _ in fixed):
        out.append('ENV PATH="$VIRTUAL_ENV/bin:$PATH"')
    out.append(f"COPY {SCRIPT_NAME} /usr/local/bin/{SCRIPT_NAME}")
    out.append(f"RUN chmod 0755 /usr/local/bin/{SCRIPT_NAME}")
    out.append(f'ENTRYPOINT ["/usr/local/bin/{SCRIPT_NAME}"]')
    out.append('CMD ["bash"]')
    return out
