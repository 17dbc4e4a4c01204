"""The restart (iobench/trial/restart.py) on the stand-in workload: every strategy persists
what the first start built, restarts on an emptied machine, restores or rebuilds it, and the
ready check finds it; the row's lifecycle columns are filled, nothing is left behind; a resume
runs the missing trials of a strategy run. The real venvs' restarts, on the lab volume too,
are tests/trial/test_restart.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import standin
from helpers.files import read_csv

from iobench.__main__ import main
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

    def lose_it(name: str, store: Path, venv: Path, run: object = None) -> object:
        for child in store.iterdir():
            child.unlink()  # the volume lost what the first start kept
        return real(name, store, venv, run=run)  # type: ignore[arg-type]

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


def test_resume_runs_the_missing_trials_of_a_strategy_run(tmp_path: Path) -> None:
    rc, run = standin.run(tmp_path, "", "--quiet", "--pack-method", "tar",
                          configs=STRATEGY_CONFIGS, repeats=1)  # fmt: skip
    assert rc == 0
    trials = run / "trials.csv"
    lines = trials.read_text().splitlines()
    trials.write_text("\n".join(lines[:3]) + "\n")  # two of four trials done
    assert main(["run", "--resume", str(run), "--no-report", "--quiet"]) == 0
    rows = read_csv(trials)
    assert sorted(r["config"] for r in rows) == sorted(
        ["reinstall", "persistent-venv", "packed-venv", "copied-venv"])  # fmt: skip
    assert all(r["status"] == "ok" and r["restart_s"] for r in rows)
