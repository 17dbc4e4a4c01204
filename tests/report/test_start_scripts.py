"""Every start-up strategy's start script, pasted twice into a clean shell (``env -i
PATH=/usr/bin:/bin bash -e``) with Debian's /usr/bin/python3 (PEP 668): the first run makes the
venv, installs what the run installed (its packages, from its index: a loopback index of the
tiny wheels here, as ``iobench run --package tiny-core --index-url URL`` records) and passes
the ready check; the second, in the same boot, succeeds and makes, installs and packs nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers.files import DATA, STOCK_PYTHON3

from iobench.report.script import (
    env_for,
    export_lines,
    install_command,
    strategy_lines,
    venv_lines,
)
from iobench.rundir.meta import IndexInfo, RoleInfo, RunMeta
from iobench.trial.index import LocalIndex
from iobench.wheels.profile import load_profile
from iobench.wheels.synth import synthesize

RUN = "20261205-120000-pod-a-tiny"
READY = 'python3 -c "import tiny_core; tiny_core.check()" && echo READY'
#: strategy: (venv role, the measured persist and restore lines, in the trial's scratch folders)
STRATEGIES = {
    "reinstall": ("tmp", "", ""),
    "persistent-venv": ("target", "", ""),
    "layered-venv": ("target", "", ""),
    "prewarm": ("target", "", ""),
    "packed-venv": ("tmp", "tar -C {tmp} -cf {store}/venv.tar venv", "tar -C {tmp} -xf {store}/venv.tar"),
    "copied-venv": ("tmp", "cp -a {tmp}/venv {store}/venv", "cp -a {store}/venv {tmp}/venv"),
    "fan-out": ("tmp", "tar -C {tmp} -cf {shared}/venv.tar venv", "tar -C {tmp} -xf {shared}/venv.tar"),
    "packed-cache": ("tmp", "tar -C {tmp} -cf {store}/cache.tar cache", "tar -C {tmp} -xf {store}/cache.tar"),
}  # fmt: skip


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    wheels = tmp_path_factory.mktemp("wheels")
    synthesize(load_profile(str(DATA / "tiny-profile.toml")), wheels)
    with LocalIndex(wheels) as served:
        yield served


def script_for(strategy: str, tmp_path: Path, url: str) -> str:
    """The start script recommend.py writes for ``strategy``'s config, from a run's meta."""
    roles = {n: RoleInfo(path=str(tmp_path / n), fstype="ext4", device=f"dev-{n}",
                         mountpoint=str(tmp_path / n)) for n in ("target", "tmp")}  # fmt: skip
    meta = RunMeta(
        scenario={"name": "tiny", "packages": ["tiny-core"]},
        index=IndexInfo(kind="remote", url=url),
        command=["iobench", "run", "--package", "tiny-core", "--index-url", url],
    )
    venv_role, persist, restore = STRATEGIES[strategy]
    trial = f"/.iobench-scratch/{RUN}/{strategy}-r1"
    where = {"tmp": f"{tmp_path}/tmp{trial}", "store": f"{tmp_path}/target{trial}/store",
             "shared": f"{tmp_path}/target/.iobench-scratch/{RUN}/shared/{strategy}"}  # fmt: skip
    config = {"venv_role": venv_role, "tmpdir_role": "tmp", "cache_role": "tmp",
              "installer": "pip", "strategy": strategy}  # fmt: skip
    row = {**config, "persist_command": persist.format(**where),
           "restore_command": restore.format(**where)}  # fmt: skip
    if strategy == "packed-cache":  # the cache is what it keeps: the cache folder's name
        row = {k: str(v).replace(" cache", " pip-cache") for k, v in row.items()}
    pairs, notes = env_for(config, roles)
    lines = export_lines(pairs, notes) + strategy_lines(
        strategy, row, venv_lines(meta, "virtualenv"), install_command(meta), roles
    )
    assert lines[-1].startswith('if [ "$#"')
    return "\n".join([*lines[:-1], READY, lines[-1]]) + "\n"


@pytest.mark.venv
@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_each_start_script_installs_at_the_first_run_and_does_nothing_twice(
    strategy: str, tmp_path: Path, index: LocalIndex
) -> None:
    if not STOCK_PYTHON3.is_file():
        pytest.skip("no /usr/bin/python3 (the stock interpreter the script is written for)")
    text = script_for(strategy, tmp_path, index.url)
    assert f"--index-url {index.url} tiny-core" in text and "21." not in text
    script = tmp_path / "start.sh"
    script.write_text(text)
    env = ["env", "-i", "PATH=/usr/bin:/bin", f"HOME={tmp_path}", "PIP_CONFIG_FILE=/dev/null",
           "bash", "-e", str(script)]  # fmt: skip
    first = subprocess.run(env, capture_output=True, text=True, timeout=300, check=False)
    assert first.returncode == 0, first.stderr[-2000:]
    assert first.stdout.rstrip().endswith("READY") and "tiny-core" in first.stdout
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "target").rglob("*") if p.is_file()}
    second = subprocess.run(env, capture_output=True, text=True, timeout=300, check=False)
    assert second.returncode == 0, second.stderr[-2000:]
    assert second.stdout.strip() == "READY", second.stdout[-2000:]  # nothing made or installed
    after = {p: p.stat().st_mtime_ns for p in (tmp_path / "target").rglob("*") if p.is_file()}
    changed = [p for p in before if after.get(p) != before[p] and "__pycache__" not in p.parts]
    assert not changed  # nothing packed, copied or written on the volume twice
    if strategy in ("packed-venv", "copied-venv", "fan-out", "packed-cache"):
        assert any(p.name in ("venv.tar", "cache.tar", "pyvenv.cfg") for p in before)  # kept
