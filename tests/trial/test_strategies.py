"""Start-up strategies with real venvs: pack or copy out, remove, restore, import, nothing left."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from helpers.venvs import build_wheel, check_venv, make_venv

from iobench.errors import IOBenchError, SafetyError
from iobench.scenario import vocab
from iobench.system.scratch import SENTINEL, Scratch, remove
from iobench.trial import strategies
from iobench.trial.strategies import StrategyError


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture
def roles(tmp_path: Path, tmpfs) -> tuple[Scratch, Scratch]:  # noqa: ANN001 - conftest factory
    """A target scratch on tmp_path's filesystem and a tmp scratch on a tmpfs we mount."""
    target = tmp_path / "target"
    target.mkdir()
    return Scratch(target).ensure(), Scratch(tmpfs()).ensure()


def only_sentinels(*scratches: Scratch) -> None:
    for s in scratches:
        assert sorted(p.name for p in s.root.iterdir()) == [SENTINEL]
        assert sorted(p.name for p in s.root.parent.iterdir()) == [s.root.name]


def _cases() -> list[tuple[str, str]]:
    return [
        ("packed-venv", "tar"),
        ("packed-venv", "tar+zstd"),
        ("packed-venv", "zstd-module"),
        ("packed-venv", "squashfs"),
        ("packed-venv", "squashfuse"),
        ("copied-venv", "copy"),
    ]


@pytest.mark.parametrize(("name", "method"), _cases())
def test_persist_remove_restore_imports_and_leaves_nothing(
    name: str,
    method: str,
    roles: tuple[Scratch, Scratch],
    wheel: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    target, local = roles
    if method == "zstd-module":
        pytest.importorskip("zstandard")
        monkeypatch.setattr(strategies, "compressor", lambda: "zstandard module")
        method = "tar+zstd"
    elif method == "squashfuse":
        if not (
            shutil.which("squashfuse")
            and shutil.which("mksquashfs")
            and os.path.exists("/dev/fuse")
        ):
            pytest.skip("squashfuse or mksquashfs missing")
        monkeypatch.setattr(strategies, "squashfs_mounter", lambda: "squashfuse")
        method = "squashfs"
    elif method not in ("copy", *strategies.available_methods()):
        pytest.skip(f"{method} cannot run here")
    venv = local.root / "venv"
    make_venv(venv, wheel)
    store = target.root / "store"

    packed = strategies.persist(name, venv, store, method="auto" if method == "copy" else method)
    assert packed is not None and packed.method == method
    assert packed.bytes > 0 and packed.files > 10 and packed.seconds > 0
    assert strategies.stored_bytes(store) == packed.bytes
    if method == "tar+zstd":
        tar_size = strategies.read_manifest(store)["tree_bytes"]
        assert packed.bytes < tar_size  # compressed
    remove(venv)

    restored = strategies.restore(name, store, venv)
    assert restored is not None
    assert (restored.method, restored.files, restored.bytes) == (method, packed.files, packed.bytes)
    assert restored.mounted == (method == "squashfs")
    if restored.mounted:
        assert os.path.ismount(venv)
    check_venv(venv)
    if restored.command:  # a start script could run exactly this
        assert str(venv.parent) in restored.command or str(venv) in restored.command

    strategies.release(restored)
    remove(venv)
    remove(store)
    only_sentinels(target, local)


def test_the_module_compressor_really_uses_zstandard(
    roles: tuple[Scratch, Scratch], wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    zstandard = pytest.importorskip("zstandard")
    monkeypatch.setattr(strategies, "compressor", lambda: "zstandard module")
    target, local = roles
    venv = local.root / "venv"
    make_venv(venv, wheel)
    packed = strategies.pack(venv, target.root / "store", "tar+zstd")
    assert packed.tool == "zstandard module" and packed.command == ""
    with open(packed.path, "rb") as f:
        head = zstandard.ZstdDecompressor().stream_reader(f).read(512)
    assert head[257:262] == b"ustar"  # a tar header inside the zstd frame
    remove(venv)
    remove(target.root / "store")


def test_restore_refuses_another_path_because_venvs_hold_absolute_paths(
    roles: tuple[Scratch, Scratch], wheel: Path
) -> None:
    target, local = roles
    venv = local.root / "venv"
    make_venv(venv, wheel)
    strategies.copy_out(venv, target.root / "store")
    remove(venv)
    with pytest.raises(StrategyError, match="absolute path"):
        strategies.copy_in(target.root / "store", local.root / "elsewhere")
    assert not (local.root / "elsewhere").exists()
    remove(target.root / "store")


@pytest.mark.parametrize("method", ["tar", "tar+zstd"])
def test_a_fan_out_restore_at_another_path_rewrites_the_venvs_own_path(
    method: str, roles: tuple[Scratch, Scratch], wheel: Path
) -> None:
    """A fan-out's worker on the builder's host restores at its own path: after the
    relocation the console script's #! line, the activate scripts and sys.prefix are its own."""
    if method not in strategies.available_methods():
        pytest.skip(f"{method} cannot run here")
    target, local = roles
    built = local.root / "w0" / "venv"
    built.parent.mkdir()
    make_venv(built, wheel)
    packed = strategies.pack(built, target.root / "store", method)
    mine = local.root / "w1" / "venv"
    mine.parent.mkdir()
    with pytest.raises(StrategyError, match="absolute path"):  # not without being asked
        strategies.unpack(target.root / "store", mine)
    with pytest.raises(StrategyError, match="the archive's folder name"):
        strategies.unpack(target.root / "store", local.root / "w1" / "other", elsewhere=True)
    remove(built)  # the builder's venv is gone: nothing may still point into it
    restored = strategies.unpack(target.root / "store", mine, elsewhere=True)
    assert restored.relocated >= 3, restored  # h8hello, pip's scripts, activate, pyvenv.cfg
    check_venv(mine)
    text = [p.read_bytes() for p in (mine / "bin").iterdir() if p.is_file() and not p.is_symlink()]
    assert not [t for t in text if str(built).encode() in t]
    assert str(mine).encode() in (mine / "bin" / "activate").read_bytes()
    assert restored.bytes == packed.bytes
    # where it was built, nothing needs rewriting
    remove(mine)
    again = strategies.unpack(target.root / "store", built, elsewhere=True)
    assert again.relocated == 0
    check_venv(built)
    remove(local.root / "w0")
    remove(local.root / "w1")
    remove(target.root / "store")
    only_sentinels(target, local)


def test_steps_refuse_paths_outside_scratch_and_existing_ones(
    roles: tuple[Scratch, Scratch], wheel: Path, tmp_path: Path
) -> None:
    target, local = roles
    venv = local.root / "venv"
    make_venv(venv, wheel)
    outside = tmp_path / "not-scratch"
    with pytest.raises(SafetyError, match="not inside an iobench scratch"):
        strategies.pack(venv, outside, "tar")
    assert not outside.exists()
    mine = target.root / "store"
    mine.mkdir()
    (mine / "keep.txt").write_text("not iobench's")
    with pytest.raises(SafetyError, match="already exists"):
        strategies.pack(venv, mine, "tar")
    assert (mine / "keep.txt").read_text() == "not iobench's"
    with pytest.raises(StrategyError, match="not a venv"):
        strategies.copy_out(local.root, target.root / "other")


def test_a_failed_step_removes_only_what_it_made(
    roles: tuple[Scratch, Scratch], wheel: Path
) -> None:
    target, local = roles
    venv = local.root / "venv"
    make_venv(venv, wheel)

    def failing(argv: Sequence[str]) -> None:
        subprocess.run(list(argv), check=True, capture_output=True)
        raise StrategyError("interrupted after the command")

    with pytest.raises(StrategyError, match="interrupted"):
        strategies.pack(venv, target.root / "store", "tar", run=failing)
    assert not (target.root / "store").exists()
    strategies.pack(venv, target.root / "store", "tar")
    remove(venv)
    with pytest.raises(StrategyError, match="interrupted"):
        strategies.unpack(target.root / "store", venv, run=failing)
    assert not venv.exists()
    assert (target.root / "store" / "venv.tar").is_file()  # the stored archive is kept
    remove(target.root / "store")
    only_sentinels(target, local)


def test_a_failing_command_is_one_clear_error(roles: tuple[Scratch, Scratch], wheel: Path) -> None:
    target, local = roles
    venv = local.root / "venv"
    make_venv(venv, wheel)
    strategies.pack(venv, target.root / "store", "tar")
    (target.root / "store" / "venv.tar").write_bytes(b"not a tar file")
    remove(venv)
    with pytest.raises(StrategyError, match="tar failed"):
        strategies.unpack(target.root / "store", venv)
    assert not venv.exists()


def test_a_cache_is_packed_with_tar_never_as_a_read_only_image(
    roles: tuple[Scratch, Scratch],
) -> None:
    """packed-cache's archive: pip and uv write to their cache, so never squashfs; restored
    where it was made, as it was."""
    target, local = roles
    cache = local.root / "cache"
    (cache / "http-v2" / "a").mkdir(parents=True)
    (cache / "http-v2" / "a" / "entry").write_bytes(b"x" * 5000)
    with pytest.raises(StrategyError, match="tar or tar\\+zstd"):
        strategies.pack(cache, target.root / "store", "squashfs", kind="cache")
    step = strategies.persist("packed-cache", local.root / "venv", target.root / "store",
                              "squashfs", cache=cache)  # fmt: skip  # --pack-method is not its
    assert step is not None and step.method in ("tar", "tar+zstd") and "cache.tar" in step.path
    remove(cache)
    back = strategies.restore("packed-cache", target.root / "store", local.root / "venv",
                              cache=cache)  # fmt: skip
    assert back is not None and (cache / "http-v2" / "a" / "entry").read_bytes() == b"x" * 5000
    with pytest.raises(StrategyError, match="where the cache was made"):
        strategies.unpack(target.root / "store", local.root / "elsewhere")


def test_strategies_as_data() -> None:
    assert list(vocab.STRATEGIES) == [
        "reinstall",
        "persistent-venv",
        "packed-venv",
        "copied-venv",
        "packed-cache",
        "layered-venv",
        "prewarm",
        "fan-out",
    ]
    assert (
        strategies.get("layered-venv").layered
        and strategies.get("layered-venv").venv_role == "target"
    )
    packed_cache = strategies.get("packed-cache")
    assert (packed_cache.venv_role, packed_cache.cache_role) == ("tmp", "tmp")
    assert packed_cache.restart == ("restore-cache", "install")
    assert strategies.get("prewarm").venv_role == "target"
    assert strategies.get("fan-out").restart == ("restore",)
    assert strategies.get("persistent-venv").venv_role == "target"
    assert strategies.get("packed-venv").restart == ("restore",)
    assert strategies.get("reinstall").restart == ("install",)
    with pytest.raises(IOBenchError, match="unknown strategy 'nope'; known: reinstall"):
        strategies.get("nope")
    assert strategies.persist("persistent-venv", Path("/x"), Path("/y")) is None
    assert strategies.restore("reinstall", Path("/y"), Path("/x")) is None
    with pytest.raises(StrategyError, match="unknown pack method"):
        strategies.choose_method("zip")


def test_step_result_row_columns() -> None:
    r = strategies.StepResult("restore", "tar", "tar", "tar -xf a", 10, 2, 0.5, "/v")
    assert r.to_row("restore") == {
        "restore_method": "tar",
        "restore_tool": "tar",
        "restore_command": "tar -xf a",
        "restore_bytes": 10,
        "restore_files": 2,
        "restore_mounted": False,
        "restore_relocated": 0,
        "restore_s": 0.5,
    }
