"""Wheel profiles: the shape of real ML packages (files of each kind, their sizes, how well
they compress, what an import touches) as validated records, loaded from TOML.

Why: the cost of installing into a network volume is files × per-operation latency, so a
stand-in for torch must have torch's *shape* (how many files of which kind, their size
distribution, how well they compress, how many directories, how much an import touches),
not its code. A profile (TOML) records that shape; ``synthesize`` turns it into real,
pip-installable wheels (METADATA, WHEEL, RECORD with sha256, an importable package with a
``check()`` the ready check calls), deterministic for a given seed.

Method: per file group, sizes are drawn from a log-normal distribution around the measured
median (sigma from the measured quartiles) and rescaled so the group's total matches the
measured total. ``.py`` members are real code (iobench.wheels.codegen) with the profile's share of
code, so they byte-compile at the measured rate; other members are random bytes over a
small alphabet (plus filler) in the proportion that gives the group's deflate ratio, so
they also inflate at a real wheel's cost. The package's ``__init__`` follows the profile's
first-import fan-out: it imports, reads and maps (never runs) what the real import did.
Profiles also record those costs (compile, imports): iobench.wheels.cost measures them.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

from iobench import __version__
from iobench.errors import UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]  # not in every lint venv

PROFILE_DIR = Path(__file__).parent / "profiles"
# a profile's name is part of its cache folder's name; versions and extensions become file names
_SAFE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.!_]*$")
_EXT_RE = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
_MISSING = object()
# kinds of file, by how an installer and an import treat them
_KIND_BY_EXT = {
    "py": "python",
    "pyi": "python",
    "so": "binary",
    "pyd": "binary",
    "dll": "binary",
    "dylib": "binary",
    "a": "binary",
    "h": "header",
    "hpp": "header",
    "cuh": "header",
    "hxx": "header",
    "inc": "header",
}


@dataclass(frozen=True)
class FileGroup:
    """Files of one extension inside one distribution."""

    ext: str
    count: int
    median_bytes: int
    total_bytes: int
    sigma: float = 1.0
    compress_ratio: float = 0.3

    @property
    def kind(self) -> str:
        return _KIND_BY_EXT.get(self.ext, "data")


# what the ready check opens, by kind (the first import's fan-out)
IMPORT_KINDS = ("pyc", "py", "so", "data")


@dataclass(frozen=True)
class CompileCost:
    """What byte-compiling a distribution's ``.py`` files costs (measured from the real wheel).

    ``s_per_mb``: CPU seconds of ``compileall -j1`` per MB of source on the measuring machine
    (a record, not used to generate); ``code_fraction``: the share of code in generated
    source that compiles at the same rate as the real source (see iobench.wheels.codegen);
    ``pyc_files``/``pyc_bytes``: what compileall wrote.
    """

    s_per_mb: float
    code_fraction: float
    pyc_files: int = 0
    pyc_bytes: int = 0


@dataclass(frozen=True)
class ImportFanout:
    """Files of a distribution the ready check opened or mapped, and their bytes, by kind.

    Bytes of a mapped file (a ``.so``) are the extent the loader mapped, and
    ``so_resident_bytes`` the part of it resident after the import (what was faulted in;
    the kernel's fault-around makes it vary between runs); of an opened file, its size
    (importers and readers read them whole).
    """

    pyc_files: int = 0
    pyc_bytes: int = 0
    py_files: int = 0
    py_bytes: int = 0
    so_files: int = 0
    so_bytes: int = 0
    data_files: int = 0
    data_bytes: int = 0
    so_resident_bytes: int = 0

    @property
    def files(self) -> int:
        return self.pyc_files + self.py_files + self.so_files + self.data_files

    @property
    def bytes(self) -> int:
        return self.pyc_bytes + self.py_bytes + self.so_bytes + self.data_bytes


@dataclass(frozen=True)
class DistProfile:
    """One distribution (wheel) of a profile."""

    name: str
    version: str
    dirs: int
    import_modules: int
    files: tuple[FileGroup, ...]
    requires: tuple[str, ...] = ()
    compile: CompileCost | None = None
    imports: ImportFanout | None = None

    @property
    def file_count(self) -> int:
        return sum(g.count for g in self.files)

    @property
    def total_bytes(self) -> int:
        return sum(g.total_bytes for g in self.files)

    @property
    def import_name(self) -> str:
        return self.name.replace("-", "_").lower()


@dataclass(frozen=True)
class Profile:
    """A named set of distributions; ``packages`` are the ones a scenario asks for."""

    name: str
    source: str
    seed: int
    dists: tuple[DistProfile, ...]
    description: str = ""

    @property
    def file_count(self) -> int:
        return sum(d.file_count for d in self.dists)

    @property
    def total_bytes(self) -> int:
        return sum(d.total_bytes for d in self.dists)

    def fingerprint(self) -> str:
        """Stable hash of everything that shapes the generated bytes (the cache key)."""
        blob = json.dumps([asdict(self), __version__, _GENERATOR_VERSION], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


# 2: .py members are real code (iobench.wheels.codegen), the import follows the profile's fan-out
# 3: other members are random bytes over a small alphabet (they inflate as real ones do)
_GENERATOR_VERSION = 3


# --------------------------------------------------------------------------- loading


def _bad(where: str, msg: str) -> UsageError:
    return UsageError(f"{where}: {msg}")


def _table(value: object, where: str) -> dict:
    if not isinstance(value, dict):
        raise _bad(where, f"expected a table, got {_show(value)}")
    return value


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _get(table: dict, key: str, where: str, kind: str, default: object = _MISSING) -> object:
    """``table[key]`` checked to be of ``kind`` (str, int, number, list); ``where`` names the table."""
    w = f"{where}.{key}"
    if key not in table:
        if default is _MISSING:
            raise _bad(w, "missing")
        return default
    value = table[key]
    if kind == "str":
        ok = isinstance(value, str)
        want = "a string"
    elif kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
        want = "an integer"
    elif kind == "number":
        ok = (
            isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        )
        want = "a finite number"
    else:  # list
        ok = isinstance(value, list)
        want = "a list"
    if not ok:
        raise _bad(w, f"expected {want}, got {_show(value)}")
    return value


def _str(table: dict, key: str, where: str, default: str | object = _MISSING) -> str:
    """``table[key]``, checked to be a string."""
    return cast(str, _get(table, key, where, "str", default))


def _int(table: dict, key: str, where: str, default: int | object = _MISSING) -> int:
    """``table[key]``, checked to be an integer (not a bool)."""
    return cast(int, _get(table, key, where, "int", default))


def _num(table: dict, key: str, where: str, default: float | object = _MISSING) -> float:
    """``table[key]``, checked to be a finite int or float."""
    return cast(float, _get(table, key, where, "number", default))


def _list(table: dict, key: str, where: str, default: list | object = _MISSING) -> list[Any]:
    """``table[key]``, checked to be a list."""
    return cast("list[Any]", _get(table, key, where, "list", default))


#: the largest values a profile may hold: far above any real package (torch: ~20,000 files,
#: ~5 GB) and low enough that synthesizing or predicting one cannot exhaust memory
MAX_FILES = 5_000_000
MAX_BYTES = 10**12
MAX_DIRS = 1_000_000
MAX_MODULES = 1_000_000


def _at_most(value: int, cap: int, where: str) -> int:
    if value > cap:
        raise _bad(where, f"{value:,} is more than iobench handles ({cap:,})")
    return value


def profile_from_dict(data: dict, where: str) -> Profile:
    """Validate a profile table (from TOML or a scenario) into a frozen Profile.

    Every error is one UsageError line naming ``where`` (the file) and the key, e.g.
    ``p.toml: profile.dist[0].files[1].total_bytes: expected an integer, got 'big'``.
    """
    _table(data, where)
    key = f"{where}: profile"  # the bare table (a measured profile) is named the same way
    prof = _table(data["profile"], key) if "profile" in data else data
    name = str(_str(prof, "name", key))
    if not _SAFE_NAME_RE.match(name) or len(name) > 64:
        raise _bad(
            f"{key}.name",
            f"{name!r} must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
        )
    raw_dists = _list(prof, "dist", key)
    if not raw_dists:
        raise _bad(f"{key}.dist", "is empty")
    dists = []
    for i, d in enumerate(raw_dists):
        w = f"{key}.dist[{i}]"
        _table(d, w)
        dname = str(_str(d, "name", w))
        if not re.match(r"^[A-Za-z][A-Za-z0-9_-]*$", dname):
            raise _bad(f"{w}.name", f"'{dname}' is not a valid distribution name")
        version = str(_str(d, "version", w, "1.0.0"))
        if not _VERSION_RE.match(version):
            raise _bad(f"{w}.version", f"{version!r} is not a version such as 1.0.0")
        dirs = _at_most(int(_int(d, "dirs", w, 1)), MAX_DIRS, f"{w}.dirs")
        import_modules = _at_most(
            int(_int(d, "import_modules", w, 10)), MAX_MODULES, f"{w}.import_modules"
        )
        if import_modules < 0:
            raise _bad(f"{w}.import_modules", "must be >= 0")
        requires = _list(d, "requires", w, [])
        if not all(isinstance(r, str) for r in requires):
            raise _bad(f"{w}.requires", "expected a list of requirement strings")
        groups = [_file_group(g, f"{w}.files[{j}]") for j, g in enumerate(_list(d, "files", w))]
        dists.append(
            DistProfile(
                name=dname,
                version=version,
                dirs=max(1, dirs),
                import_modules=import_modules,
                files=tuple(groups),
                requires=tuple(requires),
                compile=_compile_cost(d, w),
                imports=_fanout(d, w),
            )
        )
    profile = Profile(
        name=name,
        source=str(_str(prof, "source", key, "")),
        seed=int(_int(prof, "seed", key, 0)),
        dists=tuple(dists),
        description=str(_str(prof, "description", key, "")),
    )
    _at_most(profile.file_count, MAX_FILES, f"{key}: files in all")
    _at_most(profile.total_bytes, MAX_BYTES, f"{key}: bytes in all")
    return profile


def _file_group(g: object, gw: str) -> FileGroup:
    """One ``files`` entry, checked."""
    _table(g, gw)
    assert isinstance(g, dict)
    ext = str(_str(g, "ext", gw)).lstrip(".")
    if not _EXT_RE.match(ext):
        raise _bad(f"{gw}.ext", f"{ext!r} must be 1-32 letters, digits, '_' or '-'")
    count = _at_most(int(_int(g, "count", gw)), MAX_FILES, f"{gw}.count")
    med = _at_most(int(_num(g, "median_bytes", gw)), MAX_BYTES, f"{gw}.median_bytes")
    total = _at_most(int(_num(g, "total_bytes", gw, med * count)), MAX_BYTES, f"{gw}.total_bytes")
    if count < 0 or med < 0 or total < 0:
        raise _bad(gw, "count and sizes must be >= 0")
    sigma = float(_num(g, "sigma", gw, 1.0))
    if not 0.0 <= sigma <= 5.0:
        raise _bad(f"{gw}.sigma", f"{sigma} is outside 0..5")
    ratio = float(_num(g, "compress_ratio", gw, 0.3))
    if not 0.02 <= ratio <= 1.0:
        raise _bad(f"{gw}.compress_ratio", f"{ratio} is outside 0.02..1.0")
    return FileGroup(
        ext=ext, count=count, median_bytes=med, total_bytes=total, sigma=sigma, compress_ratio=ratio
    )


def _compile_cost(d: dict, w: str) -> CompileCost | None:
    if "compile" not in d:
        return None
    t = _table(d["compile"], f"{w}.compile")
    cw = f"{w}.compile"
    rate = float(_num(t, "s_per_mb", cw))
    frac = float(_num(t, "code_fraction", cw))
    if rate < 0:
        raise _bad(f"{cw}.s_per_mb", "must be >= 0")
    if not 0.0 <= frac <= 1.0:
        raise _bad(f"{cw}.code_fraction", f"{frac} is outside 0..1")
    files = int(_int(t, "pyc_files", cw, 0))
    size = int(_int(t, "pyc_bytes", cw, 0))
    if files < 0 or size < 0:
        raise _bad(cw, "pyc_files and pyc_bytes must be >= 0")
    return CompileCost(s_per_mb=rate, code_fraction=frac, pyc_files=files, pyc_bytes=size)


def _fanout(d: dict, w: str) -> ImportFanout | None:
    if "imports" not in d:
        return None
    iw = f"{w}.imports"
    t = _table(d["imports"], iw)
    values = {}
    for key in [f"{k}_{u}" for k in IMPORT_KINDS for u in ("files", "bytes")] + [
        "so_resident_bytes"
    ]:
        v = int(_int(t, key, iw, 0))
        if v < 0:
            raise _bad(f"{iw}.{key}", "must be >= 0")
        values[key] = v
    unknown = sorted(set(t) - set(values))
    if unknown:
        raise _bad(f"{iw}.{unknown[0]}", f"unknown key (known: {', '.join(sorted(values))})")
    return ImportFanout(**values)


def load_profile(name_or_path: str) -> Profile:
    """Load a shipped profile by name, or a profile TOML file by path."""
    path = Path(name_or_path)
    if not path.suffix:
        path = PROFILE_DIR / f"{name_or_path}.toml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in PROFILE_DIR.glob("*.toml")))
        raise UsageError(f"unknown wheel profile '{name_or_path}' (known: {known})")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{path}: not UTF-8 text (byte {exc.start}); a profile is a TOML file"
        ) from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    return profile_from_dict(data, str(path))


# --------------------------------------------------------------------------- measuring


# --------------------------------------------------------------------------- generating


def describe(profile: Profile) -> list[str]:
    """Lines summarising a profile (returned, not printed)."""
    lines = [
        f"profile {profile.name}: {profile.file_count} files, {profile.total_bytes / 1e6:.1f} MB"
    ]
    if profile.source:
        lines.append(f"  source: {profile.source}")
    for d in profile.dists:
        lines.append(
            f"  {d.name} {d.version}: {d.file_count} files in {d.dirs} dirs, "
            f"{d.total_bytes / 1e6:.1f} MB, imports {d.import_modules} modules"
        )
        if d.compile is not None:
            c = d.compile
            wrote = f", wrote {c.pyc_files} .pyc, {c.pyc_bytes / 1e6:.1f} MB" if c.pyc_files else ""
            lines.append(
                f"    compile: {c.s_per_mb:.3f} CPU s/MB of source (code share {c.code_fraction:.2f}){wrote}"
            )
        if d.imports is not None:
            parts = ", ".join(
                f"{getattr(d.imports, k + '_files')} .{k} {getattr(d.imports, k + '_bytes') / 1e6:.1f} MB"
                for k in IMPORT_KINDS
                if getattr(d.imports, k + "_files")
            )
            lines.append(f"    first import: {parts or 'nothing'}")
        for g in sorted(d.files, key=lambda g: -g.count)[:6]:
            lines.append(
                f"    .{g.ext:<6} {g.count:>6} files  median {g.median_bytes:>9} B  "
                f"total {g.total_bytes / 1e6:8.1f} MB  deflate {g.compress_ratio:.2f}"
            )
    return lines


__all__ = [
    "IMPORT_KINDS",
    "CompileCost",
    "DistProfile",
    "ImportFanout",
    "FileGroup",
    "Profile",
    "describe",
    "load_profile",
    "profile_from_dict",
]
