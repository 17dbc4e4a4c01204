"""Synthetic wheels: deterministic, valid (RECORD hashes), installable, shaped like the profile."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from iobench.__main__ import main
from iobench.wheels import load_profile, profile_of_wheels, profile_to_toml, synthesize

TINY = Path(__file__).parent / "data" / "tiny-profile.toml"


def test_deterministic_and_record_valid(tmp_path: Path) -> None:
    prof = load_profile(str(TINY))
    a = synthesize(prof, tmp_path / "a")
    b = synthesize(prof, tmp_path / "b")
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
    for whl in a:
        with zipfile.ZipFile(whl) as zf:
            names = zf.namelist()
            record = next(n for n in names if n.endswith("RECORD"))
            rows = list(csv.reader(io.StringIO(zf.read(record).decode())))
            assert {r[0] for r in rows} == set(names)
            for name, digest, size in rows:
                if name == record:
                    continue
                data = zf.read(name)
                want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                assert digest == f"sha256={want}" and int(size) == len(data)


def test_shape_matches_profile(tmp_path: Path) -> None:
    prof = load_profile("smoke")
    wheels = synthesize(prof, tmp_path)
    measured = profile_of_wheels(wheels, "again")
    for want, got in zip(prof.dists, measured.dists):
        for g in want.files:
            m = next(x for x in got.files if x.ext == g.ext)
            assert m.count == g.count + (g.ext == "py")  # + the package __init__.py
            assert m.total_bytes == pytest.approx(g.total_bytes, rel=0.02)
            assert m.compress_ratio == pytest.approx(g.compress_ratio, abs=0.08)
    assert load_profile("torch-cpu-like").file_count > 12000


def test_installable_and_importable(tmp_path: Path) -> None:
    synthesize(load_profile(str(TINY)), tmp_path / "wh")
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "virtualenv", "-q", "--no-setuptools", str(venv)], check=True)
    env = {"PIP_CONFIG_FILE": "/dev/null", "PATH": "/usr/bin:/bin"}
    subprocess.run(
        [str(venv / "bin/python"), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(tmp_path / "wh"), "tiny-core"],
        check=True, env=env,
    )
    out = subprocess.run(
        [str(venv / "bin/python"), "-c", "import tiny_core; print(tiny_core.check())"],
        check=True, capture_output=True, text=True,
    )
    assert int(out.stdout) == 8


def test_cli_profile_and_synth_roundtrip(tmp_path: Path, capsys) -> None:
    assert main(["wheels", "synth", str(TINY), "--out", str(tmp_path / "wh")]) == 0
    wheels = sorted((tmp_path / "wh").glob("*.whl"))
    assert len(wheels) == 2
    out = tmp_path / "p.toml"
    assert main(["wheels", "profile", *map(str, wheels), "--name", "again", "--out", str(out)]) == 0
    again = load_profile(str(out))
    tiny = load_profile(str(TINY))
    assert again.file_count == tiny.file_count + len(tiny.dists)  # each wheel adds its __init__.py
    assert profile_to_toml(again) == out.read_text()
    assert main(["wheels", "profile", str(tmp_path / "missing.whl")]) == 2
    assert "no such wheel" in capsys.readouterr().err
