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
from iobench.trial import packmethods, squashfs, strategies
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
        monkeypatch.setattr(packmethods, "compressor", lambda: "zstandard module")
        method = "tar+zstd"
    elif method == "squashfuse":
        if not (
            shutil.which("squashfuse")
            and shutil.which("mksquashfs")
            and os.path.exists("/dev/fuse")
        ):
            pytest.skip("squashfuse or mksquashfs missing")
        monkeypatch.setattr(packmethods, "squashfs_mounter", lambda: "squashfuse")
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
    ran = {"mount -t squashfs": "squashfs-loop", "squashfuse": "squashfs-fuse"}.get(restored.tool)
    assert (restored.method, restored.files, restored.bytes) == (
        ran or method, packed.files, packed.bytes)  # fmt: skip
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
    monkeypatch.setattr(packmethods, "compressor", lambda: "zstandard module")
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


# ---------------------------------------------------------------- a squashfs image's restore ways
def _mounts_below(*folders: Path) -> list[str]:
    """Mount points at or below ``folders``, from /proc/self/mountinfo (field 5)."""
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [m for m in points for f in folders if m == str(f) or m.startswith(f"{f}/")]


@pytest.mark.parametrize("way", squashfs.WAYS)
def test_each_restore_way_of_one_squashfs_image_is_ready_and_released(
    way: str, roles: tuple[Scratch, Scratch], wheel: Path
) -> None:
    """``--pack-method squashfs-<way>``: the same image, packed by mksquashfs, comes back
    loop-mounted, mounted by squashfuse or extracted by unsquashfs; the venv passes its
    check, the step says which way ran, and after release nothing is mounted or left."""
    method = f"squashfs-{way}"
    try:
        strategies.choose_method(method)
    except StrategyError as exc:
        pytest.skip(str(exc))
    target, local = roles
    venv = local.root / "venv"
    make_venv(venv, wheel)
    store = target.root / "store"
    packed = strategies.persist("packed-venv", venv, store, method)
    assert packed is not None and packed.method == "squashfs" and packed.tool == "mksquashfs"
    assert strategies.read_manifest(store)["restore"] == way  # the way asked, for every worker
    remove(venv)

    restored = strategies.restore("packed-venv", store, venv)
    assert restored is not None
    assert (restored.method, restored.tool) == (method, squashfs.TOOLS[way])
    assert restored.mounted == (way in squashfs.MOUNTS) == os.path.ismount(venv)
    assert restored.command.startswith("unsquashfs -q -n -d " if way == "extract" else "mkdir ")
    check_venv(venv)
    if way == "extract":  # a writable copy, like a tar restore
        (venv / "written").write_text("a pip install could write here")
    else:
        with pytest.raises(OSError):
            (venv / "written").write_text("read-only image")
    strategies.release(restored)
    assert _mounts_below(target.root, local.root) == []
    remove(venv)
    remove(store)
    only_sentinels(target, local)


def test_an_asked_restore_way_missing_here_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What each way needs, checked before anything runs (the run's plan calls
    choose_method): one line naming what is missing and how to get it."""
    present = {"mksquashfs", "unsquashfs", "squashfuse", "fusermount3", "mount", "tar", "zstd"}
    monkeypatch.setattr(shutil, "which", lambda name, *a, **kw: f"/x/{name}" if name in present else None)  # fmt: skip
    monkeypatch.setattr(squashfs, "capability", lambda bit: False)  # an unprivileged pod
    monkeypatch.setattr(squashfs, "_kernel_has", lambda fstype: True)

    def refused(method: str) -> str:
        with pytest.raises(StrategyError) as exc:
            strategies.choose_method(method)
        assert "\n" not in str(exc.value)
        return str(exc.value)

    assert refused("squashfs-loop") == (
        "pack method squashfs-loop cannot run here: a loop mount needs CAP_SYS_ADMIN, which "
        "this process lacks (an unprivileged pod)"
    )
    for method in ("squashfs-extract", "tar+zstd", "tar"):
        assert strategies.choose_method(method) == method
    if os.path.exists("/dev/fuse"):  # auto: squashfuse mounts it (no loop without the capability)
        assert strategies.choose_method("squashfs-fuse") == "squashfs-fuse"
        assert strategies.choose_method("auto") == "squashfs"
        assert strategies.squashfs_mounter() == "squashfuse"
    present.discard("squashfuse")
    assert refused("squashfs-fuse") == (
        "pack method squashfs-fuse cannot run here: squashfuse is not installed "
        "(apt-get install squashfuse)"
    )
    assert strategies.choose_method("auto") == "tar+zstd"  # nothing mounts: no squashfs
    present.discard("unsquashfs")
    assert refused("squashfs-extract") == (
        "pack method squashfs-extract cannot run here: unsquashfs is not installed "
        "(apt-get install squashfs-tools)"
    )
    present.discard("mksquashfs")
    assert "mksquashfs is not installed" in refused("squashfs-extract")
    monkeypatch.setattr(squashfs, "capability", lambda bit: True)
    present.add("mksquashfs")
    if os.path.exists("/dev/loop-control"):
        assert strategies.choose_method("squashfs-loop") == "squashfs-loop"
    with pytest.raises(StrategyError, match="a cache is written to"):
        strategies.choose_method("squashfs-extract", writable=True)
    assert "unknown pack method 'squashfs-nfs'" in refused("squashfs-nfs")


def test_a_restore_way_lost_since_the_pack_fails_the_restore_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fan-out's worker on a host without squashfuse: the restore says so; no folder made."""
    monkeypatch.setattr(squashfs, "missing", lambda way: f"no {way} here")
    with pytest.raises(StrategyError, match="cannot restore squashfs-fuse here: no fuse here"):
        strategies._unpack_commands(
            "squashfs", "mksquashfs", tmp_path / "i", tmp_path / "v", "fuse"
        )
    assert squashfs.restore_commands("extract", Path("/s/venv.sqfs"), Path("/t/venv")) == [
        ["unsquashfs", "-q", "-n", "-d", "/t/venv", "/s/venv.sqfs"]
    ]
    loop = squashfs.restore_commands("loop", Path("/s/venv.sqfs"), Path("/t/venv"))
    assert loop[0] == ["mkdir", "/t/venv"] and "loop,ro,nosuid,nodev" in loop[1]


def test_several_pack_methods_become_configs_of_the_packing_strategies_only() -> None:
    """``--pack-method squashfs-loop,squashfs-fuse,tar+zstd``: each packed-venv (and fan-out)
    config, one per method, named by it; the others stay as they were; one value is no axis."""
    from iobench.scenario import axes
    from iobench.scenario.load import load_scenario

    base = load_scenario("lifecycle")
    given = axes.axes_from(None, None, [], "squashfs-loop,squashfs-fuse,tar+zstd")
    crossed = {c.name: c for c in axes.cross(base, given).configs}
    packed = [n for n in crossed if n.startswith("packed-venv")]
    assert packed == ["packed-venv_squashfs-loop", "packed-venv_squashfs-fuse", "packed-venv_tar-zstd"]  # fmt: skip
    assert [crossed[n].pack_method for n in packed] == ["squashfs-loop", "squashfs-fuse", "tar+zstd"]  # fmt: skip
    others = [c.name for c in base.configs if c.strategy != "packed-venv"]
    assert all(crossed[n].pack_method == "" for n in others) and len(crossed) == len(others) + 3
    assert axes.axes_from(None, None, [], "squashfs-fuse") == []  # the run's method, as before
    assert axes.axes_from(None, None, [axes.matrix_spec("pack_method=tar,squashfs")]) == [
        ("pack_method", ["tar", "squashfs"])
    ]
    with pytest.raises(IOBenchError, match="did you mean 'squashfs-extract'"):
        axes.axes_from(None, None, [], "tar,squashfs-extrakt")
    with pytest.raises(IOBenchError, match="axis pack_method given twice"):
        axes.axes_from(None, None, [("pack_method", ["tar", "squashfs"])], "tar,squashfs")


def test_a_config_s_own_pack_method_is_only_for_strategies_that_pack(tmp_path: Path) -> None:
    from iobench.errors import ScenarioError
    from iobench.scenario.load import load_scenario

    path = tmp_path / "s.toml"
    head = '[scenario]\nname = "s"\npackages = ["x"]\nready = "import x"\n\n'
    path.write_text(head + '[configs.p]\nvenv = "tmp"\ntmpdir = "tmp"\ncache = "off"\n'
                    'strategy = "packed-venv"\npack_method = "squashfs-extract"\n')  # fmt: skip
    (cfg,) = load_scenario(str(path)).configs
    assert cfg.pack_method == "squashfs-extract" and "pack_method=squashfs-extract" in cfg.summary()
    path.write_text(path.read_text().replace('"packed-venv"', '"copied-venv"'))
    with pytest.raises(ScenarioError, match=r"configs\.p\.pack_method: only for strategies that"):
        load_scenario(str(path))
    path.write_text(path.read_text().replace('"copied-venv"', '"packed-venv"').replace(
        '"squashfs-extract"', '"zip"'))  # fmt: skip
    with pytest.raises(ScenarioError, match=r"configs\.p\.pack_method: 'zip' is not one of auto"):
        load_scenario(str(path))


def test_a_forged_manifest_is_refused_before_anything_is_restored(tmp_path: Path) -> None:
    """Issue 35 (low, read in the code): ``unpack`` joined ``manifest["archive"]`` to the store
    unchecked (an absolute path leaves the store: another tar was extracted over the venv's
    folder), and ``relocate`` took ``manifest["venv"]`` unchecked (an empty one put the new
    path between every byte of the scripts)."""
    import json

    for name in ("target", "tmp"):
        (tmp_path / name).mkdir()
    target, local = Scratch(tmp_path / "target").ensure(), Scratch(tmp_path / "tmp").ensure()
    built = local.root / "w0" / "venv"
    (built / "bin").mkdir(parents=True)
    (built / "pyvenv.cfg").write_text(f"home = /usr/bin\nprefix = {built}\n")
    (built / "bin" / "tool").write_text(f"#!{built}/bin/python\nprint('hi')\n")
    store = target.root / "store"
    strategies.pack(built, store, "tar")
    good = json.loads((store / strategies.MANIFEST).read_text())
    theirs = tmp_path / "theirs"  # a tar of someone else's, outside the store
    (theirs / "venv").mkdir(parents=True)
    (theirs / "venv" / "planted").write_text("not from the store\n")
    subprocess.run(["tar", "-C", str(theirs), "-cf", str(theirs / "x.tar"), "venv"], check=True)
    mine = local.root / "w1" / "venv"
    mine.parent.mkdir()
    forged = [
        ({"archive": str(theirs / "x.tar")}, "archive"),
        ({"archive": "../../../theirs/x.tar"}, "archive"),
        ({"venv": ""}, "venv"),
        ({"venv": "/"}, "venv"),
        ({"restore": "bogus"}, "restore"),
        ({"bytes": -1}, "bytes"),
    ]
    for change, key in forged:
        (store / strategies.MANIFEST).write_text(json.dumps({**good, **change}))
        with pytest.raises(StrategyError, match=f"not a manifest iobench wrote: {key}"):
            strategies.unpack(store, mine, elsewhere=True)
        assert not (mine / "planted").exists() and not mine.exists()
    (store / strategies.MANIFEST).write_text(json.dumps(good))
    strategies.unpack(store, mine, elsewhere=True)  # the real one restores
    script = (mine / "bin" / "tool").read_bytes()
    with pytest.raises(StrategyError, match="not where a venv was made"):
        strategies.relocate(mine, "")
    assert (mine / "bin" / "tool").read_bytes() == script
