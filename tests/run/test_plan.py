"""iobench.run.plan: every check happens before anything is created, and defaults say why."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from helpers.files import DATA
from helpers.runs import make_run_dir

from iobench.cli import build_parser
from iobench.cli.run import run_request
from iobench.errors import UsageError
from iobench.run import plan as run_plan
from iobench.run import roles as run_roles
from iobench.rundir.meta import RunMeta
from iobench.scenario.load import load_scenario
from iobench.trial import installers

TINY = DATA / "tiny.toml"


def _args(*argv: str) -> run_plan.RunRequest:
    return run_request(build_parser().parse_args(["run", *argv]))


def _dirs(tmp_path: Path) -> tuple[Path, Path, Path]:
    target, tmp, results = tmp_path / "target", tmp_path / "tmp", tmp_path / "results"
    target.mkdir()
    tmp.mkdir()
    return target, tmp, results


def _created_nothing(tmp_path: Path, results: Path) -> None:
    assert not results.exists()
    assert not list(tmp_path.rglob(".iobench-scratch"))


def test_a_plan_holds_the_checked_run(tmp_path: Path) -> None:
    target, tmp, results = _dirs(tmp_path)
    plan = run_plan.check(
        _args(
            "--scenario",
            str(TINY),
            "--target",
            str(target),
            "--tmp",
            str(tmp),
            "--results",
            str(results),
            "--repeats",
            "3",
        )
    )
    assert plan.roles == {"target": target.resolve(), "tmp": tmp.resolve()}
    assert plan.repeats == 3 and plan.results_root == results.resolve() and plan.local_index
    assert plan.trial_timeout_s == run_plan.TRIAL_BASE_S + run_plan.TRIAL_S_PER_MB * 10
    assert 0 <= plan.order_seed < 2**32
    _created_nothing(tmp_path, results)


def test_missing_uv_fails_before_the_first_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = tmp_path / "uv.toml"
    scenario.write_text(
        TINY.read_text().replace(
            'wheels = "tiny-profile.toml"', f'wheels = "{DATA / "tiny-profile.toml"}"'
        )
        + '\n[configs.fast]\nvenv = "tmp"\ntmpdir = "tmp"\ncache = "off"\ninstaller = "uv"\n'
    )
    monkeypatch.setattr(installers, "uv_binary", lambda: None)
    target, tmp, results = _dirs(tmp_path)
    with pytest.raises(UsageError, match="configs fast install with uv, which is not available"):
        run_plan.check(
            _args(
                "--scenario",
                str(scenario),
                "--target",
                str(target),
                "--tmp",
                str(tmp),
                "--results",
                str(results),
            )
        )
    _created_nothing(tmp_path, results)


def test_results_inside_a_scratch_folder_are_refused(tmp_path: Path) -> None:
    target, tmp, _ = _dirs(tmp_path)
    inside = target / ".iobench-scratch" / "results"
    with pytest.raises(UsageError, match="inside an iobench scratch folder"):
        run_plan.check(
            _args(
                "--scenario",
                str(TINY),
                "--target",
                str(target),
                "--tmp",
                str(tmp),
                "--results",
                str(inside),
            )
        )


def test_scratch_inside_results_is_refused(tmp_path: Path) -> None:
    target, tmp, _ = _dirs(tmp_path)
    with pytest.raises(UsageError, match="would lie inside it"):
        run_plan.check(
            _args(
                "--scenario",
                str(TINY),
                "--target",
                str(target),
                "--tmp",
                str(tmp),
                "--results",
                str(tmp_path),
            )
        )
    assert not (tmp_path / ".iobench-scratch").exists()


@pytest.mark.parametrize("where", ["/", "home"])
def test_default_target_refuses_root_and_a_home_folder(
    where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if Path("/workspace").is_dir() and os.path.ismount("/workspace"):
        pytest.skip("/workspace is a mount point here: it is the default target")
    monkeypatch.chdir("/" if where == "/" else Path.home())
    with pytest.raises(UsageError, match=r"^give --target DIR \(your network volume\)$"):
        run_roles.default_target()


def test_default_target_is_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if Path("/workspace").is_dir() and os.path.ismount("/workspace"):
        pytest.skip("/workspace is a mount point here: it is the default target")
    monkeypatch.chdir(tmp_path)
    assert run_roles.default_target() == (tmp_path.resolve(), "the current folder")


def test_default_tmp_leaves_the_targets_filesystem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or run_roles.same_filesystem(shm, tmp_path):
        pytest.skip("needs a /dev/shm on another filesystem than the test's temp folder")
    target, _, results = _dirs(tmp_path)
    system_tmp = tmp_path / "system-tmp"
    system_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(system_tmp))  # shares the target's filesystem
    plan = run_plan.check(
        _args("--scenario", str(TINY), "--target", str(target), "--results", str(results))
    )
    assert plan.roles["tmp"] == shm.resolve()
    assert any(
        n.startswith("tmp: /dev/shm (") and "shares the target's filesystem" in n
        for n in plan.notes
    )
    assert plan.same_storage == []


def test_default_tmp_is_the_system_temp_dir_on_another_filesystem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or run_roles.same_filesystem(shm, tmp_path):
        pytest.skip("needs a /dev/shm on another filesystem than the test's temp folder")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    scenario = load_scenario(str(TINY))
    assert run_roles.default_tmp(shm, scenario) == (tmp_path, "the system temp dir")


def test_roles_on_one_filesystem_are_said_and_recorded(tmp_path: Path) -> None:
    target, tmp, results = _dirs(tmp_path)
    plan = run_plan.check(
        _args(
            "--scenario",
            str(TINY),
            "--target",
            str(target),
            "--tmp",
            str(tmp),
            "--results",
            str(results),
        )
    )
    assert plan.same_storage == [["target", "tmp"]]
    note = [n for n in plan.notes if "one filesystem" in n]
    assert len(note) == 1 and "roles target and tmp" in note[0] and "same storage" in note[0]


def test_index_mbps_needs_the_local_index(tmp_path: Path) -> None:
    target, tmp, results = _dirs(tmp_path)
    with pytest.raises(UsageError, match="--index-mbit needs the local index"):
        run_plan.check(
            _args(
                "--scenario",
                str(TINY),
                "--package",
                "six",
                "--index-url",
                "http://127.0.0.1:9/",
                "--index-mbps",
                "5",
                "--no-reuse-downloads",
                "--target",
                str(target),
                "--tmp",
                str(tmp),
                "--results",
                str(results),
            )
        )
    _created_nothing(tmp_path, results)


def test_resume_refuses_a_changed_package_list(tmp_path: Path) -> None:
    target, tmp, results = _dirs(tmp_path)
    plan = run_plan.check(
        _args(
            "--scenario",
            str(TINY),
            "--target",
            str(target),
            "--tmp",
            str(tmp),
            "--results",
            str(results),
        )
    )
    data = {
        "run_id": "r1",
        "repeats": plan.repeats,
        "scenario": {**plan.scenario.to_dict(), "packages": ["other"]},
        "roles": {k: {"path": str(v)} for k, v in plan.roles.items()},
    }
    with pytest.raises(UsageError, match="cannot resume r1: packages changed"):
        run_plan.check_resume(RunMeta.from_json(data), plan)
    data["scenario"]["packages"] = list(plan.scenario.packages)
    run_plan.check_resume(RunMeta.from_json(data), plan)  # unchanged: accepted


@pytest.mark.parametrize(
    "flag", ["--trial-timeout", "--stall-timeout", "--stall-after", "--lock-wait"]
)
def test_times_beyond_a_sane_range_are_refused_in_one_line(tmp_path: Path, flag: str) -> None:
    target, tmp, results = _dirs(tmp_path)
    with pytest.raises(UsageError, match=f"^{flag} 1e\\+07: at most 1e\\+06 s$"):
        run_plan.check(
            _args(
                "--scenario",
                str(TINY),
                "--target",
                str(target),
                "--tmp",
                str(tmp),
                "--results",
                str(results),
                flag,
                "1e7",
            )
        )
    _created_nothing(tmp_path, results)


def _matrix(tmp_path: Path, values: int) -> Path:
    """A stand-in scenario whose [matrix] crosses ``values`` venv roles with as many tmpdir roles."""
    names = ", ".join(f'"r{i}"' for i in range(values))
    path = tmp_path / "big.toml"
    path.write_text(
        '[scenario]\nname = "big"\nkind = "standin"\n[workload]\nfiles = 1\n'
        f'[matrix]\nvenv = [{names}]\ntmpdir = [{names}]\ncache = ["off"]\n'
    )
    return path


def test_a_matrix_too_large_is_refused_before_it_is_generated(tmp_path: Path) -> None:
    """Issue 23 (low): a 2,048-config matrix x 1,000 repeats kept --dry-run busy past 120 s."""
    import time

    from iobench.errors import ScenarioError

    t0 = time.perf_counter()
    with pytest.raises(ScenarioError, match=r"10,000 combinations; at most 4,096 configs"):
        load_scenario(str(_matrix(tmp_path, 100)))
    assert time.perf_counter() - t0 < 5


def test_too_many_trials_are_refused_and_an_unknown_config_s_line_stays_short(
    tmp_path: Path,
) -> None:
    target, tmp, results = _dirs(tmp_path)
    big = str(_matrix(tmp_path, 40))  # 1,600 configs
    roles = ["--target", str(target), "--tmp", str(tmp), "--results", str(results)]
    with pytest.raises(
        UsageError, match=r"1,600 configs x 1,000 repeats = 1,600,000 trials: at most 10,000"
    ):
        run_plan.check(_args("--scenario", big, *roles, "--repeats", "1000"))
    from iobench.errors import ScenarioError

    with pytest.raises(ScenarioError) as info:
        run_plan.check(_args("--scenario", big, *roles, "--configs", "nope" * 1000))
    assert len(str(info.value)) < 600 and "(and 1,588 more)" in str(info.value)
    _created_nothing(tmp_path, results)


def test_a_run_without_configs_measures_the_scenario_s_default_set(tmp_path: Path) -> None:
    """smoke declares four configs and runs three unless --configs names others: its
    warm-cache-on-target measured alike venv-on-tmp in every default run (a loopback index
    leaves a warm cache no download to save), a fourth trial a round for no answer."""
    target, tmp, results = _dirs(tmp_path)
    where = ["--target", str(target), "--tmp", str(tmp), "--results", str(results)]
    assert load_scenario("smoke").default_configs == ("naive", "tmp-fix", "venv-on-tmp")
    plan = run_plan.check(_args(*where))
    assert [c.name for c in plan.scenario.configs] == ["naive", "tmp-fix", "venv-on-tmp"]
    assert "default_configs" not in plan.scenario.to_dict()  # the run's stored set is its own
    plan = run_plan.check(_args(*where, "--configs", "warm-cache-on-target,naive"))
    assert [c.name for c in plan.scenario.configs] == ["warm-cache-on-target", "naive"]
    # the axes cross the default set, not the declared one
    plan = run_plan.check(_args(*where, "--matrix", "compile=on,off"))
    assert len(plan.scenario.configs) == 6
    assert not any("warm-cache" in c.name for c in plan.scenario.configs)
    _created_nothing(tmp_path, results)


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("mkfs.ext4") or not shutil.which("unshare"),
    reason="an ext4 image loop-mounted in a mount namespace of the test's own (root, e2fsprogs)",
)
def test_a_run_that_ended_minutes_ago_on_an_ext4_without_a_journal_is_warned_of(
    tmp_path: Path,
) -> None:
    """Default runs a minute after another took 2.3-3.9 s a naive trial against 1.5-1.6 s six
    minutes later, on this machine's journal-less ext4: the kernel looks past every inode
    freed in the last minutes whenever it creates a file. The run says so; an ext4 with a
    journal, a run ended long ago, or a run on another filesystem says nothing."""
    results = tmp_path / "results"
    prev = make_run_dir(results)
    mnt = tmp_path / "mnt"
    mnt.mkdir()

    def said(features: list[str], ago: float, mountpoint: Path) -> str:
        doc = json.loads((prev / "meta.json").read_text())
        doc["ended_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - ago))
        doc["roles"]["target"].update(path=str(mountpoint), mountpoint=str(mountpoint))
        (prev / "meta.json").write_text(json.dumps(doc))
        img = tmp_path / "fs.img"
        img.unlink(missing_ok=True)
        subprocess.run(["mkfs.ext4", "-q", "-F", *features, str(img), "16M"], check=True)
        code = ("import sys; from pathlib import Path; from iobench.run.roles import "
                "recent_deletions as r; print(r(Path(sys.argv[1]), {'target': Path(sys.argv[2])}))")  # fmt: skip
        script = 'mount -o loop "$1" "$2" && exec "$3" -c "$4" "$5" "$2"'
        out = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script,
                              "sh", str(img), str(mnt), sys.executable, code, str(results)],
                             capture_output=True, text=True, check=True)  # fmt: skip
        return out.stdout

    warned = said(["-O", "^has_journal"], 30, mnt)
    assert "warning: target is ext4 without a journal" in warned and "ended 3" in warned, warned
    assert "start 3" in warned  # ~330 s later for the machine's own figures
    assert said([], 30, mnt) == "[]\n"  # a journal: the kernel does not look past them
    assert said(["-O", "^has_journal"], 400, mnt) == "[]\n"  # aged: nothing to look past
    assert said(["-O", "^has_journal"], 30, tmp_path) == "[]\n"  # that run was elsewhere
    assert not run_roles.journal_less("/dev/no-such-device")
