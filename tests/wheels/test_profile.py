"""Synthetic wheels: deterministic, valid (RECORD hashes), installable, shaped like the profile."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from helpers.files import DATA
from helpers.standin import ctrl_c_as_in_a_terminal

import iobench
from iobench.__main__ import main
from iobench.errors import UsageError
from iobench.wheels.cache import cached_wheels
from iobench.wheels.measure import profile_of_wheels, profile_to_toml
from iobench.wheels.profile import load_profile
from iobench.wheels.synth import synthesize

TINY = DATA / "tiny-profile.toml"


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
    for want, got, wheel in zip(prof.dists, measured.dists, wheels):
        with zipfile.ZipFile(wheel) as zf:
            init = zf.getinfo(f"{want.import_name}/__init__.py").file_size
        for g in want.files:
            m = next(x for x in got.files if x.ext == g.ext)
            extra = g.ext == "py"  # the package __init__.py
            assert m.count == g.count + extra
            assert m.total_bytes - extra * init == pytest.approx(g.total_bytes, rel=0.02)
            # .py members are generated code, which deflates as code does: close, not tuned
            assert m.compress_ratio == pytest.approx(
                g.compress_ratio, abs=0.12 if g.ext == "py" else 0.08
            )
    assert load_profile("torch-cpu-like").file_count > 12000


@pytest.mark.venv
def test_installable_and_importable(tmp_path: Path) -> None:
    synthesize(load_profile(str(TINY)), tmp_path / "wh")
    venv = tmp_path / "v"
    subprocess.run(
        [sys.executable, "-m", "virtualenv", "-q", "--no-setuptools", str(venv)], check=True
    )
    env = {"PIP_CONFIG_FILE": "/dev/null", "PATH": "/usr/bin:/bin"}
    subprocess.run(
        [
            str(venv / "bin/python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--find-links",
            str(tmp_path / "wh"),
            "tiny-core",
        ],
        check=True,
        env=env,
    )
    out = subprocess.run(
        [str(venv / "bin/python"), "-c", "import tiny_core; print(tiny_core.check())"],
        check=True,
        capture_output=True,
        text=True,
    )
    assert int(out.stdout) == 8


def test_cli_profile_and_synth_roundtrip(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["wheels", "synth", str(TINY), "--out", str(tmp_path / "wh")]) == 0
    wheels = sorted((tmp_path / "wh").glob("*.whl"))
    assert len(wheels) == 2
    out = tmp_path / "p.toml"
    assert (
        main(
            [
                "wheels",
                "profile",
                *map(str, wheels),
                "--name",
                "again",
                "--shape-only",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    again = load_profile(str(out))
    tiny = load_profile(str(TINY))
    assert again.file_count == tiny.file_count + len(tiny.dists)  # each wheel adds its __init__.py
    assert profile_to_toml(again) == out.read_text()
    assert main(["wheels", "profile", str(tmp_path / "missing.whl")]) == 2
    assert "no such wheel" in capsys.readouterr().err
    assert main(["wheels", "check", "smoke", str(wheels[0]), "--deps", str(tmp_path / "nope")]) == 2
    assert "nope: no such dependency" in capsys.readouterr().err
    assert main(["wheels", "check", "no-such-profile", str(wheels[0])]) == 2
    assert "unknown wheel profile" in capsys.readouterr().err


# --------------------------------------------------------------------------- concurrency

_GEN = """
import sys
from pathlib import Path
from iobench.wheels.profile import load_profile
from iobench.wheels.cache import cached_wheels
house = cached_wheels(load_profile(sys.argv[1]))
print(house)
print(sorted(p.name for p in house.glob("*.whl")))
"""


def _repo_env(cache: Path) -> dict:
    """Children import this checkout's iobench (not whatever the install points at)."""
    env = dict(os.environ, XDG_CACHE_HOME=str(cache))
    root = str(Path(iobench.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest.mark.parametrize("round_", range(4))
def test_cached_wheels_two_processes_at_once(tmp_path: Path, round_: int) -> None:
    cache = tmp_path / f"xdg{round_}"  # fresh each round: both processes must generate
    env = _repo_env(cache)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _GEN, str(TINY)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err
    houses = {out.splitlines()[0] for out, _ in outs}
    assert len(houses) == 1
    house = Path(houses.pop())
    want = ["tiny_blob-0.1.0-py3-none-any.whl", "tiny_core-0.1.0-py3-none-any.whl"]
    assert all(out.splitlines()[1] == repr(want) for out, _ in outs)
    assert sorted(p.name for p in house.iterdir()) == [".complete", *want]
    # nothing left behind: no temp folders beside the entry, no temp files in it
    assert [p.name for p in house.parent.iterdir()] == [house.name]
    # and the bytes are the profile's
    fresh = synthesize(load_profile(str(TINY)), tmp_path / f"ref{round_}")
    assert [p.read_bytes() for p in sorted(fresh)] == [(house / n).read_bytes() for n in want]


def test_cached_wheels_reuses_and_replaces_a_stale_entry(tmp_path: Path) -> None:
    prof = load_profile(str(TINY))
    stale = tmp_path / f"{prof.name}-{prof.fingerprint()}"
    stale.mkdir()
    (stale / "half-written.tmp").write_bytes(b"x")  # an older iobench interrupted mid-way
    house = cached_wheels(prof, tmp_path)
    assert house == stale and (house / ".complete").is_file()
    assert not (house / "half-written.tmp").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [house.name]
    mtime = (house / ".complete").stat().st_mtime_ns
    assert cached_wheels(prof, tmp_path) == house
    assert (house / ".complete").stat().st_mtime_ns == mtime  # reused, not regenerated


def test_synthesize_same_out_dir_from_two_processes(tmp_path: Path) -> None:
    code = (
        "import sys; from pathlib import Path; from iobench.wheels.profile import load_profile; from iobench.wheels.synth import synthesize; "
        "synthesize(load_profile(sys.argv[1]), Path(sys.argv[2]))"
    )
    out = tmp_path / "wh"
    for _ in range(3):
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", code, str(TINY), str(out)],
                env=_repo_env(tmp_path),
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(3)
        ]
        errs = [p.communicate(timeout=120)[1] for p in procs]
        assert [p.returncode for p in procs] == [0, 0, 0], errs
    assert sorted(p.name for p in out.iterdir()) == [
        "tiny_blob-0.1.0-py3-none-any.whl",
        "tiny_core-0.1.0-py3-none-any.whl",
    ]


# --------------------------------------------------------------------------- bad profiles

GOOD = TINY.read_text()


@pytest.mark.parametrize(
    "old, new, key",
    [
        (
            "total_bytes = 300000",
            'total_bytes = "big"',
            "profile.dist[0].files[0].total_bytes: expected a finite number, got 'big'",
        ),
        ("count = 150", "count = 1.5", "profile.dist[0].files[0].count: expected an integer"),
        (
            "median_bytes = 2000",
            "median_bytes = inf",
            "profile.dist[0].files[0].median_bytes: expected a finite",
        ),
        ("median_bytes = 2000", "median_bytes = nan", "profile.dist[0].files[0].median_bytes"),
        ("sigma = 1.0", 'sigma = "wide"', "profile.dist[0].files[0].sigma"),
        ("sigma = 1.0", "sigma = 900.0", "profile.dist[0].files[0].sigma: 900.0 is outside"),
        ('ext = "py"', 'ext = "../x"', "profile.dist[0].files[0].ext"),
        (
            "compress_ratio = 0.3 }",
            "compress_ratio = 7 }",
            "profile.dist[0].files[0].compress_ratio",
        ),
        ("dirs = 8", 'dirs = "eight"', "profile.dist[0].dirs: expected an integer"),
        ('version = "0.1.0"\ndirs = 8', 'version = "../../x"\ndirs = 8', "profile.dist[0].version"),
        (
            'version = "0.1.0"\ndirs = 8',
            "version = 1\ndirs = 8",
            "profile.dist[0].version: expected a string",
        ),
        ('requires = ["tiny-blob==0.1.0"]', "requires = [1]", "profile.dist[0].requires"),
        (
            'requires = ["tiny-blob==0.1.0"]',
            'requires = "tiny-blob"',
            "profile.dist[0].requires: expected a list",
        ),
        ("seed = 3", 'seed = "three"', "profile.seed: expected an integer"),
        ('name = "tiny"', 'name = "../tiny"', "profile.name"),
        ('name = "tiny"', "name = 7", "profile.name: expected a string"),
        ('{ ext = "py"', '1, { ext = "py"', "profile.dist[0].files[0]: expected a table"),
        # issue 23 (low): values this large gave MemoryError/SystemError tracebacks
        ("count = 150", "count = 10_000_000_000", "files[0].count: 10,000,000,000 is more than"),
        ("total_bytes = 300000", "total_bytes = 1e300", "files[0].total_bytes: "),
        ("dirs = 8", "dirs = 9_000_000_000_000", "profile.dist[0].dirs: "),
        ("count = 150", "count = 4_999_999", "profile: files in all: "),  # with the others
    ],
)
def test_bad_profile_is_one_line_naming_file_and_key(
    tmp_path: Path, old: str, new: str, key: str
) -> None:
    assert old in GOOD
    p = tmp_path / "p.toml"
    p.write_text(GOOD.replace(old, new, 1))
    with pytest.raises(UsageError) as exc:
        load_profile(str(p))
    msg = str(exc.value)
    assert msg.startswith(f"{p}: ") and key in msg and "\n" not in msg, msg


@pytest.mark.parametrize(
    "text, key",
    [
        ("[profile]\nname = 'x'\ndist = [1]\n", "profile.dist[0]: expected a table, got 1"),
        ("[profile]\nname = 'x'\ndist = ['a']\n", "profile.dist[0]: expected a table"),
        ("[profile]\nname = 'x'\ndist = []\n", "profile.dist: is empty"),
        ("[profile]\nname = 'x'\ndist = {}\n", "profile.dist: expected a list"),
        ("[profile]\nname = 'x'\n", "profile.dist: missing"),
        ("profile = 3\n", "profile: expected a table"),
        (
            "[profile]\nname = 'x'\n[[profile.dist]]\nname = 'a'\nfiles = [[1]]\n",
            "profile.dist[0].files[0]: expected a table",
        ),
        (
            "[profile]\nname = 'x'\n[[profile.dist]]\nname = 'a'\nfiles = 'py'\n",
            "profile.dist[0].files: expected a list",
        ),
        (
            "[profile]\nname = 'x'\n[[profile.dist]]\nname = 'a/b'\nfiles = []\n",
            "profile.dist[0].name",
        ),
        ("[profile\n", "not valid TOML"),
    ],
)
def test_malformed_profile_tables(tmp_path: Path, text: str, key: str) -> None:
    p = tmp_path / "p.toml"
    p.write_text(text)
    with pytest.raises(UsageError) as exc:
        load_profile(str(p))
    msg = str(exc.value)
    assert msg.startswith(f"{p}: ") and key in msg and "\n" not in msg, msg


def test_unreadable_profile_files(tmp_path: Path) -> None:
    p = tmp_path / "latin1.toml"
    p.write_bytes(GOOD.replace("test fixture", "caf\xe9").encode("latin-1"))
    with pytest.raises(UsageError, match=r"latin1\.toml: not UTF-8"):
        load_profile(str(p))
    if os.geteuid() != 0:  # root reads anything
        q = tmp_path / "locked.toml"
        q.write_text(GOOD)
        q.chmod(0)
        with pytest.raises(UsageError, match=r"locked\.toml: cannot be read"):
            load_profile(str(q))


def test_out_that_is_not_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    prof = load_profile(str(TINY))
    with pytest.raises(UsageError, match=r"file: exists and is not a folder"):
        synthesize(prof, f)
    with pytest.raises(UsageError, match=r"file/sub: a part of this path is a file"):
        synthesize(prof, f / "sub")
    assert main(["wheels", "synth", str(TINY), "--out", str(f)]) == 2
    err = capsys.readouterr().err
    assert "exists and is not a folder" in err and "Traceback" not in err
    bad = tmp_path / "bad.toml"
    bad.write_text(GOOD.replace("total_bytes = 300000", 'total_bytes = "big"'))
    assert main(["wheels", "synth", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "total_bytes" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_cache_dir_that_cannot_be_made(tmp_path: Path) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("x")
    with pytest.raises(UsageError, match="wheel cache"):
        cached_wheels(load_profile(str(TINY)), blocker / "wheels")


@pytest.mark.parametrize(
    "extra, key",
    [
        (
            "compile = { s_per_mb = 0.2, code_fraction = 2.0 }",
            "profile.dist[0].compile.code_fraction: 2.0 is outside 0..1",
        ),
        ("compile = { code_fraction = 0.5 }", "profile.dist[0].compile.s_per_mb: missing"),
        ("compile = 3", "profile.dist[0].compile: expected a table"),
        ("imports = { pyc_files = -1 }", "profile.dist[0].imports.pyc_files: must be >= 0"),
        ("imports = { pyc_file = 3 }", "profile.dist[0].imports.pyc_file: unknown key"),
        (
            "imports = { so_bytes = 'lots' }",
            "profile.dist[0].imports.so_bytes: expected an integer",
        ),
    ],
)
def test_bad_cost_tables(tmp_path: Path, extra: str, key: str) -> None:
    p = tmp_path / "p.toml"
    p.write_text(GOOD.replace("dirs = 8\n", f"dirs = 8\n{extra}\n", 1))
    with pytest.raises(UsageError) as exc:
        load_profile(str(p))
    msg = str(exc.value)
    assert msg.startswith(f"{p}: ") and key in msg and "\n" not in msg, msg


def test_import_fanout_is_generated_as_profiled(tmp_path: Path) -> None:
    """The twin's __init__ imports, reads and maps what the profile's fan-out says."""
    text = GOOD.replace(
        "dirs = 8\n", "dirs = 8\nimports = { pyc_files = 4, pyc_bytes = 4000 }\n", 1
    ).replace(
        "dirs = 4\n",
        "dirs = 4\nimports = { data_files = 2, data_bytes = 2000, so_files = 1, so_bytes = 100000, "
        "so_resident_bytes = 40000 }\n",
        1,
    )
    p = tmp_path / "p.toml"
    p.write_text(text)
    prof = load_profile(str(p))
    core, blob = synthesize(prof, tmp_path / "wh")

    def plan(wheel: Path, pkg: str) -> tuple[dict, set[str]]:
        with zipfile.ZipFile(wheel) as zf:
            init = zf.read(f"{pkg}/__init__.py").decode()
            names = set(zf.namelist())
        scope: dict = {}
        exec(
            init.split("def _read", 1)[0], {"__file__": "x/__init__.py"}, scope
        )  # the constants only
        return scope, names

    scope, names = plan(core, "tiny_core")
    assert (
        len(scope["MODULES"]) == 3 and scope["READS"] == [] and scope["MAPS"] == []
    )  # + its own __init__
    assert all(m.replace(".", "/") + ".py" in names for m in scope["MODULES"])
    scope, names = plan(blob, "tiny_blob")
    assert scope["MODULES"] == [] and len(scope["READS"]) == 2
    assert all(f"tiny_blob/{r}" in names and r.endswith(".h") for r in scope["READS"])
    ((so, extent, touch),) = scope["MAPS"]
    assert so.endswith(".so") and extent == 100000 and touch == 40000


HUGE = """[profile]
name = "huge"
seed = 1

[[profile.dist]]
name = "huge-core"
version = "0.1.0"
files = [{{ ext = "so", count = {count}, median_bytes = {median}, total_bytes = {total}, compress_ratio = 0.9 }}]
"""


def test_a_profile_without_room_is_refused_before_generating(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 35 (low), as it was done: total_bytes = 9e11, just under the cap, spun the CPU
    with no free-space check. Now one line, at once, naming the room and the need."""
    path = tmp_path / "huge.toml"
    path.write_text(HUGE.format(count=900, median=10**9, total=9 * 10**11))
    st = os.statvfs(tmp_path)
    if st.f_bavail * st.f_frsize > 8 * 10**11:
        pytest.skip("this disk has room for 0.8 TB of wheels")
    assert main(["wheels", "synth", str(path), "--out", str(tmp_path / "wh")]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        len(err.splitlines()) == 1 and "GB free; the wheels of profile huge take about 810" in err
    )
    assert list((tmp_path / "wh").iterdir()) == []
    with pytest.raises(UsageError, match="GB free"):  # and a run's generated wheels
        cached_wheels(load_profile(str(path)), tmp_path / "cache")


def test_ctrl_c_in_a_wheels_command_offers_no_run_resume(tmp_path: Path) -> None:
    """Issue 35 (low): Ctrl-C during `wheels synth` printed the `run --resume` hint."""
    path = tmp_path / "big.toml"
    path.write_text(HUGE.format(count=4000, median=200_000, total=800_000_000))
    proc = subprocess.Popen(
        [sys.executable, "-m", "iobench", "wheels", "synth", str(path), "--out", str(tmp_path / "w")],
        stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_as_in_a_terminal,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not list((tmp_path / "w").glob(".*.tmp")) and time.monotonic() < deadline:
            time.sleep(0.05)  # generating
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130 and err.strip() == "iobench: interrupted", err
