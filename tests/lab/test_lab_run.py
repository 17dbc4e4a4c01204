"""iobench run against the emulated slow volume: physics decides the ranking, samples show the wait."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.files import TINY_PROFILE, only_run_dir, read_csv
from helpers.lab import assert_nothing_left, needs_fuse

from iobench.__main__ import main

pytestmark = [pytest.mark.lab, pytest.mark.e2e]

SCENARIO = f"""
[scenario]
name = "lab"
packages = ["tiny-core"]
wheels = "{TINY_PROFILE}"
ready = "import tiny_core; tiny_core.check()"
repeats = 1
size_mb = 10

[configs.naive]
venv = "target"
tmpdir = "target"
cache = "target"

[configs.venv-on-tmp]
venv = "tmp"
tmpdir = "tmp"
cache = "tmp"
"""


@pytest.fixture
def slow(tmp_path: Path):
    from iobench.lab.manage import lab_unavailable_reason
    from iobench.lab.testing import slow_volume

    reason = lab_unavailable_reason()
    if reason:
        pytest.skip(reason)
    with slow_volume(tmp_path, latency_ms=1.0) as mnt:
        yield mnt


@pytest.mark.timing  # the ratio needs the CPU to itself
def test_venv_on_slow_volume_loses_and_the_wait_is_visible(slow: Path, tmp_path: Path) -> None:
    scenario = tmp_path / "lab.toml"
    scenario.write_text(SCENARIO)
    fast = tmp_path / "fast"
    fast.mkdir()
    rc = main(
        [
            "run",
            "--scenario",
            str(scenario),
            "--target",
            str(slow),
            "--tmp",
            str(fast),
            "--results",
            str(tmp_path / "r"),
            "--no-report",
            "--quiet",
            "--sample-hz",
            "20",
        ]
    )
    assert rc == 0
    run = only_run_dir(tmp_path / "r")
    rows = {r["config"]: r for r in read_csv(run / "trials.csv")}
    naive, local = rows["naive"], rows["venv-on-tmp"]
    assert naive["status"] == local["status"] == "ok"
    assert naive["venv_fstype"].startswith("fuse")
    ratio = float(naive["time_to_ready_s"]) / float(local["time_to_ready_s"])
    assert ratio >= 3, ratio
    # the time went to waiting, not working: off-CPU, and the installer seen in D state
    assert float(naive["offcpu_frac"]) >= 0.6
    assert float(naive["offcpu_frac"]) > float(local["offcpu_frac"]) + 0.2

    # per sample: the installer tree's CPU use while it writes the venv, from its cumulative
    # CPU seconds (FUSE waits sleep interruptibly: neither iowait nor reliably D state)
    def busy(trial: str) -> float:
        samples = [
            s
            for s in read_csv(run / "samples" / f"{trial}.csv")
            if s["phase"] in ("venv", "install")
        ]
        cpu = float(samples[-1]["tree_cpu_s"]) - float(samples[0]["tree_cpu_s"])
        return cpu / (float(samples[-1]["t"]) - float(samples[0]["t"]))

    assert busy("naive-r1") < 0.4 < busy("venv-on-tmp-r1"), (
        busy("naive-r1"),
        busy("venv-on-tmp-r1"),
    )
    # ... and where it waited: in the FUSE request queue, for a large part of the trial (about
    # half on a quiet machine; less where a busy one makes the trial's CPU part longer)
    assert float(naive["fswait_frac"]) >= 0.4 > float(local["fswait_frac"]) + 0.2, (
        naive["fswait_frac"],
        local["fswait_frac"],
    )
    # the volume is left clean
    assert [p.name for p in slow.iterdir()] == []  # a clean run leaves no scratch folder


@pytest.mark.timing
def test_probe_agrees_with_configured_latency(tmp_path: Path, capsys) -> None:
    """`iobench probe` on the volume: a create is 3 round trips (lookup of the new name,
    create, flush on close), a stat of a just-made file 1 (its attributes are cached)."""
    from iobench.lab.manage import lab_unavailable_reason
    from iobench.lab.testing import slow_volume

    reason = lab_unavailable_reason()
    if reason:
        pytest.skip(reason)
    latency = 2.0

    def best_create_ms(mnt: Path) -> list[float]:
        best = []
        for _ in range(3):  # best of three: load elsewhere on the machine only adds time
            # 50 files: every probe step pays the round trips (~8 s a probe at 150)
            assert main(["probe", str(mnt), "--files", "50", "--write-mb", "0"]) == 0
            out = capsys.readouterr().out
            # the table's row: "create of 1400 B  ops/s  p50 p95 p99 p99.9 max  count" (ms)
            line = next(ln for ln in out.splitlines() if ln.strip().startswith("create of"))
            best.append(float(line.split()[5]))  # its p50
        return best

    # the volume's own cost per create (a Python daemon's CPU, three requests) measured on a
    # twin without latency, beside it: on a loaded CI machine it alone was ~1.8 ms
    (tmp_path / "slow").mkdir()
    (tmp_path / "bare").mkdir()
    with (
        slow_volume(tmp_path / "bare", latency_ms=0) as bare,
        slow_volume(tmp_path / "slow", latency_ms=latency) as mnt,
    ):
        zero, slow = best_create_ms(bare), best_create_ms(mnt)
    added = min(slow) - min(zero)
    print(f"create: {min(slow):.2f} ms at {latency} ms, {min(zero):.2f} ms bare")
    assert added == pytest.approx(3 * latency, rel=0.25), (slow, zero)


@needs_fuse
def test_lab_down_during_a_run_ends_it_as_volume_lost(tmp_path: Path) -> None:
    """Issue 23 (low): `lab down` under a running trial ended iobench with exit 2 (the usage
    code) and left meta.json "running". A scratch folder that vanished mid-run is the
    volume's failure: exit 1, meta.json says so, the rows stay."""
    import json
    import time

    from helpers import standin

    from iobench.lab import manage

    vol = tmp_path / "vol"
    manage.up(vol)
    path = standin.scenario(tmp_path, "rate = 4", standin.NAIVE, repeats=3)  # 5 s a trial
    proc = standin.process(tmp_path, path, "--no-probe", target=vol)
    try:
        deadline = time.monotonic() + 60
        while not list(vol.glob(".iobench-scratch/*/naive-r1/files/f3")):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        manage.down(vol)  # what `iobench lab down` does: busy, so unmounted lazily
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if any(s.mountpoint == manage.mount_path(vol) for s in manage.status()):
            manage.down(vol)
    assert_nothing_left(vol)
    assert proc.returncode == 1, (out, err)
    assert "is gone" in err and "unmounted" in err, err
    run = only_run_dir(tmp_path / "results")
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "volume-lost" and "is gone" in meta["status_reason"]
    assert [r["trial_id"] for r in read_csv(run / "trials.csv")] == ["naive-r1"]
