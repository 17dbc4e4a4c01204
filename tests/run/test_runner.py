"""The runner's plumbing on the stand-in workload (iobench/trial/standin.py): rows in the
planned order, a failing step, a stall, the time limit, Ctrl-C and --resume, a held or lost
lock, a noisy neighbour, a full results disk, signals through the clean-up. Every installer,
strategy and the lab keep their own end-to-end tests; here a run takes about a second."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import standin
from helpers.files import only_run_dir, read_csv
from helpers.lab import needs_fuse

from iobench.__main__ import main
from iobench.cli import build_parser
from iobench.cli.run import run_request
from iobench.errors import LockLostError
from iobench.lab.testing import slow_volume
from iobench.run import plan as run_plan
from iobench.run.runner import Runner
from iobench.rundir.meta import OVERHEAD_CAUSES
from iobench.system.lock import TargetLock, read_lock
from iobench.system.scratch import Scratch
from iobench.trial.progress import PlainProgress


def test_a_run_records_every_trial_in_the_planned_order_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    rc, run = standin.run(tmp_path, "rate = 100\n", "--order-seed", "7", "--quiet")  # 0.2 s a trial
    assert rc == 0
    rows = read_csv(run / "trials.csv")
    meta = json.loads((run / "meta.json").read_text())
    from iobench.run.order import plan_trials
    from iobench.scenario.load import load_scenario

    planned = plan_trials(load_scenario(str(tmp_path / "standin.toml")).configs, 2, 7, set())
    assert [r["trial_id"] for r in rows] == [s.trial_id for s in planned]
    assert [int(r["position"]) for r in rows] == [s.position for s in planned]
    assert all(r["status"] == "ok" and float(r["time_to_ready_s"]) > 0 for r in rows)
    assert all(int(r["files_installed"]) == 20 and int(r["write_bytes"]) >= 20 * 4096 for r in rows)
    assert {r["venv_fstype"] for r in rows} and all(r["venv_fstype"] for r in rows)  # from meta
    for r in rows:
        total = sum(
            float(r[f"{p}_s"]) for p in ("venv", "download", "install", "compile", "import")
        )
        assert total <= float(r["time_to_ready_s"]) + 1e-3
        assert (run / "samples" / f"{r['trial_id']}.csv").is_file()
    assert meta["status"] == "complete" and meta["scenario"]["kind"] == "standin"
    assert set(meta["overhead"]["parts_s"]) == set(OVERHEAD_CAUSES)
    assert "pip_host" not in meta["versions"] and meta["pip_config"] == {}  # installs nothing
    assert not (run / "probe.json").exists()  # nothing to predict: no probe
    assert standin.scratch_left(tmp_path / "target", tmp_path / "tmp") == {
        str(tmp_path / "target"): set(), str(tmp_path / "tmp"): set()}  # fmt: skip


def test_a_failing_step_is_a_failed_row_with_its_output_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    rc, run = standin.run(tmp_path, "[workload.by_config.venv-on-tmp]\nexit = 3\n", "--quiet")
    rows = {r["trial_id"]: r for r in read_csv(run / "trials.csv")}
    assert rc == 1  # a config with no successful trial
    assert rows["naive-r1"]["status"] == rows["naive-r2"]["status"] == "ok"
    bad = rows["venv-on-tmp-r1"]
    assert bad["status"] == "failed" and bad["time_to_ready_s"] == ""
    assert bad["error"].startswith("the stand-in's writer failed (exit 3)")
    assert (run / "logs" / "venv-on-tmp-r1.install.out").is_file()  # a failed phase's output kept
    # --allow-failures: still 1, venv-on-tmp has no successful trial at all
    assert (
        main(standin.argv(tmp_path, tmp_path / "standin.toml", "--quiet", "--allow-failures")) == 1
    )


def test_a_stall_is_recorded_and_the_stalled_trial_ended(tmp_path: Path) -> None:
    rc, run = standin.run(
        tmp_path, "[workload.by_config.naive]\npause_s = 30\n",
        "--stall-after", "0.4", "--stall-timeout", "1.2", "--quiet", repeats=1,
    )  # fmt: skip
    rows = {r["config"]: r for r in read_csv(run / "trials.csv")}
    stalled = rows["naive"]
    assert rc == 1 and rows["venv-on-tmp"]["status"] == "ok"
    assert stalled["status"] == "stalled" and "stall" in stalled["error"]
    assert int(stalled["stalls"]) == 1 and 1.0 <= float(stalled["stall_longest_s"]) < 10
    stalls = read_csv(run / "stalls.csv")
    assert [(s["trial_id"], s["phase"]) for s in stalls] == [("naive-r1", "install")]


def test_a_trial_past_its_time_limit_is_failed_and_its_tree_ended(tmp_path: Path) -> None:
    rc, run = standin.run(tmp_path, "[workload.by_config.naive]\nrate = 2\n",
                          "--trial-timeout", "1", "--quiet", repeats=1)  # fmt: skip
    row = next(r for r in read_csv(run / "trials.csv") if r["config"] == "naive")
    assert rc == 1 and row["status"] == "failed" and "past the trial's time limit" in row["error"]
    assert not subprocess.run(["pgrep", "-f", str(tmp_path / "target")], capture_output=True).stdout


@pytest.mark.run
def test_ctrl_c_keeps_finished_trials_and_resume_completes(tmp_path: Path) -> None:
    """SIGINT in the second trial (its writer paced to take seconds): exit 130, one line with
    the --resume hint, the finished row kept, the interrupted one recorded, nothing left in
    scratch, the user's files untouched; --resume runs what is left."""
    path = standin.scenario(tmp_path, "rate = 10\n", repeats=1)
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "user-file").write_text("mine")
    proc = standin.process(tmp_path, path, "--order-seed", "1")
    results = tmp_path / "results"
    trials = standin.wait_for(lambda: [p for p in results.glob("*/trials.csv") if read_csv(p)], 60,
                       "the first row", proc)[0]  # fmt: skip
    time.sleep(0.5)  # inside the second trial's writer (2 s at 10 files/s)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err and f"--resume {trials.parent}" in err
    assert "\x1b[" not in out and re.search(r"^\[1/2\] \S+-r1 ", out, re.M), out
    assert [r["status"] for r in read_csv(trials)] == ["ok", "interrupted"]
    assert json.loads((trials.parent / "meta.json").read_text())["status"] == "interrupted"
    assert standin.scratch_left(tmp_path / "target", tmp_path / "tmp") == {
        str(tmp_path / "target"): set(), str(tmp_path / "tmp"): set()}  # fmt: skip
    assert (tmp_path / "target" / "user-file").read_text() == "mine"
    assert main(["run", "--resume", str(trials.parent), "--no-report", "--quiet"]) == 0
    rows = read_csv(trials)
    ok = sorted(r["trial_id"] for r in rows if r["status"] == "ok")
    assert ok == ["naive-r1", "venv-on-tmp-r1"]
    assert json.loads((trials.parent / "meta.json").read_text())["status"] == "complete"


def test_resume_refuses_changed_roles_and_a_folder_that_is_no_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, run = standin.run(tmp_path, "", "--quiet", repeats=1)
    assert rc == 0
    other = tmp_path / "other"
    other.mkdir()
    assert main(["run", "--resume", str(run), "--target", str(other)]) == 2
    assert "roles changed" in capsys.readouterr().err
    # the same interpreter by another name (a venv's python3 for its python) is no change
    alias = tmp_path / "python-alias"
    alias.symlink_to(sys.executable)
    assert main(["run", "--resume", str(run), "--python", str(alias), "--quiet"]) == 0
    other_python = shutil.which("python3", path="/usr/bin")
    if other_python and os.path.realpath(other_python) != os.path.realpath(sys.executable):
        assert main(["run", "--resume", str(run), "--python", other_python]) == 2
        assert "--python changed" in capsys.readouterr().err
    assert main(["run", "--resume", str(tmp_path)]) == 1  # not a run directory: a runtime error
    assert "not an iobench run directory" in capsys.readouterr().err


def test_a_second_run_on_the_same_target_is_refused_naming_the_holder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target, _, results = standin.roles(tmp_path)
    scratch = Scratch(target).ensure()
    with TargetLock(scratch.root, "other-run", heartbeat=False):
        rc = main(standin.argv(tmp_path, standin.scenario(tmp_path)))
        err = capsys.readouterr().err
        assert rc == 1 and "in use by another iobench run" in err and "other-run" in err
        assert not results.exists()
        assert main(["clean", str(target)]) == 2  # a live run's scratch is not cleaned
        assert "in use" in capsys.readouterr().err
    assert not (scratch.root / "lock.json").exists()


def test_losing_the_lock_ends_the_run_with_its_rows(tmp_path: Path) -> None:
    """Another run takes the target's lock over mid-trial: this run stops after the trial in
    flight, keeps its rows, says why in meta.json, and leaves the new holder's lock alone."""
    path = standin.scenario(tmp_path, "rate = 20\n")
    args = build_parser().parse_args(standin.argv(tmp_path, path))
    runner = Runner(run_plan.check(run_request(args)), PlainProgress(stream=io.StringIO()))
    results, thieves = tmp_path / "results", []

    def take_over() -> None:
        standin.wait_for(
            lambda: runner.lock is not None and list(results.glob("*/meta.json")), 30, "a run"
        )
        time.sleep(0.2)
        ours = runner.lock
        assert ours is not None
        os.unlink(ours.path)
        thieves.append(TargetLock(ours.root, "thief-run", heartbeat=False).acquire())
        try:
            ours.refresh(force=True)  # what the heartbeat does every ttl/4
        except LockLostError:
            pass

    thread = threading.Thread(target=take_over, daemon=True)
    thread.start()
    try:
        with pytest.raises(LockLostError, match="taken over"):
            runner.run()
        thread.join(timeout=30)
        run = only_run_dir(results)
        assert 1 <= len(read_csv(run / "trials.csv")) < 4  # stopped after the trial in flight
        meta = json.loads((run / "meta.json").read_text())
        assert meta["status"] == "lock-lost" and "thief-run" in meta["status_reason"]
        held = read_lock(tmp_path / "target" / ".iobench-scratch")
        assert held is not None and held.run_id == "thief-run"  # not ours to remove
    finally:
        for lock in thieves:
            lock.release()


def test_a_noisy_neighbour_is_named_in_the_row(tmp_path: Path) -> None:
    """dd writing ~20 MB/s to the disk while the trial runs, double-forked so that it is
    nobody's child here (iobench never blames its own descendants)."""
    noise = tmp_path / "noise"
    subprocess.run(
        ["bash", "-c", "(while :; do head -c 1048576 /dev/zero; sleep 0.05; done | "
         f"dd of={noise} bs=1M iflag=fullblock oflag=direct) >/dev/null 2>&1 &"],
        check=True, start_new_session=True,
    )  # fmt: skip
    try:
        time.sleep(0.3)
        rc, run = standin.run(tmp_path, "rate = 20\n", "--quiet", repeats=1)
    finally:
        subprocess.run(["pkill", "-f", f"of={noise}"])
        subprocess.run(["pkill", "-f", "head -c 1048576 /dev/zero; sleep 0.05"])
    rows = read_csv(run / "trials.csv")
    assert rc == 0 and all(r["status"] == "ok" for r in rows)
    assert any(re.search(r"\bdd\[\d+\]:", r["contended"]) for r in rows), [
        r["contended"] for r in rows
    ]


@pytest.mark.run
def test_the_clean_up_finishes_whatever_signals_arrive(tmp_path: Path) -> None:
    """SIGTERM mid-trial, then a stream of SIGTERMs and SIGINTs through the clean-up: the
    interrupted row is recorded, the trial's folders, the run's scratch and the lock go."""
    path = standin.scenario(tmp_path, "rate = 10\n", repeats=1)
    proc = standin.process(tmp_path, path)
    results = tmp_path / "results"
    try:
        standin.wait_for(lambda: list(results.glob("*/logs/*")) or list(results.glob("*/meta.json")),
                  60, "a trial", proc)  # fmt: skip
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            proc.send_signal(signal.SIGTERM if int(time.monotonic() * 50) % 2 else signal.SIGINT)
            time.sleep(0.01)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # after the clean-up iobench's handlers are back: a later signal may end it on its way out
    assert proc.returncode in (130, -signal.SIGTERM, -signal.SIGINT), (out, err)
    assert "finished trials are kept" in err
    run = only_run_dir(results)
    assert read_csv(run / "trials.csv")[-1]["status"] == "interrupted"
    assert json.loads((run / "meta.json").read_text())["status"] == "interrupted"
    for role in (tmp_path / "target", tmp_path / "tmp"):
        scratch = role / ".iobench-scratch"
        left = [p.name for p in scratch.iterdir()] if scratch.exists() else []
        assert not [n for n in left if n.startswith("2") or n == "lock.json"], (role, left)


def _fill(folder: Path) -> Path:
    """Fill the filesystem of ``folder`` to the last block; return the filler file."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for chunk in (65536, 512):
            try:
                while True:
                    os.write(fd, b"\0" * chunk)
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


@pytest.mark.run
def test_a_full_results_disk_keeps_the_row(tmpfs, tmp_path: Path) -> None:  # noqa: ANN001
    """The results disk fills during the first trial: its row is still written (it comes
    first, into the block the header holds); the samples and meta.json's last update are what
    is lost, and iobench says so, naming the file."""
    results = tmpfs(size="1m", name="results")
    path = standin.scenario(tmp_path, "rate = 20\n", configs=standin.NAIVE, repeats=1)
    target, tmp, _ = standin.roles(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "iobench", "run", "--scenario", str(path), "--target", str(target), "--tmp", str(tmp),
         "--results", str(results), "--no-report"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        standin.wait_for(lambda: list(results.glob("*/meta.json")), 60, "the run folder", proc)
        filler = _fill(results)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert os.statvfs(results).f_bavail == 0 or filler.stat().st_size > 0
    run = only_run_dir(results)
    rows = read_csv(run / "trials.csv")
    assert [r["trial_id"] for r in rows] == ["naive-r1"] and rows[0]["status"] == "ok", out
    assert "samples of naive-r1 not saved" in out or not (run / "samples" / "naive-r1.csv").exists()
    assert "Traceback" not in out
    # issue 23 (low): meta.json said "running" for good, 0-byte .tmp files stayed
    assert json.loads((run / "meta.json").read_text())["status"] == "complete", out
    assert not [p for p in run.rglob("*") if p.name.endswith(".tmp")]
    assert "No space left on device" not in out or str(results) in out  # it names the file


def _leave_free(folder: Path, kb: int) -> None:
    """Fill ``folder``'s filesystem, then give back ``kb`` KiB."""
    filler = _fill(folder)
    os.truncate(filler, max(0, filler.stat().st_size - kb * 1024))


@pytest.mark.e2e
def test_twelve_kib_free_on_the_results_disk_costs_no_trial_and_no_state(
    tmpfs, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # noqa: ANN001
    """Issue 35 (low), as it was done: 12 KiB free on the results disk, a pip trial. Before:
    meta.json stayed "running" (`list`: "running (gone)"), and the trial was recorded
    `failed` (its log could not be redacted through a copy, or pip's output not written).
    Now the trial is ok, meta.json complete, and the log is redacted in place or removed."""
    from iobench.__main__ import main

    target, tmp, _ = standin.roles(tmp_path)
    for kb in (12, 20):
        results = tmpfs(size="1m", name=f"results-{kb}")
        _leave_free(results, kb)
        argv = ["run", "--scenario", "smoke", "--configs", "naive", "--repeats", "1",
                "--target", str(target), "--tmp", str(tmp), "--results", str(results),
                "--no-report", "--quiet"]  # fmt: skip
        rc = main(argv)
        said = capsys.readouterr()
        run = next(p for p in results.iterdir() if p.is_dir())
        rows = read_csv(run / "trials.csv")
        assert rc == 0 and [r["status"] for r in rows] == ["ok"], (kb, rows, said.err)
        assert json.loads((run / "meta.json").read_text())["status"] == "complete", said.err
        assert main(["list", str(results)]) == 0
        assert "complete" in capsys.readouterr().out
        log = run / "logs" / "naive-r1.log"
        assert not log.exists() or "smoke" in log.read_text() or log.stat().st_size == 0
        assert (
            not (target / ".iobench-scratch").exists() and not (tmp / ".iobench-scratch").exists()
        )


def test_no_room_for_a_run_folder_leaves_nothing_behind(
    tmpfs, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # noqa: ANN001
    """Issue 35 (low): no room for meta.json left an empty run folder in the results and an
    empty .iobench-scratch on the target (the lock's); now one line, and neither."""
    from iobench.__main__ import main

    results = tmpfs(size="1m", name="results")
    _leave_free(results, 0)
    path = standin.scenario(tmp_path, configs=standin.NAIVE, repeats=1)
    argv = standin.argv(tmp_path, path)
    argv[argv.index("--results") + 1] = str(results)
    assert main(argv) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No space left on device" in err[0], err
    assert [p.name for p in results.iterdir()] == ["filler"]
    target, tmp, _ = standin.roles(tmp_path)
    assert not (target / ".iobench-scratch").exists() and not (tmp / ".iobench-scratch").exists()


@pytest.mark.timing  # iobench's own steps between phases and after the last: load stretches them
def test_the_phases_and_samples_end_with_the_trial(tmp_path: Path) -> None:
    """The bounds test_run_e2e's untimed test held, until a busy machine broke them (a sample
    stamped 4.237 s in a 4.007 s trial at load 6; 0.31 s of gaps between phases in a 3.47 s
    trial at load 12): on an idle machine the phases add up to the time to ready but for a
    few per cent, and the last tick is within 0.2 s of the ready moment."""
    rc, run = standin.run(tmp_path, "", "--repeats", "2", "--sample-hz", "20")
    assert rc == 0
    for row in read_csv(run / "trials.csv"):
        ttr = float(row["time_to_ready_s"])
        phases = [
            float(row[f"{p}_s"] or 0) for p in ("venv", "download", "install", "compile", "import")
        ]
        assert ttr - sum(phases) < 0.05 * ttr + 0.05, (row["trial_id"], ttr, phases)
        ts = [float(s["t"]) for s in read_csv(run / "samples" / f"{row['trial_id']}.csv")]
        assert ts and ts[-1] <= ttr + 0.2, (row["trial_id"], ts[-3:])


@pytest.mark.lab
@needs_fuse
def test_a_run_on_a_lab_volume_says_what_the_lab_delivered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 39: a volume whose rate no lab reaches (10^6 MB/s): each row records what the lab
    delivered to the trial's writes and what the options allow, a note under the trial's line
    and the report's notes say "the lab gave X of the volume's Y MB/s"."""
    from iobench.report.build import build_report

    path = tmp_path / "standin.toml"
    path.write_text(
        '[scenario]\nname = "standin"\nkind = "standin"\nrepeats = 2\n\n'
        f"[workload]\nfiles = 24\nkb = 1024\n{standin.NAIVE}"
    )
    with slow_volume(tmp_path, "vol", mb_per_s=1e6) as vol:
        assert main(standin.argv(tmp_path, path, target=vol)) == 0
        rd = only_run_dir(tmp_path / "results")
        rows = read_csv(rd / "trials.csv")
    assert len(rows) == 2
    for row in rows:
        assert row["lab_volume"] == str(vol) and row["lab_preset"] == ""
        assert 0 < float(row["lab_write_mb_s"]) < 2e5
        assert float(row["lab_write_allowed_mb_s"]) > 5 * float(row["lab_write_mb_s"])
    out = (rd / "notes.txt").read_text()  # the console's notes line points there
    assert out.count("the lab gave ") == 2 and "of the volume's " in out, out
    notes = build_report(rd, charts=False).summary.notes
    said = [n for n in notes if n.startswith("naive: the lab gave ")]
    assert len(said) == 1 and "to its writes (median of 2 trials)" in said[0], notes
