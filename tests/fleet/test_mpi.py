"""Fleet runs under a real launcher (``mpirun``, Open MPI): every rank on the lab volume at
once, the gathered rows checked against what each rank wrote in its own folder, and a rank
killed mid-trial (docs/fleet.md)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import standin
from helpers.files import TINY_PROFILE, only_run_dir
from helpers.lab import volume_factory
from helpers.mpi import GRACE, in_trial, mpirun, ranks_of, rows

pytestmark = [
    pytest.mark.run,
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("mpirun") is None, reason="no mpirun (apt-get install openmpi-bin)"
    ),
]
pytest.importorskip("mpi4py", reason="pip install 'iobench[fleet]'")

SCENARIO = f"""
[scenario]
name = "fleet-lab"
packages = ["tiny-core"]
wheels = "{TINY_PROFILE}"
ready = "import tiny_core; tiny_core.check()"
repeats = 1
size_mb = 10

[configs.naive]
venv = "target"
tmpdir = "target"
cache = "off"

[configs.shared-cache]
venv = "tmp"
tmpdir = "tmp"
cache = "target"
cache_state = "shared"
"""


@pytest.fixture
def volume(tmp_path: Path):  # noqa: ANN201
    """Slow volumes under tmp_path, torn down (and checked) afterwards."""
    yield from volume_factory(tmp_path)


@pytest.mark.lab
@pytest.mark.venv
def test_two_ranks_install_at_once_on_the_lab_volume(volume, tmp_path: Path) -> None:
    target = volume(latency_ms=1.0, iops=2000)
    scenario = tmp_path / "fleet.toml"
    scenario.write_text(SCENARIO)
    tmp, results = tmp_path / "tmp", tmp_path / "results"
    tmp.mkdir()
    job = mpirun(2, ["run", "--fleet", "--scenario", str(scenario), "--target", str(target),
                     "--tmp", str(tmp), "--results", str(results), "--no-report"])  # fmt: skip
    out, _ = job.communicate(timeout=400)
    assert job.returncode == 0, out[-3000:]
    run = only_run_dir(results)
    gathered = rows(run / "trials.csv")
    # every rank's share of every trial, gathered by rank 0
    assert sorted((r["config"], r["rank"]) for r in gathered) == [
        ("naive", "0"), ("naive", "1"), ("shared-cache", "0"), ("shared-cache", "1")]  # fmt: skip
    assert {r["status"] for r in gathered} == {"ok"}
    assert {r["fleet_size"] for r in gathered} == {"2"}
    # rank 1's rows are what rank 1 wrote in its own folder, figure for figure
    own = {r["trial_id"]: r for r in rows(run / "workers" / "w1" / "trials.csv")}
    for r in (r for r in gathered if r["rank"] == "1"):
        mine = own[r["trial_id"]]
        for column in ("time_to_ready_s", "install_s", "started_at", "write_bytes", "host"):
            assert r[column] == mine[column], column
    # the fleet's time: the last worker ready, from the first start, never below a rank's own
    for config in ("naive", "shared-cache"):
        share = [r for r in gathered if r["config"] == config]
        assert min(float(r["fleet_start_s"]) for r in share) == 0.0
        last = max(float(r["fleet_ready_s"]) for r in share)
        assert last >= max(float(r["time_to_ready_s"]) for r in share)
        assert last < 10 * max(float(r["time_to_ready_s"]) for r in share)
    # the shared cache is one cache for both: its lock lines are counted, never missing
    assert all(r["lock_lines"] != "" for r in gathered if r["config"] == "shared-cache")
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "complete"
    assert [w["rank"] for w in meta["fleet"]["workers"]] == [0, 1]
    assert abs(meta["fleet"]["workers"][1]["offset_s"]) < 0.05  # one host: one clock
    assert not any(standin.scratch_left(target, tmp).values())
    assert ranks_of(str(tmp_path)) == {}  # the volume's teardown checks nothing holds it


FAN_OUT = f"""
[scenario]
name = "fan-out-lab"
packages = ["tiny-core"]
wheels = "{TINY_PROFILE}"
ready = "import tiny_core; tiny_core.check()"
repeats = 1
size_mb = 10

[configs.fan-out]
venv = "tmp"
tmpdir = "tmp"
cache = "tmp"
strategy = "fan-out"
"""


@pytest.mark.lab
@pytest.mark.venv
def test_fan_out_rank_0_packs_the_others_wait_and_restore_it(volume, tmp_path: Path) -> None:
    """Three ranks on one host: rank 0 installs and packs onto the lab volume, ranks 1 and 2
    wait for its archive, restore it at their own paths (relocated) and pass the ready check;
    at the restart all three restore the one archive."""
    target = volume(latency_ms=1.0, iops=2000)
    scenario = tmp_path / "fan-out.toml"
    scenario.write_text(FAN_OUT)
    tmp, results = tmp_path / "tmp", tmp_path / "results"
    tmp.mkdir()
    # tar+zstd: an archive unpacked, so a worker's own path is written into it (a squashfs
    # image is mounted read-only and keeps rank 0's: tests/trial/test_strategies.py)
    job = mpirun(3, ["run", "--fleet", "--scenario", str(scenario), "--target", str(target),
                     "--tmp", str(tmp), "--results", str(results), "--no-report",
                     "--pack-method", "tar+zstd"])  # fmt: skip
    out, _ = job.communicate(timeout=400)
    assert job.returncode == 0, out[-3000:]
    run = only_run_dir(results)
    got = {r["rank"]: r for r in rows(run / "trials.csv")}
    assert sorted(got) == ["0", "1", "2"] and {r["status"] for r in got.values()} == {"ok"}
    builder = got["0"]
    assert builder["fanout_wait_s"] == "" and float(builder["install_s"]) > 0
    assert float(builder["persist_s"]) > 0 and int(builder["stored_bytes"]) > 0
    assert builder["persist_method"] == "tar+zstd"
    # the builder's archive was ready at its first start's end, on the fleet's clock
    packed_at = float(builder["fleet_start_s"]) + float(builder["first_start_s"])
    for rank in "12":
        w = got[rank]
        assert w["install_s"] == w["venv_s"] == ""  # it installed nothing
        wait, restore = float(w["fanout_wait_s"]), float(w["fanout_restore_s"])
        assert int(w["fanout_relocated"]) >= 2  # its own path on rank 0's host
        assert float(w["time_to_ready_s"]) >= wait + restore
        assert float(w["fleet_start_s"]) + wait == pytest.approx(packed_at, abs=1.0)
        assert float(w["fleet_ready_s"]) > packed_at
        assert w["stored_bytes"] == ""  # the archive is rank 0's, counted in its row
        # the restart: every worker restored the one archive and passed the ready check
        assert float(w["restore_s"]) > 0 and float(w["restart_s"]) > float(w["restore_s"])
        assert w["restore_command"] and w["persist_command"] == ""
    assert float(builder["restore_s"]) > 0
    assert max(float(r["fleet_ready_s"]) for r in got.values()) > packed_at
    assert not any(standin.scratch_left(target, tmp).values())
    assert ranks_of(str(tmp_path)) == {}


def test_fan_out_waiters_stop_at_once_when_rank_0_makes_no_archive(tmp_path: Path) -> None:
    """Rank 0's install fails (no such package on the index): the waiter does not wait out
    the trial's limit, its row names rank 0's failure."""
    scenario = tmp_path / "broken.toml"
    scenario.write_text(FAN_OUT.replace('packages = ["tiny-core"]', 'packages = ["no-such-pkg"]'))
    tmp, target, results = tmp_path / "tmp", tmp_path / "target", tmp_path / "results"
    tmp.mkdir()
    target.mkdir()
    start = time.monotonic()
    job = mpirun(2, ["run", "--fleet", "--scenario", str(scenario), "--target", str(target),
                     "--tmp", str(tmp), "--results", str(results), "--no-report",
                     "--trial-timeout", "300"], grace=2)  # fmt: skip
    out, _ = job.communicate(timeout=200)
    took = time.monotonic() - start
    got = {r["rank"]: r for r in rows(only_run_dir(results) / "trials.csv")}
    assert got["0"]["status"] == got["1"]["status"] == "failed", out[-3000:]
    assert "rank 0 made no archive" in got["1"]["error"], got["1"]["error"]
    assert "no-such-pkg" in got["1"]["error"] or "pip" in got["1"]["error"], got["1"]["error"]
    assert float(got["1"]["time_to_ready_s"] or 0) == 0
    assert took < 120, took  # far below the 300 s limit
    assert not any(standin.scratch_left(target, tmp).values())


def test_a_rank_killed_mid_trial_ends_the_run_with_its_row_saying_so(tmp_path: Path) -> None:
    path = tmp_path / "ten-seconds.toml"  # 200 files at 20 a second: 10 s a trial
    path.write_text('[scenario]\nname = "kill"\nkind = "standin"\nrepeats = 2\n'
                    f'[workload]\nfiles = 200\nkb = 4\nrate = 20\n{standin.NAIVE}')  # fmt: skip
    target, tmp, results = standin.roles(tmp_path)
    argv = ["run", "--fleet", *standin.argv(tmp_path, path)[1:]]
    start = time.monotonic()
    job = mpirun(4, argv)
    in_trial(job, target, rank=1)
    time.sleep(2)  # into the first trial (10 s of writing)
    victim = ranks_of(str(tmp_path))[1]
    os.kill(victim, signal.SIGKILL)
    out, _ = job.communicate(timeout=4 * GRACE + 60)
    took = time.monotonic() - start
    assert job.returncode != 0, out[-4000:]
    run = only_run_dir(results)
    got = {r["rank"]: r for r in rows(run / "trials.csv")}
    assert sorted(got) == ["0", "1", "2", "3"], out[-3000:]
    assert got["1"]["status"] == "lost"
    assert f"pid {victim} is gone" in got["1"]["error"]
    assert {got[r]["status"] for r in "023"} == {"ok"}  # the others' rows are kept
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "failed" and "rank 1 died" in meta["status_reason"]
    dead = json.loads((run / "workers" / "w1" / "meta.json").read_text())  # not "running"
    assert dead["status"] == "failed" and "said by rank 0" in dead["status_reason"], dead
    assert took < 2 * GRACE + 40, took  # the launcher's two waits, and the trial's
    assert ranks_of(str(tmp_path)) == {}  # nothing left running
    assert not any(standin.scratch_left(target, tmp).values())  # the dead rank's too


def test_a_fleet_run_stopped_by_a_lost_rank_resumes_under_a_new_launch(tmp_path: Path) -> None:
    """A rank killed in the first trial stops the run (its row lost, rank 0's kept);
    `mpirun -n 2 iobench run --fleet --resume RUN` runs that fleet trial again on both ranks,
    then the rest, and the run's latest rows are every rank's share of every trial, ok."""
    path = tmp_path / "five-seconds.toml"  # 100 files at 20 a second: 5 s a trial
    path.write_text('[scenario]\nname = "resume"\nkind = "standin"\nrepeats = 2\n'
                    f'[workload]\nfiles = 100\nkb = 4\nrate = 20\n{standin.NAIVE}')  # fmt: skip
    target, tmp, results = standin.roles(tmp_path)
    job = mpirun(2, ["run", "--fleet", *standin.argv(tmp_path, path)[1:]])
    in_trial(job, target, rank=1)
    time.sleep(1)  # into the first trial (5 s of writing)
    os.kill(ranks_of(str(tmp_path))[1], signal.SIGKILL)
    out, _ = job.communicate(timeout=4 * GRACE + 60)
    assert job.returncode != 0, out[-3000:]
    run = only_run_dir(results)
    first = rows(run / "trials.csv")
    assert sorted((r["rank"], r["status"]) for r in first) == [("0", "ok"), ("1", "lost")]
    assert json.loads((run / "meta.json").read_text())["status"] == "failed"

    again = mpirun(2, ["run", "--fleet", "--resume", str(run), "--no-report"])
    out, _ = again.communicate(timeout=300)
    assert again.returncode == 0, out[-3000:]
    latest: dict[str, dict[str, str]] = {}
    for r in rows(run / "trials.csv"):  # a trial run again counts by its later row
        latest[r["trial_id"]] = r
    assert sorted((r["config"], r["repeat"], r["rank"], r["status"]) for r in latest.values()) == [
        ("naive", "1", "0", "ok"), ("naive", "1", "1", "ok"),
        ("naive", "2", "0", "ok"), ("naive", "2", "1", "ok")]  # fmt: skip
    # rank 1's own folder holds what it did in the resumed launch
    own = {r["trial_id"] for r in rows(run / "workers" / "w1" / "trials.csv")}
    assert own >= {r["trial_id"] for r in latest.values() if r["rank"] == "1"}
    assert json.loads((run / "meta.json").read_text())["status"] == "complete"
    assert ranks_of(str(tmp_path)) == {}
    assert not any(standin.scratch_left(target, tmp).values())


def test_ctrl_c_on_the_launcher_ends_every_rank_and_keeps_what_finished(tmp_path: Path) -> None:
    """SIGINT to mpirun (a Ctrl-C in its terminal): Open MPI passes it on to the ranks as
    SIGTERM once its grace has run; every rank ends its trial as interrupted and cleans up,
    the finished rows are kept, and rank 0 alone says how to resume the fleet."""
    path = tmp_path / "ten-seconds.toml"
    path.write_text('[scenario]\nname = "ctrl-c"\nkind = "standin"\nrepeats = 2\n'
                    f'[workload]\nfiles = 200\nkb = 4\nrate = 20\n{standin.NAIVE}')  # fmt: skip
    target, tmp, results = standin.roles(tmp_path)
    start = time.monotonic()
    job = mpirun(2, ["run", "--fleet", *standin.argv(tmp_path, path)[1:]])
    in_trial(job, target, rank=1)
    time.sleep(1)
    job.send_signal(signal.SIGINT)
    out, _ = job.communicate(timeout=4 * GRACE + 60)
    took = time.monotonic() - start
    run = only_run_dir(results)
    got = rows(run / "trials.csv")
    assert {r["status"] for r in got} <= {"ok", "interrupted"}, out[-3000:]
    assert "interrupted" in {r["status"] for r in got}
    by_slot: dict[str, set[str]] = {}
    for r in got:  # every rank's share of each trial that began
        by_slot.setdefault(r["trial_id"].rsplit("-w", 1)[0], set()).add(r["rank"])
    assert all(ranks == {"0", "1"} for ranks in by_slot.values()), by_slot
    assert json.loads((run / "meta.json").read_text())["status"] == "interrupted"
    assert f"mpirun -n 2 iobench run --fleet --resume {run}" in out, out[-2000:]
    assert "workers/w1)" not in out  # rank 1 names no resume of its own
    assert took < 2 * GRACE + 40, took
    assert ranks_of(str(tmp_path)) == {}
    assert not any(standin.scratch_left(target, tmp).values())


#: a rank that lies (issue 35's fleet surfaces): it speaks rank 0's protocol (JSON, or a
#: pickle where rank 0 speaks that), then sends as its result an object whose unpickling
#: runs a command, or a row of another trial whose name leads out of the run folder
LIAR = r"""
import json, os, pickle, socket, sys, time
from mpi4py import MPI

proof, mode = sys.argv[1], sys.argv[2]
speaks = {"json": False}

def loads(data):
    data = bytes(data)
    try:
        value = json.loads(data)
    except ValueError:
        return pickle.loads(data)
    speaks["json"] = True
    return value

def dumps(obj, *_):
    return json.dumps(obj).encode() if speaks["json"] else pickle.dumps(obj)

class Evil:
    def __reduce__(self):
        return (os.system, (f"id > {proof}",))

MPI.pickle.__init__(dumps, loads)
comm, st = MPI.COMM_WORLD, MPI.Status()
READY, GO, ROW, CLOCK, SHARE, BYE = 11, 12, 13, 14, 15, 16
while True:
    msg = comm.recv(source=0, tag=MPI.ANY_TAG, status=st)
    if st.Get_tag() == CLOCK and msg is None:
        comm.send((time.time(), socket.gethostname(), os.getpid()), dest=0, tag=CLOCK)
    elif st.Get_tag() == CLOCK:
        comm.send(("naive-r1-n2", ""), dest=0, tag=READY)
    elif st.Get_tag() == GO:
        bad = "../../../../../../../" + proof.lstrip("/") + "-escaped"
        if mode == "pickle":
            MPI.pickle.__init__(pickle.dumps, loads)
            payload = Evil()
        elif speaks["json"]:
            payload = {"row": {"trial_id": bad, "config": "naive", "repeat": 1, "rank": 1,
                               "status": "ok"}, "samples": [{"t": 0.0}], "stalls": []}
        else:
            from iobench.rundir.records import TrialRow
            payload = {"row": TrialRow(trial_id=bad, config="naive", repeat=1, rank=1, status="ok"),
                       "samples": [{"t": 0.0}], "stalls": []}
        comm.send((msg[1], payload), dest=0, tag=ROW)
        break
comm.send(1, dest=0, tag=BYE)
time.sleep(2)
MPI.Finalize()
"""


@pytest.mark.parametrize("lie", ["pickle", "row"])
def test_a_rank_that_lies_cannot_run_code_or_write_outside_the_run(
    tmp_path: Path, lie: str
) -> None:
    """Before: rank 0 unpickled what a rank sent (a pickle ran `id` as root: uid=0 written)
    and wrote a rank's samples at the path its row named (a file outside the run folder,
    and a trials.csv no reader could load). Now messages are JSON, and a rank's row must be
    its own row of this trial, every cell as trials.csv's: the liar is lost, said in one line."""
    target, tmp, results = standin.roles(tmp_path)
    scenario = standin.scenario(tmp_path, configs=standin.NAIVE, repeats=1)
    (tmp_path / "liar.py").write_text(LIAR)
    proof = tmp_path / "proof"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMPI_ALLOW_RUN_AS_ROOT": "1",
           "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}  # fmt: skip
    cmd = ["mpirun", "--oversubscribe", "--mca", "odls_base_sigkill_timeout", str(GRACE),
           "-n", "1", sys.executable, "-m", "iobench", "run", "--fleet", "--scenario",
           str(scenario), "--target", str(target), "--tmp", str(tmp), "--results",
           str(results), "--no-report", "--quiet", ":",
           "-n", "1", sys.executable, str(tmp_path / "liar.py"), str(proof), lie]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    said = out.stdout + out.stderr
    assert not proof.exists(), said  # no command of theirs ran
    assert not Path(f"{proof}-escaped.csv").exists(), said  # nothing written where they said
    gathered = {r["trial_id"]: r for r in rows(only_run_dir(results) / "trials.csv")}
    assert gathered["naive-r1-n2-w0"]["status"] == "ok"
    theirs = gathered["naive-r1-n2-w1"]
    assert theirs["status"] == "lost" and "rank 1 sent a" in theirs["error"], theirs
    assert out.returncode != 0 and "rank 1 sent a" in said
