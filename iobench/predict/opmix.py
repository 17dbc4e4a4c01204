"""Count the filesystem operations of an install, per phase and per role, from an strace log.

Method: ``strace -f -y`` of a whole ``iobench run`` (every role on tmpfs). Each process
inherits its parent's phase; an ``execve`` names it: ``-m virtualenv`` is the venv phase,
``-m pip install`` the download then install phase (install from the first file created in
the venv's site-packages), ``-m compileall`` compile, ``<venv>/bin/python -c`` the import
(ready) check. Priming and warm-up venvs are left out. Each system call that names a path
in a trial's ``venv``, ``tmp`` or ``cache`` folder counts for that role as one of the
operations the probe measures (:data:`OPS`); stats are counted once per path and phase
(the client's attribute cache answers repeats — on FUSE and NFS alike), missing names every
time (no negative cache), bytes read and written in full.

The counts, per trial and cache state, are kept in ``iobench/predict/opmix.toml``; the
prediction model (:mod:`iobench.predict.model`) scales them to another profile by its file count.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iobench.rundir.folder import RunDir
from iobench.rundir.records import PHASES
from iobench.trial.warmcache import PREFIX as WARM_PREFIX  # a warm cache lives outside any trial

#: operations, named as the probe names its micro-probes
OPS = ("create", "stat", "stat_miss", "open_read", "chmod", "rename", "unlink", "mkdir", "fsync")
_ROLE_DIRS = {"venv": "venv", "tmp": "tmpdir", "cache": "cache"}

_HEAD = re.compile(r"^(\d+)\s+(?:(\d\d):(\d\d):(\d\d(?:\.\d+)?)\s+)?(.*)$")
_CALL = re.compile(r"^(\w+)\((.*)\)\s+= (-?\d+|\?)(.*)$")
#: phase length over attribute-cache time at which the stat curve is sampled
CURVE_POINTS = (0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)
_SCRATCH = re.compile(r"/\.iobench-scratch/[^/]+/([^/]+)/(venv|tmp|cache|prime-venv)(?:/|$)")
_FD_PATH = re.compile(r"^(-?\d+|AT_FDCWD)<([^>]*)>")
_STR = re.compile(r'"((?:[^"\\]|\\.)*)"')
#: a file of an installed distribution (not pip's own modules or their bytecode)
_INSTALLED = re.compile(
    r"/site-packages/(?!pip/|pip-|_distutils_hack|distutils-precedence)[^/]+/(?!.*__pycache__)"
)
_STATS = {
    "stat",
    "lstat",
    "newfstatat",
    "statx",
    "access",
    "faccessat",
    "faccessat2",
    "readlink",
    "readlinkat",
}
_SIMPLE = {
    "rename": "rename",
    "renameat": "rename",
    "renameat2": "rename",
    "unlink": "unlink",
    "unlinkat": "unlink",
    "rmdir": "unlink",
    "mkdir": "mkdir",
    "mkdirat": "mkdir",
    "fsync": "fsync",
    "fdatasync": "fsync",
    "chmod": "chmod",
    "fchmod": "chmod",
    "fchmodat": "chmod",
    "utimensat": "chmod",
    "symlink": "create",
    "symlinkat": "create",
    "link": "create",
    "linkat": "create",
    "getdents64": "stat",
}


@dataclass
class Counts:
    """Operations and bytes of one (trial, phase, role)."""

    ops: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OPS, 0))
    bytes_written: int = 0
    bytes_read: int = 0
    #: (phase length / attribute-cache time, stats that reach the server): see stat_curve()
    stat_curve: list[tuple[float, int]] = field(default_factory=list)


def merged_lines(lines: Iterable[str]) -> Iterator[tuple[str, float, str]]:
    """``(pid, seconds of day, call)`` per whole call: strace's ``<unfinished ...>`` and
    ``<... resumed>`` halves joined (at the start time); ``-tt`` stamps optional (0.0)."""
    pending: dict[str, tuple[float, str]] = {}
    for raw in lines:
        m = _HEAD.match(raw.rstrip("\n"))
        if not m:
            continue
        pid, rest = m.group(1), m.group(5)
        t = int(m.group(2)) * 3600 + int(m.group(3)) * 60 + float(m.group(4)) if m.group(2) else 0.0
        if rest.endswith("<unfinished ...>"):
            pending[pid] = (t, rest[: -len("<unfinished ...>")].rstrip())
        elif rest.startswith("<... "):
            head = pending.pop(pid, None)
            if head is not None:
                yield pid, head[0], head[1] + rest.split("resumed>", 1)[1]
        else:
            yield pid, t, rest


def phase_of_exec(argv: str) -> str | None:
    """The phase an exec'd command line starts, or "ignore" for priming and warm-up."""
    if "prime-venv" in argv or "/warm-up/" in argv:
        return "ignore"
    if '"-m", "virtualenv"' in argv:
        return "venv"
    if '"-m", "pip", "install"' in argv:
        return "download"
    if '"-m", "compileall"' in argv:
        return "compile"
    if '/venv/bin/python", "-c"' in argv:
        return "import"
    return None


def _path_of(name: str, args: str) -> str | None:
    """The path a call names: ``dirfd<dir>, "rel"``, ``"abs"`` or ``fd</path>``."""
    fd = _FD_PATH.match(args)
    strings = _STR.findall(args)
    if name in (
        "read",
        "write",
        "pread64",
        "pwrite64",
        "fsync",
        "fdatasync",
        "fchmod",
        "getdents64",
    ):
        return fd.group(2) if fd else None
    if not strings:
        return fd.group(2) if fd else None
    rel = strings[0]
    if rel.startswith("/") or not fd:
        return rel
    if rel == "":
        return fd.group(2)
    return fd.group(2).rstrip("/") + "/" + rel


def _classify(name: str, args: str, ret: int) -> str | None:
    """Which probe operation a call costs like (None: no round trip of its own)."""
    if name in ("open", "openat", "creat"):
        if name == "creat" or "O_CREAT" in args:
            return "create"
        if ret < 0:
            return "stat_miss"
        return "stat" if "O_DIRECTORY" in args else "open_read"
    if name in _STATS:
        if name == "newfstatat" and '""' in args and "AT_EMPTY_PATH" in args:
            return None  # fstat of an open file: attributes already held
        return "stat_miss" if ret < 0 else "stat"
    op = _SIMPLE.get(name)
    if op == "mkdir" and ret < 0:
        return "stat"  # EEXIST: a lookup that found it
    if op == "unlink" and ret < 0:
        return "stat_miss"
    return op


class _Tracer:
    """Walk one strace log, attributing calls to (trial, phase, role)."""

    def __init__(self) -> None:
        self.phase: dict[str, str | None] = {}
        self.trial: dict[str, str | None] = {}  # pid -> the trial whose command it runs
        self.pip_stage: dict[str, str] = {}
        self.counts: dict[tuple[str, str, str], Counts] = defaultdict(Counts)
        self.seen: set[tuple[str, str, str, str]] = set()
        self.stats: dict[tuple[str, str, str], list[tuple[float, str]]] = defaultdict(list)
        self.span: dict[tuple[str, str], tuple[float, float]] = {}

    def feed(self, pid: str, t: float, call: str) -> None:
        m = _CALL.match(call)
        if not m:
            return
        name, args, ret_text = m.group(1), m.group(2), m.group(3)
        ret = int(ret_text) if ret_text != "?" else -1
        if name in ("clone", "clone3", "fork", "vfork"):
            if ret > 0:
                self.phase[str(ret)] = self.phase.get(pid)
                self.trial[str(ret)] = self.trial.get(pid)
            return
        if name == "execve":
            started = phase_of_exec(args) if ret == 0 else None
            if started:
                self.phase[pid] = started
                where = _SCRATCH.search(args)
                self.trial[pid] = where.group(1) if where else None
                if started == "download" and where:
                    self.pip_stage[where.group(1)] = "download"
            return
        self._count(pid, t, name, args, ret)

    def _count(self, pid: str, t: float, name: str, args: str, ret: int) -> None:
        phase = self.phase.get(pid)
        if phase in (None, "ignore"):
            return
        path = _path_of(name, args)
        where = _SCRATCH.search(path or "")
        if not where or where.group(2) == "prime-venv":
            return
        tid, role = where.group(1), _ROLE_DIRS[where.group(2)]
        if tid.startswith(WARM_PREFIX):  # a primed cache shared by the placement's trials
            tid = self.trial.get(pid) or ""
            if not tid:
                return
        if phase in ("download", "install"):
            if role == "venv" and "O_CREAT" in args and _INSTALLED.search(path or ""):
                self.pip_stage[tid] = "install"
            phase = self.pip_stage.get(tid, "download")
        first, last = self.span.get((tid, phase), (t, t))
        self.span[(tid, phase)] = (min(first, t), max(last, t))
        c = self.counts[(tid, phase, role)]
        if name in ("write", "pwrite64"):
            c.bytes_written += max(ret, 0)
            return
        if name in ("read", "pread64"):
            c.bytes_read += max(ret, 0)
            return
        op = _classify(name, args, ret)
        if op is None or (name == "getdents64" and ret <= 0):
            return  # the end of a listing is answered with its last part
        if op == "stat":
            # a listing's first part is a round trip of its own, beside the folder's open
            # (FUSE: opendir, then readdir; the lab served both for each folder an import listed)
            seen_as = (path or "") + ("\0listing" if name == "getdents64" else "")
            self.stats[(tid, phase, role)].append((t, seen_as))
            key = (tid, phase, role, seen_as)
            if key in self.seen:
                return
            self.seen.add(key)
        c.ops[op] += 1


def count_trace(lines: Iterable[str]) -> dict[tuple[str, str, str], Counts]:
    """``{(trial_id, phase, role): Counts}`` of an ``strace -f -y`` log of an iobench run."""
    tracer = _Tracer()
    for pid, t, call in merged_lines(lines):
        tracer.feed(pid, t, call)
    for key, events in tracer.stats.items():
        first, last = tracer.span[key[:2]]
        tracer.counts[key].stat_curve = stat_curve(events, first, last)
    return dict(tracer.counts)


def stat_curve(
    events: list[tuple[float, str]], first: float, last: float
) -> list[tuple[float, int]]:
    """How many of a phase's stats reach the server, by phase length over the client's
    attribute-cache time: a path's stat is answered from the cache until that time has
    passed since the last one that went out. The traced phase is assumed to stretch
    uniformly (times taken relative to it), so 0 gives one per path, a long phase every one."""
    span = max(last - first, 1e-9)
    out = []
    for ratio in CURVE_POINTS:
        window = 1.0 / ratio  # the cache time as a fraction of the phase
        sent: dict[str, float] = {}
        n = 0
        for t, path in events:
            rel = (t - first) / span
            if path not in sent or rel - sent[path] >= window:
                sent[path] = rel
                n += 1
        out.append((float(ratio), n))
    return out


#: what ``strace`` must record for :func:`count_trace`
STRACE_ARGS = (
    "-f",
    "-tt",
    "-y",
    "-qq",
    "-s",
    "400",
    "-e",
    "trace=execve,clone,clone3,fork,vfork,openat,open,creat,stat,lstat,newfstatat,statx,access,"
    "faccessat,faccessat2,readlink,readlinkat,rename,renameat,renameat2,unlink,unlinkat,rmdir,"
    "mkdir,mkdirat,fsync,fdatasync,chmod,fchmod,fchmodat,utimensat,write,pwrite64,read,pread64,"
    "getdents64,symlink,symlinkat,link,linkat",
)


# --------------------------------------------------------------------------- the data file


def _median(values: list[float]) -> float:
    import statistics

    return statistics.median(values) if values else 0.0


def fast_times(trials_csv: str) -> dict[str, dict[str, float]]:
    """Median phase seconds per cache state of a run whose roles were all on tmpfs (its
    trials.csv read through the run directory's own reader)."""
    rows = [r for r in RunDir(Path(trials_csv).parent).trials(latest_only=True) if r.status == "ok"]
    out: dict[str, dict[str, float]] = {}
    for state in ("cold", "warm"):
        mine = [r for r in rows if (getattr(r, "cache_state", "") == "warm") == (state == "warm")]
        if mine:
            out[state] = {
                p: round(_median([float(getattr(r, f"{p}_s") or 0.0) for r in mine]), 3)
                for p in PHASES
            }
    return out


def _table(name: str, values: Mapping[str, float | int]) -> list[str]:
    return [f"[{name}]", *(f"{k} = {v}" for k, v in values.items()), ""]


def opmix_toml(
    installer: str,
    counts: dict[tuple[str, str, str], Counts],
    trial_of: dict[str, str],
    meta: dict[str, Any],
    fast: dict[str, dict[str, dict[str, float]]],
    fast_costs: dict[str, float],
    fast_cpu_s: dict[str, float] | None = None,
) -> str:
    """The ``[installer]`` part of ``iobench/predict/opmix.toml``; ``trial_of`` maps cache
    state ("cold"/"warm") to the traced trial id that stands for it, ``fast`` profile name
    to cache state to phase seconds, ``fast_cpu_s`` profile name to the CPU calibration
    measured around its fast run."""
    lines = [f"[{installer}]", *(f"{k} = {v!r}".replace("'", '"') for k, v in meta.items()), ""]
    for profile, states in fast.items():
        for state, values in states.items():
            lines += _table(f"{installer}.fast.{profile}.{state}", values)
    lines += _table(f"{installer}.fast_costs", {k: round(v, 5) for k, v in fast_costs.items()})
    if fast_cpu_s:  # quoted keys: profile names have dashes
        lines += _table(
            f"{installer}.fast_cpu_s", {f'"{k}"': round(v, 4) for k, v in fast_cpu_s.items()}
        )
    for state, tid in trial_of.items():
        for (t, phase, role), c in sorted(counts.items()):
            if t == tid:
                lines += counts_table(f"{installer}.ops.{state}.{phase}.{role}", c)
    return "\n".join(lines)


def counts_table(name: str, c: Counts) -> list[str]:
    """One (phase, role)'s table: its operations, bytes and stat curve."""
    values = {op: n for op, n in c.ops.items() if n}
    values |= {"bytes_written": c.bytes_written, "bytes_read": c.bytes_read}
    table = _table(name, values)
    if c.stat_curve:
        curve = ", ".join(f"[{r:g}, {n}]" for r, n in c.stat_curve)
        table.insert(-1, f"stat_curve = [{curve}]")
    return table
