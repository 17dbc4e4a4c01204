"""recommend.py in a run with start-up strategies: the advice is the cheapest config over a
month at the user's starts (iobench.cost.month), its script holds the measured persist and
restore lines and the measured venv creator, and the script works when pasted — twice: the
first start packs, a restart on an emptied machine restores."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers import runs as rf
from helpers.files import DATA, STOCK_PYTHON3, python3_shim, stock_python3

from iobench.cost.idle import CostOptions
from iobench.report import build_report
from iobench.report.recommend import Recommendation
from iobench.report.script import (
    STOCK_VENV,
    STRICT,
    VENV_COMMANDS,
    fan_out_lines,
    packed_cache_lines,
    strategy_lines,
    user_command,
    venv_lines,
    venv_note,
)
from iobench.rundir.meta import RoleInfo, RunMeta
from iobench.shell import PRIVATE_DIR
from iobench.wheels.profile import load_profile
from iobench.wheels.synth import synthesize

TINY_PROFILE = DATA / "tiny-profile.toml"
RUN_ID = "20261130-120000-pod-a-torch"
#: first start and restart (s) of each strategy, and what it keeps (the numbers of
#: tests/test_lifecycle.py): reinstall wins at 1 start a month, packed-venv from 2.3 on
LIFE = {
    "reinstall": (20.0, 18.0, 0.0),
    "persistent-venv": (40.0, 6.0, 2e9),
    "packed-venv": (25.0, 3.0, 1e9),
}
SPECS = (
    rf.ConfigSpec("reinstall", venv="tmp", tmpdir="tmp", cache="tmp"),
    rf.ConfigSpec("persistent-venv", venv="target", tmpdir="tmp", cache="tmp"),
    rf.ConfigSpec("packed-venv", venv="tmp", tmpdir="tmp", cache="tmp"),
)


@pytest.fixture(scope="module")
def tiny_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheels")
    synthesize(load_profile(str(TINY_PROFILE)), out)
    return out


def strategy_run(tmp_path: Path, creator: str = "virtualenv") -> Path:
    """A synthetic run of three strategies whose roles are folders of tmp_path, its trials.csv
    holding the lifecycle columns a real run writes (tar commands in iobench's scratch)."""
    run = rf.make_run_dir(tmp_path / "results", configs=SPECS, repeats=3)
    meta = json.loads((run / "meta.json").read_text())
    roles = {}
    for name, role in meta["roles"].items():
        role.update(path=str(tmp_path / "roles" / name), device=f"dev-{name}")
        role["mountpoint"] = role["path"]
        roles[name] = role["path"]
        Path(role["path"]).mkdir(parents=True, exist_ok=True)
    meta["versions"]["venv"] = {"python": "3.11.7", "virtualenv": "21.15.11", "pip": "26.3"}
    (run / "meta.json").write_text(json.dumps(meta))
    trials = pd.read_csv(run / "trials.csv", dtype=str, keep_default_na=False)
    for i, row in trials.iterrows():
        first, restart, kept = LIFE[row["config"]]
        jitter = 0.1 * (i % 3)
        trial = f"{roles['tmp']}/.iobench-scratch/{RUN_ID}/{row['trial_id']}"
        store = f"{roles['target']}/.iobench-scratch/{RUN_ID}/{row['trial_id']}/store"
        packed = row["config"] == "packed-venv"
        trials.loc[
            i,
            [
                "strategy",
                "venv_creator",
                "first_start_s",
                "restart_s",
                "stored_bytes",
                "cache_mode",
                "cold_method",
                "persist_method",
                "persist_command",
                "restore_command",
            ],
        ] = [  # fmt: skip
            row["config"],
            creator,
            str(first + jitter),
            str(restart + jitter),
            str(int(kept)),
            "cold",
            "drop_caches",
            "tar" if packed else "",
            f"tar -C {trial} -cf {store}/venv.tar venv" if packed else "",
            f"tar -C {trial} -xf {store}/venv.tar" if packed else "",
        ]
    trials.to_csv(run / "trials.csv", index=False)
    return run


def advice(run: Path, starts: float) -> Recommendation:
    result = build_report(run, CostOptions(gpu_price=3.6, starts_per_month=starts), charts=False)
    assert result.recommendation is not None
    return result.recommendation


def test_the_advice_is_the_cheapest_month_at_the_users_starts(tmp_path: Path) -> None:
    run = strategy_run(tmp_path)
    # 1 start: reinstall's 20 s first start is the whole month; 100: packed-venv's 3 s restarts
    at_1 = advice(run, 1)
    assert at_1.config == "reinstall"
    assert at_1.lifecycle.startswith("Cheapest over a month at 1 start: reinstall")
    # reinstall and persistent-venv cross at 2.7 starts, where packed-venv undercuts both: no
    # advice changes there, so none is announced
    assert at_1.lifecycle.endswith(
        "break-even 1.3 starts a month (reinstall below, packed-venv above)."
    )
    at_100 = advice(run, 100)
    assert at_100.config == "packed-venv" and at_100.baseline == "persistent-venv"
    line = at_100.saving_line("H100 $3.60/h", 100)
    # packed: (25.1 + 99 x 3.1) s x $3.6/h = $0.332; persistent: (40.1 + 99 x 6.1) s = $0.644
    assert line.startswith("Cheapest over a month at 100 starts: packed-venv ($0.332/month;")
    assert "against persistent-venv at $0.644" in line
    assert "cheaper than persistent-venv at any number of starts" in line
    # reinstall: 20.1 + (N - 1) x 18.1 = 25.1 + (N - 1) x 3.1 at N = 1 + 5/15
    assert line.endswith(" reinstall is cheaper below 1.3 starts a month.")
    assert "which beat" not in at_100.why
    # the main table ranks by the month the verdict judges, first start and restart beside it
    table = "\n".join(build_report(run, CostOptions(gpu_price=3.6), charts=False).lines)
    head = next(x for x in table.splitlines() if x.startswith("config"))
    assert "first start" in head and "restart" in head and "a month of 30 starts" in head
    order = [x.split()[0] for x in table.splitlines() if x.split()[:1] and x.split()[0] in LIFE]
    assert order[:3] == ["packed-venv", "persistent-venv", "reinstall"], table


def test_the_script_holds_the_measured_pack_and_restore_lines_in_the_users_folders(
    tmp_path: Path,
) -> None:
    rec = advice(strategy_run(tmp_path), 100)
    text = "\n".join(rec.shell)
    target, tmp = tmp_path / "roles" / "target", tmp_path / "roles" / "tmp" / "iobench-$(id -u)"
    assert f"tar -C {tmp} -cf {target}/store/venv.tar venv" in text
    assert f"tar -C {tmp} -xf {target}/store/venv.tar" in text
    assert f'export VIRTUAL_ENV="{tmp}/venv"' in text and ".iobench-scratch" not in text
    assert "trade-off: lost at restart: the venv on tmp" in text
    assert "restore to the path the venv was built at" in text
    assert "rebuild it (and reinstall every package) at every start" not in text
    assert VENV_COMMANDS["virtualenv"] in text and STOCK_VENV in text


@pytest.mark.parametrize("creator", ["virtualenv", "venv", "venv-without-pip", "uv"])
def test_the_script_makes_the_venv_with_the_measured_creator_or_a_stock_python3_s(
    creator: str,
) -> None:
    meta = RunMeta(versions={"venv": {"virtualenv": "21.15.11", "pip": "26.3"}})
    lines = venv_lines(meta, creator, "measured here: 1.0 s against 0.2 s")
    commands = [x.split("  #")[0].strip() for x in lines if not x.startswith("#")]
    said = venv_note(meta, creator, "measured here: 1.0 s against 0.2 s")  # the report's note
    assert "21.15.11" not in " ".join(lines)  # no version paragraph in the script
    assert ("virtualenv 21.15.11" in said) == (creator == "virtualenv")
    if creator == "venv":  # what a stock python3 has: no test, no fallback
        assert commands == [STOCK_VENV]
        return
    # the measured creator where the machine has it, else the stock python3 -m venv
    assert commands[0].startswith("if ") and commands[1] == VENV_COMMANDS[creator]
    assert commands[2:] == ["else", STOCK_VENV, "fi"]
    assert "measured here: 1.0 s against 0.2 s" in said
    others = {c: v for c, v in VENV_COMMANDS.items() if c not in (creator, "venv")}
    assert not any(v in commands for v in others.values())


@pytest.mark.parametrize(("installer", "var"), [("pip", "PIP_CACHE_DIR"), ("uv", "UV_CACHE_DIR")])
def test_a_measured_packed_cache_becomes_the_cache_s_lines_in_the_users_folders(
    installer: str, var: str
) -> None:
    roles = {"target": RoleInfo(path="/workspace"), "tmp": RoleInfo(path="/dev/shm")}
    trial, store = ("/dev/shm/.iobench-scratch/run-1/packed-cache-r1",
                    "/workspace/.iobench-scratch/run-1/packed-cache-r1/store")  # fmt: skip
    row = {"installer": installer,
           "persist_command": f"tar -C {trial} -I 'zstd -T0' -cf {store}/cache.tar.zst cache",
           "restore_command": f"tar -C {trial} -I 'zstd -T0' -xf {store}/cache.tar.zst"}  # fmt: skip
    lines = strategy_lines("packed-cache", row, ["python3 -m venv \"$VIRTUAL_ENV\""],
                           "python3 -m pip install x", roles, own=Path("/nonexistent"))  # fmt: skip
    text = "\n".join(lines)
    assert lines[0].startswith("CACHE_ARCHIVE=/workspace/store/cache.tar.zst")
    assert f'tar -C "$(dirname "${var}")" -I \'zstd -T0\' -xf "$CACHE_ARCHIVE"' in text
    assert f'-cf "$CACHE_ARCHIVE.tmp" "$(basename "${var}")"' in text
    assert ".iobench-scratch" not in text and text.count("export PATH=") == 1
    # the venv is made at every start (on local disk), after the cache is back
    assert text.index("-xf") < text.index("python3 -m venv") < text.index('"${INSTALL[@]}"')


def test_user_command_moves_each_role_s_scratch_to_the_role_s_folder() -> None:
    roles = {"target": RoleInfo(path="/workspace"), "tmp": RoleInfo(path="/dev/shm")}
    measured = (
        "tar -C /dev/shm/.iobench-scratch/run-1/packed-venv-r1 -I 'zstd -T0' "
        "-cf /workspace/.iobench-scratch/run-1/packed-venv-r1/store/venv.tar.zst venv"
    )
    assert user_command(measured, roles, own=Path("/nonexistent")) == (
        "tar -C /dev/shm/iobench-$(id -u) -I 'zstd -T0' -cf /workspace/store/venv.tar.zst venv"
    )


def _machine(tmp_path: Path, machine: str) -> Path:
    """A bin folder for the pasted script's PATH: a stock python3 (Debian's, without
    virtualenv), or this interpreter, which has virtualenv as the trials did."""
    if not STOCK_PYTHON3.is_file():
        pytest.skip("no /usr/bin/python3 (the stock interpreter the script is written for)")
    if machine == "stock":
        return stock_python3(tmp_path / "bin")
    return python3_shim(tmp_path / "bin", sys.executable)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("creator", "machine"), [("virtualenv", "stock"), ("virtualenv", "measured"), ("venv", "stock")]
)
@pytest.mark.venv
def test_the_pasted_script_packs_at_the_first_start_and_restores_at_a_restart(
    tmp_path: Path, tiny_wheels: Path, creator: str, machine: str
) -> None:
    rec = advice(strategy_run(tmp_path, creator), 100)
    assert "\n".join(rec.shell).count('export PATH="$VIRTUAL_ENV/bin:$PATH"') == 1
    shim = _machine(tmp_path, machine)
    install = f"python3 -m pip install --quiet --no-index --find-links {tiny_wheels} tiny-core"
    body = [f"INSTALL=({install})" if x.startswith("INSTALL=(") else x for x in rec.shell]
    script = tmp_path / "start.sh"
    script.write_text("\n".join([*body, 'python3 -c "import tiny_core; tiny_core.check()"',
                                 'echo "READY $(python3 -c "import sys; print(sys.prefix)")"']) + "\n")  # fmt: skip
    env = ["env", "-i", f"PATH={shim}:/usr/bin:/bin", f"HOME={tmp_path}",
           "PIP_CONFIG_FILE=/dev/null", "bash", "-e", str(script)]  # fmt: skip
    venv = tmp_path / "roles" / "tmp" / f"iobench-{os.getuid()}" / "venv"  # the user's own folder
    archive = tmp_path / "roles" / "target" / "store" / "venv.tar"
    first = subprocess.run(env, capture_output=True, text=True, timeout=300, check=False)
    assert first.returncode == 0, first.stderr[-2000:]
    assert first.stdout.strip().endswith(f"READY {venv}") and archive.is_file()
    shutil.rmtree(venv)  # a new machine: tmp is empty, the volume kept the archive
    packed = archive.stat().st_mtime_ns
    again = subprocess.run(env, capture_output=True, text=True, timeout=300, check=False)
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.strip().endswith(f"READY {venv}")
    assert archive.stat().st_mtime_ns == packed  # restored, not packed again
    assert "Collecting" not in again.stdout + again.stderr  # nothing installed at the restart


@pytest.mark.venv
@pytest.mark.parametrize("machine", ["stock", "measured"])
def test_a_persistent_venv_script_makes_the_venv_once_and_reuses_it(
    tmp_path: Path, tiny_wheels: Path, machine: str
) -> None:
    meta = RunMeta(versions={"venv": {"virtualenv": "21.15.11", "pip": "26.3"}})
    venv = tmp_path / "roles" / "target" / "venv"
    install = f"python3 -m pip install --quiet --no-index --find-links {tiny_wheels} tiny-core"
    lines = [*STRICT, f"export VIRTUAL_ENV={venv}"] + strategy_lines(
        "persistent-venv", {}, venv_lines(meta, "virtualenv"), install, {}
    )
    assert "\n".join(lines).count('export PATH="$VIRTUAL_ENV/bin:$PATH"') == 1
    script = tmp_path / "start.sh"
    script.write_text("\n".join([*lines[:-1], 'python3 -c "import tiny_core; tiny_core.check()"',
                                 'echo "READY $(python3 -c "import sys; print(sys.prefix)")"']) + "\n")  # fmt: skip
    env = ["env", "-i", f"PATH={_machine(tmp_path, machine)}:/usr/bin:/bin", f"HOME={tmp_path}",
           "PIP_CONFIG_FILE=/dev/null", "bash", "-e", str(script)]  # fmt: skip
    first = subprocess.run(env, capture_output=True, text=True, timeout=300, check=False)
    assert first.returncode == 0 and first.stdout.strip().endswith(f"READY {venv}"), first.stderr
    made = (venv / "pyvenv.cfg").stat().st_mtime_ns
    again = subprocess.run(env, capture_output=True, text=True, timeout=300, check=False)
    assert again.returncode == 0 and again.stdout.strip().endswith(f"READY {venv}"), again.stderr
    assert (venv / "pyvenv.cfg").stat().st_mtime_ns == made  # kept, not made again


@pytest.mark.venv
@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="two pods with local disks at one path need a mount namespace each (root)",
)
def test_a_fan_out_script_pasted_on_two_pods_at_once_builds_once_and_restores_once(
    tmp_path: Path, tiny_wheels: Path
) -> None:
    """Two pods start at the same moment on one volume, each with an empty local disk at the
    same path (a tmpfs in its own mount namespace): the one that takes the lock installs and
    packs, the other waits for the archive and restores it; a restart restores."""
    meta = RunMeta(versions={"venv": {"virtualenv": "21.15.11", "pip": "26.3"}})
    local, volume = tmp_path / "local", tmp_path / "volume"
    local.mkdir()
    volume.mkdir()
    venv, kept = local / "venv", volume / "store" / "venv.tar"
    install = f"python3 -m pip install --quiet --no-index --find-links {tiny_wheels} tiny-core"
    make = [f"    {x}" for x in venv_lines(meta, "virtualenv")]
    body = fan_out_lines(str(kept), f"tar -C {local} -cf {kept} venv",
                         f"tar -C {local} -xf {kept}", make, install)  # fmt: skip
    assert "\n".join(body).count('export PATH="$VIRTUAL_ENV/bin:$PATH"') == 1
    script = tmp_path / "start.sh"
    script.write_text("\n".join([*STRICT, *PRIVATE_DIR, f"export VIRTUAL_ENV={venv}", *body[:-1],
                                 'python3 -c "import tiny_core; tiny_core.check()"',
                                 'echo "READY $first_start $(python3 -c "import sys; print(sys.prefix)")"']) + "\n")  # fmt: skip
    shim = _machine(tmp_path, "stock")
    pod = ["unshare", "-m", "--propagation", "private", "sh", "-c",
           f'mount -t tmpfs pod {local} && exec "$@"', "pod",
           "env", "-i", f"PATH={shim}:/usr/bin:/bin", f"HOME={tmp_path}",
           "PIP_CONFIG_FILE=/dev/null", "bash", "-e", str(script)]  # fmt: skip
    pods = [subprocess.Popen(pod, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]  # fmt: skip
    outs = [p.communicate(timeout=300) for p in pods]
    assert [p.returncode for p in pods] == [0, 0], [e[-1500:] for _, e in outs]
    ready = sorted(o.strip().splitlines()[-1] for o, _ in outs)
    assert ready == [f"READY 0 {venv}", f"READY 1 {venv}"]  # one built, one restored
    assert kept.is_file() and (volume / "store" / "venv.tar.done").is_file()
    assert not venv.exists()  # each pod's disk was its own
    restart = subprocess.run(pod, capture_output=True, text=True, timeout=300, check=False)
    assert restart.returncode == 0, restart.stderr[-1500:]
    assert restart.stdout.strip().splitlines()[-1] == f"READY 0 {venv}"


@pytest.mark.venv
def test_a_prewarm_script_records_the_import_set_once_and_reads_it_at_each_restart(
    tmp_path: Path, tiny_wheels: Path
) -> None:
    """Pasted twice into a stock shell: the first start makes the venv, installs and records
    the files `import tiny_core` opens; the restart reads them before the program runs."""
    meta = RunMeta(versions={"venv": {"virtualenv": "21.15.11", "pip": "26.3"}})
    venv = tmp_path / "roles" / "target" / "venv"
    install = f"python3 -m pip install --quiet --no-index --find-links {tiny_wheels} tiny-core"
    lines = [*STRICT, f"export VIRTUAL_ENV={venv}", "export PREWARM_IMPORTS='import tiny_core'"]
    lines += strategy_lines("prewarm", {}, venv_lines(meta, "virtualenv"), install, {})
    assert "\n".join(lines).count('export PATH="$VIRTUAL_ENV/bin:$PATH"') == 1
    script = tmp_path / "start.sh"
    script.write_text("\n".join([*lines[:-1], 'python3 -c "import tiny_core; tiny_core.check()"',
                                 'echo "READY $first_start"']) + "\n")  # fmt: skip
    env = ["env", "-i", f"PATH={_machine(tmp_path, 'stock')}:/usr/bin:/bin", f"HOME={tmp_path}",
           "PIP_CONFIG_FILE=/dev/null", "bash", "-e", str(script)]  # fmt: skip
    first = subprocess.run(env, capture_output=True, text=True, timeout=300, check=False)
    assert first.returncode == 0 and first.stdout.strip().endswith("READY 1"), first.stderr
    listed = [p for p in (venv / ".prewarm.list").read_bytes().split(b"\0") if p]
    assert any(b"tiny_core" in p for p in listed), listed  # the package's own files
    assert all(p.startswith(str(venv).encode()) for p in listed)  # nothing outside the venv
    traced = [("-ex" if w == "-e" else w) for w in env]  # the restart's lines, as run
    again = subprocess.run(traced, capture_output=True, text=True, timeout=300, check=False)
    assert again.returncode == 0 and again.stdout.strip().endswith("READY 0"), again.stderr
    assert "+ xargs -0 -P 32 -n 64 cat --" in again.stderr  # the import set was read first
    assert "\n+ python3 -m pip install" not in again.stderr  # INSTALL=(...) is set, not run


def test_an_entered_strategy_is_ranked_marked_and_never_scripted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--strategy-figure flashboot=30,0.5,2: ranked beside the measured strategies by the
    same month, named "(entered)", its row "not measured"; the script stays the cheapest
    measured strategy's, and says the entered one would cost less."""
    from iobench.__main__ import main
    from iobench.cost.month import strategy_figure

    run = strategy_run(tmp_path)
    snap = strategy_figure("flashboot=30,0.5,2")
    options = CostOptions(gpu_price=3.6, starts_per_month=100, entered=(snap,))
    result = build_report(run, options, charts=False)
    rec = result.recommendation
    assert rec is not None and rec.config == "packed-venv"  # measured, and scripted
    assert rec.baseline == "persistent-venv"  # the measured runner-up
    # (30 + 99 x 0.5) s x $3.6/h = $0.0795 + 2 GB kept at $0: below packed-venv's $0.332
    assert rec.lifecycle.startswith(
        "Cheapest over a month at 100 starts: flashboot (entered) ($0.080/month;"
    )
    assert "flashboot (entered) would cost less, by the figures you entered" in "\n".join(rec.shell)
    text = "\n".join(result.section_lines)
    assert "flashboot (entered)" in text and "entered (not measured)" in text
    csv_rows = pd.read_csv(run / "lifecycle.csv")
    entered = csv_rows[csv_rows["config"] == "flashboot (entered)"].iloc[0]
    assert (entered["first_start_s"], entered["restart_s"], entered["stored_bytes"]) == (
        30.0, 0.5, 2e9)  # fmt: skip
    # bad figures: one line, exit 2, nothing written
    for bad in ("flashboot", "flashboot=1", "flashboot=a,b", "flashboot=-1,2", "=1,2"):
        assert main(["report", str(run), "--strategy-figure", bad]) == 2
        err = capsys.readouterr().err
        assert err.startswith("iobench: error: --strategy-figure") and err.count("\n") <= 2, err


@pytest.mark.venv
@pytest.mark.lab  # it mounts (squashfuse) and unmounts
@pytest.mark.skipif(
    not (shutil.which("mksquashfs") and shutil.which("unsquashfs") and shutil.which("squashfuse")
         and os.path.exists("/dev/fuse")),
    reason="needs squashfs-tools, squashfuse and /dev/fuse",
)  # fmt: skip
def test_a_squashfs_script_restores_where_loop_mounts_are_refused(
    tmp_path: Path, tiny_wheels: Path
) -> None:
    """An unprivileged pod refuses `mount -o loop`: the packed-venv script mounts the image
    with squashfuse instead, and where squashfuse is missing too it unpacks it."""
    meta = RunMeta(versions={"venv": {"virtualenv": "21.15.11", "pip": "26.3"}})
    local, volume = tmp_path / "local", tmp_path / "volume"
    local.mkdir()
    volume.mkdir()
    venv, image = local / "venv", volume / "store" / "venv.sqfs"
    row = {"persist_command": f"mksquashfs {venv} {image} -noappend -quiet -no-progress",
           "restore_command": f"mkdir {venv} && mount -t squashfs -o loop,ro,nosuid,nodev "
                              f"{image} {venv}"}  # fmt: skip
    roles = {"target": RoleInfo(path=str(volume))}
    install = f"python3 -m pip install --quiet --no-index --find-links {tiny_wheels} tiny-core"
    body = strategy_lines("packed-venv", row, venv_lines(meta, "virtualenv"), install, roles)
    script = tmp_path / "start.sh"
    script.write_text("\n".join([*STRICT, *PRIVATE_DIR, f"export VIRTUAL_ENV={venv}", *body[:-1],
                                 'python3 -c "import tiny_core; tiny_core.check()"',
                                 'echo "READY $first_start"']) + "\n")  # fmt: skip
    pod = tmp_path / "pod-bin"  # the pod's tools: no squashfuse, and a mount that refuses
    pod.mkdir()
    for folder in ("/usr/bin", "/bin"):
        for tool in Path(folder).iterdir():
            if tool.name not in ("mount", "squashfuse") and not (pod / tool.name).exists():
                (pod / tool.name).symlink_to(tool)
    (pod / "mount").write_text(
        "#!/bin/sh\necho 'mount: only root can use --options' >&2\nexit 32\n"
    )
    (pod / "mount").chmod(0o755)
    shim = _machine(tmp_path, "stock")

    def start(path: str) -> subprocess.CompletedProcess[str]:
        env = ["env", "-i", f"PATH={shim}:{path}", f"HOME={tmp_path}",
               "PIP_CONFIG_FILE=/dev/null", "bash", "-e", str(script)]  # fmt: skip
        return subprocess.run(env, capture_output=True, text=True, timeout=300, check=False)

    first = start(f"{pod}")
    assert first.returncode == 0 and first.stdout.strip().endswith("READY 1"), first.stderr
    assert image.is_file()
    shutil.rmtree(venv)  # a new pod: the local disk is empty
    with_fuse = start(f"{pod}:{Path(shutil.which('squashfuse') or '').parent}")
    try:
        assert with_fuse.returncode == 0, with_fuse.stderr
        assert with_fuse.stdout.strip().endswith("READY 0")
        assert f" {venv} fuse" in Path("/proc/self/mounts").read_text()  # squashfuse's mount
    finally:
        subprocess.run(["fusermount3", "-u", str(venv)], capture_output=True)
    venv.rmdir()
    unpacked = start(f"{pod}")  # neither a loop mount nor squashfuse: unsquashfs
    assert unpacked.returncode == 0 and unpacked.stdout.strip().endswith("READY 0"), unpacked.stderr
    assert (venv / "pyvenv.cfg").is_file() and not os.path.ismount(venv)


@pytest.mark.venv
def test_a_packed_cache_script_restores_the_cache_downloads_nothing_and_repacks_on_a_change(
    tmp_path: Path, tiny_wheels: Path
) -> None:
    """Pasted into a stock shell on three new machines in turn (local disk emptied each
    time): the first installs from the index and packs pip's cache onto the volume; the
    second unpacks it, installs from it and downloads nothing, and leaves the archive as it
    was; the third asks for one more package, downloads only that, and packs again."""
    from helpers.venvs import build_wheel

    from iobench.trial.index import LocalIndex

    served = tmp_path / "served"
    shutil.copytree(tiny_wheels, served)
    build_wheel(served)  # h8pkg: the package the third start adds
    meta = RunMeta(versions={"venv": {"virtualenv": "21.15.11", "pip": "26.3"}})
    local, volume = tmp_path / "local", tmp_path / "volume"
    kept = volume / "store" / "cache.tar.zst"
    zstd = " -I 'zstd -T0'" if shutil.which("zstd") else ""
    persist = f"tar -C {local}{zstd} -cf {kept} pip-cache"
    with LocalIndex(served).start() as index:
        # pip caches plain-HTTP answers only from a trusted host (a real index is HTTPS)
        install = (f"python3 -m pip install --quiet --index-url {index.url} --trusted-host "
                   "127.0.0.1 tiny-core ${EXTRA:-}")  # fmt: skip
        body = packed_cache_lines(
            str(kept), persist, "pip", venv_lines(meta, "virtualenv"), install
        )
        assert "\n".join(body).count('export PATH="$VIRTUAL_ENV/bin:$PATH"') == 1
        script = tmp_path / "start.sh"
        script.write_text("\n".join([*STRICT, *PRIVATE_DIR, f"export VIRTUAL_ENV={local}/venv",
                                     f"export PIP_CACHE_DIR={local}/pip-cache",
                                     'mkdir -p "$PIP_CACHE_DIR"', *body[:-1],
                                     'python3 -c "import tiny_core; tiny_core.check()"',
                                     'echo "READY $first_start"']) + "\n")  # fmt: skip
        env = ["env", "-i", f"PATH={_machine(tmp_path, 'stock')}:/usr/bin:/bin",
               f"HOME={tmp_path}", "PIP_CONFIG_FILE=/dev/null", "bash", "-e", str(script)]  # fmt: skip

        def start(*extra: str) -> str:
            shutil.rmtree(local, ignore_errors=True)  # a new machine: its local disk is empty
            r = subprocess.run([*env[:2], *extra, *env[2:]], capture_output=True, text=True,
                               timeout=300, check=False)  # fmt: skip
            assert r.returncode == 0, r.stderr[-2000:]
            return r.stdout.strip().splitlines()[-1]

        assert start() == "READY 1" and kept.is_file()
        fetched, packed = index.counters.file_requests, kept.stat().st_mtime_ns
        assert fetched >= 2  # tiny-core and tiny-blob (and their PEP 658 metadata)
        assert start() == "READY 1"  # a new machine: installed again, from the restored cache
        assert index.counters.file_requests == fetched  # installed from the restored cache
        assert kept.stat().st_mtime_ns == packed  # nothing new: not packed again
        assert start("EXTRA=h8pkg") == "READY 1"
        added = index.counters.file_requests - fetched
        assert 0 < added < fetched  # only the new package (and its metadata)
        assert kept.stat().st_mtime_ns != packed  # the cache grew: packed again


@pytest.mark.venv
@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="an image's packages stand in a private mount namespace (root)",
)
def test_a_layered_venv_script_installs_only_what_the_image_lacks(
    tmp_path: Path, tiny_wheels: Path
) -> None:
    """The image: tiny-blob in the stock python3's /usr/local dist-packages (a bind mount in a
    mount namespace of the test's own). Pasted twice: the first start makes the venv with
    --system-site-packages on the volume and installs tiny-core alone; the restart keeps it."""
    stock = subprocess.run([str(STOCK_PYTHON3), "-c", "import site, sys; print("
                            "next(p for p in sys.path if p.startswith('/usr/local/') and "
                            "p.endswith('dist-packages')))"],
                           capture_output=True, text=True, check=False)  # fmt: skip
    if stock.returncode != 0:
        pytest.skip("the stock python3 reads no /usr/local dist-packages (not Debian's)")
    dist = stock.stdout.strip()
    image = tmp_path / "image"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index",
                    "--find-links", str(tiny_wheels), "--target", str(image), "tiny-blob"],
                   check=True, env={**os.environ, "PIP_CONFIG_FILE": os.devnull})  # fmt: skip
    meta = RunMeta(versions={"venv": {"virtualenv": "21.15.11", "pip": "26.3"}})
    venv = tmp_path / "volume" / "venv"
    install = f"python3 -m pip install --no-index --find-links {tiny_wheels} tiny-core"
    lines = [*STRICT, f"export VIRTUAL_ENV={venv}"]
    lines += strategy_lines("layered-venv", {}, venv_lines(meta, "virtualenv"), install, {})
    text = "\n".join(lines)
    assert (
        '-m venv --system-site-packages "$VIRTUAL_ENV"' in text and text.count("export PATH=") == 1
    )
    script = tmp_path / "start.sh"
    script.write_text("\n".join([*lines[:-1], 'python3 -c "import tiny_core; tiny_core.check()"',
                                 'echo "READY $first_start"']) + "\n")  # fmt: skip
    shim = _machine(tmp_path, "stock")
    pod = ["unshare", "-m", "--propagation", "private", "sh", "-c",
           f'mount --bind {image} {dist} && exec "$@"', "pod",
           "env", "-i", f"PATH={shim}:/usr/bin:/bin", f"HOME={tmp_path}",
           "PIP_CONFIG_FILE=/dev/null", "bash", "-e", str(script)]  # fmt: skip
    first = subprocess.run(pod, capture_output=True, text=True, timeout=300, check=False)
    assert first.returncode == 0, first.stderr[-2000:]
    assert first.stdout.strip().endswith("READY 1")
    assert "Requirement already satisfied: tiny-blob" in first.stdout  # the image's
    site = next(venv.glob("lib/python3*/site-packages"))
    assert (site / "tiny_core").is_dir() and not list(site.glob("tiny_blob*"))
    again = subprocess.run(pod, capture_output=True, text=True, timeout=300, check=False)
    assert again.returncode == 0 and again.stdout.strip().endswith("READY 0"), again.stderr[-2000:]


@pytest.mark.parametrize("strategy", ["packed-venv", "fan-out", "packed-cache"])
def test_a_store_another_user_made_on_the_volume_is_refused_before_anything_is_restored(
    tmp_path: Path, strategy: str
) -> None:
    """Before: the scripts made the store with `mkdir -p` and restored whatever archive was
    in it; another user who made the store folder first (a sticky, shared volume) planted a
    venv whose python then ran as the script's user (root, in the hostile test)."""
    if os.geteuid() != 0:
        pytest.skip("making a folder another user owns needs root")
    volume = tmp_path / "volume"
    volume.mkdir(mode=0o1777)
    store = volume / "store"
    store.mkdir()
    os.chown(store, 65534, 65534)
    pwned = tmp_path / "pwned"
    payload = tmp_path / "payload" / "venv" / "bin"
    payload.mkdir(parents=True)
    (payload / "python3").write_text(f"#!/bin/sh\ntouch {pwned}\n")
    (payload / "python3").chmod(0o755)
    name = "cache.tar" if strategy == "packed-cache" else "venv.tar"
    subprocess.run(["tar", "-C", str(tmp_path / "payload"), "-cf", str(store / name), "venv"],
                   check=True)  # fmt: skip
    if strategy == "fan-out":
        (store / "venv.tar.done").touch()
    local = tmp_path / "local"
    trial = f"{local}/.iobench-scratch/run-1/x-r1"
    kept = f"{volume}/.iobench-scratch/run-1/x-r1/store/{name}"
    row = {"installer": "pip", "persist_command": f"tar -C {trial} -cf {kept} venv",
           "restore_command": f"tar -C {trial} -xf {kept}"}  # fmt: skip
    roles = {"target": RoleInfo(path=str(volume)), "tmp": RoleInfo(path=str(local))}
    body = strategy_lines(strategy, row, ['python3 -m venv "$VIRTUAL_ENV"'], "true", roles,
                          own=Path("/nonexistent"))  # fmt: skip
    script = tmp_path / "start.sh"
    script.write_text("\n".join([*STRICT, *PRIVATE_DIR, f"export VIRTUAL_ENV={local}/venv",
                                 f"export PIP_CACHE_DIR={local}/pip-cache", *body,
                                 '"$VIRTUAL_ENV/bin/python3"']) + "\n")  # fmt: skip
    r = subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", "bash", "-e", str(script)],
                       capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert r.returncode != 0 and f"refusing {store}" in r.stderr, r.stderr
    assert not pwned.exists()
