"""Never silent, never lost: real interruptions, real stalls, a really full disk, bad indexes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers.files import DATA, TINY_PROFILE, only_run_dir, read_csv

from iobench.__main__ import main

TINY = DATA / "tiny.toml"

pytestmark = pytest.mark.e2e

HEAD = f"""
[scenario]
name = "robust"
packages = ["tiny-core"]
wheels = "{TINY_PROFILE}"
ready = "import tiny_core; tiny_core.check()"
repeats = 1
size_mb = 1
"""


def _scenario(tmp_path: Path, body: str, head: str = HEAD) -> Path:
    p = tmp_path / "s.toml"
    p.write_text(head + body)
    return p


def test_sigint_keeps_finished_trials_and_resume_completes(tmp_path: Path) -> None:
    target, tmp, results = tmp_path / "target", tmp_path / "tmp", tmp_path / "results"
    target.mkdir()
    tmp.mkdir()
    (target / "user-file").write_text("mine")
    argv = [
        sys.executable,
        "-m",
        "iobench",
        "run",
        "--scenario",
        str(TINY),
        "--target",
        str(target),
        "--tmp",
        str(tmp),
        "--results",
        str(results),
        "--no-report",
        "--no-probe",
        "--index-mbps",
        "6",
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    deadline = time.monotonic() + 120
    trials = None
    while time.monotonic() < deadline:
        found = list(results.glob("*/trials.csv"))
        if found and len(read_csv(found[0])) >= 1:
            trials = found[0]
            break
        time.sleep(0.1)
    assert trials is not None, proc.communicate(timeout=30)
    first = read_csv(trials)[0]["trial_id"]
    # inside the second trial's install (its download alone takes ~1.7 s at 6 Mbit/s)
    _wait_for(
        lambda: [
            p
            for p in trials.parent.glob("logs/*.install.out")
            if not p.name.startswith(first + ".")
        ],
        120,
        "the second trial's install",
        proc,
    )
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err and "--resume" in err
    assert "\x1b[" not in out  # not a terminal: plain lines, nothing animated
    assert re.search(r"^\[1/4\] \S+-r1 ", out, re.M), out
    rows = read_csv(trials)
    assert [r["status"] for r in rows] == ["ok", "interrupted"]
    run = trials.parent
    assert f"--resume {run}" in err  # the hint names the real run folder
    assert json.loads((run / "meta.json").read_text())["status"] == "interrupted"
    # the interrupted trial's venv and caches are gone; the user's file is untouched
    for role in (target, tmp):
        scratch = role / ".iobench-scratch"
        left = {p.name for p in scratch.iterdir()} if scratch.exists() else set()
        assert left <= {".iobench-sentinel", "lock.json"}, left
    assert (target / "user-file").read_text() == "mine"
    assert not subprocess.run(["pgrep", "-f", str(target)], capture_output=True).stdout
    # resume: same scenario and roles from meta.json; only the trials not yet done run
    assert main(["run", "--resume", str(run), "--no-report", "--no-probe", "--quiet"]) == 0
    rows = read_csv(trials)
    ok = [r["trial_id"] for r in rows if r["status"] == "ok"]
    assert sorted(ok) == sorted(["naive-r1", "venv-on-tmp-r1", "warm-r1", "nocache-r1"])
    assert len(ok) == len(set(ok))
    assert json.loads((run / "meta.json").read_text())["status"] == "complete"
    from iobench.cli import console_summary

    table = "\n".join(console_summary(rows))
    lines = table.splitlines()[1:5]
    assert len(lines) == 4 and not any(re.search(r"\s\d+$", line.rstrip()) for line in lines), (
        table
    )  # none failed


def test_resume_refuses_changed_roles(tmp_path: Path, capsys) -> None:
    target = tmp_path / "t"
    target.mkdir()
    s = _scenario(tmp_path, '[configs.a]\nvenv="tmp"\ntmpdir="tmp"\ncache="tmp"\n')
    assert (
        main(
            [
                "run",
                "--scenario",
                str(s),
                "--target",
                str(target),
                "--tmp",
                str(tmp_path),
                "--results",
                str(tmp_path / "r"),
                "--no-report",
                "--no-probe",
                "--quiet",
            ]
        )
        == 0
    )
    run = only_run_dir(tmp_path / "r")
    other = tmp_path / "other"
    other.mkdir()
    assert main(["run", "--resume", str(run), "--target", str(other)]) == 2
    assert "roles changed" in capsys.readouterr().err
    assert main(["run", "--resume", str(tmp_path)]) == 1  # not a run directory: a runtime error
    assert "not an iobench run directory" in capsys.readouterr().err


def test_real_stall_is_detected_then_killed(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    head = HEAD.replace(
        'ready = "import tiny_core; tiny_core.check()"', f'ready = "open({str(fifo)!r}).read()"'
    )
    s = _scenario(
        tmp_path,
        '[configs.a]\nvenv="tmp"\ntmpdir="tmp"\ncache="off"\ncompile="off"\n'
        '[configs.b]\nvenv="tmp"\ntmpdir="tmp"\ncache="off"\ncompile="off"\n',
        head,
    )

    def release_second_trial() -> None:
        # the first trial stays blocked until killed; the second is released after ~2.5 s of silence
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            found = list((tmp_path / "r").glob("*/trials.csv"))
            if found and read_csv(found[0]):
                break
            time.sleep(0.05)
        while time.monotonic() < deadline:  # the second trial's ready check is blocked on the FIFO
            if subprocess.run(["pgrep", "-f", str(fifo)], capture_output=True).stdout:
                break
            time.sleep(0.05)
        time.sleep(2.5)
        with open(fifo, "w") as fh:
            fh.write("go")

    t = threading.Thread(target=release_second_trial, daemon=True)
    t.start()
    rc = main(
        [
            "run",
            "--scenario",
            str(s),
            "--target",
            str(tmp_path),
            "--tmp",
            str(tmp_path),
            "--results",
            str(tmp_path / "r"),
            "--no-report",
            "--no-probe",
            "--quiet",
            "--stall-after",
            "1",
            "--stall-timeout",
            "6",
        ]
    )
    t.join(timeout=30)
    rows = read_csv(only_run_dir(tmp_path / "r") / "trials.csv")
    a, b = rows
    assert a["status"] == "stalled" and "stall-timeout" in a["error"] and a["time_to_ready_s"] == ""
    assert int(a["stalls"]) == 1 and float(a["stall_longest_s"]) >= 5.5
    assert b["status"] == "ok", b["error"]
    assert int(b["stalls"]) == 1 and 2.0 <= float(b["stall_longest_s"]) <= 6
    assert rc == 1  # a trial did not succeed
    assert not subprocess.run(["pgrep", "-f", str(fifo)], capture_output=True).stdout
    stalls = read_csv(only_run_dir(tmp_path / "r") / "stalls.csv")
    # in the order the trials ran (their order is shuffled): the first was killed, the second released
    assert [(s["trial_id"], s["phase"]) for s in stalls] == [
        (a["trial_id"], "import"),
        (b["trial_id"], "import"),
    ]
    assert float(stalls[0]["length_s"]) == float(a["stall_longest_s"])
    assert all(
        int(s["dstate_max"]) >= 0 and 0 <= float(s["iowait_mean_pct"]) <= 100 for s in stalls
    )


def test_disk_full_mid_trial_is_recorded_and_run_goes_on(tmpfs, tmp_path: Path) -> None:
    small = tmpfs(
        size="6m", name="small"
    )  # passes the (declared 1 MB) space check, fills mid-trial
    s = _scenario(
        tmp_path,
        '[configs.full]\nvenv="target"\ntmpdir="tmp"\ncache="off"\n'
        '[configs.fine]\nvenv="tmp"\ntmpdir="tmp"\ncache="off"\n',
    )
    rc = main(
        [
            "run",
            "--scenario",
            str(s),
            "--target",
            str(small),
            "--tmp",
            str(tmp_path),
            "--results",
            str(tmp_path / "r"),
            "--no-report",
            "--no-probe",
            "--quiet",
        ]
    )
    rows = {r["config"]: r for r in read_csv(only_run_dir(tmp_path / "r") / "trials.csv")}
    assert rows["full"]["status"] == "failed"
    assert "ENOSPC" in rows["full"]["error"] and "No space left" in rows["full"]["error"]
    assert rows["fine"]["status"] == "ok"
    assert rc == 1  # a trial did not succeed
    scratch = small / ".iobench-scratch"
    assert not scratch.exists() or {p.name for p in scratch.iterdir()} <= {".iobench-sentinel"}
    st = os.statvfs(small)
    assert (st.f_blocks - st.f_bfree) * st.f_frsize < 512 * 1024  # the venv was removed


def test_failing_installer_recorded_with_output_tail(tmp_path: Path) -> None:
    head = HEAD.replace(
        'packages = ["tiny-core"]', 'packages = ["tiny-core", "no-such-package==9.9"]'
    )
    s = _scenario(
        tmp_path,
        '[configs.a]\nvenv="tmp"\ntmpdir="tmp"\ncache="off"\n'
        '[configs.b]\nvenv="target"\ntmpdir="tmp"\ncache="off"\n',
        head,
    )
    rc = main(
        [
            "run",
            "--scenario",
            str(s),
            "--target",
            str(tmp_path),
            "--tmp",
            str(tmp_path),
            "--results",
            str(tmp_path / "r"),
            "--no-report",
            "--no-probe",
            "--quiet",
        ]
    )
    rows = read_csv(only_run_dir(tmp_path / "r") / "trials.csv")
    assert [r["status"] for r in rows] == ["failed", "failed"]  # recorded, and the run went on
    assert "pip failed (exit 1)" in rows[0]["error"] and "no-such-package" in rows[0]["error"]
    assert rc == 1


def test_unreachable_index_fails_early(tmp_path: Path, capsys) -> None:
    rc = main(
        [
            "run",
            "--scenario",
            "torch",
            "--index-url",
            "http://127.0.0.1:9/simple/",
            "--target",
            str(tmp_path),
            "--results",
            str(tmp_path / "r"),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 1 and "cannot be reached" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_second_run_on_same_target_is_refused_with_holder(tmp_path: Path, capsys) -> None:
    from iobench.system.lock import TargetLock
    from iobench.system.scratch import Scratch

    scratch = Scratch(tmp_path).ensure()
    with TargetLock(scratch.root, "other-run", heartbeat=False):
        rc = main(
            [
                "run",
                "--scenario",
                str(TINY),
                "--target",
                str(tmp_path),
                "--results",
                str(tmp_path / "r"),
            ]
        )
        err = capsys.readouterr().err
        assert rc == 1 and "in use by another iobench run" in err and "other-run" in err
        assert not (tmp_path / "r").exists()
        assert main(["clean", str(tmp_path)]) == 2  # a live run's scratch is not cleaned
        assert "in use" in capsys.readouterr().err
    assert not (scratch.root / "lock.json").exists()


def test_noisy_neighbour_is_recorded(tmp_path: Path) -> None:
    s = _scenario(tmp_path, '[configs.a]\nvenv="tmp"\ntmpdir="tmp"\ncache="off"\n')
    # dd writing ~20 MB/s straight to the disk for as long as the run lasts; double-forked so
    # that it is nobody's child here (iobench never blames its own descendants)
    noise = tmp_path / "noise"
    subprocess.run(
        [
            "bash",
            "-c",
            "(while :; do head -c 1048576 /dev/zero; sleep 0.05; done | "
            f"dd of={noise} bs=1M iflag=fullblock oflag=direct) >/dev/null 2>&1 &",
        ],
        check=True,
        start_new_session=True,
    )
    try:
        rc = main(
            [
                "run",
                "--scenario",
                str(s),
                "--target",
                str(tmp_path),
                "--tmp",
                str(tmp_path),
                "--results",
                str(tmp_path / "r"),
                "--no-report",
                "--no-probe",
                "--quiet",
            ]
        )
    finally:
        subprocess.run(["pkill", "-f", f"of={noise}"])
        subprocess.run(["pkill", "-f", "head -c 1048576 /dev/zero; sleep 0.05"])
    row = read_csv(only_run_dir(tmp_path / "r") / "trials.csv")[0]
    assert rc == 0 and row["status"] == "ok"
    assert "dd:" in row["contended"], row["contended"]


def _wait_for(pred, timeout: float, what: str, proc: subprocess.Popen | None = None):  # noqa: ANN001, ANN202
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = pred()
        if found:
            return found
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"iobench ended (exit {proc.returncode}) before {what}")
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.lab
@pytest.mark.timeout(600)
def test_hung_fuse_volume_during_install_ends_the_run_with_its_row(tmp_path: Path) -> None:
    """A SIGSTOPped FUSE daemon mid-install (issue 9, item 9): iobench ends within its limits,
    records the row, gives up deleting on the hung volume, says where, and exits."""
    from iobench.lab import manage
    from iobench.lab.options import VolumeOptions

    reason = manage.lab_unavailable_reason()
    if reason:
        pytest.skip(reason)
    tmp, results, vol = tmp_path / "tmp", tmp_path / "results", tmp_path / "vol"
    tmp.mkdir()
    s = _scenario(
        tmp_path,
        '[configs.naive]\nvenv="target"\ntmpdir="target"\ncache="off"\n'
        '[configs.local]\nvenv="tmp"\ntmpdir="tmp"\ncache="off"\n',
    )
    lab = manage.up(vol, options=VolumeOptions(latency_ms=2))
    proc = switch = None
    try:
        argv = [
            sys.executable,
            "-m",
            "iobench",
            "run",
            "--scenario",
            str(s),
            "--configs",
            "naive,local",
            "--target",
            str(vol),
            "--tmp",
            str(tmp),
            "--results",
            str(results),
            "--no-report",
            "--no-probe",  # and naive first (seed 1): the hang comes in its first trial
            "--order-seed",
            "1",
            "--trial-timeout",
            "12",
            "--hung-after",
            "5",
        ]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        _wait_for(
            lambda: list(results.glob("*/logs/naive-r1.install.out")), 120, "naive's install", proc
        )
        time.sleep(0.3)
        # a dead man's switch: the daemon continues after 200 s even if this test is killed
        # (a stopped daemon would hang every later walk of the temp folder)
        switch = subprocess.Popen(
            ["sh", "-c", f"sleep 200; kill -CONT {lab.pid}"], start_new_session=True
        )
        os.kill(lab.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        out, _ = proc.communicate(timeout=150)
        took = time.monotonic() - t0
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        if lab.pid:
            os.kill(lab.pid, signal.SIGCONT)
        if switch is not None:
            os.killpg(switch.pid, signal.SIGKILL)
            switch.wait()
        manage.down(vol)
    run = only_run_dir(results)
    rows = read_csv(run / "trials.csv")
    naive = [r for r in rows if r["config"] == "naive"]
    assert len(naive) == 1 and naive[0]["status"] == "failed", out
    assert "time limit" in naive[0]["error"], naive[0]["error"]
    assert proc.returncode == 1, out
    assert "stopped answering" in out and str(vol) in out, out
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "volume-hung" and str(vol) in meta["status_reason"]
    assert "no progress for 5 s" in out, out  # --hung-after
    assert took < 12 + 5 + 40, f"took {took:.0f} s after the hang"
    print(
        f"hung volume: iobench ended {took:.1f} s after SIGSTOP (trial limit 12 s, hung after 5 s)"
    )


def test_cleanup_finishes_whatever_signals_arrive(tmp_path: Path) -> None:
    """SIGTERM mid-trial, then a stream of SIGTERMs and SIGINTs through the clean-up (issue 9,
    item 3): the interrupted row is recorded, the venvs, the run's scratch and the lock go."""
    target, tmp, results = tmp_path / "target", tmp_path / "tmp", tmp_path / "results"
    target.mkdir()
    tmp.mkdir()
    argv = [
        sys.executable,
        "-m",
        "iobench",
        "run",
        "--scenario",
        str(TINY),
        "--target",
        str(target),
        "--tmp",
        str(tmp),
        "--results",
        str(results),
        "--no-report",
        "--no-probe",
        "--index-mbps",
        "6",
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_for(
            lambda: [f for f in results.glob("*/logs/*.install.out")], 120, "an install", proc
        )
        proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            proc.send_signal(signal.SIGTERM if int(time.monotonic() * 50) % 2 else signal.SIGINT)
            time.sleep(0.01)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # after the clean-up iobench's handlers are back: a later signal may end it on its way out
    assert proc.returncode in (130, -signal.SIGTERM, -signal.SIGINT), out
    assert "finished trials are kept" in out
    run = only_run_dir(results)
    rows = read_csv(run / "trials.csv")
    assert rows and rows[-1]["status"] == "interrupted", out
    assert json.loads((run / "meta.json").read_text())["status"] == "interrupted"
    for role in (target, tmp):
        scratch = role / ".iobench-scratch"
        left = [p.name for p in scratch.iterdir()] if scratch.exists() else []
        assert not [n for n in left if n.startswith("2") or n == "lock.json"], (role, left, out)


def test_losing_the_lock_ends_the_run_with_its_rows(tmp_path: Path) -> None:
    """Another run takes the target's lock over mid-trial (issue 9, item 7): this run stops
    after the trial in flight, keeps its rows, says why in meta.json, and leaves the new
    holder's lock alone."""
    import io

    from iobench.cli import build_parser
    from iobench.cli.run import run_request
    from iobench.errors import LockLostError
    from iobench.run import plan as run_plan
    from iobench.run.runner import Runner
    from iobench.system.lock import TargetLock, read_lock
    from iobench.trial.progress import PlainProgress

    target, tmp, results = tmp_path / "target", tmp_path / "tmp", tmp_path / "results"
    target.mkdir()
    tmp.mkdir()
    args = build_parser().parse_args(
        [
            "run",
            "--scenario",
            str(TINY),
            "--target",
            str(target),
            "--tmp",
            str(tmp),
            "--results",
            str(results),
            "--no-report",
            "--no-probe",
        ]
    )
    runner = Runner(run_plan.check(run_request(args)), PlainProgress(stream=io.StringIO()))
    thieves: list[TargetLock] = []

    def take_over() -> None:
        _wait_for(
            lambda: runner.lock is not None and list(results.glob("*/logs/*.install.out")),
            120,
            "a trial",
        )
        ours = runner.lock
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
        rows = read_csv(run / "trials.csv")
        assert 1 <= len(rows) < 4  # stopped after the trial in flight; its row kept
        meta = json.loads((run / "meta.json").read_text())
        assert meta["status"] == "lock-lost" and "thief-run" in meta["status_reason"]
        held = read_lock(target / ".iobench-scratch")
        assert held is not None and held.run_id == "thief-run"  # not ours to remove
    finally:
        for lock in thieves:
            lock.release()


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
        try:
            os.close(fd)
        except OSError:
            pass
    return filler


def test_full_results_disk_keeps_the_row(tmpfs, tmp_path: Path) -> None:
    """The results disk fills before the first trial (issue 9, item 4): its row is still
    written (it comes first, into the block the header holds); the samples and meta.json's
    last update are what is lost, and iobench says so."""
    results = tmpfs(size="4m", name="results")
    s = _scenario(tmp_path, '[configs.a]\nvenv="tmp"\ntmpdir="tmp"\ncache="off"\n')
    argv = [
        sys.executable,
        "-m",
        "iobench",
        "run",
        "--scenario",
        str(s),
        "--target",
        str(tmp_path),
        "--tmp",
        str(tmp_path),
        "--results",
        str(results),
        "--no-report",
        "--no-probe",
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_for(lambda: list(results.glob("*/meta.json")), 120, "the run folder", proc)
        filler = _fill(results)
        out, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert os.statvfs(results).f_bavail == 0 or filler.stat().st_size > 0
    run = only_run_dir(results)
    rows = read_csv(run / "trials.csv")
    assert [r["trial_id"] for r in rows] == ["a-r1"], out
    assert rows[0]["status"] in ("ok", "failed"), out
    if rows[0]["status"] == "ok":  # pip's log could not be written: the split is unknown, not zero
        assert (
            rows[0]["download_s"] == rows[0]["install_s"] == "" or float(rows[0]["install_s"]) > 0
        )
    assert "samples of a-r1 not saved" in out or not (run / "samples" / "a-r1.csv").exists()
    assert "Traceback" not in out
