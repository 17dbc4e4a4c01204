"""The sampler's cost: the smoke set's install time with 10 Hz sampling vs without.

Run with `nox -s bench`. Each round installs the smoke wheels from the loopback index into
a fresh venv (made in setup, untimed) with an empty TMPDIR and no cache, as a trial does.
The two benchmarks share a group so pytest-benchmark prints them side by side; the ratio of
their medians is the sampler's overhead. ``test_tick_cost`` times one sampler tick while a
real process tree is watched: tick cost x rate = the CPU share the sampler takes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iobench.trial.index import LocalIndex
from iobench.trial.installers import IndexSpec, Pip, base_environment
from iobench.trial.sampler import Sampler
from iobench.wheels.cache import cached_wheels
from iobench.wheels.profile import load_profile

ROUNDS = int(os.environ.get("IOBENCH_BENCH_ROUNDS", "7"))
# a RAM filesystem when there is one: the VM's disk speed drifts far more than the effect
SHM = Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else None


@pytest.fixture
def work(tmp_path: Path):
    if SHM is None:
        yield tmp_path
        return
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="iobench-bench-", dir=SHM))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def index():
    with LocalIndex(cached_wheels(load_profile("smoke"))) as ix:
        yield ix


def _prepare(root: Path) -> tuple[Path, Path]:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    venv, tmp = root / "venv", root / "tmp"
    tmp.mkdir()
    subprocess.run(
        [sys.executable, "-m", "virtualenv", "-q", "--no-setuptools", str(venv)], check=True
    )
    return venv, tmp


def _install(venv: Path, tmp: Path, index: LocalIndex, hz: float | None) -> None:
    env = base_environment(tmp, isolated=True)
    step = Pip().command(
        venv, ["smoke-core"], IndexSpec(index.url, local=True), None, tmp / "log", env
    )
    sampler = Sampler(hz).start() if hz else None
    proc = subprocess.Popen(
        step.argv, env=step.env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    if sampler:
        sampler.watch(proc.pid, "install")
    assert proc.wait() == 0
    if sampler:
        sampler.stop()


@pytest.mark.venv  # each round makes a venv and installs into it
@pytest.mark.benchmark(group="sampler-overhead")
@pytest.mark.parametrize("hz", [None, 10.0], ids=["unsampled", "sampled-10hz"])
def test_install_smoke(benchmark, index, work: Path, hz: float | None) -> None:
    state: dict = {}

    def setup():
        state["venv"], state["tmp"] = _prepare(work / "round")
        return (state["venv"], state["tmp"], index, hz), {}

    benchmark.pedantic(_install, setup=setup, rounds=ROUNDS, iterations=1)


@pytest.mark.benchmark(group="sampler-tick")
def test_tick_cost(benchmark, tmp_path: Path) -> None:
    proc = subprocess.Popen(["bash", "-c", "sleep 30; true"])
    s = Sampler(hz=1000.0)
    s.start()
    s._stop.set()  # stop the thread: the benchmark drives ticks itself
    s._thread.join()
    s.watch(proc.pid, "install")
    try:
        benchmark(s._tick)
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.venv
@pytest.mark.benchmark(group="sampler-overhead-paired")
def test_overhead_paired(benchmark, index, work: Path) -> None:
    """Pairs in ABBA order, so drift in background load hits both arms alike; the median of
    the per-pair ratios (sampled / unsampled) goes to extra_info and the terminal."""
    ratios: list[float] = []

    def pair(i: int) -> None:
        times = {}
        order = (None, 10.0) if i % 2 == 0 else (10.0, None)
        for hz in order:
            venv, tmp = _prepare(work / "pair")
            t = time.perf_counter()
            _install(venv, tmp, index, hz)
            times[hz] = time.perf_counter() - t
        ratios.append(times[10.0] / times[None])

    counter = iter(range(10_000))
    benchmark.pedantic(lambda: pair(next(counter)), rounds=ROUNDS * 2, iterations=1)
    ratios.sort()
    median = (
        ratios[len(ratios) // 2]
        if len(ratios) % 2
        else sum(ratios[len(ratios) // 2 - 1 : len(ratios) // 2 + 1]) / 2
    )
    benchmark.extra_info["median_ratio_sampled_over_unsampled"] = round(median, 4)
    benchmark.extra_info["ratios"] = [round(r, 4) for r in ratios]
    print(
        f"\nsampler overhead: median ratio sampled/unsampled = {median:.4f} over {len(ratios)} pairs"
    )
