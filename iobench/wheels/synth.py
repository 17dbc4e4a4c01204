"""Synthetic wheels generated from a profile: real, pip-installable wheels (METADATA,
WHEEL, RECORD with sha256, an importable package with a ``check()``) of the profile's shape,
deterministic for a seed; the method is in :mod:`iobench.wheels.profile`'s docstring."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import math
import os
import random
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from iobench import __version__, files
from iobench.errors import UsageError
from iobench.wheels.codegen import module_source
from iobench.wheels.profile import DistProfile, FileGroup, Profile


def group_sizes(group: FileGroup, rng: random.Random) -> list[int]:
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
        for size in group_sizes(group, rng):
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


#: room left beside the wheels: the zip headers and a margin for the estimate
ROOM_BYTES = 64 << 20


def wheel_bytes(profile: Profile) -> int:
    """About how many bytes the profile's wheels take: each group at its deflate ratio."""
    return int(sum(g.total_bytes * g.compress_ratio for d in profile.dists for g in d.files))


def synthesize(profile: Profile, out_dir: Path) -> list[Path]:
    """Write the profile's wheels into ``out_dir`` (deterministic for the profile's seed).

    Safe to run from several processes into the same ``out_dir`` at once. A folder that
    cannot be made or written (a file in the way, no permission, a full disk) or that lacks
    room for the wheels (checked first) is a UsageError naming it.
    """
    out_dir = Path(out_dir)
    try:  # judged on the way (iobench.files): no folder another user could swap
        files.make_folders(out_dir)
    except (FileExistsError, NotADirectoryError):
        if out_dir.is_file():
            raise UsageError(
                f"{out_dir}: exists and is not a folder (give a folder for the wheels)"
            ) from None
        raise UsageError(f"{out_dir}: a part of this path is a file, not a folder") from None
    except OSError as exc:
        raise UsageError(f"{out_dir}: cannot create the folder ({exc.strerror or exc})") from None
    need, st = wheel_bytes(profile), os.statvfs(out_dir)
    if need + ROOM_BYTES > st.f_bavail * st.f_frsize:  # before hours of generating
        raise UsageError(
            f"{out_dir}: {st.f_bavail * st.f_frsize / 1e9:,.1f} GB free; the wheels of profile "
            f"{profile.name} take about {need / 1e9:,.1f} GB ({profile.total_bytes / 1e9:,.1f} GB "
            "unpacked): give a folder with room, or a smaller profile"
        )
    try:
        return [_build_dist(d, profile.seed, out_dir) for d in profile.dists]
    except OSError as exc:
        raise UsageError(f"{out_dir}: cannot write wheels there ({exc.strerror or exc})") from None


__all__ = ["synthesize", "wheel_bytes"]
