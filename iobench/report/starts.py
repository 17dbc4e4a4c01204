"""The start script's body for each start-up strategy (docs/strategies.md): make or restore
the venv, install what the run measured, keep what the strategy keeps on the volume.

Every body is idempotent: run again in the same boot it finds the venv there and the install
recorded in it (``.iobench-installed``: the install command that filled it), so it makes,
restores, installs and packs nothing twice; a restart (a new boot: local disk empty) restores
what the first start kept. A changed install line installs again and, for the strategies that
keep the venv or the cache on the volume, keeps it again: what is packed is what was installed.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from iobench import shell
from iobench.report.places import user_path
from iobench.rundir.meta import RoleInfo

#: the first lines of every script: bash, stopping at the first error, an unset variable or a
#: failed pipe
STRICT = ["#!/bin/bash", "set -euo pipefail"]


PATH_LINE = 'export PATH="$VIRTUAL_ENV/bin:$PATH"'


#: the last line: run the command given to the script (a Dockerfile's CMD), if any
EXEC_LINE = 'if [ "$#" -gt 0 ]; then exec "$@"; fi'


#: the venv is there already: made, restored or kept earlier (this boot, or on the volume)
HAVE_VENV = '[ -x "$VIRTUAL_ENV/bin/python" ]'
#: what was installed into the venv: the install command, as the shell expanded it
INSTALLED = '"$VIRTUAL_ENV/.iobench-installed"'
#: the install differs from what the venv holds (a new venv, or a changed INSTALL line)
NOT_INSTALLED = f'[ "$(cat {INSTALLED} 2>/dev/null)" != "${{INSTALL[*]}}" ]'


#: what the first start keeps on the volume goes in a folder of the user's own: an archive
#: another user planted there would be restored, and its python run, as the script's user
_STORE_IS_YOURS = "{}  # the store on the volume: yours only"
#: strategies whose venv is restored from the target at each start
RESTORED = ("packed-venv", "copied-venv", "fan-out")
#: strategies whose start script restores what the measured steps kept (their lines)
SCRIPTED = (*RESTORED, "packed-cache")


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
        f"mkdir -p {venv}",
        f"if mount -t squashfs -o loop,ro,nosuid,nodev {image} {venv} 2>/dev/null; then",
        "    :  # a loop mount (root with CAP_SYS_ADMIN)",
        "elif command -v squashfuse >/dev/null; then  # in user space",
        f"    squashfuse -o nosuid,nodev {image} {venv}",
        "else  # no mount allowed: unpack the image instead (apt-get install squashfs-tools)",
        f"    rmdir {venv} && unsquashfs -q -n -d {venv} {image}",
        "fi",
    ]


def install_block(install: str, after: list[str] | None = None) -> tuple[list[str], list[str]]:
    """``INSTALL=(...)`` (the install as a bash array: its comment lines above it) and the lines
    that run it when the venv does not hold it yet, record it in the venv, then run ``after``
    (keep the venv or cache on the volume: only when something was installed)."""
    lines = install.splitlines() or [""]
    *said, command = lines
    return [*said, f"INSTALL=({command})", "first_start=0"], [
        f"if {NOT_INSTALLED}; then  # not installed yet: once",
        '    "${INSTALL[@]}"',
        "    first_start=1",
        f"    printf '%s\\n' \"${{INSTALL[*]}}\" > {INSTALLED}",
        *[f"    {x}" for x in after or []],
        "fi",
    ]


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


def kept_venv_lines(make: list[str], install: str, note: str = "") -> list[str]:
    """A venv made once where it is kept (reinstall's local disk: made again after a reboot;
    persistent-venv's volume: made once), installed into once."""
    head, run = install_block(install)
    return [*([note] if note else []), *head,
            f"if ! {HAVE_VENV}; then  # not made yet (on this volume, or in this boot)",
            *make, "fi", PATH_LINE, *run, EXEC_LINE]  # fmt: skip


def prewarm_lines(make: list[str], install: str) -> list[str]:
    """prewarm's body: persistent-venv's, plus the import set recorded at the first start and
    read in parallel (32 readers) at every later one, before the program's first import."""
    head, run = install_block(install, [PREWARM_RECORD])
    return [
        "# prewarm: the imports your program starts with (what the first start records)",
        'PREWARM_IMPORTS="${PREWARM_IMPORTS:-import sys}"',
        *head,
        f"if ! {HAVE_VENV}; then  # the first start: make the venv once",
        *make,
        f"elif [ -f {PREWARM_LIST} ]; then  # a restart: read the import set in parallel first",
        f"    xargs -0 -P 32 -n 64 cat -- < {PREWARM_LIST} > /dev/null",
        "fi",
        PATH_LINE,
        *run,
        EXEC_LINE,
    ]


def fan_out_lines(
    kept: str, persist: str, restore: str, make: list[str], install: str
) -> list[str]:
    """fan-out's body: the first pod to take the lock (``mkdir`` is atomic, on NFS too) makes
    the venv, installs, packs and marks the archive done; every other pod waits for the mark
    and restores, as every pod does at a restart; a pod that has the venv already (a second
    run in the same boot) does neither."""
    done, lock = shell.quote(kept + ".done"), shell.quote(kept + ".lock")
    again = [f"    {x}" for x in restore_lines(restore)]
    head, run = install_block(install, [persist, f"touch {done}"])
    return [
        _STORE_IS_YOURS.format(shell.private_dir(posixpath.dirname(kept))),
        *head,
        f"if {HAVE_VENV}; then",
        "    :  # made or restored earlier in this boot",
        f"elif [ -e {done} ]; then  # a restart, or the fleet's archive is there: restore it",
        *again,
        f"elif mkdir {lock} 2>/dev/null; then  # the fleet's first pod: make the venv",
        *make,
        f"else  # another pod is making it (if that pod died: rm -r {lock})",
        f"    until [ -e {done} ]; do sleep 1; done",
        *again,
        "fi",
        PATH_LINE,
        *run,
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
    head, run = install_block(install, [
        f'if [ ! -e "$CACHE_ARCHIVE" ] || [ "$({count})" != "$cached" ]; then  # keep the cache',
        f'    tar {where} -cf "$CACHE_ARCHIVE.tmp" "$(basename "${var}")"',
        '    mv "$CACHE_ARCHIVE.tmp" "$CACHE_ARCHIVE"',
        "fi",
    ])  # fmt: skip
    return [
        f"CACHE_ARCHIVE={shell.quote(kept)}  # the {var} kept on the volume",
        _STORE_IS_YOURS.format('private_dir "$(dirname "$CACHE_ARCHIVE")"'),
        *head,
        f"if ! {HAVE_VENV}; then  # not made in this boot yet",
        '    if [ -e "$CACHE_ARCHIVE" ]; then  # a restart: the cache back onto local disk',
        f'        tar {where} -xf "$CACHE_ARCHIVE"',
        "    fi",
        *[f"    {x}" for x in make],
        "fi",
        f"cached=$({count})",
        PATH_LINE,
        "# the install runs from the restored cache: only what it lacks is downloaded",
        *run,
        EXEC_LINE,
    ]


def restored_lines(kept: str, persist: str, restore: str, make: list[str], install: str,
                   copied: bool) -> list[str]:  # fmt: skip
    """packed-venv's and copied-venv's body: restore what the volume keeps, else make the venv
    and keep it there once installed (a copy kept before is replaced, not copied into)."""
    keep = [f"rm -rf {shell.quote(kept)}", persist] if copied else [persist]
    head, run = install_block(install, keep)
    return [
        _STORE_IS_YOURS.format(shell.private_dir(posixpath.dirname(kept))),
        *head,
        f"if {HAVE_VENV}; then",
        "    :  # made or restored earlier in this boot",
        f"elif [ -e {shell.quote(kept)} ]; then  # a restart: restore what the first start kept",
        *[f"    {x}" for x in restore_lines(restore)],
        "else  # the first start: make the venv",
        *make,
        "fi",
        PATH_LINE,
        *run,
        EXEC_LINE,
    ]


def strategy_lines(strategy: str, row: Mapping[str, Any], make: list[str], install: str,
                   roles: Mapping[str, RoleInfo], own: Path | None = None) -> list[str]:  # fmt: skip
    """The start script's body for one strategy: ``make`` (the venv's lines) and ``install``
    (the install command, its comment lines above it) once, then at every start what the
    strategy measured (restore, or nothing); PATH is set once, after the venv exists."""
    ind = [f"    {x}" for x in make]
    if strategy == "prewarm":
        return prewarm_lines(ind, install)
    if strategy == "layered-venv":  # persistent-venv's, over the image's own packages
        over = [x.replace(' "$VIRTUAL_ENV"', ' --system-site-packages "$VIRTUAL_ENV"')
                for x in ind]  # fmt: skip
        note = "# layered-venv: the venv on the volume holds only what the image lacks"
        return kept_venv_lines(over, install, note)
    persist = user_command(str(row.get("persist_command") or ""), roles, own)
    restore = user_command(str(row.get("restore_command") or ""), roles, own)
    kept = kept_path(persist, roles, own)
    if strategy not in SCRIPTED or not (persist and restore and kept):
        why = "" if strategy in ("reinstall", "persistent-venv") else (
            f"# {strategy}: its {row.get('persist_method') or 'persist'} step ran through a Python "
            "module here, so no shell line was measured to print")  # fmt: skip
        return kept_venv_lines(ind, install, why)
    if strategy == "fan-out":
        return fan_out_lines(kept, persist, restore, ind, install)
    if strategy == "packed-cache":
        return packed_cache_lines(kept, persist, str(row.get("installer") or "pip"), make, install)
    return restored_lines(kept, persist, restore, ind, install, strategy == "copied-venv")
