"""Synthetic wheels that install like real ML packages, and profiles measured from real ones.

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

import base64
import csv
import hashlib
import io
import json
import math
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import zipfile
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

from iobench import __version__
from iobench.errors import UsageError
from iobench.wheels.codegen import module_source

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
        dirs = int(_int(d, "dirs", w, 1))
        import_modules = int(_int(d, "import_modules", w, 10))
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
    return Profile(
        name=name,
        source=str(_str(prof, "source", key, "")),
        seed=int(_int(prof, "seed", key, 0)),
        dists=tuple(dists),
        description=str(_str(prof, "description", key, "")),
    )


def _file_group(g: object, gw: str) -> FileGroup:
    """One ``files`` entry, checked."""
    _table(g, gw)
    assert isinstance(g, dict)
    ext = str(_str(g, "ext", gw)).lstrip(".")
    if not _EXT_RE.match(ext):
        raise _bad(f"{gw}.ext", f"{ext!r} must be 1-32 letters, digits, '_' or '-'")
    count = int(_int(g, "count", gw))
    med = int(_num(g, "median_bytes", gw))
    total = int(_num(g, "total_bytes", gw, med * count))
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


def _group_key(filename: str) -> str:
    base = filename.rsplit("/", 1)[-1]
    if ".so" in base:
        return "so"
    if "." not in base:
        return "noext"
    # an extension becomes part of a generated file name: keep it to safe characters
    ext = re.sub(r"[^a-z0-9_-]", "_", base.rsplit(".", 1)[-1].lower())[:32]
    return ext or "noext"


def profile_of_wheels(wheels: list[Path], name: str, seed: int = 1) -> Profile:
    """Measure real wheels into a profile (what `iobench wheels profile` prints)."""
    dists = []
    for wheel in wheels:
        try:
            zf = zipfile.ZipFile(wheel)
        except (OSError, zipfile.BadZipFile) as exc:
            raise UsageError(f"{wheel}: not a readable wheel ({exc})") from None
        with zf:
            parts = wheel.name.split("-")
            if len(parts) < 5:
                raise UsageError(f"{wheel}: not a wheel file name (name-version-...-tag.whl)")
            groups: dict[str, list[tuple[int, int]]] = defaultdict(list)
            dirs = set()
            for info in zf.infolist():
                if info.is_dir() or ".dist-info/" in info.filename:
                    continue
                dirs.add(info.filename.rsplit("/", 1)[0] if "/" in info.filename else "")
                groups[_group_key(info.filename)].append((info.file_size, info.compress_size))
            files = []
            for ext, sizes in sorted(groups.items(), key=lambda kv: -len(kv[1])):
                raw = sorted(s for s, _ in sizes)
                total = sum(raw)
                comp = sum(c for _, c in sizes)
                med = statistics.median(raw)
                sigma = 1.0
                if len(raw) >= 4 and raw[len(raw) // 4] > 0:
                    q1, q3 = raw[len(raw) // 4], raw[(3 * len(raw)) // 4]
                    sigma = max(0.1, math.log(max(q3, 1) / max(q1, 1)) / 1.349)
                files.append(
                    {
                        "ext": ext,
                        "count": len(raw),
                        "median_bytes": int(med),
                        "total_bytes": int(total),
                        "sigma": round(sigma, 3),
                        "compress_ratio": round(min(1.0, max(0.02, comp / max(total, 1))), 3),
                    }
                )
            py = len(groups.get("py", ()))
            dists.append(
                {
                    "name": "synth_" + parts[0].lower().replace("-", "_"),
                    "version": parts[1].split("+")[0],
                    "dirs": len(dirs),
                    "import_modules": min(300, max(1, py // 8)),
                    "files": files,
                }
            )
    return profile_from_dict(
        {
            "name": name,
            "seed": seed,
            "source": "measured from " + ", ".join(w.name for w in wheels),
            "dist": dists,
        },
        "measured profile",
    )


def profile_to_toml(profile: Profile) -> str:
    """Render a profile as TOML (the format `load_profile` reads)."""
    out = [
        "[profile]",
        f"name = {json.dumps(profile.name)}",
        f"source = {json.dumps(profile.source)}",
        f"description = {json.dumps(profile.description)}",
        f"seed = {profile.seed}",
    ]
    for d in profile.dists:
        out += [
            "",
            "[[profile.dist]]",
            f"name = {json.dumps(d.name)}",
            f"version = {json.dumps(d.version)}",
            f"dirs = {d.dirs}",
            f"import_modules = {d.import_modules}",
            f"requires = {json.dumps(list(d.requires))}",
        ]
        if d.compile is not None:
            c = d.compile
            out.append(
                f"compile = {{ s_per_mb = {c.s_per_mb}, code_fraction = {c.code_fraction}, "
                f"pyc_files = {c.pyc_files}, pyc_bytes = {c.pyc_bytes} }}"
            )
        if d.imports is not None:
            fields = ", ".join(f"{k} = {v}" for k, v in asdict(d.imports).items())
            out.append(f"imports = {{ {fields} }}")
        out.append("files = [")
        for g in d.files:
            out.append(
                f"  {{ ext = {json.dumps(g.ext)}, count = {g.count}, median_bytes = {g.median_bytes}, "
                f"total_bytes = {g.total_bytes}, sigma = {g.sigma}, compress_ratio = {g.compress_ratio} }},"
            )
        out.append("]")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- generating


def _sizes(group: FileGroup, rng: random.Random) -> list[int]:
    if group.count == 0:
        return []
    mu = math.log(max(group.median_bytes, 1))
    raw = [rng.lognormvariate(mu, group.sigma) for _ in range(group.count)]
    scale = group.total_bytes / max(sum(raw), 1.0)
    return [max(0, int(r * scale)) for r in raw]


_FILLER = b"# synthetic filler line: compresses well, like docstrings and headers do.\n"
# deflate ratio (level 1) of random bytes over an alphabet of k symbols, measured once
_ALPHABET_RATIO = (
    (2, 0.223), (3, 0.285), (4, 0.332), (5, 0.373), (6, 0.405), (8, 0.457), (11, 0.515),
    (16, 0.584), (23, 0.643), (32, 0.682), (64, 0.775), (128, 0.883), (256, 1.0),
)  # fmt: skip
_DEFLATE_OVERHEAD = 90
_SPREAD = 1.6
_CHUNK = 1 << 24


def _content(size: int, ratio: float, rng: random.Random) -> bytes:
    """Bytes of ``size`` whose deflate ratio is close to ``ratio``, and that cost as much to inflate.

    Random bytes over a small alphabet, as real binaries and headers are: deflate compresses
    them by Huffman coding, so inflating decodes every byte (the filler-plus-random-bytes
    mix of generator 1 inflated four times faster than real wheels: stored blocks and long
    matches cost almost nothing). The alphabet is the smallest that deflates to
    ``_SPREAD`` times ``ratio``, the filler (~0.02) makes up the rest: how many bytes are
    Huffman-decoded, set so that pip spends the CPU on the torch-cpu-like twin that it
    spends on torch 2.13 (``iobench wheels check``).
    """
    if size <= 0:
        return b""
    k, top = next(
        ((k, r) for k, r in _ALPHABET_RATIO if r >= min(1.0, ratio * _SPREAD)), _ALPHABET_RATIO[-1]
    )
    # deflated: ~_DEFLATE_OVERHEAD bytes a member (block header, the filler's first line),
    # ``top`` a random byte, 0.02 a filler byte; solved for the random bytes
    want = ratio * size - _DEFLATE_OVERHEAD - 0.02 * size
    n_rand = size if ratio >= top else min(size, max(0, int(want / (top - 0.02))))
    table = bytes((b % k) * 37 % 256 for b in range(256))
    # in chunks: randbytes takes at most 2**28 bytes at once (torch has a 434 MB library)
    body = b"".join(
        rng.randbytes(min(_CHUNK, n_rand - i)).translate(table) for i in range(0, n_rand, _CHUNK)
    )
    fill = size - len(body)
    if fill > 0:
        body += (_FILLER * (fill // len(_FILLER) + 1))[:fill]
    return body


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


_PYC_PER_SOURCE = (
    (0.02, 0.114),
    (0.1, 0.393),
    (0.25, 0.908),
    (0.5, 1.383),
    (0.75, 1.56),
    (1.0, 1.771),
)
_PYC_OVERHEAD = 200  # header, code object and the VALUE/f head of every module
_DEFAULT_CODE_FRACTION = 0.5  # profiles measured before compile costs were


def _pyc_estimate(source_bytes: int, code_fraction: float) -> float:
    """Bytes of the .pyc of a generated module (measured once per fraction, CPython 3.11)."""
    pts = _PYC_PER_SOURCE
    f = min(1.0, max(pts[0][0], code_fraction))
    for (f0, r0), (f1, r1) in zip(pts, pts[1:]):
        if f0 <= f <= f1:
            return _PYC_OVERHEAD + source_bytes * (r0 + (r1 - r0) * (f - f0) / (f1 - f0))
    return _PYC_OVERHEAD + source_bytes * pts[-1][1]


@dataclass(frozen=True)
class _Member:
    path: str  # inside the wheel
    size: int
    group: FileGroup

    @property
    def module(self) -> str:
        return self.path[: -len(".py")].replace("/", ".")


def _layout(dist: DistProfile, rng: random.Random) -> list[_Member]:
    """Every file's path and size: a folder tree with branching so depth stays modest."""
    pkg = dist.import_name
    dirs = [pkg]
    for i in range(1, dist.dirs):
        parent = dirs[rng.randrange(len(dirs))] if len(dirs) > 1 else pkg
        dirs.append(f"{parent}/d{i:04d}")
    members = []
    counter = 0
    for group in dist.files:
        for size in _sizes(group, rng):
            counter += 1
            folder = dirs[rng.randrange(len(dirs))]
            name = f"m{counter:05d}.py" if group.ext == "py" else f"f{counter:05d}.{group.ext}"
            members.append(_Member(f"{folder}/{name}", size, group))
    return members


def _pick(weights: list[float], n: int, target: float) -> list[int]:
    """Indexes of ``n`` items whose weights sum closest to ``target``.

    A window of ``n`` neighbours in weight order: the window's sum grows with its start,
    so a binary search finds the closest (deterministic, no search over subsets).
    """
    n = min(n, len(weights))
    if n <= 0:
        return []
    order = sorted(range(len(weights)), key=lambda i: (weights[i], i))
    prefix = [0.0]
    for i in order:
        prefix.append(prefix[-1] + weights[i])
    lo, hi = 0, len(order) - n
    while lo < hi:
        mid = (lo + hi) // 2
        if prefix[mid + n] - prefix[mid] < target:
            lo = mid + 1
        else:
            hi = mid
    if lo > 0 and abs(prefix[lo - 1 + n] - prefix[lo - 1] - target) < abs(
        prefix[lo + n] - prefix[lo] - target
    ):
        lo -= 1
    return sorted(order[lo : lo + n])


@dataclass(frozen=True)
class _ImportPlan:
    """What the synthetic package's import touches: modules, files read, files mapped."""

    modules: list[str]
    reads: list[str]  # paths relative to the package folder
    maps: list[tuple[str, int, int]]  # (relative path, bytes to map, bytes of them to touch)


def _import_plan(
    dist: DistProfile, members: list[_Member], rng: random.Random, fraction: float
) -> _ImportPlan:
    py = [m for m in members if m.group.ext == "py"]
    fan = dist.imports
    if fan is None:  # an older profile: only a module count
        chosen = rng.sample(py, min(dist.import_modules, len(py)))
        return _ImportPlan([m.module for m in chosen], [], [])
    pkg = dist.import_name + "/"
    # the package's own __init__ is one of the .pyc files the import opens
    mods = _pick(
        [_pyc_estimate(m.size, fraction) for m in py],
        fan.pyc_files - 1,
        fan.pyc_bytes - _PYC_OVERHEAD,
    )
    sources = _pick([m.size for m in py], fan.py_files, fan.py_bytes)
    binary = [m for m in members if m.group.kind == "binary" and m.size > 0]
    other = [m for m in members if m.group.kind != "binary" and m.group.ext != "py"]
    data = _pick([m.size for m in other], fan.data_files, fan.data_bytes)
    # stand-ins for shared libraries: the largest ones, each mapped and touched in proportion to its size
    big = sorted(binary, key=lambda m: (-m.size, m.path))[: fan.so_files]
    total = sum(m.size for m in big)
    maps = []
    for m in big:
        extent = min(m.size, round(fan.so_bytes * m.size / total))
        maps.append(
            (m.path[len(pkg) :], extent, min(extent, round(fan.so_resident_bytes * m.size / total)))
        )
    return _ImportPlan(
        [py[i].module for i in mods],
        [py[i].path[len(pkg) :] for i in sources] + [other[i].path[len(pkg) :] for i in data],
        maps,
    )


def _init_source(plan: _ImportPlan, seed: int) -> bytes:
    """The package's __init__: imports the plan's modules, reads its files, maps its libraries."""
    return (
        f'"""Synthetic stand-in generated by iobench {__version__} (profile seed {seed})."""\n'
        "import importlib\nimport mmap\nimport os\n\n"
        "_HERE = os.path.dirname(__file__)\n"
        f"MODULES = {plan.modules!r}\n"
        f"READS = {plan.reads!r}\n"
        f"MAPS = {plan.maps!r}\n\n\n"
        "def _read(rel):\n"
        "    with open(os.path.join(_HERE, rel), 'rb') as fh:\n"
        "        return len(fh.read())\n\n\n"
        "def _map(rel, extent, touch):\n"
        '    """Map a shared-library stand-in as a loader would and fault in some of it (never run)."""\n'
        "    with open(os.path.join(_HERE, rel), 'rb') as fh:\n"
        "        m = mmap.mmap(fh.fileno(), extent, access=mmap.ACCESS_READ)\n"
        "    sum(m[i] for i in range(0, touch, mmap.PAGESIZE))\n"
        "    return m\n\n\n"
        "_loaded = [importlib.import_module(m) for m in MODULES]\n"
        "_read_bytes = sum(_read(p) for p in READS)\n"
        "_mapped = [_map(*args) for args in MAPS if args[1] > 0]\n\n\n"
        "def check():\n"
        '    """The ready check: every module imported and callable."""\n'
        "    assert all(m.f(0) == m.VALUE for m in _loaded)\n"
        "    return len(_loaded)\n"
    ).encode()


def _member_bytes(member: _Member, index: int, fraction: float, rng: random.Random) -> bytes:
    if member.group.ext == "py":
        head = f"VALUE = {index}\n\n\ndef f(x):\n    return x + VALUE\n\n\n"
        return module_source(member.size, fraction, rng, head=head)
    return _content(member.size, member.group.compress_ratio, rng)


def _build_dist(dist: DistProfile, seed: int, out_dir: Path) -> Path:
    rng = random.Random(f"{seed}:{dist.name}:{dist.version}")
    pkg = dist.import_name
    fraction = dist.compile.code_fraction if dist.compile else _DEFAULT_CODE_FRACTION
    members = _layout(dist, rng)
    plan = _import_plan(dist, members, rng, fraction)
    entries = [(f"{pkg}/__init__.py", _init_source(plan, seed))]
    entries += [(m.path, _member_bytes(m, i, fraction, rng)) for i, m in enumerate(members, 1)]
    entries += _dist_info(dist, entries)
    path = out_dir / f"{pkg}-{dist.version}-py3-none-any.whl"
    _write_wheel(entries, path, out_dir)
    return path


def _dist_info(dist: DistProfile, entries: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """METADATA, WHEEL, top_level.txt and the RECORD of ``entries`` and of themselves."""
    pkg = dist.import_name
    dist_info = f"{pkg}-{dist.version}.dist-info"
    requires = "".join(f"Requires-Dist: {r}\n" for r in dist.requires)
    metadata = (
        f"Metadata-Version: 2.1\nName: {dist.name}\nVersion: {dist.version}\n"
        f"Summary: iobench synthetic wheel ({dist.file_count} files)\n{requires}"
    ).encode()
    wheel_meta = (
        b"Wheel-Version: 1.0\nGenerator: iobench\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    meta = [
        (f"{dist_info}/METADATA", metadata),
        (f"{dist_info}/WHEEL", wheel_meta),
        (f"{dist_info}/top_level.txt", f"{pkg}\n".encode()),
    ]
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for name, data in entries + meta:
        writer.writerow([name, _record_hash(data), len(data)])
    writer.writerow([f"{dist_info}/RECORD", "", ""])
    return meta + [(f"{dist_info}/RECORD", record.getvalue().encode())]


def _write_wheel(entries: list[tuple[str, bytes]], path: Path, out_dir: Path) -> None:
    # a temp name of this process's own, then an atomic replace: two processes writing the
    # same out_dir each write their own file, and the last replace wins (same bytes anyway)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=out_dir)
    tmp = Path(tmp_name)
    try:
        with (
            os.fdopen(fd, "wb") as fh,
            zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf,
        ):
            for name, data in entries:
                info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
                info.external_attr = 0o644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, data, compresslevel=1)
        os.chmod(
            tmp, 0o644
        )  # mkstemp makes it 0600; a wheelhouse is read by other users' installers
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def synthesize(profile: Profile, out_dir: Path) -> list[Path]:
    """Write the profile's wheels into ``out_dir`` (deterministic for the profile's seed).

    Safe to run from several processes into the same ``out_dir`` at once. A folder that
    cannot be made or written (a file in the way, no permission, a full disk) is a
    UsageError naming it.
    """
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UsageError(
            f"{out_dir}: exists and is not a folder (give a folder for the wheels)"
        ) from None
    except NotADirectoryError:
        raise UsageError(f"{out_dir}: a part of this path is a file, not a folder") from None
    except OSError as exc:
        raise UsageError(f"{out_dir}: cannot create the folder ({exc.strerror or exc})") from None
    try:
        return [_build_dist(d, profile.seed, out_dir) for d in profile.dists]
    except OSError as exc:
        raise UsageError(f"{out_dir}: cannot write wheels there ({exc.strerror or exc})") from None


def default_cache_dir() -> Path:
    """Where generated wheels are kept between runs (XDG cache)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "iobench" / "wheels"


def cached_wheels(profile: Profile, cache_dir: Path | None = None) -> Path:
    """A wheelhouse for the profile, generated once and then reused (keyed by fingerprint).

    Concurrency: the wheels are generated into a private temp folder beside the entry
    (``.NAME-FP.XXXX.tmp``), marked complete, and the whole folder is renamed into place.
    Rename is atomic, so a reader sees either no entry or a complete one; if another
    process renamed its copy in first, ours is discarded and theirs is used. An entry
    without ``.complete`` can only be left by an older iobench that generated in place
    and was interrupted: it is moved aside and removed.
    """
    parent = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    root = parent / f"{profile.name}-{profile.fingerprint()}"
    done = root / ".complete"
    if done.is_file():
        return root
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.", suffix=".tmp", dir=parent))
    except OSError as exc:
        raise UsageError(
            f"wheel cache {parent}: cannot create a folder there ({exc.strerror or exc})"
        ) from None
    try:
        synthesize(profile, tmp)
        (tmp / ".complete").write_text(
            json.dumps({"profile": profile.name, "files": profile.file_count})
        )
        os.chmod(tmp, 0o755)  # mkdtemp makes it 0700
        for _ in range(5):
            try:
                os.rename(tmp, root)
                return root
            except OSError:
                if done.is_file():
                    return root  # another process won; ours is removed below
                if not root.exists():
                    continue  # it vanished between our rename and the check: try again
                _discard_stale(root, parent)
        raise UsageError(
            f"wheel cache {root}: cannot be put in place (is another process removing it?)"
        )
    except OSError as exc:
        raise UsageError(
            f"wheel cache {parent}: cannot write there ({exc.strerror or exc})"
        ) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _discard_stale(root: Path, parent: Path) -> None:
    """Move an incomplete entry aside (one atomic rename, so only one process does it) and delete it."""
    trash = Path(tempfile.mkdtemp(prefix=f".{root.name}.", suffix=".stale", dir=parent))
    moved = trash / "entry"
    try:
        os.rename(root, moved)
        if (moved / ".complete").is_file():
            # another process put its complete copy in place between our look and our move:
            # give it back (if a third one got there first, that one is as good)
            os.rename(moved, root)
    except OSError:
        pass  # someone else moved it, or the entry is back: the caller looks again
    shutil.rmtree(trash, ignore_errors=True)


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
    "cached_wheels",
    "describe",
    "load_profile",
    "profile_from_dict",
    "profile_of_wheels",
    "profile_to_toml",
    "synthesize",
]
