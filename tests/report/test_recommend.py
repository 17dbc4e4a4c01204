"""recommend.py: the variables a start script sets for each installer and placement."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import runs as rf
from helpers.files import DATA, STOCK_PYTHON3, python3_shim, stock_python3

from iobench.report import build_report
from iobench.report.recommend import Recommendation, recommend
from iobench.report.script import SCRIPT_NAME, env_for, user_path
from iobench.rundir.meta import RoleInfo, RunMeta
from iobench.trial.installers import uv_binary
from iobench.wheels.profile import load_profile
from iobench.wheels.synth import synthesize


def test_env_for_each_installer_and_placement() -> None:
    roles = {
        "target": RoleInfo(path="/workspace", device="nfs:/vol", mountpoint="/workspace"),
        "tmp": RoleInfo(path="/tmp", device="overlay", mountpoint="/"),
    }
    pairs, notes = env_for({"installer": "pip", "venv_role": "tmp", "tmpdir_role": "tmp",
                            "cache_role": "off", "compile": "off", "cache_state": "cold"}, roles)  # fmt: skip
    mine = "/tmp/iobench-$(id -u)"  # the user's own folder in the shared tmp role
    assert pairs == [("VIRTUAL_ENV", f"{mine}/venv"), ("TMPDIR", mine),
                     ("PIP_NO_CACHE_DIR", "1"), ("PIP_NO_COMPILE", "1")]  # fmt: skip
    pairs, notes = env_for({"installer": "uv", "venv_role": "tmp", "tmpdir_role": "tmp",
                            "cache_role": "target", "compile": "on", "cache_state": "warm"}, roles)  # fmt: skip
    assert ("UV_CACHE_DIR", "/workspace/uv-cache") in pairs and ("UV_LINK_MODE", "copy") in pairs
    assert ("UV_COMPILE_BYTECODE", "1") in pairs
    assert any("hard-link" in n for n in notes)
    pairs, _ = env_for({"installer": "pip", "venv_role": "scratch", "tmpdir_role": "tmp",
                        "cache_role": "tmp", "compile": "on"}, roles)  # fmt: skip
    assert ("VIRTUAL_ENV", "/scratch/venv") in pairs and (
        "PIP_CACHE_DIR",
        "/tmp/iobench-$(id -u)/pip-cache",
    ) in pairs
    # bytecode on local disk: in the user's own folder (a shared one would let another user
    # plant the .pyc files this user's imports load)
    pairs, _ = env_for({"installer": "pip", "venv_role": "target", "tmpdir_role": "tmp",
                        "cache_role": "tmp", "compile": "off", "pycache": "local"}, roles)  # fmt: skip
    assert ("PYTHONPYCACHEPREFIX", f"{mine}/pycache") in pairs


# --- the printed start scripts, pasted into a clean shell -----------------------------------------

TINY_PROFILE = DATA / "tiny-profile.toml"
FAST = {"venv": 1.2, "download": 9.0, "install": 38.0, "compile": 12.0, "import": 4.0}
KINDS = {
    # a pip venv on a tmpfs tmp role, a warm pip cache on the volume
    "pip-venv-on-tmpfs": rf.ConfigSpec("venv-on-shm", venv="tmp", tmpdir="tmp", cache="local",
                                       cache_state="warm", profile="cpu", phases=FAST),
    # a pip venv on the volume, no cache, no bytecode
    "pip-venv-on-volume": rf.ConfigSpec("venv-local", venv="local", tmpdir="local", cache="off",
                                        compile="off", profile="cpu", phases=FAST),
    # uv with its cache on another filesystem than the venv
    "uv": rf.ConfigSpec("uv-local", venv="local", tmpdir="local", cache="tmp", installer="uv",
                        profile="bandwidth", compile="off", phases=FAST),
}  # fmt: skip


@pytest.fixture(scope="module")
def tiny_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheels")
    synthesize(load_profile(str(TINY_PROFILE)), out)
    return out


def advice_for(tmp_path: Path, spec: rf.ConfigSpec, own: Path | None = None) -> Recommendation:
    """The recommendation of a run whose winner is ``spec``, its roles in folders of tmp_path."""
    run = rf.make_run_dir(tmp_path / "results", configs=(rf.DEFAULT_CONFIGS[0], spec))
    meta = json.loads((run / "meta.json").read_text())
    for name, role in meta["roles"].items():
        role["path"] = str(tmp_path / "roles" / name)
        role["device"] = f"dev-{name}"
        role["mountpoint"] = role["path"]
    meta["roles"]["tmp"]["fstype"] = "tmpfs"
    meta["versions"]["venv"] = {"python": "3.11.7", "virtualenv": "21.15.11", "pip": "26.3"}
    (run / "meta.json").write_text(json.dumps(meta))
    summary = build_report(run, charts=False).summary
    assert summary.verdict.kind == "advice" and summary.winner == spec.name
    rec = recommend(summary, RunMeta.from_json(meta), own=own)
    assert rec is not None
    return rec


def _bin(tmp_path: Path, machine: str, uv: str | None = None) -> Path:
    """The pasted script's python3: a stock one (Debian's, without virtualenv), or one that has
    what the trials measured with (this interpreter, which has virtualenv); uv where given."""
    folder = tmp_path / "bin"
    if machine == "stock":
        stock_python3(folder)
    else:
        python3_shim(folder, sys.executable)
    if uv is not None:
        (folder / "uv").symlink_to(uv)
    return folder


def paste(
    lines: list[str], tmp_path: Path, install: str, bin_dir: Path
) -> subprocess.CompletedProcess[str]:
    """Run the script with ``env -i PATH=/usr/bin:/bin bash -e``, as printed, with ``bin_dir``
    first on PATH; then install the tiny wheels from a folder (the user's install line) and run
    the ready check in the venv the script made."""
    checks = [
        'python3 -c "import tiny_core; tiny_core.check()"',
        'test "$(python3 -c "import sys; print(sys.prefix)")" = "$VIRTUAL_ENV"',
        'test -d "$TMPDIR"',
        "echo READY",
    ]
    body = [
        f"INSTALL=({install})" if line.startswith("INSTALL=(") else line
        for line in lines
        if not line.startswith('if [ "$#"')
    ]  # the exec line last; fmt: skip
    script = tmp_path / "start.sh"
    script.write_text("\n".join([*body, *checks, lines[-1]]) + "\n")
    env = ["env", "-i", f"PATH={bin_dir}:/usr/bin:/bin", f"HOME={tmp_path}", "PIP_CONFIG_FILE=/dev/null",
           "UV_NO_CONFIG=1", "bash", "-e", str(script)]  # fmt: skip
    return subprocess.run(env, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.venv
@pytest.mark.parametrize("machine", ["stock", "measured"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_each_kind_of_printed_script_builds_a_working_venv_in_a_clean_shell(
    kind: str, machine: str, tmp_path: Path, tiny_wheels: Path
) -> None:
    """On a stock python3 (no virtualenv: PEP 668 Debian) the script makes the venv with
    python3 -m venv; where virtualenv is there, with virtualenv, as the trials did."""
    if not STOCK_PYTHON3.is_file():
        pytest.skip("no /usr/bin/python3 (the stock interpreter the script is written for)")
    rec = advice_for(tmp_path, KINDS[kind])
    text = "\n".join(rec.shell)
    assert rec.shell[0] == "#!/bin/bash" and rec.shell[1] == "set -euo pipefail"
    assert "python " not in text and "python -m" not in text  # python3 only
    assert ".iobench-scratch" not in text and "export VIRTUAL_ENV=" in text
    assert "'pip==26.3'" not in text and "virtualenv 21.15.11" not in text  # the report's notes
    assert "INSTALL=(python3 -m pip install torch==2.9.1)" in text or kind == "uv"
    assert "python3 -m virtualenv --no-periodic-update --no-setuptools" in text  # as measured
    assert 'python3 -m venv "$VIRTUAL_ENV"' in text  # what a stock python3 has
    assert text.count('export PATH="$VIRTUAL_ENV/bin:$PATH"') == 1
    uv = None
    if kind == "uv":
        uv = uv_binary()
        if uv is None:
            pytest.skip("uv is not installed")
        install = f"uv pip install --no-index --find-links {tiny_wheels} tiny-core"
        assert "export UV_LINK_MODE=copy" in text
    else:
        install = f"python3 -m pip install --no-index --find-links {tiny_wheels} tiny-core"
    done = paste(rec.shell, tmp_path, install, _bin(tmp_path, machine, uv))
    assert done.returncode == 0 and done.stdout.rstrip().endswith("READY"), done.stderr[-2000:]
    venv = Path(next(v for n, v in _exports(rec.shell) if n == "VIRTUAL_ENV"))
    assert (venv / "bin" / "python3").exists() and venv.is_relative_to(tmp_path / "roles")
    made_by_virtualenv = "virtualenv = " in (venv / "pyvenv.cfg").read_text()
    assert made_by_virtualenv == (machine == "measured")
    said = " ".join(line.lstrip("# ") for line in rec.shell if line.startswith("#"))
    noted = " ".join(rec.notes)
    assert "not measured in this run" in noted and "--venv-creator virtualenv,venv" in noted
    assert "'pip==26.3'" in noted and "virtualenv 21.15.11" in noted
    if kind == "pip-venv-on-tmpfs":
        assert "is tmpfs: it is RAM" in said and "64 MB" in said and "--shm-size" in said
        assert "rebuild it (and reinstall every package) at every start" in said
        assert "warm cache on 'local'" in said
        assert (tmp_path / "roles" / "local" / "pip-cache").is_dir()
    if kind == "pip-venv-on-volume":
        assert "export PIP_NO_CACHE_DIR=1" in text and "export PIP_NO_COMPILE=1" in text
        assert "tmpfs" not in text


@pytest.mark.venv
def test_a_uv_script_stops_before_making_anything_when_uv_is_missing(tmp_path: Path) -> None:
    if not STOCK_PYTHON3.is_file():
        pytest.skip("no /usr/bin/python3 (the stock interpreter the script is written for)")
    rec = advice_for(tmp_path, KINDS["uv"])
    done = paste(rec.shell, tmp_path, "true", _bin(tmp_path, "stock"))
    assert done.returncode == 1 and "installs with uv, which is not on PATH" in done.stderr
    assert not (tmp_path / "roles" / "local" / "venv").exists()


@pytest.mark.venv
def test_the_dockerfile_fragment_makes_the_venv_at_start_and_runs_the_command(
    tmp_path: Path,
) -> None:
    """The Dockerfile lines, carried out as Docker would (ENV for every process, the start
    script copied in as the entrypoint, the CMD given to it): no Docker engine runs here."""
    if not STOCK_PYTHON3.is_file():
        pytest.skip("no /usr/bin/python3 (the stock interpreter the script is written for)")
    rec = advice_for(tmp_path, KINDS["pip-venv-on-tmpfs"])
    image = tmp_path / "image"
    env = {"PATH": f"{_bin(tmp_path, 'stock')}:/usr/bin:/bin", "HOME": str(tmp_path)}
    entry: list[str] = []
    for line in rec.dockerfile:
        word, _, rest = line.partition(" ")
        if word == "ENV":
            name, _, value = rest.partition("=")
            value = value.strip('"').strip("'")
            env[name] = re.sub(r"\$(\w+)", lambda m: env.get(m.group(1), ""), value)
        elif word == "COPY":
            source, dest = rest.split()
            assert source == SCRIPT_NAME
            (image / dest.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            body = ["INSTALL=(true)" if x.startswith("INSTALL=(") else x for x in rec.shell]
            (image / dest.lstrip("/")).write_text("\n".join(body) + "\n")  # installs nothing
        elif word == "RUN":
            subprocess.run(rest.replace(" /usr/", f" {image}/usr/"), shell=True, check=True)
        elif word == "ENTRYPOINT":
            entry = [str(image) + p for p in json.loads(rest)]
        elif word == "CMD":
            assert json.loads(rest) == ["bash"]
    ready = ["python3", "-c", "import sys; print(sys.prefix)"]  # `docker run IMAGE python3 ...`
    done = subprocess.run([*entry, *ready], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    venv = dict(_exports(rec.shell))["VIRTUAL_ENV"]
    if "$(id -u)" in dict(env_for_script(rec.shell)).get("VIRTUAL_ENV", "$(id -u)"):
        # a per-user folder (the venv on tmp): no ENV can name it, the entrypoint exports it
        assert "VIRTUAL_ENV" not in env and "docker exec CONTAINER" in "\n".join(rec.dockerfile)
    else:
        assert env["VIRTUAL_ENV"] == venv
    assert done.stdout.strip() == venv


def env_for_script(lines: list[str]) -> list[tuple[str, str]]:
    """The exported (name, value) pairs as written in the script."""
    return [tuple(line[len("export ") :].split("=", 1)) for line in lines  # type: ignore[misc]
            if line.startswith("export ") and not line.startswith("export PATH=")]  # fmt: skip


def _exports(lines: list[str]) -> list[tuple[str, str]]:
    """The exported (name, value) pairs as the shell sees them here ($(id -u) expanded)."""
    out = []
    for line in lines:
        if line.startswith("export ") and not line.startswith("export PATH="):
            name, _, value = line[len("export ") :].partition("=")
            word = shlex.split(value.replace("$(id -u)", "\0uid\0"))[0]
            out.append((name, word.replace("\0uid\0", str(os.getuid()))))
    return out


def test_a_role_inside_iobench_s_clone_is_moved_to_its_parent(
    tmp_path: Path, tiny_wheels: Path
) -> None:
    clone = tmp_path / "roles"  # every role lives inside "iobench's clone"
    rec = advice_for(tmp_path, KINDS["pip-venv-on-volume"], own=clone)
    assert f"export VIRTUAL_ENV={tmp_path}/venv" in rec.shell
    assert any("was iobench's own folder" in n for n in rec.notes)
    assert not any(str(clone) in line for line in rec.shell if not line.startswith("#"))


def test_no_script_without_advice(run_dir: Path) -> None:
    trials = (run_dir / "trials.csv").read_text().splitlines()
    keep = [trials[0], *[t for t in trials[1:] if ",naive-r1," in t or ",uv-local-r1," in t]]
    (run_dir / "trials.csv").write_text("\n".join(keep) + "\n")
    result = build_report(run_dir, charts=False)
    assert result.summary.verdict.kind == "too-few" and result.recommendation is None
    assert "Set (start script" not in "\n".join(result.lines)
    assert "<h2>What to set</h2>" not in (run_dir / "report.html").read_text()
    assert json.loads((run_dir / "summary.json").read_text())["recommendation"] is None


def test_a_role_in_any_iobench_clone_or_scratch_folder_is_never_the_script_s_path(
    tmp_path: Path,
) -> None:
    clone = tmp_path / "src" / "iobench-clone"
    (clone / "iobench").mkdir(parents=True)
    (clone / "iobench" / "__init__.py").write_text("")
    (clone / "pyproject.toml").write_text('[project]\nname = "iobench"\n')
    roles = {"target": RoleInfo(path=str(clone)),
             "tmp": RoleInfo(path=f"{tmp_path}/t/.iobench-scratch/x")}  # fmt: skip
    path, note = user_path(roles, "target")
    assert path == str(tmp_path / "src") and note and "iobench's own folder" in note
    assert user_path(roles, "tmp") == (f"{tmp_path}/t/iobench-$(id -u)", None)  # the user's own


def _nobody() -> int:
    import pwd

    try:
        return pwd.getpwnam("nobody").pw_uid
    except KeyError:
        pytest.skip("no user nobody")


@pytest.mark.venv
@pytest.mark.parametrize("planted", ["per-user folder", "link", "venv on the volume"])
def test_a_script_refuses_a_folder_another_user_made_before_it(
    planted: str, tmp_path: Path, tiny_wheels: Path
) -> None:
    """Issue 23, item 6: another user creates the script's venv folder first, with a .pth file
    in it that runs their code in every Python started there. Before, the script reused it
    (`<tmp role>/venv`) and ran it as whoever followed the script. Now the script stops first."""
    if not STOCK_PYTHON3.is_file():
        pytest.skip("no /usr/bin/python3 (the stock interpreter the script is written for)")
    if os.geteuid() != 0:
        pytest.skip("needs root to make folders owned by another user")
    spec = KINDS["pip-venv-on-volume" if planted == "venv on the volume" else "pip-venv-on-tmpfs"]
    rec = advice_for(tmp_path, spec)
    venv = Path(dict(_exports(rec.shell))["VIRTUAL_ENV"])
    pwned = tmp_path / "pwned"
    site = venv / "lib" / "python3.11" / "site-packages"
    shared = venv.parent if planted != "venv on the volume" else venv
    if planted == "link":  # a link to a folder the attacker owns, at the user's folder's name
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        venv.parent.parent.mkdir(parents=True, exist_ok=True)
        venv.parent.symlink_to(elsewhere)
        shared = elsewhere
    site.mkdir(parents=True)
    (site / "evil.pth").write_text(f"import os; open({str(pwned)!r}, 'w').write('ran')\n")
    for folder in [shared, *shared.rglob("*")]:
        os.chown(folder, _nobody(), -1, follow_symlinks=False)
    install = f"python3 -m pip install --no-index --find-links {tiny_wheels} tiny-core"
    done = paste(rec.shell, tmp_path, install, _bin(tmp_path, "stock"))
    assert done.returncode != 0 and "READY" not in done.stdout
    assert "refusing" in done.stderr and "another user's folder" in done.stderr, done.stderr
    assert not pwned.exists(), "the other user's code ran as the script's user"
