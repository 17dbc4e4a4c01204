"""iobench.run.guard and the run folder held open (issue 35's High, as it was done): another
user's folder as ``--results`` or ``--fleet-dir``, and the swap of a worker's tree whose
logs became links to a private file of root's, which root's pip then appended to."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import standin
from helpers.users import NOBODY, runuser_nobody, theirs

from iobench.__main__ import main


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder of root's that user nobody can reach (tmp_path's are 0700)."""
    path = Path(tempfile.mkdtemp(prefix="iobench-guard-", dir="/tmp"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    rc = main(argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, (rc, err)
    return err


def test_results_and_fleet_dirs_another_user_controls_are_refused_before_anything_is_made(
    shared: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before: each of these was accepted with no word, and the run folder made in it."""
    path = standin.scenario(tmp_path, repeats=1)
    base = standin.argv(tmp_path, path, "--quiet")
    at = base.index("--results") + 1

    def run_with(*extra: str, results: Path | None = None) -> list[str]:
        argv = list(base)
        if results is not None:
            argv[at] = str(results)
        return argv + list(extra)

    owned = theirs(shared / "owned")  # 0755, nobody's
    err = _refused(run_with(results=owned), capsys)
    assert f"{owned} belongs to user nobody (uid 65534)" in err and "--trust-owner nobody" in err
    sticky = theirs(shared / "sticky", 0o1777)  # nobody's, sticky and open to all
    assert "belongs to user nobody" in _refused(run_with(results=sticky), capsys)
    open_dir = shared / "open"  # root's, 0777, not sticky: `--results open/sub/r`
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    err = _refused(run_with(results=open_dir / "sub" / "r"), capsys)
    assert f"{open_dir} is writable by other users and not sticky (mode 0777)" in err
    # the hostile re-test: their link, then `..` (the kernel leaves the link's target)
    private = shared / "private" / "sub"
    private.mkdir(parents=True, mode=0o700)
    public = shared / "public"  # root's, sticky, as /tmp
    public.mkdir(mode=0o1777)
    public.chmod(0o1777)
    link = public / "ln"
    link.symlink_to(private)
    os.lchown(link, NOBODY, NOBODY)
    err = _refused(run_with(results=link / ".." / "x"), capsys)
    assert f"{link} is a link owned by user nobody" in err and not (private.parent / "x").exists()
    # the default ./results when the current folder is another user's
    cwd = theirs(shared / "their-cwd")
    monkeypatch.chdir(cwd)
    argv = run_with()
    del argv[at - 1 : at + 1]
    assert f"{cwd} belongs to user nobody" in _refused(argv, capsys)
    monkeypatch.chdir(tmp_path)
    # --fleet-dir: theirs, and root's sticky one whose workers/ is theirs
    fleet = theirs(shared / "fleet-1")
    assert f"{fleet} belongs to user nobody" in _refused(
        run_with("--fleet-dir", str(fleet)), capsys
    )
    sticky_fleet = shared / "fleet-2"
    sticky_fleet.mkdir(mode=0o1777)
    os.chmod(sticky_fleet, 0o1777)
    theirs(sticky_fleet / "workers")
    err = _refused(run_with("--fleet-dir", str(sticky_fleet)), capsys)
    assert f"{sticky_fleet / 'workers'} belongs to user nobody" in err
    for folder in (owned, sticky, open_dir, cwd, fleet, sticky_fleet / "workers"):
        assert not any(p.name.endswith(f"-{os.getpid()}") for p in folder.rglob("*")), folder
    # an export into their folder: refused before the run, not after it (the hostile re-test)
    argv = run_with("--export-json", str(owned / "x.json"))
    argv.remove("--no-report")
    assert f"--export-json {owned / 'x.json'}: refusing to write into {owned}" in _refused(
        argv, capsys
    )
    assert not (owned / "x.json").exists()
    # a resumed run whose logs/ is theirs, inside a run folder of root's
    assert main(run_with()) == 0
    (run,) = (tmp_path / "results").iterdir()
    meta = json.loads((run / "meta.json").read_text())
    (run / "meta.json").write_text(json.dumps({**meta, "status": "interrupted", "repeats": 2}))
    os.chown(run / "logs", NOBODY, NOBODY)
    err = _refused(["run", "--resume", str(run), "--no-report"], capsys)
    assert f"{run / 'logs'} belongs to user nobody" in err
    assert json.loads((run / "meta.json").read_text())["status"] == "interrupted"
    # a sticky folder of root's (as /tmp) is fine: others cannot rename what is not theirs
    shutil.rmtree(sticky_fleet / "workers")
    assert main(run_with("--fleet-dir", str(sticky_fleet), "--worker-id", "w1")) == 0
    assert (sticky_fleet / "workers" / "w1" / "meta.json").is_file()
    # and a trusted owner's folder, when the user says so
    assert main(run_with("--trust-owner", "nobody", results=owned)) == 0


#: user nobody's side of the attack: wait for workers/<id>/logs, move the whole tree away,
#: put a tree of their own in its place (meta.json a link to the real one), then replace
#: each log root makes there by a link to root's private file
SWAPPER = r"""
import os, stat, sys, time
fleet, victim = sys.argv[1], sys.argv[2]
workers = os.path.join(fleet, "workers")
end = time.time() + 300
found = None
while found is None and time.time() < end:
    try:
        found = next((w for w in os.listdir(workers) if os.path.isdir(os.path.join(workers, w, "logs"))), None)
    except OSError:
        pass
    time.sleep(0.001)
real = os.path.join(fleet, ".real")
os.rename(workers, real)
logs = os.path.join(workers, found, "logs")
os.makedirs(logs)
os.symlink(os.path.join(real, found, "meta.json"), os.path.join(workers, found, "meta.json"))
os.symlink(os.path.join(real, found, "samples"), os.path.join(workers, found, "samples"))
print("swapped", found, flush=True)
while time.time() < end:
    for name in os.listdir(logs):
        p = os.path.join(logs, name)
        st = os.lstat(p)
        if stat.S_ISREG(st.st_mode) and st.st_uid != os.getuid():
            os.unlink(p)
            os.symlink(victim, p)
            print("linked", name, flush=True)
    time.sleep(0.0005)
"""


@pytest.mark.e2e
@pytest.mark.slow
def test_a_swapped_fleet_worker_tree_cannot_make_pip_append_to_a_private_file(
    shared: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The High as it was done: ``--fleet-dir`` a folder nobody owns; when
    ``workers/<id>/logs`` appeared they swapped the tree for their own and replaced each
    ``.log`` root made by a link to a 0600 file in a 0700 folder of root's; root's pip
    appended its log there (1 line -> 68). Trusted (--trust-owner), the run now writes
    through the folder it holds open, and the file keeps its one line; not trusted, the
    folder is refused."""
    secret = tmp_path / "secret"
    secret.mkdir(mode=0o700)
    victim = secret / "private.conf"
    victim.write_text("root's one line\n")
    victim.chmod(0o600)
    fleet = theirs(shared / "fleet-1")
    for folder in ("t", "tmp"):
        (tmp_path / folder).mkdir()
    argv = ["run", "--scenario", "smoke", "--configs", "naive", "--repeats", "1", "--no-report",
            "--target", str(tmp_path / "t"), "--tmp", str(tmp_path / "tmp"),
            "--fleet-dir", str(fleet), "--worker-id", "w1", "--quiet"]  # fmt: skip
    attacker = subprocess.Popen(
        [*runuser_nobody(), "-c", SWAPPER, str(fleet), str(victim)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        rc = main([*argv, "--trust-owner", "nobody"])
        time.sleep(0.5)  # what the attacker does after the run's last log
    finally:
        os.killpg(attacker.pid, signal.SIGKILL)  # runuser and the python it started
        said, _ = attacker.communicate()
    assert "swapped w1" in said, said  # the attack ran
    assert victim.read_text() == "root's one line\n", said
    assert rc == 0, capsys.readouterr().err
    real = fleet / ".real" / "w1"  # the run's own folder, moved: every file went there
    assert "smoke" in (real / "logs" / "naive-r1.log").read_text()
    assert json.loads((real / "meta.json").read_text())["status"] == "complete"
    rows = (real / "trials.csv").read_text().splitlines()
    assert len(rows) == 2 and ",ok," in rows[1]
    # not trusted: refused before anything is made
    fresh = theirs(shared / "fleet-2")
    argv[argv.index(str(fleet))] = str(fresh)
    err = _refused(argv, capsys)
    assert f"--fleet-dir {fresh}: {fresh} belongs to user nobody" in err
    assert not (fresh / "workers").exists()


# ------------------------------------------------------------------ interpreters (Medium)
def _their_interpreter(shared: Path) -> tuple[Path, Path]:
    """(nobody's "python" in nobody's folder, the file it writes `id` into when run)."""
    folder = theirs(shared / "their-bin")
    proof = shared / "ran-as"
    script = folder / "python"
    script.write_text(f'#!/bin/sh\nid > {proof}\nexec /usr/bin/python3 "$@"\n')
    script.chmod(0o755)
    os.chown(script, NOBODY, NOBODY)
    return script, proof


DATASET = """[scenario]
name = "ds"
kind = "dataset"
repeats = 1
size_mb = 1

[workload]
files = 4
file_mb = 0.05
batch = 2
workers = 0
{python}

[configs.from-volume]
data = "target"
"""

CHECKPOINT = """[scenario]
name = "ck"
kind = "checkpoint"
repeats = 1

[workload]
checkpoint_mb = 1
{python}

[configs.on-target]
save = "target"
"""


def test_an_interpreter_another_user_could_change_is_not_run(
    shared: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ``--python``, a scenario's ``[workload] python`` (dataset, checkpoint) each
    ran a script nobody owns as root (``uid=0(root)`` written, rc 0, no warning)."""
    script, proof = _their_interpreter(shared)
    target, tmp, results = standin.roles(tmp_path)
    where = ["--target", str(target), "--tmp", str(tmp), "--results", str(results),
             "--no-report", "--quiet"]  # fmt: skip
    argv = ["run", "--scenario", "smoke", "--configs", "naive", "--repeats", "1", *where]
    err = _refused([*argv, "--python", str(script)], capsys)
    assert err.startswith(f"iobench: error: --python {script}: {script.parent} belongs to user")
    assert "--trust-owner nobody" in err
    for text, key in [
        (DATASET.format(python=f'python = "{script}"'), "workload.python"),
        (CHECKPOINT.format(python=f'by_config.on-target.python = "{script}"'),
         "workload.by_config.on-target.python"),
    ]:  # fmt: skip
        path = tmp_path / "s.toml"
        path.write_text(text)
        err = _refused(["run", "--scenario", str(path), *where], capsys)
        assert f"{key} {script}: {script.parent} belongs to user nobody" in err, err
    # a link of theirs to root's own python is theirs to point elsewhere
    link = theirs(shared / "their-links") / "python3"
    link.symlink_to("/usr/bin/python3")
    os.lchown(link, NOBODY, NOBODY)
    assert "belongs to user nobody" in _refused([*argv, "--python", str(link)], capsys)
    # a file of root's that others may write, in a folder of root's
    writable = shared / "py"
    shutil.copy(script, writable)
    writable.chmod(0o757)
    assert "writable by other users" in _refused([*argv, "--python", str(writable)], capsys)
    assert not proof.exists() and not results.exists()


def test_a_scenario_that_names_an_interpreter_says_so_and_a_resume_judges_it_again(
    shared: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ``--resume`` of a received run folder ran the interpreter its meta.json
    named (nobody's) as root."""
    script, proof = _their_interpreter(shared)
    path = tmp_path / "ds.toml"
    path.write_text(DATASET.format(python='python = "/usr/bin/python3"'))
    target, tmp, results = standin.roles(tmp_path)
    argv = ["run", "--scenario", str(path), "--target", str(target), "--tmp", str(tmp),
            "--results", str(results), "--no-report"]  # fmt: skip
    assert main([*argv, "--quiet"]) == 0
    (run,) = results.iterdir()
    meta = json.loads((run / "meta.json").read_text())
    meta["scenario"]["workload"]["python"] = str(script)
    meta.update(status="interrupted", repeats=2)
    (run / "meta.json").write_text(json.dumps(meta))
    err = _refused(["run", "--resume", str(run), "--no-report"], capsys)
    assert f"workload.python {script}: {script.parent} belongs to user nobody" in err
    assert not proof.exists()
    assert main([*argv, "--dry-run"]) == 0
    said = capsys.readouterr()
    assert "the scenario names the interpreter its workload runs: /usr/bin/python3" in (
        said.out + said.err
    )


def test_a_venv_of_root_s_whose_home_is_another_user_s_is_not_run(
    shared: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found by the hostile re-test: a venv root made (--copies), its pyvenv.cfg's home
    naming a folder nobody owns, whose lib/python3.X held their sitecustomize.py: the
    interpreter, root's own file, took its standard library from there and ran their code
    as root. Now the venv's configuration, its base interpreter's home and both lib folders
    are judged like the interpreter."""
    version = f"python3.{sys.version_info.minor}"
    stdlib = Path(f"/usr/lib/{version}")
    base = Path(f"/usr/bin/{version}")
    if not (stdlib / "os.py").is_file() or not base.is_file():
        pytest.skip(f"needs the system's {version} and its standard library")
    home = theirs(shared / "their-python") / "bin"
    proof = shared / "ran-as"
    script = f"import os\nos.system('id > {proof}')\n"
    runuser_nobody()
    (home.parent / "lib" / version).mkdir(parents=True)
    for entry in stdlib.iterdir():  # their stdlib: the system's, by links, and one module more
        if entry.name != "sitecustomize.py":
            (home.parent / "lib" / version / entry.name).symlink_to(entry)
    (home.parent / "lib" / version / "sitecustomize.py").write_text(script)
    home.mkdir()
    for path in [home.parent, *home.parent.rglob("*")]:
        os.lchown(path, NOBODY, NOBODY)
    venv = tmp_path / "venv"  # root's, in root's folder
    (venv / "bin").mkdir(parents=True)
    shutil.copy2(base, venv / "bin" / "python")
    (venv / "pyvenv.cfg").write_text(f"home = {home}\ninclude-system-site-packages = false\n")
    path = tmp_path / "ds.toml"
    path.write_text(DATASET.format(python=f'python = "{venv / "bin" / "python"}"'))
    target, tmp, results = standin.roles(tmp_path)
    err = _refused(["run", "--scenario", str(path), "--target", str(target), "--tmp", str(tmp),
                    "--results", str(results), "--no-report", "--quiet"], capsys)  # fmt: skip
    assert f"{home.parent} belongs to user nobody" in err and "base interpreter" in err, err
    assert not proof.exists()


def test_a_scenario_wheelhouse_or_requirements_another_user_could_change_is_refused(
    shared: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The hostile round of stop 43: a scenario file in a folder of uid 65534 ran (its
    ``ready`` is code root runs in every trial); a ``--wheelhouse`` of theirs is what root
    installs and imports, a ``--requirements`` of theirs may name their index. Each refused
    in one line before anything is made; a scenario of theirs trusted on purpose runs."""
    mine = standin.scenario(tmp_path, repeats=1)
    folder = theirs(shared / "their-scenarios")
    path = folder / "standin.toml"
    shutil.copy(mine, path)
    os.chown(path, NOBODY, NOBODY)
    argv = standin.argv(tmp_path, path, "--quiet")
    err = _refused(argv, capsys)
    assert err.startswith(f"iobench: error: --scenario {path}: {folder} belongs to user nobody")
    results = Path(argv[argv.index("--results") + 1])
    assert not results.exists()
    assert main([*argv, "--trust-owner", "nobody"]) == 0
    where = standin.argv(tmp_path, mine)[3:]  # --target DIR ... --no-report
    real = ["run", "--scenario", "torch", "--configs", "naive", "--repeats", "1", *where]
    wheels = theirs(shared / "their-wheels")
    err = _refused([*real, "--wheelhouse", str(wheels)], capsys)
    assert f"--wheelhouse {wheels}: {wheels} belongs to user nobody" in err, err
    reqs = shared / "requirements.txt"
    reqs.write_text("smoke-core\n")
    reqs.chmod(0o666)
    err = _refused([*real, "--requirements", str(reqs)], capsys)
    assert f"--requirements {reqs}: " in err and "writable by other users" in err, err
