"""Hosts of their own on one machine (``iobench lab hosts``): a fleet launched on them by
``mpirun``'s own remote launcher, the shared volume over their network, a host's rank killed,
and nothing left afterwards (docs/fleet.md)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import standin
from helpers.files import TINY_PROFILE, only_run_dir
from helpers.lab import FUSE_REASON
from helpers.mpi import GRACE, in_trial, mpirun, ranks_of, rows

from iobench.__main__ import main
from iobench.fleet import hosts, netns
from iobench.lab.testing import slow_volume
from iobench.system import procfs

REASON = hosts.unavailable() or FUSE_REASON
pytestmark = [
    pytest.mark.lab,
    pytest.mark.run,
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("mpirun") is None, reason="no mpirun (apt-get install openmpi-bin)"
    ),
    pytest.mark.skipif(REASON is not None, reason=REASON or ""),
    pytest.mark.skipif(
        os.path.realpath(sys.prefix).startswith("/tmp/"),
        reason=f"this Python lives under /tmp ({sys.prefix}), which each host replaces",
    ),
]
pytest.importorskip("mpi4py", reason="pip install 'iobench[fleet]'")

SCENARIO = f"""
[scenario]
name = "hosts"
packages = ["tiny-core"]
wheels = "{TINY_PROFILE}"
ready = "import tiny_core; tiny_core.check()"
repeats = 1
size_mb = 10

[configs.naive]
venv = "target"
tmpdir = "target"
cache = "off"

[configs.fan-out]
venv = "tmp"
tmpdir = "tmp"
cache = "tmp"
strategy = "fan-out"
"""


@pytest.fixture
def place() -> Iterator[Path]:
    """A folder every host sees (pytest's own is under /tmp, which each host replaces)."""
    folder = Path(tempfile.mkdtemp(prefix="iobench-hosts-test-", dir="/var/tmp"))
    yield folder
    shutil.rmtree(folder)


@pytest.fixture
def three(place: Path) -> Iterator[tuple[hosts.HostSet, Path]]:
    """Three hosts sharing a lab volume (1 ms, 2,000 IOPS); afterwards nothing of theirs is
    left: no namespace, interface, mount, process or record, also when the test failed."""
    name = "t" + uuid.uuid4().hex[:6]
    with slow_volume(place, "vol", latency_ms=1.0, iops=2000) as vol:
        hs = hosts.up(name, 3, vol)
        made = _what_it_made(hs)
        try:
            yield hs, vol
        finally:
            if hosts.find(name) is not None:
                hosts.down(name)
            _nothing_left(hs, made)


def _what_it_made(hs: hosts.HostSet) -> dict[str, int]:
    """The namespaces of the set, by kind and inode (to look for afterwards)."""
    made = {}
    for files in [h.files() for h in hs.hosts] + [{"net": hs.server_net}]:
        for kind, path in files.items():
            made[f"{kind}:{path}"] = netns.kept(path) or 0
    assert all(made.values()), made
    return made


def _nothing_left(hs: hosts.HostSet, made: dict[str, int]) -> None:
    for key, inode in made.items():
        kind = key.split(":")[0]
        if kind in ("net", "mnt"):
            assert netns.pids_in(kind, inode) == [], f"processes left in {key}"
    links = os.listdir("/sys/class/net")
    assert not [n for n in links if n.startswith(hs.bridge)], links
    left = [m.mountpoint for m in procfs.mounts() if m.mountpoint.startswith(hs.folder)]
    assert left == [], left
    assert not os.path.exists(hs.folder)
    assert ranks_of(hs.folder) == {} and not [
        p for p in map(int, filter(str.isdigit, os.listdir("/proc")))
        if hs.folder in procfs.cmdline(p)
    ]  # fmt: skip


def _launch(hs: hosts.HostSet, place: Path) -> list[str]:
    """The mpirun options a user gives on these hosts (the cache outside /tmp, as -x would
    on real hosts: each host's /tmp is its own)."""
    return ["--hostfile", str(hs.hostfile), "--mca", "plm_rsh_agent", str(hs.agent),
            "-x", f"XDG_CACHE_HOME={place / 'cache'}", "-x", "PYTHONUNBUFFERED", "-x", "TERM"]  # fmt: skip


def _on(hs: hosts.HostSet, host: str, command: str) -> str:
    return subprocess.run([str(hs.agent), host, command], capture_output=True, text=True,
                          timeout=30, check=True).stdout  # fmt: skip


@pytest.mark.venv
def test_a_fleet_on_three_hosts_of_their_own(three, place: Path) -> None:
    """Every rank on its own host, the volume over each host's own sshfs: each row names its
    host; fan-out's waiters restore at rank 0's path on their own /tmp, nothing relocated."""
    hs, vol = three
    scenario = place / "hosts.toml"
    scenario.write_text(SCENARIO)
    results = place / "results"
    job = mpirun(3, ["run", "--fleet", "--scenario", str(scenario), "--target", str(vol),
                     "--tmp", "/tmp", "--results", str(results), "--no-report",
                     "--pack-method", "tar+zstd"], launch=_launch(hs, place), cwd=place)  # fmt: skip
    out, _ = job.communicate(timeout=500)
    assert job.returncode == 0, out[-3000:]
    run = only_run_dir(results)
    got = rows(run / "trials.csv")
    assert {r["status"] for r in got} == {"ok"}, out[-3000:]
    for r in got:  # rank r on host r + 1: the name its own UTS namespace gives it
        assert r["host"] == f"{hs.name}-{int(r['rank']) + 1}", r
    meta = json.loads((run / "meta.json").read_text())
    assert [w["host"] for w in meta["fleet"]["workers"]] == [h.name for h in hs.hosts]
    fan = {r["rank"]: r for r in got if r["config"] == "fan-out"}
    built = re.search(r"-C (\S+) ", fan["0"]["restore_command"])
    assert built is not None and ".w0/fan-out-r1-n3-w0" in built.group(1)
    for rank in "12":
        w = fan[rank]
        assert float(w["fanout_wait_s"]) > 0 and float(w["fanout_restore_s"]) > 0
        assert w["fanout_relocated"] == "0"  # rank 0's path: nothing to rewrite
        assert f"-C {built.group(1)} " in w["restore_command"], w["restore_command"]
    for h in hs.hosts:  # each host's own /tmp, left empty; its own monotonic clock
        assert _on(hs, h.name, "find /tmp -mindepth 1 -maxdepth 2") == ""
    uptimes = [float(_on(hs, h.name, "cat /proc/uptime").split()[0]) for h in hs.hosts]
    if netns.time_namespaces():
        steps = [b - a for a, b in zip(uptimes, uptimes[1:])]
        assert all(abs(s - hosts.OFFSET_STEP_S) < 60 for s in steps), uptimes
    assert not any(standin.scratch_left(vol).values())


def test_a_hosts_rank_killed_mid_trial_ends_the_run(three, place: Path) -> None:
    """Rank 1's process on host 2 killed 2 s into a 10 s trial: the launcher ends the job
    within its two waits, rank 0's row for rank 1 says lost, the others' rows are kept."""
    hs, vol = three
    path = place / "ten-seconds.toml"  # 200 files at 20 a second: 10 s a trial
    path.write_text('[scenario]\nname = "kill"\nkind = "standin"\nrepeats = 2\n'
                    f'[workload]\nfiles = 200\nkb = 4\nrate = 20\n{standin.NAIVE}')  # fmt: skip
    results = place / "results"
    argv = ["run", "--fleet", "--scenario", str(path), "--target", str(vol), "--tmp", "/tmp",
            "--results", str(results), "--no-report"]  # fmt: skip
    start = time.monotonic()
    job = mpirun(3, argv, launch=_launch(hs, place), cwd=place)
    in_trial(job, vol, rank=1)
    time.sleep(2)
    victim = ranks_of(str(path))[1]
    assert os.readlink(f"/proc/{victim}/ns/uts") != os.readlink("/proc/self/ns/uts")
    os.kill(victim, signal.SIGKILL)
    out, _ = job.communicate(timeout=4 * GRACE + 60)
    took = time.monotonic() - start
    assert job.returncode != 0, out[-3000:]
    run = only_run_dir(results)
    got = {r["rank"]: r for r in rows(run / "trials.csv")}
    assert sorted(got) == ["0", "1", "2"], out[-3000:]
    assert got["1"]["status"] == "lost" and got["1"]["host"] == f"{hs.name}-2"
    assert "rank 1 sent no result" in got["1"]["error"], got["1"]["error"]
    assert {got[r]["status"] for r in "02"} == {"ok"}
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "failed" and "rank 1" in meta["status_reason"]
    assert took < 2 * GRACE + 40, took  # the launcher's two waits, and the trial's
    assert ranks_of(str(path)) == {}


def test_a_taken_name_is_one_line(three, place: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hs, vol = three
    assert main(["lab", "hosts", "up", "2", "--volume", str(vol), "--name", hs.name]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "up already" in err, err
    assert [s.hosts.name for s in hosts.status() if s.hosts.name == hs.name] == [hs.name]


#: the fleet model's bar (issue 40): predicted within 25 % of the measured fleet time, held
#: where the volume decides (naive at 3: its IOPS); the CPU-bound configs' recorded ratios
#: spread 0.51-1.22 with the load other work puts on the 2 shared cores (docs/fleet.md;
#: 0.51: venv-on-tmp at 3 hosts, load 7)
AGREE = 0.25
CPU_BOUND = (0.4, 1.6)
_TIME = re.compile(r"([\d,]+(?:\.\d+)?) s\b")


def _predicted(text: str, config: str) -> list[float]:
    """A config's predicted times, one per fleet size, from ``iobench fleet``'s table."""
    line = next(x for x in text.splitlines() if x.split()[:1] == [config])
    return [float(t.replace(",", "")) for t in _TIME.findall(line)]


@pytest.mark.timing
@pytest.mark.timeout(600)  # the wheels built, naive at 1 and 3, a probe: ~4 min
@pytest.mark.venv
def test_the_fleet_model_agrees_with_a_fleet_on_three_hosts(three, place: Path) -> None:
    """The fleet scenario's naive, venv-on-tmp and fan-out on 1 and 3 hosts of a 1 ms,
    2,000-IOPS lab volume, and ``iobench fleet``'s prediction for the same volume (probed
    from a host, the fast part from the run's own one-worker trials, the hosts sharing this
    machine's 2 CPUs): naive, held by the volume's IOPS at 3 workers, within 25 % (recorded:
    0.88-1.10 at 1-8 hosts, load 2-9); venv-on-tmp and fan-out within what the load on the
    shared cores left them (recorded 0.51-1.22)."""
    hs, vol = three
    configs = "naive,venv-on-tmp,fan-out"
    results = place / "results"
    job = mpirun(3, ["run", "--fleet", "--scenario", "fleet", "--configs", configs,
                     "--ranks", "1,3", "--repeats", "1", "--target", str(vol), "--tmp", "/tmp",
                     "--results", str(results), "--no-report"],
                 launch=_launch(hs, place), cwd=place)  # fmt: skip
    out, _ = job.communicate(timeout=480)
    assert job.returncode == 0, out[-3000:]
    run = only_run_dir(results)
    got = rows(run / "trials.csv")
    assert {r["status"] for r in got} == {"ok"}, out[-3000:]
    measured = {
        (c, n): max(float(r["fleet_ready_s"]) for r in got
                    if r["config"] == c and r["fleet_size"] == str(n))
        for c in configs.split(",") for n in (1, 3)
    }  # fmt: skip
    # a host sees the volume over sshfs, not as a lab mount: its caps are given, as a user would
    model = (f"cd {place} && XDG_CACHE_HOME={place / 'cache'} {sys.executable} -m iobench "
             f"fleet --target {vol} --tmp /tmp --iops 2000 --cpus 2 --workers 1,3 "
             f"--configs {configs} --fast-from {run}")  # fmt: skip
    said = subprocess.run([str(hs.agent), hs.hosts[0].name, model], capture_output=True,
                          text=True, timeout=300, check=True).stdout  # fmt: skip
    for config in configs.split(","):
        at_3 = _predicted(said, config)[1]
        ratio = at_3 / measured[(config, 3)]
        low, high = (1 - AGREE, 1 + AGREE) if config == "naive" else CPU_BOUND
        assert low <= ratio <= high, (config, at_3, measured, said)
    # naive at 3: the volume's IOPS decide it, not one worker's own time
    assert "iops" in next(x for x in said.splitlines() if x.startswith("naive")), said
    assert measured[("naive", 3)] > measured[("naive", 1)], measured
