"""The start-up strategies' traps (iobench.predict.traps), on real folders and mounts: a
small tmpfs standing in for Docker's /dev/shm, TMPDIR on another filesystem than the cache, a
venv on the lab volume without bytecode, locks that fail where uv's cache lives."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from iobench.predict import doctor, traps


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private HOME whose caches and TMPDIR are this test's folders."""
    h = tmp_path / "home"
    (h / "tmp").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.setenv("TMPDIR", str(h / "tmp"))
    for var in ("PIP_CACHE_DIR", "UV_CACHE_DIR", "XDG_CACHE_HOME", "HF_HOME", "TORCH_HOME",
                "VIRTUAL_ENV"):  # fmt: skip
        monkeypatch.delenv(var, raising=False)
    return h


@pytest.fixture
def slow(tmp_path: Path) -> Iterator[Path]:
    from iobench.lab.manage import lab_unavailable_reason
    from iobench.lab.testing import slow_volume

    reason = lab_unavailable_reason()
    if reason:
        pytest.skip(reason)
    with slow_volume(tmp_path, latency_ms=0.2) as mnt:
        yield mnt


def fake_venv(root: Path, modules: int = 40) -> Path:
    """A venv's site-packages with ``modules`` plain modules and no bytecode."""
    site = root / "lib" / f"python3.{sys.version_info.minor}" / "site-packages" / "pkg"
    site.mkdir(parents=True)
    (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    for i in range(modules):
        (site / f"m{i}.py").write_text(f"VALUE = {i}\n")
    return root


def locs(**paths: Path) -> list[doctor.Location]:
    return [doctor.locate(name, path) for name, path in paths.items()]


@pytest.mark.lab
def test_the_pip_cache_on_another_filesystem_than_tmpdir_is_flagged_with_both_moved(
    tmp_path: Path,
    tmpfs,
    home: Path,  # noqa: ANN001
) -> None:
    local = tmpfs("64m")
    (tmp_path / "cache").mkdir()
    found = traps.cache_apart(locs(TMPDIR=local, PIP_CACHE_DIR=tmp_path / "cache"), str(local))
    assert [f.level for f in found] == ["warn"]
    assert "different filesystems" in found[0].message and "atomic" in found[0].message
    mine = f"{local}/iobench-$(id -u)"
    assert f'export PIP_CACHE_DIR="{mine}/pip-cache"' in found[0].fix
    assert f'export TMPDIR="{mine}/tmp"' in found[0].fix
    # one filesystem: nothing to say
    (local / "cache").mkdir()
    assert traps.cache_apart(locs(TMPDIR=local, PIP_CACHE_DIR=local / "cache"), str(local)) == []
    # uv's cache apart from the venv: it copies instead of linking
    (tmp_path / "venv").mkdir()
    found = traps.cache_apart(locs(venv=tmp_path / "venv", UV_CACHE_DIR=local / "uv"), str(local))
    assert [f.level for f in found] == ["info"] and "copies every file" in found[0].message


def test_uv_on_a_target_whose_flock_fails_is_bad_and_moves_the_cache(tmp_path: Path) -> None:
    target, local = tmp_path / "target", tmp_path / "local"
    target.mkdir()
    local.mkdir()
    placed = locs(UV_CACHE_DIR=target / "uv", PIP_CACHE_DIR=target / "pip")
    mount = doctor.locate("target", target).mountpoint
    failing = {"flock": "error: [Errno 38] Function not implemented"}
    found = traps.lock_fallout(placed, failing, mount, str(local))
    assert [(f.level, f.topic) for f in found] == [("bad", "locks"), ("warn", "locks")]
    assert "stops when it fails" in found[0].message
    assert any(line.startswith("export UV_CACHE_DIR=") for line in found[0].fix)
    loose = traps.lock_fallout(placed, {"flock": "does not exclude"}, mount, str(local))
    assert [f.level for f in loose] == ["warn", "warn"] and "unprotected" in loose[0].message
    assert traps.lock_fallout(placed, {"flock": "works"}, mount, str(local)) == []
    # the caches elsewhere: what the target's locks do is not theirs to suffer
    elsewhere = locs(UV_CACHE_DIR=Path("/proc/uv"))
    assert traps.lock_fallout(elsewhere, failing, mount, str(local)) == []


@pytest.mark.lab
def test_a_venv_on_the_lab_volume_without_bytecode_is_flagged_until_compiled(slow: Path) -> None:
    venv = fake_venv(slow / "venv")
    found = traps.bytecode_missing(locs(venv=venv))
    assert [f.level for f in found] == ["warn"] and "40 of its 40 modules" in found[0].message
    compile_line = found[0].fix[0]
    assert compile_line.startswith("python -m compileall")
    subprocess.run(compile_line.replace("python", sys.executable, 1), shell=True, check=True)
    assert traps.bytecode_share(venv) == (40, 0)
    assert traps.bytecode_missing(locs(venv=venv)) == []  # the fix holds


def test_a_venv_on_local_disk_without_bytecode_is_not_a_trap(tmp_path: Path) -> None:
    venv = fake_venv(tmp_path / "venv")
    assert traps.bytecode_share(venv) == (40, 40)
    assert traps.bytecode_missing(locs(venv=venv)) == []


@pytest.mark.lab
def test_a_64_mib_shm_is_smaller_than_a_venv(tmp_path: Path, tmpfs) -> None:  # noqa: ANN001
    shm = tmpfs("64m")
    info, _ = doctor.shm_check(str(shm))
    assert info is not None
    found = traps.shm_for_venv(info, [])  # no venv active: a torch + CUDA one
    assert [f.level for f in found] == ["warn"] and "64 MiB" in found[0].message
    assert "--shm-size=5g" in found[0].fix[0]
    small = tmp_path / "venv"
    small.mkdir()
    (small / "f").write_bytes(b"x" * 1_000_000)  # a 1 MB venv fits
    assert traps.shm_for_venv(info, locs(venv=small)) == []
    big = tmp_path / "big"
    big.mkdir()
    with open(big / "f", "wb") as f:
        f.truncate(100 * 2**20)  # 100 MiB (sparse): more than the tmpfs holds
    found = traps.shm_for_venv(info, locs(venv=big))
    assert [f.level for f in found] == ["warn"] and "--shm-size=1g" in found[0].fix[0]


def test_loop_mounts_refused_without_cap_sys_admin_fall_back(tmp_path: Path) -> None:
    status = tmp_path / "status"
    status.write_text("Name:\tx\nCapEff:\t0000000000000000\n")
    dev = tmp_path / "dev"
    dev.mkdir()
    info, found = traps.loop_mount(str(status), str(dev))
    assert info["cap_sys_admin"] is False and info["loop_control"] is False
    assert [f.level for f in found] == ["info"] and "no CAP_SYS_ADMIN" in found[0].message
    assert "squashfuse" in found[0].message or "tar" in found[0].message


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/dev/loop-control"),
                    reason="needs root and /dev/loop-control")  # fmt: skip
def test_loop_mounts_as_root_here_are_ok() -> None:
    info, found = traps.loop_mount()
    assert info["cap_sys_admin"] and [f.level for f in found] == ["ok"]


@pytest.mark.lab
def test_doctor_on_a_container_like_setup_flags_each_trap_with_its_fix(
    tmp_path: Path,
    slow: Path,
    tmpfs,
    home: Path,
    monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
) -> None:
    """A 64 MiB /dev/shm, TMPDIR on another filesystem than pip's cache, a persistent venv on
    the volume without bytecode: `iobench doctor` names each, with its fix."""
    shm, fast = tmpfs("64m"), tmpfs("6g")  # room for an install: only the size is a trap
    (tmp_path / "cache").mkdir()
    monkeypatch.setenv("TMPDIR", str(fast))
    monkeypatch.setenv("PIP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("VIRTUAL_ENV", str(fake_venv(slow / "venv")))
    report = doctor.run_doctor(slow, fast, seconds=0.05, offline=True, shm=str(shm))
    topics = {f.topic: f for f in report.findings if f.level == "warn"}
    topics |= {f.topic: f for f in report.findings if f.topic not in topics}
    assert (
        topics["cache-apart"].level == "warn" and "PIP_CACHE_DIR" in topics["cache-apart"].message
    )
    assert topics["bytecode"].level == "warn" and "compileall" in topics["bytecode"].fix[0]
    shm_warns = [f for f in report.findings if f.topic == "shm" and f.level == "warn"]
    assert shm_warns and any("--shm-size" in " ".join(f.fix) for f in shm_warns)
    assert "loop-mount" in topics
    assert report.exit_status == 3, [f for f in report.findings if f.level == "bad"]
    assert report.to_dict()["loop_mount"] == report.loop_mount
    script = report.fix_script()
    assert any("compileall" in line for line in script)
    assert any(line.startswith("export PIP_CACHE_DIR=") for line in script)


@pytest.mark.lab
def test_a_venv_on_the_volume_that_a_packed_one_would_beat_is_said_with_both_figures(
    slow: Path, tmp_path: Path
) -> None:
    from iobench.predict.model import Costs

    venv = fake_venv(slow / "venv", modules=400)
    # 400 files of ~10 bytes, 1 ms a file, 100 MB/s: ~0.05 s of round trips against ~0 s
    found = traps.packed_would_start_faster(locs(venv=venv), Costs({"open_read": 1.0}, None, 100.0))
    assert [(f.level, f.topic) for f in found] == [("info", "strategy")]
    message = found[0].message
    assert "401 files" in message and "1.00 ms per file" in message and "packed venv" in message
    assert found[0].measure[0].startswith(f"iobench run --target {slow} --scenario lifecycle")
    # a volume whose reads are slow beside its round trips: the archive would not win
    assert (
        traps.packed_would_start_faster(locs(venv=venv), Costs({"open_read": 0.01}, None, 0.001))
        == []
    )
    # no probe of the venv's filesystem, or the venv on local disk: nothing predicted
    assert traps.packed_would_start_faster(locs(venv=venv), None) == []
    local = fake_venv(tmp_path / "venv")
    assert (
        traps.packed_would_start_faster(locs(venv=local), Costs({"open_read": 1.0}, None, 100.0))
        == []
    )
