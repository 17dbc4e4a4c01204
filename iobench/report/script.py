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
import re
import shlex
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from iobench import shell
from iobench.report.placement import same_filesystem
from iobench.rundir.meta import RoleInfo, RunMeta
from iobench.units import fmt_s

SCRATCH = ".iobench-scratch"
DOCKER_SHM_MB = 64


SCRATCH = ".iobench-scratch"
DOCKER_SHM_MB = 64


def iobench_clone(path: str) -> Path | None:
    """The iobench source folder that ``path`` lies in, if any: this package's own (an
    editable install) or any folder above ``path`` holding ``pyproject.toml`` and
    ``iobench/__init__.py`` (a clone installed with ``pip install .``)."""
    here = Path(__file__).resolve().parents[2]
    p = Path(path)
    for folder in (p, *p.parents):
        if folder == here or (
            (folder / "pyproject.toml").is_file() and (folder / "iobench" / "__init__.py").is_file()
        ):
            return folder
    return None


def user_path(
    roles: Mapping[str, RoleInfo], name: str, own: Path | None = None
) -> tuple[str, str | None]:
    """A role's folder for the script, and a note when it had to be moved out of iobench's own.

    A path inside a ``.iobench-scratch`` folder becomes the folder holding it; a path inside
    iobench's clone (``own``) becomes the clone's parent (the same filesystem, the user's).
    The tmp role (a shared temporary folder: /tmp, /dev/shm) becomes the user's own folder
    in it (``iobench.shell.per_user``).
    """
    raw = roles[name].path if name in roles else ""
    if not raw:
        return "/" + name, f"meta.json records no path for role '{name}'; the script uses /{name}"
    path = posixpath.normpath(str(raw))
    parts = path.split("/")
    if SCRATCH in parts:
        path = "/".join(parts[: parts.index(SCRATCH)]) or "/"
    own = own or iobench_clone(path)
    note = None
    if own is not None and (path == str(own) or path.startswith(str(own) + "/")):
        path, note = (
            str(own.parent),
            (
                f"role '{name}' was iobench's own folder ({path}); the script uses its parent "
                f"{own.parent}, on the same filesystem: change it to your own folder on that volume"
            ),
        )
    return (shell.per_user(path) if name == "tmp" else path), note


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


#: the first lines of every script: bash, stopping at the first error, an unset variable or a
#: failed pipe
STRICT = ["#!/bin/bash", "set -euo pipefail"]


PATH_LINE = 'export PATH="$VIRTUAL_ENV/bin:$PATH"'


#: the last line: run the command given to the script (a Dockerfile's CMD), if any
EXEC_LINE = 'if [ "$#" -gt 0 ]; then exec "$@"; fi'


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
    does (``python3 -m venv``), saying which the trials used and how the other compared."""
    venv = meta.versions.get("venv") or {}
    venv = venv if isinstance(venv, Mapping) else {}
    made = _CREATOR_NAMES[creator]
    if creator == "virtualenv" and venv.get("virtualenv"):
        made = f"virtualenv {venv['virtualenv']}"
    pip = venv.get("pip") if creator == "virtualenv" else None
    said = f"the trials made venvs with {made}" + (f", seeded with pip {pip}" if pip else "")
    test = _CREATOR_PRESENT.get(creator)
    if test is None:  # python3 -m venv: what a stock python3 has (Debian/Ubuntu: python3-venv)
        return [*_comments([said + "; Debian/Ubuntu: apt-get install python3-venv"]), STOCK_VENV]
    said += (
        "; where this machine lacks it (a stock Debian/Ubuntu python3 does), python3 -m venv "
        "makes it instead (apt-get install python3-venv), seeding the Python's own pip"
    )
    said += f"; {difference}" if difference else ""
    if pip:
        said += f"; to match the trials' pip: python3 -m pip install 'pip=={pip}'"
    return [
        *_comments([said]),
        f"if {test}; then",
        f"    {VENV_COMMANDS[creator]}",
        "else",
        f"    {STOCK_VENV}",
        "fi",
    ]


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
    """The start script: caveats as comments, exports, folders, then the venv and its install."""
    return [
        *export_lines(pairs, comments, installer),
        *venv_lines(meta, creator, difference),
        PATH_LINE,
        install_hint(installer, creator),
        EXEC_LINE,
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


#: a trial's folder in iobench's scratch, or a fleet trial's shared one (a fan-out's archive)
_ANY_SCRATCH = re.compile(r"/\.iobench-scratch/[^/\s'\"]+/(?:shared/[^/\s'\"]+|[^/\s'\"]+)")


def user_command(command: str, roles: Mapping[str, RoleInfo], own: Path | None = None) -> str:
    """A measured command in the user's folders: each role's trial folder inside iobench's
    scratch becomes the role's folder of the script (:func:`user_path`)."""
    for name in roles:
        raw = roles[name].path if name in roles else ""
        if not raw:
            continue
        user, _ = user_path(roles, name, own)
        trial_dir = re.escape(posixpath.normpath(str(raw))) + _ANY_SCRATCH.pattern
        command = re.sub(trial_dir, user.replace("\\", "\\\\"), command)
    return _ANY_SCRATCH.sub("", command)


def kept_path(command: str, roles: Mapping[str, RoleInfo], own: Path | None = None) -> str | None:
    """What the persist step wrote on the target (the archive or the copied tree), user's path."""
    target, _ = user_path(roles, "target", own)
    words = shlex.split(command) if command else []
    return next((w for w in words if w.startswith(target.rstrip("/") + "/")), None)


#: a measured squashfs restore: the venv's folder made, then the image mounted on it
_SQUASHFS_RESTORE = re.compile(
    r"^mkdir (?P<venv>.+?) && (?:mount -t squashfs -o \S+|squashfuse -o \S+) (?P<image>.+) (?P=venv)$"
)


def restore_lines(restore: str) -> list[str]:
    """The restore as the script runs it. A squashfs image is loop-mounted where the pod
    allows it (CAP_SYS_ADMIN: most unprivileged pods refuse), else mounted in user space with
    squashfuse, else unpacked with unsquashfs (squashfs-tools; no mount at all)."""
    m = _SQUASHFS_RESTORE.match(restore)
    if m is None:
        return [restore]
    venv, image = m["venv"], m["image"]
    return [
        f"mkdir {venv}",
        f"if mount -t squashfs -o loop,ro,nosuid,nodev {image} {venv} 2>/dev/null; then",
        "    :  # a loop mount (root with CAP_SYS_ADMIN)",
        "elif command -v squashfuse >/dev/null; then  # in user space",
        f"    squashfuse -o nosuid,nodev {image} {venv}",
        "else  # no mount allowed: unpack the image instead (apt-get install squashfs-tools)",
        f"    rmdir {venv} && unsquashfs -q -n -d {venv} {image}",
        "fi",
    ]


#: what the first start keeps on the volume goes in a folder of the user's own: an archive
#: another user planted there would be restored, and its python run, as the script's user
_STORE_IS_YOURS = "{}  # the store on the volume: yours only"
#: strategies whose venv is restored from the target at each start
RESTORED = ("packed-venv", "copied-venv", "fan-out")
#: strategies whose start script restores what the measured steps kept (their lines)
SCRIPTED = (*RESTORED, "packed-cache")


#: prewarm's list of the files the program's imports open, kept in the venv on the volume
PREWARM_LIST = '"$VIRTUAL_ENV/.prewarm.list"'
#: the start script's recording of that list (the venv's python, after the install)
PREWARM_RECORD = (
    'python3 -c "$PREWARM_IMPORTS"\'\nimport os, sys\nroot = os.path.realpath(sys.prefix) + os.sep\n'
    "seen = {os.path.realpath(p) for m in list(sys.modules.values()) for p in "
    '(getattr(m, "__file__", None), getattr(m, "__cached__", None)) if isinstance(p, str)}\n'
    'seen |= {f[5].strip() for f in (l.split(None, 5) for l in open("/proc/self/maps")) if len(f) == 6}\n'
    'sys.stdout.buffer.write(b"".join(os.fsencode(p) + b"\\0" for p in sorted(seen) '
    "if p.startswith(root) and os.path.isfile(p)))' > " + PREWARM_LIST
)


def prewarm_lines(make: list[str], install: str) -> list[str]:
    """prewarm's body: persistent-venv's, plus the import set recorded at the first start and
    read in parallel (32 readers) at every later one, before the program's first import."""
    return [
        "# prewarm: the imports your program starts with (what the first start records)",
        'PREWARM_IMPORTS="${PREWARM_IMPORTS:-import sys}"',
        "first_start=0",
        'if [ ! -x "$VIRTUAL_ENV/bin/python" ]; then  # the first start: make the venv once',
        *make,
        "    first_start=1",
        "fi",
        PATH_LINE,
        'if [ "$first_start" = 1 ]; then  # install, then record what the imports open',
        f"    {install}",
        f"    {PREWARM_RECORD}",
        f"elif [ -f {PREWARM_LIST} ]; then  # a restart: read the import set in parallel first",
        f"    xargs -0 -P 32 -n 64 cat -- < {PREWARM_LIST} > /dev/null",
        "fi",
        EXEC_LINE,
    ]


def fan_out_lines(
    kept: str, persist: str, restore: str, make: list[str], install: str
) -> list[str]:
    """fan-out's body: the first pod to take the lock (``mkdir`` is atomic, on NFS too) makes
    the venv, installs, packs and marks the archive done; every other pod waits for the mark
    and restores, as every pod does at a restart."""
    done, lock = shell.quote(kept + ".done"), shell.quote(kept + ".lock")
    again = [f"    {x}" for x in restore_lines(restore)]
    return [
        _STORE_IS_YOURS.format(shell.private_dir(posixpath.dirname(kept))),
        "first_start=0",
        f"if [ -e {done} ]; then  # a restart, or the fleet's archive is there: restore it",
        *again,
        f"elif mkdir {lock} 2>/dev/null; then  # the fleet's first pod: make the venv",
        *make,
        "    first_start=1",
        f"else  # another pod is making it (if that pod died: rm -r {lock})",
        f"    until [ -e {done} ]; do sleep 1; done",
        *again,
        "fi",
        PATH_LINE,
        'if [ "$first_start" = 1 ]; then  # install, pack onto the volume, tell the others',
        f"    {install}",
        f"    {persist}",
        f"    touch {done}",
        "fi",
        EXEC_LINE,
    ]


def packed_cache_lines(kept: str, persist: str, installer: str, make: list[str],
                       install: str) -> list[str]:  # fmt: skip
    """packed-cache's body: a restart unpacks the installer's cache (kept on the volume as one
    archive) onto local disk before the venv is made and the install runs from it; the
    archive is written at the first start, and again after an install that added to the
    cache (a changed package list: only the new packages were downloaded)."""
    var = "UV_CACHE_DIR" if installer == "uv" else "PIP_CACHE_DIR"
    zstd = " -I 'zstd -T0'" if " -I " in persist else ""  # as measured: tar+zstd, or tar
    where = f'-C "$(dirname "${var}")"{zstd}'
    count = f'find "${var}" -type f 2>/dev/null | wc -l'
    return [
        f"CACHE_ARCHIVE={shell.quote(kept)}  # the {var} kept on the volume",
        _STORE_IS_YOURS.format('private_dir "$(dirname "$CACHE_ARCHIVE")"'),
        "first_start=0",
        'if [ -e "$CACHE_ARCHIVE" ]; then  # a restart: the cache back onto local disk',
        f'    tar {where} -xf "$CACHE_ARCHIVE"',
        "else",
        "    first_start=1",
        "fi",
        f"cached=$({count})",
        *make,
        PATH_LINE,
        f"{install}  # from the restored cache: only what it lacks is downloaded",
        f'if [ "$first_start" = 1 ] || [ "$({count})" != "$cached" ]; then  # keep the cache',
        f'    tar {where} -cf "$CACHE_ARCHIVE.tmp" "$(basename "${var}")"',
        '    mv "$CACHE_ARCHIVE.tmp" "$CACHE_ARCHIVE"',
        "fi",
        EXEC_LINE,
    ]


def strategy_lines(strategy: str, row: Mapping[str, Any], make: list[str], install: str,
                   roles: Mapping[str, RoleInfo], own: Path | None = None) -> list[str]:  # fmt: skip
    """The start script's body for one strategy: ``make`` (the venv's lines) and ``install``
    (the user's install, a comment) at the first start, then at every start what the strategy
    measured (restore, or nothing); PATH is set once, after the venv exists."""
    ind = [f"    {x}" for x in make]
    if strategy == "prewarm":
        return prewarm_lines(ind, install)
    if strategy == "layered-venv":  # persistent-venv's, over the image's own packages
        over = [x.replace(' "$VIRTUAL_ENV"', ' --system-site-packages "$VIRTUAL_ENV"')
                for x in ind]  # fmt: skip
        return ["# layered-venv: the venv on the volume holds only what the image lacks",
                *strategy_lines("persistent-venv", row, [x[4:] for x in over], install, roles, own)]  # fmt: skip
    if strategy == "persistent-venv":
        return ["first_start=0",
                'if [ ! -x "$VIRTUAL_ENV/bin/python" ]; then  # the first start: make the venv once',
                *ind, "    first_start=1", "fi", PATH_LINE,
                'if [ "$first_start" = 1 ]; then', f"    {install}", "    :", "fi", EXEC_LINE]  # fmt: skip
    persist = user_command(str(row.get("persist_command") or ""), roles, own)
    restore = user_command(str(row.get("restore_command") or ""), roles, own)
    kept = kept_path(persist, roles, own)
    if strategy not in SCRIPTED or not (persist and restore and kept):
        why = [] if strategy == "reinstall" else [
            f"# {strategy}: its {row.get('persist_method') or 'persist'} step ran through a Python "
            "module here, so no shell line was measured to print"]  # fmt: skip
        return [*why, *make, PATH_LINE, install, EXEC_LINE]
    if strategy == "fan-out":
        return fan_out_lines(kept, persist, restore, ind, install)
    if strategy == "packed-cache":
        return packed_cache_lines(kept, persist, str(row.get("installer") or "pip"), make, install)
    return [
        _STORE_IS_YOURS.format(shell.private_dir(posixpath.dirname(kept))),
        "first_start=0",
        f"if [ -e {shell.quote(kept)} ]; then  # a restart: restore what the first start kept",
        *[f"    {x}" for x in restore_lines(restore)],
        "else  # the first start: make the venv",
        *ind,
        "    first_start=1",
        "fi",
        PATH_LINE,
        'if [ "$first_start" = 1 ]; then  # the first start: install, then keep the venv on the volume',
        f"    {install}",
        f"    {persist}",
        "fi",
        EXEC_LINE,
    ]
