"""What a wheel costs once installed: pip's unpacking, byte compilation, and the first import.

Why: a synthetic stand-in is only as good as the costs it reproduces, and two of them are not
visible in the wheel file: byte-compiling the ``.py`` members (CPU-bound, most of an install
on fast storage) and the files the first import opens and reads (all that a restart pays
when the venv persists on a volume). Both are measured by installing for real, the way a
trial does (``iobench.trial.installers``): a fresh virtualenv, ``pip install --no-compile
--no-deps --no-index`` isolated from the machine's pip configuration, then ``compileall -j1``
over what was installed, then the ready check in a child that records every file it opens
(``sys.addaudithook`` on ``open``) and, after the import, every file it has mapped with its
resident bytes (``/proc/self/smaps``: what the loader faulted in of each shared library).

``check`` installs a real wheel set and its synthetic twin alternately (ABAB) and reports
both side by side with their ratios; times are medians over the repeats, with their spread.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from iobench.errors import IOBenchError, UsageError
from iobench.wheels.codegen import code_fraction_for, compile_rate, reference_rates
from iobench.wheels.profile import IMPORT_KINDS, CompileCost, DistProfile, ImportFanout, Profile
from iobench.wheels.synth import group_sizes, synthesize

_PROBE = r"""
import json, os, sys
site = os.path.realpath(sys.argv[1])
seen = []
def _hook(event, args):
    if event == "open" and not isinstance(args[0], int):
        seen.append(os.path.abspath(os.fsdecode(args[0])))
sys.addaudithook(_hook)
exec(compile(sys.argv[2], "<ready>", "exec"), {"__name__": "__main__"})
mapped, resident, cur = {}, {}, None
with open("/proc/self/smaps") as fh:
    for line in fh:
        parts = line.split()
        if parts and not parts[0].endswith(":"):
            cur = os.path.realpath(parts[5]) if len(parts) >= 6 and parts[5].startswith("/") else None
            if cur and cur.startswith(site + os.sep):
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                mapped[cur] = mapped.get(cur, 0) + hi - lo
        elif parts and parts[0] == "Rss:" and cur in mapped:
            resident[cur] = resident.get(cur, 0) + int(parts[1]) * 1024
files = {}
for p in seen:
    rp = os.path.realpath(p)
    if rp.startswith(site + os.sep) and rp not in mapped and os.path.isfile(rp):
        files[rp] = os.path.getsize(rp)
out = [[p, "so", b] for p, b in mapped.items()] + [[p, "resident", b] for p, b in resident.items()]
for p, b in files.items():
    kind = "pyc" if p.endswith(".pyc") else "py" if p.endswith(".py") else "data"
    out.append([p, kind, b])
print("IOBENCH-PROBE " + json.dumps(out))
"""


_VENV_ARGS = ("--quiet", "--no-periodic-update", "--no-setuptools")
_PIP_ARGS = ("--quiet", "--no-compile", "--no-deps", "--no-index", "--no-cache-dir")


class MeasureError(IOBenchError):
    """A real install, compile or import that the measurement needed did not work."""

    exit_code = 1


@dataclass(frozen=True)
class Timed:
    """One child process: wall seconds and the CPU seconds of it and its children."""

    wall_s: float
    cpu_s: float


@dataclass
class Install:
    """One measured install of a wheel set into a fresh venv on the scratch folder."""

    files: int = 0  # files the distributions' RECORDs list
    bytes: int = 0
    install: Timed = Timed(0.0, 0.0)
    compile: Timed = Timed(0.0, 0.0)
    sources: dict[str, list[Path]] = field(default_factory=dict)  # top-level name -> its .py files
    pycs: dict[str, list[int]] = field(
        default_factory=dict
    )  # top-level name -> [.pyc files, bytes]
    # per top-level name: {kind: [files, bytes]} of what the ready check opened or mapped
    imports: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    top_levels: dict[str, str] = field(default_factory=dict)  # top-level name -> distribution

    def import_totals(self, names: set[str] | None = None) -> tuple[int, int]:
        """(files, bytes) the ready check touched, of the given top-level names (default all)."""
        files = size = 0
        for top, kinds in self.imports.items():
            if names is None or top in names:
                for kind, (f, b) in kinds.items():
                    if kind in IMPORT_KINDS:  # not "resident": those pages are of the mapped files
                        files += f
                        size += b
        return files, size


def isolated_env() -> dict[str, str]:
    """The environment of every step: no PIP_* settings, no pip configuration file, bytecode on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "PYTHON"))}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _run(
    argv: list[str], env: dict[str, str], what: str, ok: tuple[int, ...] = (0,)
) -> tuple[Timed, str]:
    """Run ``argv`` to the end: its wall time, its tree's CPU time (RUSAGE_CHILDREN delta), its output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    text = proc.stdout.decode(errors="replace")
    if proc.returncode not in ok:
        tail = " | ".join(text.strip().splitlines()[-3:])
        raise MeasureError(f"{what} failed (exit {proc.returncode}): {tail}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timed(wall, cpu), text


def scratch_root() -> Path:
    """Where measurement venvs go: tmpfs (/dev/shm) when there is one, so storage costs nothing."""
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())


@contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    """A private folder on the scratch root, removed afterwards (only what this made)."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=scratch_root()))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _site(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3*/site-packages"))
    if not found:
        raise MeasureError(f"no site-packages under {venv}")
    return found[0]


def _record_files(site: Path, skip: set[str]) -> tuple[dict[str, str], int, int]:
    """Top-level name -> distribution, and the files and bytes the RECORDs of new dists list."""
    tops: dict[str, str] = {}
    files = size = 0
    for rec in sorted(site.glob("*.dist-info/RECORD")):
        if rec.parent.name in skip:
            continue
        dist = rec.parent.name.split("-")[0]
        for line in rec.read_text(errors="replace").splitlines():
            path = line.split(",", 1)[0]
            if not path or path.startswith(".."):
                continue
            files += 1
            full = site / path
            size += full.stat().st_size if full.is_file() else 0
            top = path.split("/", 1)[0]
            if not top.endswith((".dist-info", ".data")):
                tops.setdefault(_top(top), dist)
    return tops, files, size


def _top(name: str) -> str:
    """A top-level entry's import name: a package folder, or a module or extension file's stem."""
    return name.split(".", 1)[0]


def install_and_probe(
    wheels: list[Path], ready: str, root: Path, deps: Sequence[Path] = ()
) -> Install:
    """Install ``wheels`` into a fresh venv under ``root`` and measure install, compile, import."""
    env = isolated_env()
    venv = root / "venv"
    # the venv as a trial makes it (iobench.run.runner), pip as a trial runs it (iobench.trial.installers)
    _run([sys.executable, "-m", "virtualenv", *_VENV_ARGS, str(venv)], env, "virtualenv")
    py = str(venv / "bin" / "python")
    site = _site(venv)
    seeded = {p.name for p in site.iterdir()}
    pip = [py, "-m", "pip", "install", *_PIP_ARGS]
    m = Install()
    m.install, _ = _run(pip + [str(w) for w in wheels], env, "pip install")
    added = sorted(
        site / n for n in {p.name for p in site.iterdir()} - seeded if not n.endswith(".dist-info")
    )
    m.top_levels, m.files, m.bytes = _record_files(
        site, {n for n in seeded if n.endswith(".dist-info")}
    )
    for d in added:
        # several entries can share a name (numpy and numpy.libs): add up, never replace
        m.sources.setdefault(_top(d.name), []).extend(
            p for p in ([d] if d.is_file() else sorted(d.rglob("*.py"))) if p.suffix == ".py"
        )
    # exit 1: some file did not compile (torch ships modules for newer Pythons); pip ignores that too
    m.compile, _ = _run(
        [py, "-m", "compileall", "-q", "-j", "1", *map(str, added)], env, "compileall", (0, 1)
    )
    for d in added:
        pycs = [p.stat().st_size for p in d.rglob("*.pyc")] if d.is_dir() else []
        counts = m.pycs.setdefault(_top(d.name), [0, 0])
        counts[0] += len(pycs)
        counts[1] += sum(pycs)
    if deps:
        _install_untimed(py, site, deps, env)
    _, out = _run([py, "-c", _PROBE, str(site), ready], env, "the ready check")
    m.imports = _fanout_by_top(out, site)
    return m


def _install_untimed(py: str, site: Path, deps: Sequence[Path], env: dict[str, str]) -> None:
    """Install and compile what the ready check needs besides the measured wheels."""
    before = {p.name for p in site.iterdir()}
    _run(
        [py, "-m", "pip", "install", *_PIP_ARGS, *map(str, deps)], env, "pip install (dependencies)"
    )
    new = [str(site / n) for n in {p.name for p in site.iterdir()} - before]
    _run([py, "-m", "compileall", "-q", *new], env, "compileall (dependencies)", (0, 1))


def _fanout_by_top(output: str, site: Path) -> dict[str, dict[str, list[int]]]:
    line = next((ln for ln in output.splitlines() if ln.startswith("IOBENCH-PROBE ")), None)
    if line is None:
        raise MeasureError("the ready check printed no probe result")
    real_site = os.path.realpath(site)
    by_top: dict[str, dict[str, list[int]]] = {}
    for path, kind, size in json.loads(line[len("IOBENCH-PROBE ") :]):
        top = _top(os.path.relpath(path, real_site).split(os.sep, 1)[0])
        counts = by_top.setdefault(top, {}).setdefault(kind, [0, 0])
        counts[0] += 1
        counts[1] += size
    return by_top


def default_ready(wheels: list[Path]) -> str:
    """``import`` of every top-level package the wheels declare (top_level.txt, else RECORD)."""
    names: list[str] = []
    for w in wheels:
        with zipfile.ZipFile(w) as zf:
            tl = next((n for n in zf.namelist() if n.endswith(".dist-info/top_level.txt")), None)
            if tl:
                found = [t.strip() for t in zf.read(tl).decode().splitlines() if t.strip()]
            else:
                found = sorted(
                    {
                        n.split("/", 1)[0]
                        for n in zf.namelist()
                        if n.endswith("/__init__.py") and n.count("/") == 1
                    }
                )
            names += [n for n in found if n.isidentifier() and not n.startswith("_")]
    if not names:
        raise UsageError(
            "the wheels declare no importable package: give the ready check with --ready"
        )
    return "import " + ", ".join(dict.fromkeys(names))


__all__ = [
    "Install",
    "MeasureError",
    "Timed",
    "default_ready",
    "install_and_probe",
    "isolated_env",
    "scratch_dir",
]


# --------------------------------------------------------------------------- profiles


def _norm(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")


def _real_rate(sources: list[Path], budget: int = 64_000_000) -> float:
    """In-process compile rate (CPU s/MB) of a sample of ``sources`` (up to ``budget`` bytes)."""
    import random

    pool = list(sources)
    random.Random(0).shuffle(pool)
    texts: list[bytes] = []
    total = 0
    for p in pool:
        if total >= budget:
            break
        text = p.read_bytes()
        try:
            compile(text, str(p), "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            continue  # modules for a newer Python: compileall skips them too
        texts.append(text)
        total += len(text)
    # best of 3 where the sample is small (a fraction of a second to compile, where one
    # timing has been off by 2x on a busy machine); one timing of a large sample is steady
    return compile_rate(texts, repeats=3 if total < 8_000_000 else 1)


def _ref_sizes(dist: DistProfile, budget: int = 4_000_000) -> list[int]:
    """About ``budget`` bytes' worth of the module sizes the generator will draw for ``dist``.

    The twin's sizes, not the real ones: small modules are mostly padding, so the code share
    that gives a rate depends on the size mix the generator actually writes.
    """
    import random

    group = next((g for g in dist.files if g.ext == "py"), None)
    sizes = group_sizes(group, random.Random(0)) if group else []
    random.Random(1).shuffle(sizes)
    out: list[int] = []
    for n in sizes:
        if sum(out) >= budget:
            break
        out.append(n)
    return out or [12_500] * 40


def with_costs(
    profile: Profile, wheels: list[Path], ready: str, deps: Sequence[Path] = ()
) -> Profile:
    """``profile`` (measured from ``wheels``' shapes) with compile costs and import fan-out.

    Installs the wheels once into a scratch venv (see ``install_and_probe``).
    """
    with scratch_dir(".iobench-profile-") as root:
        m = install_and_probe(wheels, ready, root, deps)
        # the sources are read (compiled in-process) before the scratch venv goes
        return replace(
            profile, dists=tuple(_dist_costs(m, d, w) for d, w in zip(profile.dists, wheels))
        )


def _dist_costs(m: Install, dist: DistProfile, wheel: Path) -> DistProfile:
    """One distribution of ``m`` with its compile cost and its import fan-out."""
    py_mb = sum(p.stat().st_size for ps in m.sources.values() for p in ps) / 1e6
    # compileall ran once over the whole install: every distribution gets its rate
    s_per_mb = round(m.compile.cpu_s / py_mb, 4) if py_mb else 0.0
    tops = [t for t, d in m.top_levels.items() if _norm(d) == _norm(wheel.name.split("-")[0])]
    sources = [p for t in tops for p in m.sources.get(t, [])]
    cost = None
    if sources:
        rate = _real_rate(sources)
        frac = code_fraction_for(rate, lambda: reference_rates(_ref_sizes(dist)))
        pyc = [sum(m.pycs.get(t, [0, 0])[i] for t in tops) for i in (0, 1)]
        cost = CompileCost(
            s_per_mb=s_per_mb, code_fraction=frac, pyc_files=pyc[0], pyc_bytes=pyc[1]
        )
    fan: dict[str, int] = {}
    for t in tops:
        for kind, (f, b) in m.imports.get(t, {}).items():
            if kind == "resident":
                fan["so_resident_bytes"] = fan.get("so_resident_bytes", 0) + b
                continue
            fan[f"{kind}_files"] = fan.get(f"{kind}_files", 0) + f
            fan[f"{kind}_bytes"] = fan.get(f"{kind}_bytes", 0) + b
    return replace(
        dist, compile=cost, imports=ImportFanout(**fan), import_modules=fan.get("pyc_files", 0)
    )


# --------------------------------------------------------------------------- check


_Metric = Callable[["Install", "set[str] | None"], float]


@dataclass
class Fidelity:
    """A real wheel set and its synthetic twin, each installed ``repeats`` times (ABAB)."""

    real: list[Install]
    synth: list[Install]
    real_tops: set[str]  # the real wheels' own top-level names (not their dependencies')

    def rows(self) -> list[tuple[str, list[float], list[float]]]:
        """(metric, real values, synthetic values): one value per repeat for times, one for counts."""

        def both(fn: _Metric) -> tuple[list[float], list[float]]:
            return [fn(m, self.real_tops) for m in self.real], [fn(m, None) for m in self.synth]

        def fan(kind: str, i: int) -> _Metric:
            return lambda m, tops: sum(
                m.imports.get(t, {}).get(kind, [0, 0])[i] for t in (tops or m.imports)
            )

        spec = [
            ("files", lambda m, _: m.files),
            ("bytes", lambda m, _: m.bytes),
            ("install s", lambda m, _: m.install.wall_s),
            ("install cpu s", lambda m, _: m.install.cpu_s),
            ("compile s", lambda m, _: m.compile.wall_s),
            ("install+compile s", lambda m, _: m.install.wall_s + m.compile.wall_s),
            ("compile cpu s", lambda m, _: m.compile.cpu_s),
            ("pyc files", lambda m, _: sum(f for f, _ in m.pycs.values())),
            ("pyc bytes", lambda m, _: sum(b for _, b in m.pycs.values())),
            ("import files", lambda m, tops: m.import_totals(tops)[0]),
            ("import bytes", lambda m, tops: m.import_totals(tops)[1]),
        ]
        spec += [
            (f"import {k} {u}", fan(k, i))
            for k in IMPORT_KINDS
            for i, u in ((0, "files"), (1, "bytes"))
        ]
        # pages of the mapped files resident after the import: the kernel's fault-around makes
        # this vary from run to run (tens of percent for torch), so it is shown, not matched
        spec.append(("import so resident bytes", fan("resident", 1)))
        return [(name, *both(fn)) for name, fn in spec]


def check(
    profile: Profile, wheels: list[Path], ready: str, deps: Sequence[Path] = (), repeats: int = 3
) -> Fidelity:
    """Install ``wheels`` and ``profile``'s synthetic twin alternately, ``repeats`` times each."""

    if repeats < 1:
        raise UsageError(f"--repeats must be at least 1 (got {repeats})")
    synth_ready = (
        "import "
        + ", ".join(d.import_name for d in profile.dists)
        + "; "
        + "; ".join(f"{d.import_name}.check()" for d in profile.dists)
    )
    real: list[Install] = []
    synth: list[Install] = []
    with scratch_dir(".iobench-check-") as root:
        twin = synthesize(profile, root / "wheelhouse")
        for _ in range(repeats):
            with scratch_dir(".iobench-check-real-") as r:
                real.append(install_and_probe(wheels, ready, r, deps))
            with scratch_dir(".iobench-check-synth-") as r:
                synth.append(install_and_probe(twin, synth_ready, r))
    names = {_norm(w.name.split("-")[0]) for w in wheels}
    tops = {t for t, d in real[0].top_levels.items() if _norm(d) in names}
    return Fidelity(real, synth, tops)


def _fmt(name: str, v: float) -> str:
    if name.endswith(" s"):
        return f"{v:.2f}"
    if "bytes" in name:
        return f"{v / 1e6:.1f} MB"
    return f"{v:,.0f}"


def fidelity_lines(fid: Fidelity) -> list[str]:
    """The side-by-side table (returned, not printed): medians, the spread of times, ratios."""
    lines = [f"{'':<20} {'real':>22} {'synthetic':>22} {'ratio':>7}"]
    for name, rv, sv in fid.rows():
        r, s = statistics.median(rv), statistics.median(sv)
        cells = []
        for vals, med in ((rv, r), (sv, s)):
            text = _fmt(name, med)
            if name.endswith(" s") and len(vals) > 1:
                text += f" ({_fmt(name, min(vals))}-{_fmt(name, max(vals))})"
            cells.append(text)
        ratio = f"{s / r:.2f}" if r else ("=" if s == r else "-")
        lines.append(f"{name:<20} {cells[0]:>22} {cells[1]:>22} {ratio:>7}")
    n = len(fid.real)
    lines.append(
        f"times: median of {n} installs each, alternating real/synthetic; (min-max) in brackets; ratio = synthetic / real"
    )
    return lines
