"""Installers and venv creators: real venvs, real uv installs on two filesystems, the link mode
read back from the inodes, requirement files, and the axes crossed with a scenario's configs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers.files import DATA, TINY_PROFILE, only_run_dir, read_csv

from iobench.__main__ import main
from iobench.errors import UsageError
from iobench.run.facts import fstype_of
from iobench.scenario import axes
from iobench.scenario.load import Scenario, load_scenario
from iobench.trial import installers
from iobench.trial.installers import IndexSpec, Pip, Uv
from iobench.wheels.cache import cached_wheels
from iobench.wheels.profile import load_profile

TINY = DATA / "tiny.toml"


def _wheelhouse() -> Path:
    return cached_wheels(load_profile(str(TINY_PROFILE)))


def _env(tmp: Path) -> dict[str, str]:
    return installers.base_environment(tmp, isolated=True)


def _make_venv(venv: Path, creator: str, env: dict[str, str]) -> None:
    r = subprocess.run(
        installers.venv_command(venv, None, creator), env=env, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr


def _uv_install(venv: Path, cache: Path, tmp: Path, link_mode: str) -> subprocess.CompletedProcess:
    """Install the tiny wheels with uv exactly as a trial does, from a local folder."""
    step = Uv(link_mode).command(venv, ["tiny-core"], IndexSpec(None, local=True,
                                 extra_args=("--no-index", "--find-links", str(_wheelhouse()))),
                                 cache, tmp / "uv.log", _env(tmp))  # fmt: skip
    return subprocess.run(step.argv, env=step.env, capture_output=True, text=True)


def _cache_twins(path: Path, site: Path, cache: Path) -> list[Path]:
    return list(cache.glob(f"archive-v*/*/{path.relative_to(site)}"))


# ---------------------------------------------------------------- venv creators
@pytest.mark.e2e
@pytest.mark.parametrize(
    ("creator", "seeds_pip"),
    [("virtualenv", True), ("venv", True), ("venv-without-pip", False), ("uv", False)],
)
def test_each_creator_makes_a_venv_with_or_without_pip(
    tmp_path: Path, creator: str, seeds_pip: bool
) -> None:
    venv = tmp_path / "venv"
    _make_venv(venv, creator, _env(tmp_path))
    assert (venv / "bin" / "python").exists() and installers.site_packages(venv).is_dir()
    assert installers.has_pip(venv) is seeds_pip
    contents = installers.venv_contents(venv)
    assert ("pip" in contents) is seeds_pip


@pytest.mark.e2e
def test_pip_installs_into_a_venv_without_pip_from_outside(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    env = _env(tmp_path)
    _make_venv(venv, "venv-without-pip", env)
    index = IndexSpec(
        None, local=True, extra_args=("--no-index", "--find-links", str(_wheelhouse()))
    )
    step = Pip().command(venv, ["tiny-core"], index, None, tmp_path / "pip.log", env)
    assert step.argv[:5] == [
        installers.sys.executable,
        "-m",
        "pip",
        "--python",
        str(venv / "bin" / "python"),
    ]
    r = subprocess.run(step.argv, env=step.env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    site = installers.site_packages(venv)
    assert list(site.glob("tiny_core-*.dist-info")) and not installers.has_pip(venv)


def test_an_unknown_creator_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unknown venv creator 'conda'"):
        installers.venv_command(tmp_path, None, "conda")


# ---------------------------------------------------------------- uv's link mode, read from the disk
@pytest.mark.e2e
@pytest.mark.parametrize("mode", ["hardlink", "copy", "symlink"])
def test_link_mode_on_one_filesystem_matches_the_inodes(disk_dir: Path, mode: str) -> None:
    venv, cache, tmp = disk_dir / "venv", disk_dir / "cache", disk_dir / "tmp"
    tmp.mkdir()
    _make_venv(venv, "uv", _env(tmp))
    r = _uv_install(venv, cache, tmp, mode)
    assert r.returncode == 0, r.stderr
    site = installers.site_packages(venv)
    cols = installers.link_columns(r.stdout + r.stderr, site, set(), cache, mode)
    assert cols == {"link_observed": mode, "link_fallback": ""}
    files = installers.sample_files(site, set())
    assert files
    for f in files:  # the disk itself agrees with what was recorded
        twins = _cache_twins(f, site, cache)
        assert twins, f
        same_inode = any(os.stat(t).st_ino == f.lstat().st_ino for t in twins)
        assert f.is_symlink() is (mode == "symlink")
        assert same_inode is (mode == "hardlink")
        if mode == "symlink":
            assert Path(os.path.realpath(f)).is_relative_to(cache.resolve())


@pytest.mark.e2e
def test_cache_on_another_filesystem_falls_back_to_copy(tmpfs, disk_dir: Path) -> None:
    shm = tmpfs(size="64m")
    venv, cache, tmp = disk_dir / "venv", shm / "cache", disk_dir / "tmp"
    tmp.mkdir()
    if fstype_of(disk_dir) == "tmpfs":
        pytest.skip("the test's temp folder is itself a tmpfs; need a disk filesystem")
    _make_venv(venv, "uv", _env(tmp))
    r = _uv_install(venv, cache, tmp, "hardlink")
    assert r.returncode == 0, r.stderr
    site = installers.site_packages(venv)
    cols = installers.link_columns(r.stdout + r.stderr, site, set(), cache, "hardlink")
    assert cols["link_observed"] == "copy"
    assert cols["link_fallback"].startswith("Failed to hardlink files; falling back to full copy")
    for f in installers.sample_files(site, set()):
        assert (
            f.lstat().st_nlink == 1
            and f.lstat().st_dev != next(iter(_cache_twins(f, site, cache))).stat().st_dev
        )


@pytest.mark.parametrize(
    ("line", "install_s"),
    [
        ("Installed 10 packages in 850ms", 0.85),
        ("Installed 10 packages in 2.35s", 2.35),
        # past a minute uv writes minutes and seconds: a lab volume at 1 ms took this long
        ("Installed 10 packages in 1m 05s", 65.0),
        ("Installed 1 package in 12m 00s", 720.0),
    ],
)
def test_uv_install_time_is_read_in_every_unit_uv_writes(line: str, install_s: float) -> None:
    output = f"Resolved 10 packages in 3ms\nPrepared 10 packages in 1m 30s\n{line}\n + torch==2\n"
    download, install = Uv().split(Path("unused"), 0.0, 1000.0, output)
    assert install == pytest.approx(install_s)
    assert download == pytest.approx(1000.0 - install_s)


def test_uv_output_without_an_installed_line_is_unknown_not_zero() -> None:
    assert Uv().split(Path("unused"), 0.0, 5.0, "Resolved 1 package in 1ms\n") == (None, None)


def test_pip_output_has_no_fallback_and_an_empty_site_says_nothing(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    assert installers.link_columns("Successfully installed x", site, set(), None, "default") == {
        "link_observed": "",
        "link_fallback": "",
    }


# ---------------------------------------------------------------- requirement files
def test_requirements_file_as_pip_reads_it(tmp_path: Path) -> None:
    (tmp_path / "base.txt").write_text("numpy>=1.26  # the base\n")
    req = tmp_path / "req.txt"
    req.write_text(
        "# a comment\n\ntorch==2.13.0 ; sys_platform == 'linux'\n"
        "pkg[extra]>=1, \\\n  <2\n-r base.txt\nw @ https://h/w-1.0-py3-none-any.whl#sha256=ab\n"
    )
    assert axes.read_requirements(req) == [
        "torch==2.13.0 ; sys_platform == 'linux'",
        "pkg[extra]>=1,   <2",
        "numpy>=1.26",
        "w @ https://h/w-1.0-py3-none-any.whl#sha256=ab",
    ]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("torch==2.13.0\nnot a req!!\n", r"req.txt:2: 'not a req!!': not a requirement"),
        (
            "torch\n--index-url https://u:secret@host/simple\n",
            r"req.txt:2: '--index-url https://\*\*\*@host/simple': pip options are not taken",
        ),
        ("torch --hash=sha256:abc\n", r"req.txt:1: .*pip options are not taken"),
        ("# only comments\n", r"no requirements in it"),
    ],
)
def test_a_bad_requirements_line_is_one_line_naming_file_and_line(
    tmp_path: Path, text: str, match: str
) -> None:
    req = tmp_path / "req.txt"
    req.write_text(text)
    with pytest.raises(UsageError, match=match) as err:
        axes.read_requirements(req)
    assert "secret" not in str(err.value) and "\n" not in str(err.value)


def test_extra_index_url_is_checked_and_redacted() -> None:
    assert (
        axes.extra_index_url("https://download.pytorch.org/whl/cu124")
        == "https://download.pytorch.org/whl/cu124"
    )
    with pytest.raises(UsageError) as err:
        axes.extra_index_url("ftp://user:hunter2@host/simple")
    assert "hunter2" not in str(err.value) and "***" in str(err.value)
    assert axes.index_args(["a", "b"]) == ("--extra-index-url", "a", "--extra-index-url", "b")


# ---------------------------------------------------------------- axes crossed with the configs
def _apply(s: Scenario, **kw: Any) -> Scenario:
    """``axes.apply`` as `iobench run` calls it, with the given options."""
    axes_given = axes.axes_from(kw.get("installer"), kw.get("venv_creator"), kw.get("matrix", []))
    return axes.apply(s, axes_given, kw.get("requirements"), bool(kw.get("package")), False)


def test_axes_cross_every_config_and_name_it() -> None:
    s = load_scenario(str(TINY)).select(["naive", "nocache"])
    out = _apply(s, installer="pip,uv", matrix=[axes.matrix_spec("link_mode=hardlink,symlink")])
    names = [c.name for c in out.configs]
    assert names == [
        "naive_pip",
        "naive_uv_link-hardlink",
        "naive_uv_link-symlink",
        "nocache_pip",
        "nocache_uv_link-hardlink",
        "nocache_uv_link-symlink",
    ]
    pip = out.config("naive_pip")
    assert (pip.installer, pip.link_mode, pip.cache) == ("pip", "default", "target")
    one = _apply(s, venv_creator="uv")  # one value: set, no suffix
    assert [(c.name, c.venv_creator) for c in one.configs] == [("naive", "uv"), ("nocache", "uv")]


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (
            {"venv_creator": "conda"},
            r"--matrix: configs.naive_?.*venv_creator: 'conda' is not one of",
        ),
        ({"installer": "uv", "matrix": [("installer", ["pip"])]}, "axis installer given twice"),
    ],
)
def test_a_bad_axis_is_one_line(kw: dict, match: str) -> None:
    s = load_scenario(str(TINY)).select(["naive"])
    with pytest.raises(UsageError, match=match):
        _apply(s, **kw)
    with pytest.raises(UsageError, match="not an axis"):
        axes.matrix_spec("colour=red,blue")


def test_link_mode_with_pip_in_a_scenario_file_is_refused(tmp_path: Path) -> None:
    from iobench.errors import ScenarioError

    bad = tmp_path / "bad.toml"
    bad.write_text(
        TINY.read_text().replace('cache = "off"\n', 'cache = "off"\nlink_mode = "symlink"\n')
    )
    with pytest.raises(ScenarioError, match=r"configs.nocache.link_mode: 'symlink' is uv's"):
        load_scenario(str(bad))


def test_shipped_uv_scenarios_put_uv_beside_pip() -> None:
    for name in ("uv-smoke", "uv-torch"):
        s = load_scenario(name)
        by = {c.name: c for c in s.configs}
        assert by["naive"].installer == "pip"
        assert (by["uv-naive"].venv, by["uv-naive"].cache, by["uv-naive"].installer) == (
            "target",
            "target",
            "uv",
        )
        assert (by["uv-cache-on-tmp"].venv, by["uv-cache-on-tmp"].cache) == ("target", "tmp")
        assert (by["uv-all-tmp"].venv, by["uv-all-tmp"].cache) == ("tmp", "tmp")


def test_a_missing_venv_creator_fails_before_anything_is_made(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(installers, "uv_binary", lambda: None)
    results = tmp_path / "results"
    (tmp_path / "t").mkdir()
    (tmp_path / "s").mkdir()
    rc = main(
        [
            "run",
            "--scenario",
            str(TINY),
            "--configs",
            "nocache",
            "--venv-creator",
            "uv",
            "--target",
            str(tmp_path / "t"),
            "--tmp",
            str(tmp_path / "s"),
            "--results",
            str(results),
            "--no-report",
            "--no-probe",
            "--quiet",
        ]
    )
    assert rc == 2 and not results.exists()
    assert not any((tmp_path / "t").iterdir())


# ---------------------------------------------------------------- end to end: a run across the axes
@pytest.mark.e2e
def test_run_across_installers_link_modes_and_creators_on_two_filesystems(
    tmpfs, disk_dir: Path, tmp_path: Path
) -> None:
    target = tmpfs(size="200m", name="target")
    if fstype_of(disk_dir) == "tmpfs":
        pytest.skip("the test's temp folder is itself a tmpfs; need a disk filesystem")
    results = tmp_path / "results"
    configs = {  # config: (venv creator, link mode, what the disk must show, fall-back warned)
        "naive_pip_by-venv": ("venv", "default", "copy", False),
        "nocache_pip_by-venv-without-pip": ("venv-without-pip", "default", "copy", False),
        "naive_uv_by-uv_link-hardlink": ("uv", "hardlink", "hardlink", False),  # all on the tmpfs
        "venv-on-tmp_uv_by-virtualenv_link-symlink": (
            "virtualenv",
            "symlink",
            "symlink",
            False,
        ),  # all on disk
        "venv-on-tmp_uv_by-venv_link-copy": ("venv", "copy", "copy", False),
        "warm_uv_by-uv_link-hardlink": (
            "uv",
            "hardlink",
            "copy",
            True,
        ),  # venv on disk, cache on the tmpfs
    }
    rc = main(
        [
            "run",
            "--scenario",
            str(TINY),
            "--target",
            str(target),
            "--tmp",
            str(disk_dir),
            "--results",
            str(results),
            "--no-report",
            "--no-probe",
            "--quiet",
            "--installer",
            "pip,uv",
            "--venv-creator",
            "virtualenv,venv,venv-without-pip,uv",
            "--matrix",
            "link_mode=hardlink,copy,symlink",
            "--configs",
            ",".join(configs),
        ]
    )
    assert rc == 0
    rows = {r["config"]: r for r in read_csv(only_run_dir(results) / "trials.csv")}
    assert set(rows) == set(configs)
    for name, (creator, link, seen, warned) in configs.items():
        r = rows[name]
        assert r["status"] == "ok", r["error"]
        assert (r["venv_creator"], r["link_mode"], r["link_observed"]) == (creator, link, seen), (
            name
        )
        assert bool(r["link_fallback"]) is warned, (name, r["link_fallback"])
        assert float(r["venv_s"]) > 0 and int(r["files_installed"]) > 0
    # python -m venv seeds pip through ensurepip: its venv phase does more than one without pip
    assert float(rows["naive_pip_by-venv"]["venv_s"]) > float(
        rows["naive_uv_by-uv_link-hardlink"]["venv_s"]
    )


def test_extra_index_beside_the_local_index_is_refused_before_anything_is_made(
    tmp_path: Path, capsys
) -> None:
    results = tmp_path / "results"
    (tmp_path / "t").mkdir()
    (tmp_path / "s").mkdir()
    rc = main(
        [
            "run",
            "--scenario",
            str(TINY),
            "--extra-index-url",
            "https://me:hunter2@127.0.0.1:9/simple",
            "--target",
            str(tmp_path / "t"),
            "--tmp",
            str(tmp_path / "s"),
            "--results",
            str(results),
            "--no-report",
            "--no-probe",
            "--quiet",
        ]
    )
    err = capsys.readouterr().err
    assert (
        rc == 2 and not results.exists() and "beside a real index" in err and "hunter2" not in err
    )


@pytest.mark.e2e
def test_run_installs_a_requirements_file_and_refuses_a_bad_one(tmp_path: Path, capsys) -> None:
    import json

    (tmp_path / "t").mkdir()
    (tmp_path / "s").mkdir()
    req = tmp_path / "req.txt"
    req.write_text("# the app\ntiny-core  # from the local index\n")
    common = [
        "run",
        "--scenario",
        str(TINY),
        "--configs",
        "nocache",
        "--target",
        str(tmp_path / "t"),
        "--tmp",
        str(tmp_path / "s"),
        "--no-report",
        "--no-probe",
        "--quiet",
    ]
    assert main([*common, "--results", str(tmp_path / "results"), "--requirements", str(req)]) == 0
    run = only_run_dir(tmp_path / "results")
    assert json.loads((run / "meta.json").read_text())["scenario"]["packages"] == ["tiny-core"]
    assert [r["status"] for r in read_csv(run / "trials.csv")] == ["ok"]
    req.write_text("tiny-core\ntiny_core ===\n")
    capsys.readouterr()
    assert main([*common, "--results", str(tmp_path / "bad"), "--requirements", str(req)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{req}:2: 'tiny_core ===': not a requirement" in err[0]
    assert not (tmp_path / "bad").exists()
