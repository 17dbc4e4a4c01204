"""The restart (iobench/trial/restart.py) on the stand-in workload: every strategy persists
what the first start built, restarts on an emptied machine, restores or rebuilds it, and the
ready check finds it; the row's lifecycle columns are filled, nothing is left behind; a resume
runs the missing trials of a strategy run. The real venvs' restarts, on the lab volume too,
are tests/trial/test_restart.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import standin
from helpers.files import read_csv

from iobench.__main__ import main
from iobench.cli import build_parser
from iobench.cli.run import run_request
from iobench.run import plan as run_plan
from iobench.trial import strategies

#: one config per strategy, on the target and tmp as each strategy puts it
STRATEGY_CONFIGS = """
[defaults]
venv = "tmp"
tmpdir = "tmp"
cache = "off"

[matrix]
strategy = ["reinstall", "persistent-venv", "packed-venv", "copied-venv"]
name = "{strategy}"
"""


def test_every_strategy_restarts_ready_and_its_row_says_how(tmp_path: Path) -> None:
    method = strategies.choose_method("tar")  # available everywhere: the restore is tar -x
    rc, run = standin.run(tmp_path, "rate = 400\n", "--pack-method", method, "--quiet",
                          configs=STRATEGY_CONFIGS, repeats=1)  # fmt: skip
    rows = {r["config"]: r for r in read_csv(run / "trials.csv")}
    assert rc == 0, rows
    assert set(rows) == {"reinstall", "persistent-venv", "packed-venv", "copied-venv"}
    for name, r in rows.items():
        assert r["status"] == "ok" and r["strategy"] == name, r
        assert float(r["first_start_s"]) >= float(r["time_to_ready_s"]) > 0
        assert float(r["restart_s"]) > 0 and float(r["restart_import_s"]) > 0
        assert r["cache_mode"] == "cold" and r["cold_method"] in ("drop_caches", "fadvise", "none")
    assert rows["persistent-venv"]["venv_role"] == "target"  # the strategy keeps it there
    assert int(rows["persistent-venv"]["stored_bytes"]) >= 20 * 4096
    packed = rows["packed-venv"]
    assert packed["persist_method"] == "tar" and packed["persist_command"].startswith("tar ")
    assert packed["restore_command"].startswith("tar ") and float(packed["restore_s"]) > 0
    assert rows["copied-venv"]["persist_method"] == "copy"
    assert rows["reinstall"]["stored_bytes"] == "0" and rows["reinstall"]["restore_s"] == ""
    assert json.loads((run / "meta.json").read_text())["pack_method"] == "tar"
    assert standin.scratch_left(tmp_path / "target", tmp_path / "tmp") == {
        str(tmp_path / "target"): set(), str(tmp_path / "tmp"): set()}  # fmt: skip


def test_a_restart_that_cannot_find_what_was_kept_fails_with_restart_in_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first start's figures stay; the row is failed with ``restart (...)``."""
    real = strategies.restore

    def lose_it(name: str, store: Path, venv: Path, run: object = None, **kw: bool) -> object:
        for child in store.iterdir():
            child.unlink()  # the volume lost what the first start kept
        return real(name, store, venv, run=run, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(strategies, "restore", lose_it)
    configs = STRATEGY_CONFIGS.replace(
        '["reinstall", "persistent-venv", "packed-venv", "copied-venv"]', '["copied-venv"]'
    )
    rc, run = standin.run(tmp_path, "", "--quiet", configs=configs, repeats=1)
    (row,) = read_csv(run / "trials.csv")
    assert (
        rc == 1 and row["status"] == "failed" and row["error"].startswith("restart (copied-venv)")
    )
    assert float(row["time_to_ready_s"]) > 0 and float(row["first_start_s"]) > 0


def test_resume_runs_the_missing_trials_of_every_strategy_with_the_run_s_restart_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An interrupted strategy run resumes its missing trial; a resume keeps the run's
    --cache-mode and --pack-method (from meta.json when not given, refused when changed)."""
    configs = STRATEGY_CONFIGS.replace(
        '["reinstall", "persistent-venv", "packed-venv", "copied-venv"]',
        '["reinstall", "copied-venv"]',
    )
    rc, run_dir = standin.run(tmp_path, "", "--quiet", configs=configs, repeats=1)
    first = {r["config"]: r for r in read_csv(run_dir / "trials.csv")}
    assert rc == 0 and all(
        r["status"] == "ok" and float(r["restart_s"]) > 0 for r in first.values()
    )
    # an interrupted run: the last trial's row is gone, meta.json says interrupted
    lines = (run_dir / "trials.csv").read_text().splitlines(keepends=True)
    dropped = lines[-1].split(",")[1]
    (run_dir / "trials.csv").write_text("".join(lines[:-1]))
    meta = json.loads((run_dir / "meta.json").read_text())
    (run_dir / "meta.json").write_text(json.dumps({**meta, "status": "interrupted"}))
    assert (meta["cache_mode"], meta["pack_method"]) == ("cold", "auto")
    # restarts measured warm, or packed otherwise, would not be the run's: refused, nothing run
    for flag, value in (("--cache-mode", "warm"), ("--pack-method", "tar")):
        assert main(["run", "--resume", str(run_dir), "--no-report", flag, value]) != 0
        assert f"cannot resume {run_dir.name}: {flag} changed" in capsys.readouterr().err
    assert len(read_csv(run_dir / "trials.csv")) == 1
    # not given, a resume takes the run's from meta.json (a warm run resumes warm)
    theirs = {**meta, "status": "interrupted", "cache_mode": "warm", "pack_method": "tar"}
    (run_dir / "meta.json").write_text(json.dumps(theirs))
    request = run_request(build_parser().parse_args(["run", "--resume", str(run_dir)]))
    plan = run_plan.check(request)
    assert (plan.cache_mode, plan.pack_method) == ("warm", "tar")
    # meta.json written before the keys: its restarts were cold, so a cold resume goes on
    (run_dir / "meta.json").write_text(
        json.dumps({k: v for k, v in meta.items() if k != "cache_mode"} | {"status": "interrupted"})
    )
    assert main(["run", "--resume", str(run_dir), "--no-report", "--quiet"]) == 0
    rows = read_csv(run_dir / "trials.csv")
    assert sorted(r["trial_id"] for r in rows) == ["copied-venv-r1", "reinstall-r1"]
    again = next(r for r in rows if r["trial_id"] == dropped)
    assert again["status"] == "ok" and again["strategy"] == dropped.removesuffix("-r1")
    assert float(again["restart_s"]) > 0


def test_a_restore_method_this_pod_cannot_run_fails_in_one_line_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--pack-method squashfs-loop`` in an unprivileged pod: exit 1, one line naming what is
    missing, no run folder; a mistyped method is a usage error (2) with a "did you mean"."""
    from iobench.trial import squashfs

    monkeypatch.setattr(squashfs, "capability", lambda bit: False)
    path = standin.scenario(tmp_path, "", STRATEGY_CONFIGS, repeats=1)
    # the first thing missing here is named: without squashfs-tools, the image's maker
    lacks = "a loop mount needs CAP_SYS_ADMIN" if shutil.which("mksquashfs") else (
        "mksquashfs is not installed")  # fmt: skip
    cases = (("squashfs-loop,tar", 1, f"pack method squashfs-loop cannot run here: {lacks}"),
             ("tar,squashfs-lop", 2, "did you mean 'squashfs-loop'?"))  # fmt: skip
    for value, status, words in cases:
        assert main(standin.argv(tmp_path, path, "--pack-method", value)) == status
        err = capsys.readouterr().err
        assert err.startswith("iobench: error: ") and words in err and err.count("\n") == 1, err
    assert not (tmp_path / "results").exists()
    assert standin.scratch_left(tmp_path / "target", tmp_path / "tmp") == {
        str(tmp_path / "target"): set(), str(tmp_path / "tmp"): set()}  # fmt: skip


def test_several_pack_methods_are_configs_of_one_run_and_a_resume_keeps_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--pack-method tar,squashfs-extract``: packed-venv once per method in one run, each
    row naming the restore that ran; meta.json keeps the list, and a resume keeps it (runs the
    missing trial with its config's own method) and refuses another."""
    try:
        strategies.choose_method("squashfs-extract")  # mksquashfs and unsquashfs: no mount
    except strategies.StrategyError as exc:
        pytest.skip(str(exc))
    configs = STRATEGY_CONFIGS.replace(
        '["reinstall", "persistent-venv", "packed-venv", "copied-venv"]',
        '["reinstall", "packed-venv"]',
    )
    rc, run_dir = standin.run(tmp_path, "", "--quiet", "--pack-method", "tar,squashfs-extract",
                              configs=configs, repeats=1)  # fmt: skip
    rows = {r["config"]: r for r in read_csv(run_dir / "trials.csv")}
    assert rc == 0 and set(rows) == {"reinstall", "packed-venv_tar", "packed-venv_squashfs-extract"}
    extract, tar = rows["packed-venv_squashfs-extract"], rows["packed-venv_tar"]
    assert (extract["persist_method"], extract["restore_method"], extract["restore_tool"]) == (
        "squashfs", "squashfs-extract", "unsquashfs")  # fmt: skip
    assert extract["restore_command"].startswith("unsquashfs -q -n -d ")
    assert (tar["persist_method"], tar["restore_method"]) == ("tar", "tar")
    assert (rows["reinstall"]["restore_method"], rows["reinstall"]["restore_tool"]) == ("", "")
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["pack_method"] == "tar,squashfs-extract"
    # interrupted before its last trial: a resume keeps the configs' methods, refuses others
    lines = (run_dir / "trials.csv").read_text().splitlines(keepends=True)
    dropped = lines[-1].split(",")[1]
    (run_dir / "trials.csv").write_text("".join(lines[:-1]))
    (run_dir / "meta.json").write_text(json.dumps({**meta, "status": "interrupted"}))
    assert main(["run", "--resume", str(run_dir), "--no-report", "--pack-method", "tar"]) == 2
    assert "--pack-method changed (was tar,squashfs-extract, now tar)" in capsys.readouterr().err
    assert main(["run", "--resume", str(run_dir), "--no-report", "--quiet"]) == 0
    again = {r["trial_id"]: r for r in read_csv(run_dir / "trials.csv")}[dropped]
    assert (
        again["status"] == "ok"
        and again["restore_method"] == rows[again["config"]]["restore_method"]
    )
    assert standin.scratch_left(tmp_path / "target", tmp_path / "tmp") == {
        str(tmp_path / "target"): set(), str(tmp_path / "tmp"): set()}  # fmt: skip
