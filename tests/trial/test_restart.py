"""Start-up strategies end to end: first start and restart of real venvs, on the lab volume
(the target) and a tmpfs (tmp), read back from trials.csv; and --resume across strategies."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.files import TINY_PROFILE, only_run_dir, read_csv

from iobench.__main__ import main

pytestmark = [pytest.mark.e2e]


def scenario(tmp_path: Path, strategies: list[str], repeats: int = 1, ready: str = "") -> Path:
    path = tmp_path / "life.toml"
    path.write_text(f"""
[scenario]
name = "life"
packages = ["tiny-core"]
wheels = "{TINY_PROFILE}"
ready = "{ready or "import tiny_core; tiny_core.check()"}"
repeats = {repeats}
size_mb = 10

[defaults]
venv = "tmp"
tmpdir = "tmp"
cache = "tmp"

[matrix]
strategy = {json.dumps(strategies)}
name = "{{strategy}}"
""")
    return path


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A folder on a tmpfs (/dev/shm), removed afterwards."""
    if not os.access("/dev/shm", os.W_OK):
        pytest.skip("/dev/shm is not writable here")
    path = Path("/dev/shm") / f"iobench-test-{os.getpid()}-{tmp_path.name}"
    path.mkdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def lab(tmp_path: Path, latency_ms: float) -> Iterator[Path]:
    """The lab volume; the kernel may keep its names a minute (cache_s=60), so that a warm
    restart finds them cached and only the flush of a cold one sends the lookups to it."""
    from iobench.lab.manage import lab_unavailable_reason
    from iobench.lab.testing import slow_volume

    reason = lab_unavailable_reason()
    if reason:
        pytest.skip(reason)
    with slow_volume(tmp_path, latency_ms=latency_ms, cache_s=60) as mnt:
        yield mnt


@pytest.fixture
def quick(tmp_path: Path) -> Iterator[Path]:
    yield from lab(tmp_path, 0.2)  # enough to be a volume the daemon counts, cheap to copy onto


def run(
    scen: Path, target: Path, tmp: Path, results: Path, *extra: str
) -> dict[str, dict[str, str]]:
    rc = main(
        [
            "run",
            "--scenario",
            str(scen),
            "--target",
            str(target),
            "--tmp",
            str(tmp),
            "--results",
            str(results),
            "--no-report",
            "--no-probe",
            "--quiet",
            *extra,
        ]
    )
    run_dir = only_run_dir(results)
    rows = read_csv(run_dir / "trials.csv")
    assert rc == 0, rows
    return {r["config"]: r for r in rows}


def nothing_left(*roles: Path) -> None:
    for role in roles:
        scratch = role / ".iobench-scratch"
        left = {p.name for p in scratch.iterdir()} if scratch.exists() else set()
        assert left <= {".iobench-sentinel", "lock.json"}, left
        assert {p.name for p in role.iterdir()} <= {".iobench-scratch"}
    mounts = Path("/proc/self/mounts").read_text()
    for role in roles:
        assert f" {role}/" not in mounts, mounts  # no squashfs image left mounted below a role


@pytest.mark.lab
def test_a_persistent_venv_restart_is_made_cold_or_kept_warm(
    quick: Path, tmpfs: Path, tmp_path: Path
) -> None:
    """The runner makes a cold restart cold (lab-flush) and a warm one not, and the lab daemon
    counts what the restart read from the volume; that lab-flush sends every lookup to the
    volume again and makes the ready check slower by those round trips is held on a 3 ms
    volume by tests/test_coldcache.py (the lab counts file reads warm too: no keep_cache)."""
    scen = scenario(tmp_path, ["persistent-venv"])
    cold = run(scen, quick, tmpfs, tmp_path / "cold")["persistent-venv"]
    warm = run(scen, quick, tmpfs, tmp_path / "warm", "--cache-mode", "warm")["persistent-venv"]
    assert cold["status"] == warm["status"] == "ok"
    assert cold["strategy"] == "persistent-venv" and cold["venv_role"] == "target"
    assert (cold["cache_mode"], cold["cold_method"]) == ("cold", "lab-flush")
    assert (warm["cache_mode"], warm["cold_method"]) == ("warm", "none")
    assert int(cold["restart_target_read_bytes"]) > 0
    assert int(cold["stored_bytes"]) > 1_000_000  # the venv itself stays on the volume
    nothing_left(quick, tmpfs)


@pytest.mark.lab
def test_packed_and_copied_venvs_are_restored_ready_and_leave_nothing(
    quick: Path, tmpfs: Path, tmp_path: Path
) -> None:
    # fan-out without a fleet is packed-venv: its own archive, restored at the restart
    strategies = ["packed-venv", "copied-venv", "fan-out"]
    rows = run(scenario(tmp_path, strategies), quick, tmpfs, tmp_path / "r")
    for name in strategies:
        row = rows[name]
        assert row["status"] == "ok", row["error"]  # the ready check of the restored venv passed
        assert row["venv_role"] == "tmp"
        assert float(row["restore_s"]) > 0 and float(row["restart_s"]) >= float(row["restore_s"])
        assert float(row["first_start_s"]) > float(
            row["time_to_ready_s"]
        )  # the persist step counts
        assert int(row["stored_bytes"]) > 0 and row["persist_method"]
        assert row["cold_method"] == "lab-flush" and int(row["restart_target_read_bytes"]) > 0
    assert rows["copied-venv"]["persist_method"] == "copy"
    assert rows["copied-venv"]["restore_command"].startswith("cp -a ")
    nothing_left(quick, tmpfs)


def test_one_run_compares_the_ways_to_restore_a_packed_venv(
    tmpfs: Path, disk_dir: Path, tmp_path: Path
) -> None:
    """``--pack-method squashfs-loop,squashfs-fuse,squashfs-extract,tar+zstd`` (those this
    machine can run): one packed-venv config per method in the same run, each restarted its
    way — the image loop-mounted, mounted by squashfuse, extracted, or the tar unpacked — and
    ready; each row names the way that ran, and nothing is left mounted or in scratch."""
    from iobench.errors import IOBenchError
    from iobench.trial.strategies import choose_method

    methods = []
    for method in ("squashfs-loop", "squashfs-fuse", "squashfs-extract", "tar+zstd"):
        try:
            methods.append(choose_method(method))
        except IOBenchError:
            continue
    if len(methods) < 2:
        pytest.skip(f"only {methods} can restore here: nothing to compare")
    rows = run(scenario(tmp_path, ["reinstall", "packed-venv"]), disk_dir, tmpfs, tmp_path / "r",
               "--pack-method", ",".join(methods))  # fmt: skip
    names = {m: f"packed-venv_{m.replace('+', '-')}" for m in methods}
    assert set(rows) == {"reinstall", *names.values()}  # reinstall packs nothing: one config
    tools = {"squashfs-loop": "mount -t squashfs", "squashfs-fuse": "squashfuse",
             "squashfs-extract": "unsquashfs"}  # fmt: skip
    for method, name in names.items():
        row = rows[name]
        assert row["status"] == "ok", row["error"]  # the restored venv passed the ready check
        assert row["restore_method"] == method and row["strategy"] == "packed-venv"
        assert row["persist_method"] == ("squashfs" if method.startswith("squashfs") else method)
        assert row["restore_tool"] == tools.get(method, row["restore_tool"]) != ""
        assert row["restore_command"].split()[0] in ("mkdir", "unsquashfs", "tar")
        assert 0 < float(row["restore_s"]) <= float(row["restart_s"])
    meta = json.loads((only_run_dir(tmp_path / "r") / "meta.json").read_text())
    assert meta["pack_method"] == ",".join(methods)
    assert [c["pack_method"] for c in meta["scenario"]["configs"]] == ["", *methods]
    mountinfo = Path("/proc/self/mountinfo").read_text().splitlines()
    assert not [m for m in mountinfo if f" {disk_dir}/" in m or f" {tmpfs}/" in m], mountinfo
    nothing_left(disk_dir, tmpfs)


def test_a_reinstall_restart_makes_its_venv_with_the_config_s_creator(tmp_path: Path) -> None:
    """``python -m venv --without-pip`` seeds no pip; virtualenv would: the ready check, run at
    both events, fails if the restart's venv was made by another creator than the first's."""
    target, tmp = tmp_path / "target", tmp_path / "tmp"
    target.mkdir()
    tmp.mkdir()
    ready = "import importlib.util, tiny_core; assert importlib.util.find_spec('pip') is None"
    scen = scenario(tmp_path, ["reinstall", "persistent-venv"], ready=ready)
    text = scen.read_text().replace(
        'cache = "tmp"\n', 'cache = "tmp"\nvenv_creator = "venv-without-pip"\n', 1
    )
    scen.write_text(text)
    rows = run(scen, target, tmp, tmp_path / "r")
    assert rows["reinstall"]["venv_creator"] == "venv-without-pip"
    assert rows["reinstall"]["status"] == "ok" and float(rows["reinstall"]["restart_s"]) > 0
    nothing_left(target, tmp)


@pytest.mark.lab
def test_a_prewarm_restart_reads_the_recorded_import_set_before_the_ready_check(
    quick: Path, tmpfs: Path, tmp_path: Path
) -> None:
    """prewarm: the first start lists the venv's files the ready check opened; the cold
    restart reads them, 32 at once, then passes the ready check — and the lab daemon saw
    at least those bytes read from the volume."""
    rows = run(scenario(tmp_path, ["persistent-venv", "prewarm"]), quick, tmpfs, tmp_path / "r")
    warm, plain = rows["prewarm"], rows["persistent-venv"]
    assert warm["status"] == plain["status"] == "ok", warm["error"]
    assert warm["venv_role"] == "target" and warm["persist_method"] == "record"
    files = int(warm["persist_tool"].split("(")[1].split()[0])
    assert files >= 2, warm["persist_tool"]  # tiny_core's module and its bytecode at least
    assert float(warm["first_start_s"]) > float(warm["time_to_ready_s"])  # the recording counts
    assert warm["restore_command"].startswith("xargs -0 -P 32 -n 64 cat -- < ")
    assert float(warm["restore_s"]) > 0
    assert float(warm["restart_s"]) >= float(warm["restore_s"]) + float(warm["restart_import_s"])
    assert warm["cold_method"] == "lab-flush"
    assert int(warm["restart_target_read_bytes"]) >= int(plain["restart_target_read_bytes"])
    assert int(warm["stored_bytes"]) > int(plain["stored_bytes"]) * 0.9  # the venv, and the list
    nothing_left(quick, tmpfs)


@pytest.mark.lab
def test_a_packed_cache_restart_installs_from_the_restored_cache_and_downloads_nothing(
    quick: Path, tmpfs: Path, tmp_path: Path
) -> None:
    """packed-cache: the first start installs with its cache on tmp and packs the cache onto
    the volume; the cold restart (a new machine: tmp empty) unpacks it onto tmp, installs
    from it — no wheel byte from the index — and passes the ready check."""
    rows = run(scenario(tmp_path, ["reinstall", "packed-cache"]), quick, tmpfs, tmp_path / "r")
    row = rows["packed-cache"]
    assert row["status"] == "ok", row["error"]
    assert (row["venv_role"], row["cache_role"]) == ("tmp", "tmp")  # the strategy's places
    assert row["persist_method"] in ("tar", "tar+zstd")  # written to: never a squashfs image
    assert "/store/cache.tar" in row["persist_command"]
    assert int(row["index_bytes"]) > 0 and int(row["restart_index_bytes"]) == 0
    # reinstall's cache was on tmp too, and went with the machine: it downloads again
    assert int(rows["reinstall"]["restart_index_bytes"]) == int(row["index_bytes"])
    assert float(row["restore_s"]) > 0
    assert float(row["restart_s"]) > float(row["restore_s"]) + float(row["restart_import_s"])
    assert float(row["first_start_s"]) > float(row["time_to_ready_s"])  # the pack counts
    assert row["cold_method"] == "lab-flush" and int(row["restart_target_read_bytes"]) > 0
    assert 0 < int(row["stored_bytes"]) < int(row["index_bytes"]) * 2
    nothing_left(quick, tmpfs)


@pytest.mark.lab
def test_bytecode_compiled_at_install_at_first_import_or_on_local_disk(
    quick: Path, tmpfs: Path, tmp_path: Path
) -> None:
    """A persistent venv's bytecode three ways: compiled at install (in the venv, on the
    volume), written by the first start's import (there too, only what was imported), or
    kept in PYTHONPYCACHEPREFIX on local disk — nothing of it on the volume, and the cold
    restart on its new machine compiles what it imports again, there."""
    scen = scenario(tmp_path, ["persistent-venv"])
    text = (
        scen.read_text().split("[matrix]")[0]
        + """
[defaults.more]
[configs.compiled]
strategy = "persistent-venv"
[configs.first-import]
strategy = "persistent-venv"
compile = "off"
[configs.prefix-local]
strategy = "persistent-venv"
compile = "off"
pycache = "local"
"""
    )
    scen.write_text(text.replace("[defaults.more]\n", ""))
    rows = run(scen, quick, tmpfs, tmp_path / "r")
    assert all(r["status"] == "ok" for r in rows.values()), rows
    compiled, first, local = rows["compiled"], rows["first-import"], rows["prefix-local"]
    assert (local["pycache"], compiled["pycache"]) == ("local", "beside")
    # what stays on the volume: every module's bytecode, the imported ones', none
    assert int(compiled["stored_bytes"]) > int(first["stored_bytes"]) > int(local["stored_bytes"])
    # the restarts wrote no file onto the volume (the first import's bytecode was already
    # there; the local prefix is local), and the local one compiled its imports again
    assert [int(r["restart_target_creates"]) for r in (compiled, first, local)] == [0, 0, 0]
    assert int(local["restart_pyc_local"]) >= 2 and compiled["restart_pyc_local"] == ""
    nothing_left(quick, tmpfs)


@pytest.mark.lab
def test_a_layered_venv_keeps_only_what_the_image_lacks_on_the_volume(
    quick: Path, tmpfs: Path, tmp_path: Path
) -> None:
    """layered-venv: the image's packages (tiny-blob) on local disk, made once per run and
    untimed; the venv on the volume holds only tiny-core, reads tiny-blob through the image
    at both events (the ready check imports both), cold from the volume for its own part."""
    scen = scenario(tmp_path, ["persistent-venv", "layered-venv"])
    scen.write_text(
        scen.read_text().replace("size_mb = 10\n", 'size_mb = 10\nimage = ["tiny-blob==0.1.0"]\n')
    )
    rows = run(scen, quick, tmpfs, tmp_path / "r")
    layered, whole = rows["layered-venv"], rows["persistent-venv"]
    assert layered["status"] == whole["status"] == "ok", layered["error"]
    assert layered["venv_role"] == "target" and layered["strategy"] == "layered-venv"
    assert int(layered["files_installed"]) < int(whole["files_installed"])  # tiny-core only
    # tiny-blob's ~1.3 MB (its shared libraries) stay on local disk; the seeded pip is in both
    assert int(whole["stored_bytes"]) - int(layered["stored_bytes"]) > 1_000_000
    assert int(layered["restart_target_read_bytes"]) > 0  # tiny-core, from the volume, cold
    assert float(layered["restart_import_s"]) > 0
    nothing_left(quick, tmpfs)


def test_a_layered_venv_needs_the_image_it_sits_over(tmp_path: Path) -> None:
    from iobench.errors import ScenarioError
    from iobench.scenario.load import load_scenario

    with pytest.raises(ScenarioError, match="layered-venv .* needs the packages the pod's image"):
        load_scenario(str(scenario(tmp_path, ["layered-venv"])))
