"""Compile cost and import fan-out: measured from a real wheel, followed by its synthetic twin."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import statistics
import sysconfig
import zipfile
from pathlib import Path

import pytest

from iobench.wheels.codegen import compile_rate, module_source
from iobench.wheels.cost import check, default_ready, with_costs
from iobench.wheels.measure import profile_of_wheels, profile_to_toml
from iobench.wheels.profile import load_profile
from iobench.wheels.synth import synthesize

STDLIB = Path(sysconfig.get_paths()["stdlib"])
# real code: packages of the standard library, copied under one top-level package
TREES = ("email", "json", "asyncio", "xml", "unittest")
INIT = '''"""A real package for iobench's tests: stdlib code, a data table, a shared library."""
import ctypes
import json
import os

from . import json as _json_pkg
from . import asyncio as _asyncio_pkg
from .xml.dom import minidom as _minidom
from .email import message as _message

_HERE = os.path.dirname(__file__)
with open(os.path.join(_HERE, "data", "table.json")) as fh:
    TABLE = json.load(fh)
_LIB = ctypes.CDLL(os.path.join(_HERE, "lib", "{so}"))
'''


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _extension_module() -> Path:
    """A shared library of this interpreter's standard library (an extension module)."""
    import importlib

    for name in ("_decimal", "_ctypes", "_json", "_socket", "_ssl"):
        path = getattr(importlib.import_module(name), "__file__", None)
        if path and path.endswith(".so"):
            return Path(path)
    pytest.skip("no stdlib extension module is a shared library here")


def build_real_wheel(out: Path) -> Path:
    """realpkg-1.0: stdlib trees, a JSON table read at import, a real .so mapped at import."""
    so = _extension_module()
    entries: list[tuple[str, bytes]] = [("realpkg/__init__.py", INIT.format(so=so.name).encode())]
    for tree in TREES:
        for p in sorted((STDLIB / tree).rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts and p.suffix in (".py", ".txt"):
                entries.append((f"realpkg/{tree}/{p.relative_to(STDLIB / tree)}", p.read_bytes()))
    table = json.dumps({f"key{i}": list(range(i % 50)) for i in range(2000)}).encode()
    entries += [("realpkg/data/table.json", table), (f"realpkg/lib/{so.name}", so.read_bytes())]
    info = "realpkg-1.0.dist-info"
    entries += [
        (f"{info}/METADATA", b"Metadata-Version: 2.1\nName: realpkg\nVersion: 1.0\n"),
        (
            f"{info}/WHEEL",
            b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        ),
        (f"{info}/top_level.txt", b"realpkg\n"),
    ]
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for name, data in entries:
        writer.writerow([name, _record_hash(data), len(data)])
    writer.writerow([f"{info}/RECORD", "", ""])
    entries.append((f"{info}/RECORD", record.getvalue().encode()))
    out.mkdir(parents=True, exist_ok=True)
    path = out / "realpkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries:
            zf.writestr(name, data)
    return path


def _sources(wheel: Path) -> list[bytes]:
    with zipfile.ZipFile(wheel) as zf:
        return [zf.read(n) for n in zf.namelist() if n.endswith(".py")]


def _compiles(texts: list[bytes]) -> list[bytes]:
    out = []
    for t in texts:
        try:
            compile(t, "x", "exec", dont_inherit=True)
            out.append(t)
        except SyntaxError:
            pass
    return out


@pytest.mark.e2e
@pytest.mark.timing  # the profile's code share is fitted from one timed compile, on this machine
def test_twin_follows_a_real_wheels_compile_cost_and_import_fanout(tmp_path: Path) -> None:
    wheel = build_real_wheel(tmp_path / "real")
    ready = default_ready([wheel])
    assert ready == "import realpkg"
    prof = with_costs(profile_of_wheels([wheel], "real", seed=5), [wheel], ready)
    # the profile is what was measured, and it survives its TOML
    (tmp_path / "p.toml").write_text(profile_to_toml(prof))
    assert load_profile(str(tmp_path / "p.toml")) == prof
    d = prof.dists[0]
    n_py = len(_compiles(_sources(wheel)))
    assert d.compile is not None and d.compile.pyc_files == n_py and d.compile.s_per_mb > 0
    assert 0.02 <= d.compile.code_fraction <= 1.0
    fan = d.imports
    assert fan is not None
    assert (fan.so_files, fan.data_files) == (1, 1)
    assert (
        fan.pyc_files > 30
        and fan.so_bytes > 0
        and fan.data_bytes == len(json.dumps({f"key{i}": list(range(i % 50)) for i in range(2000)}))
    )

    # the twin's source compiles at the real source's rate (CPU time, same process, interleaved)
    twin = synthesize(prof, tmp_path / "twin")
    real_src, twin_src = _compiles(_sources(wheel)), _sources(twin[0])
    ratios = [
        compile_rate(twin_src, repeats=1) / compile_rate(real_src, repeats=1) for _ in range(3)
    ]
    # 0.5-2x: the profile's code share was fitted from one timed compile of the real source, and
    # on a loaded CI machine that one timing alone has been off by 1.8x (the shipped profiles
    # are fitted on a quiet machine and checked by `iobench wheels check`)
    assert 0.5 <= statistics.median(ratios) <= 2.0, ratios

    # installed side by side: the same files, the same compile work, the same import fan-out
    fid = check(prof, [wheel], ready, repeats=1)
    rows = {name: (statistics.median(r), statistics.median(s)) for name, r, s in fid.rows()}
    real_files, twin_files = rows["files"]
    assert abs(twin_files - real_files) <= 2  # + the twin's own __init__.py
    assert rows["pyc files"][1] == pytest.approx(rows["pyc files"][0], rel=0.05)
    assert 0.5 <= rows["compile cpu s"][1] / rows["compile cpu s"][0] <= 2.0, rows["compile cpu s"]
    for kind in ("pyc", "so", "data"):
        assert rows[f"import {kind} files"][1] == rows[f"import {kind} files"][0], kind
    assert rows["import files"][1] == pytest.approx(rows["import files"][0], rel=0.05)
    assert rows["import bytes"][1] == pytest.approx(rows["import bytes"][0], rel=0.15)
    assert rows["import pyc bytes"][1] == pytest.approx(rows["import pyc bytes"][0], rel=0.15)


def test_generated_modules_are_exact_size_valid_and_deterministic() -> None:
    import random

    for size in (0, 1, 2, 9, 40, 81, 300, 2_000, 20_000):
        for f in (0.02, 0.5, 1.0):
            a = module_source(size, f, random.Random(size), head="VALUE = 1\n")
            assert a == module_source(size, f, random.Random(size), head="VALUE = 1\n")
            assert len(a) == max(size, len("VALUE = 1\n"))
            compile(a, "m", "exec", dont_inherit=True)


def test_more_code_compiles_slower() -> None:
    import random

    rng = random.Random(1)
    low = [module_source(8000, 0.1, rng) for _ in range(30)]
    high = [module_source(8000, 0.9, rng) for _ in range(30)]
    assert compile_rate(high) > 2 * compile_rate(low)


def test_scratch_is_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from iobench.wheels import cost as wheel_cost

    monkeypatch.setattr(wheel_cost, "scratch_root", lambda: tmp_path)
    with wheel_cost.scratch_dir(".x-") as d:
        (d / "f").write_text("x")
    assert list(tmp_path.iterdir()) == []
