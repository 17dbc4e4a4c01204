"""The fleet model: shared caps as bounds on each phase, fan-out as one install plus N - 1
restores, a preset's latencies as per-operation costs; hand-made numbers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers.lab import FUSE_REASON

from iobench.predict import fleet, model

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

OPMIX = model.load_opmix("pip")
FAST = model.fast_costs(OPMIX)
ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "fleet_requests.py"


def config(
    name: str, venv: str, tmpdir: str, cache: str, strategy: str = "reinstall"
) -> SimpleNamespace:
    return SimpleNamespace(name=name, venv=venv, tmpdir=tmpdir, cache=cache, cache_state="cold",
                           installer="pip", compile="on", strategy=strategy,
                           roles=lambda: {venv, tmpdir, cache} - {"off"})  # fmt: skip


NAIVE = config("naive", "target", "target", "target")
LOCAL = config("venv-on-tmp", "tmp", "tmp", "tmp")
FAN_OUT = config("fan-out", "tmp", "tmp", "tmp", "fan-out")
ONE_MS = fleet.preset_costs(1.0, 0.0, 0.0, None, OPMIX)
FOLDERS = {"target": ONE_MS, "tmp": FAST}
SIZE = model.Size.traced(OPMIX)


def test_the_pipe_moves_at_the_burst_rate_while_credits_last_then_at_the_baseline() -> None:
    caps = fleet.Caps(mb_per_s=10.0, burst_mb_per_s=110.0, burst_credits_mb=1000.0)
    # the balance falls at 100 MB/s: 10 s of burst, 1,100 MB moved
    assert caps.pipe_s(550.0) == pytest.approx(5.0)
    assert caps.pipe_s(1100.0) == pytest.approx(10.0)
    assert caps.pipe_s(1200.0) == pytest.approx(10.0 + 100.0 / 10.0)
    assert fleet.Caps(mb_per_s=10.0).pipe_s(50.0) == pytest.approx(5.0)
    assert fleet.Caps().pipe_s(1e9) == 0.0


def test_a_part_takes_the_longest_of_its_bounds() -> None:
    each = fleet.Demand(requests=1000, mb=2.0)
    caps = fleet.Caps(iops=2000, mb_per_s=4.0)
    assert fleet.bounded(3.0, each, 1.0, 1, caps, None) == (3.0, "alone")
    assert fleet.bounded(3.0, each, 1.0, 8, caps, None) == (4.0, "iops")  # 8,000 / 2,000
    assert fleet.bounded(3.0, each, 1.0, 10, caps, None) == (5.0, "iops")
    assert fleet.bounded(3.0, fleet.Demand(0, 2.0), 1.0, 10, caps, None) == (5.0, "bandwidth")
    assert fleet.bounded(3.0, fleet.Demand(), 1.0, 10, caps, 2.0) == (5.0, "cpu")


def test_a_preset_prices_each_operation_by_its_requests() -> None:
    costs = fleet.preset_costs(1.0, 1.0, 2.7, 500.0, OPMIX)
    table = fleet.load_requests()
    create = table["create"]
    assert costs.ms["create"] == pytest.approx(
        FAST.ms["create"] + create["meta"] * 1.0 + create["write"] * 2.7
    )
    assert costs.ms["stat_miss"] == pytest.approx(FAST.ms["stat_miss"] + 1.0)
    assert costs.write_mbps == costs.read_mbps == 500.0


def test_requests_and_metered_bytes_of_a_mix() -> None:
    table = fleet.load_requests()
    per_create = sum(table["create"].values())
    got = fleet.demand({"create": 10}, 1.0, 1.0, 10.0, metered=False)
    assert got.requests == pytest.approx(10 * per_create) and got.mb == 0.0
    metered = fleet.demand({"create": 10, "bytes_written": 10 * 1400}, 1.0, 1.0, 10.0, metered=True)
    meta = 10 * (table["create"]["meta"] + table["create"].get("free", 0)) * 4096
    assert metered.mb == pytest.approx((meta + 10 * 32 * 1024) / 1e6)  # each write: 32 KiB


def test_alone_a_worker_takes_the_single_client_model_s_time() -> None:
    one = fleet.fleet_install(NAIVE, FOLDERS, SIZE, fleet.Caps(iops=2000), [1])[0]
    roles = {"venv": ONE_MS, "tmpdir": ONE_MS, "cache": ONE_MS}
    assert one.seconds == pytest.approx(model.predict_config("naive", roles, "cold", OPMIX).total_s)
    assert one.bound == "alone" and one.alone_s == pytest.approx(one.seconds)


def test_past_the_knee_an_iops_bound_fleet_grows_with_its_size() -> None:
    times = fleet.fleet_install(NAIVE, FOLDERS, SIZE, fleet.Caps(iops=2000), [1, 2, 4, 64, 128])
    s = {t.workers: t.seconds for t in times}
    assert s[1] <= s[2] <= s[4] < s[64]
    assert s[128] == pytest.approx(2 * s[64], rel=0.01) and times[-1].bound == "iops"
    # nothing shared on local disk: as alone, at any size, unless the workers share CPUs
    local = fleet.fleet_install(LOCAL, FOLDERS, SIZE, fleet.Caps(iops=2000), [1, 1024])
    assert local[0].seconds == pytest.approx(local[1].seconds)
    shared = fleet.fleet_install(LOCAL, FOLDERS, SIZE, fleet.Caps(), [1, 8], cpus=2)
    assert shared[1].seconds == pytest.approx(4 * shared[0].seconds, rel=0.05)
    assert shared[1].bound == "cpu"


def test_fan_out_is_one_install_then_restores_that_share_the_volume() -> None:
    caps = fleet.Caps(mb_per_s=1.0)  # a pipe of 1 MB/s: 1,024 workers' archives take long
    times = fleet.fleet_fan_out(FAN_OUT, FOLDERS, SIZE, caps, [1, 2, 1024], "tar+zstd")
    alone, two, many = times
    assert set(alone.parts) == {"install", "ready"}  # ready before its pack, as rank 0 is
    assert set(two.parts) == {"install", "pack", "restore", "ready"}
    assert two.parts["install"] == alone.parts["install"]  # rank 0's, whatever the fleet
    assert many.parts["restore"][1] == "bandwidth" and many.seconds > 100 * two.seconds
    assert fleet.polls_per_s(1024) == pytest.approx(1023 / 0.05)


@pytest.mark.lab
@pytest.mark.skipif(not TOOL.is_file(), reason="the sdist carries no tools/ (a clone's test)")
@pytest.mark.skipif(FUSE_REASON is not None, reason=FUSE_REASON or "")
def test_the_requests_table_is_what_the_lab_counts() -> None:
    out = subprocess.run([sys.executable, str(TOOL)], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    fresh = tomllib.loads(out.stdout)["requests"]
    shipped = fleet.load_requests()
    assert set(fresh) == set(shipped)
    for op, kinds in shipped.items():
        for kind, n in kinds.items():
            assert fresh[op].get(kind, 0) == pytest.approx(n, abs=0.1), (op, fresh[op], kinds)
