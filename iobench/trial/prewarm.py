"""prewarm's two steps (docs/strategies.md): the first start records the venv's files its
ready check opened — its modules, their bytecode, the shared libraries mapped (torch's
``lib/*.so`` are no modules) — and each restart reads them, many at once, before the ready
check, so that an import's serial round trips find names and pages already cached.

Each step is a command a start script runs (the venv's python; ``xargs -0 -P 32 cat``), so
what is measured is what iobench prints.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

#: the file the first start records the ready check's files in (NUL-separated paths)
PREWARM_LIST = "prewarm.list"
#: readers at once: a network volume answers many requests in flight at ~the latency of one
PREWARM_JOBS = 32
#: run by the venv's python: the ready check, then every file of the venv it opened — its
#: modules, their bytecode, the shared libraries mapped (torch's lib/*.so are no modules)
_RECORD = r"""
import os, sys
exec(compile(sys.argv[1], "<ready>", "exec"), {"__name__": "__ready__"})
root = os.path.realpath(sys.prefix) + os.sep
seen = set()
for m in list(sys.modules.values()):
    for p in (getattr(m, "__file__", None), getattr(m, "__cached__", None)):
        if isinstance(p, str) and os.path.isfile(p):
            seen.add(os.path.realpath(p))
try:
    with open("/proc/self/maps") as maps:
        fields = [line.split(None, 5) for line in maps]
    seen.update(f[5].strip() for f in fields if len(f) == 6)
except OSError:
    pass
mine = sorted(p for p in seen if p.startswith(root) and os.path.isfile(p))
with open(sys.argv[2], "wb") as out:
    out.write(b"".join(os.fsencode(p) + b"\0" for p in mine))
"""


def record_argv(venv: Path, ready: str, listing: Path) -> list[str]:
    """prewarm's first start: run the ready check in the venv and list the venv's files it
    opened into ``listing``."""
    return [str(venv / "bin" / "python"), "-c", _RECORD, ready, str(listing)]


def prewarm_argv(listing: Path, jobs: int = PREWARM_JOBS) -> list[str]:
    """prewarm's restart: read every listed file, ``jobs`` readers at once (what a start
    script runs: ``xargs -0 -P 32 -n 64 cat``)."""
    return ["sh", "-c", f'xargs -0 -P {jobs} -n 64 cat -- < "$1" > /dev/null', "sh", str(listing)]


def prewarm_command(listing: str, jobs: int = PREWARM_JOBS) -> str:
    """The shell line of :func:`prewarm_argv`."""
    return f"xargs -0 -P {jobs} -n 64 cat -- < {shlex.quote(listing)} > /dev/null"


def listed(listing: Path) -> tuple[int, int]:
    """(files, bytes) named by a prewarm list (files gone since are not counted)."""
    names = [n for n in listing.read_bytes().split(b"\0") if n]
    size = 0
    for n in names:
        try:
            size += os.stat(n).st_size
        except OSError:
            continue
    return len(names), size


__all__ = [
    "PREWARM_JOBS",
    "PREWARM_LIST",
    "listed",
    "prewarm_argv",
    "prewarm_command",
    "record_argv",
]
