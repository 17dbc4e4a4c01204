"""The prediction model: strace counting on a hand-made log, the formula with hand-made
numbers, and the shipped operation mix against real probes."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from iobench.predict import model, opmix
from iobench.predict.probe import probe, probe_roles, result_to_dict
from iobench.scenario.load import load_scenario
from iobench.wheels.profile import load_profile

S = "/r/.iobench-scratch/RUN/t1"
TRACE = f"""\
100 execve("{S}/venv/bin/python", ["{S}/venv/bin/python", "-m", "pip", "install", "x"], 0x7ffd /* 3 vars */) = 0
100 clone3({{flags=CLONE_VM|CLONE_VFORK, exit_signal=SIGCHLD}}, 88 <unfinished ...>
100 <... clone3 resumed>) = 101
101 openat(AT_FDCWD</w>, "{S}/tmp/pip-1/x.whl", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0644) = 3<{S}/tmp/pip-1/x.whl>
101 write(3<{S}/tmp/pip-1/x.whl>, "PK\\3\\4"..., 1000) = 1000
100 newfstatat(AT_FDCWD</w>, "{S}/cache/http", {{st_mode=S_IFDIR|0755, st_size=40, ...}}, 0) = 0
100 newfstatat(AT_FDCWD</w>, "{S}/cache/http", {{st_mode=S_IFDIR|0755, st_size=40, ...}}, 0) = 0
100 newfstatat(AT_FDCWD</w>, "{S}/cache/nope", 0x7ffe, 0) = -1 ENOENT (No such file or directory)
100 newfstatat(AT_FDCWD</w>, "{S}/cache/nope", 0x7ffe, 0) = -1 ENOENT (No such file or directory)
100 openat(AT_FDCWD</w>, "{S}/venv/lib/python3.11/site-packages/pip/__pycache__/a.pyc", O_WRONLY|O_CREAT, 0644) = 4<{S}/venv/x>
100 openat(4<{S}/venv/lib/python3.11/site-packages>, "pkg/mod.py", O_WRONLY|O_CREAT|O_EXCL, 0644) = 5<{S}/venv/lib/python3.11/site-packages/pkg/mod.py>
100 rename("{S}/venv/a", "{S}/venv/b") = 0
100 fsync(5<{S}/venv/lib/python3.11/site-packages/pkg/mod.py>) = 0
100 newfstatat(5<{S}/venv/lib/python3.11/site-packages/pkg/mod.py>, "", {{st_mode=S_IFREG|0644, ...}}, AT_EMPTY_PATH) = 0
200 execve("{S}/prime-venv/bin/python", ["{S}/prime-venv/bin/python", "-m", "pip", "install", "x"], 0x7 /* 1 var */) = 0
200 openat(AT_FDCWD</w>, "{S}/cache/y", O_WRONLY|O_CREAT, 0644) = 3<{S}/cache/y>
300 openat(AT_FDCWD</w>, "{S}/venv/z", O_WRONLY|O_CREAT, 0644) = 3<{S}/venv/z>
"""


def _ops(c: opmix.Counts) -> dict[str, int]:
    return {k: v for k, v in c.ops.items() if v}


def test_count_trace_attributes_calls_to_phase_and_role() -> None:
    counts = opmix.count_trace(TRACE.splitlines(keepends=True))
    assert set(counts) == {
        ("t1", "download", "tmpdir"),
        ("t1", "download", "cache"),
        ("t1", "download", "venv"),
        ("t1", "install", "venv"),
    }
    tmp = counts[("t1", "download", "tmpdir")]
    assert _ops(tmp) == {"create": 1} and tmp.bytes_written == 1000
    assert _ops(counts[("t1", "download", "cache")]) == {
        "stat": 1,
        "stat_miss": 2,
    }  # stats once per path
    assert _ops(counts[("t1", "download", "venv")]) == {
        "create": 1
    }  # pip's own bytecode: still downloading
    assert _ops(counts[("t1", "install", "venv")]) == {"create": 1, "rename": 1, "fsync": 1}


def test_a_listing_is_a_round_trip_beside_its_folder_s_open() -> None:
    """The lab served an opendir and a readdir for each folder torch-like's import listed
    (502 each); the trace counted the two as one stat of the folder."""
    pkg = f"{S}/venv/lib/python3.11/site-packages/pkg"
    log = f"""\
400 execve("{S}/venv/bin/python", ["{S}/venv/bin/python", "-c", "import pkg"], 0x7 /* 1 var */) = 0
400 openat(AT_FDCWD</w>, "{pkg}", O_RDONLY|O_NONBLOCK|O_CLOEXEC|O_DIRECTORY) = 3<{pkg}>
400 getdents64(3<{pkg}>, 0x55 /* 4 entries */, 32768) = 112
400 getdents64(3<{pkg}>, 0x55 /* 0 entries */, 32768) = 0
400 openat(AT_FDCWD</w>, "{pkg}", O_RDONLY|O_NONBLOCK|O_CLOEXEC|O_DIRECTORY) = 3<{pkg}>
400 getdents64(3<{pkg}>, 0x55 /* 4 entries */, 32768) = 112
"""
    counts = opmix.count_trace(log.splitlines(keepends=True))
    # the folder's open and its listing, once each per path (the second listing is the
    # client cache's, as a second stat of a path is)
    assert _ops(counts[("t1", "import", "venv")]) == {"stat": 2}


MIX = {
    "profile": "p",
    "files": 100,
    "bytes": 1_000_000,
    "dists": 1,
    "fast": {
        "p": {"cold": {"venv": 1.0, "download": 2.0, "install": 3.0, "compile": 0.0, "import": 0.0}}
    },
    "fast_costs": {"create": 0.01, "write_mbps": 1000.0, "read_mbps": 1000.0},
    "ops": {
        "cold": {
            "install": {"venv": {"create": 100, "bytes_written": 1_000_000, "bytes_read": 0}},
            "venv": {"venv": {"create": 10}},
        }
    },
}


def test_formula_with_hand_made_numbers() -> None:
    slow = model.Costs({"create": 1.01}, write_mbps=10.0, read_mbps=None)
    fast = model.Costs({"create": 0.01}, 1000.0, 1000.0)
    p = model.predict_config("x", {"venv": slow, "tmpdir": fast, "cache": None}, "cold", MIX)
    # install: 3 s on tmpfs + 100 creates x 1 ms extra + 1 MB x (1/10 - 1/1000) s/MB
    assert p.phases["install"] == pytest.approx(3.0 + 0.1 + 0.099)
    assert p.phases["venv"] == pytest.approx(1.0 + 10 * 0.001)
    assert p.total_s == pytest.approx(1.01 + 2.0 + 3.199)
    # a profile twice the size: files and bytes double, the venv does not; fast times scale too
    big = model.Size("q", 200, 2_000_000, 1)
    p2 = model.predict_config("x", {"venv": slow, "tmpdir": fast, "cache": None}, "cold", MIX, big)
    assert p2.phases["install"] == pytest.approx(6.0 + 0.2 + 0.198)
    assert p2.phases["venv"] == pytest.approx(1.01) and p2.phases["download"] == pytest.approx(2.0)
    # on a machine (or at a moment) twice as slow as when the fast times were measured
    mix = MIX | {"fast_cpu_s": {"p": 0.5}}
    p3 = model.predict_config(
        "x", {"venv": slow, "tmpdir": fast, "cache": None}, "cold", mix, cpu_s=1.0
    )
    assert p3.phases["install"] == pytest.approx(6.0 + 0.1 + 0.099) and p3.phases[
        "venv"
    ] == pytest.approx(2.01)
    # a folder faster than the reference costs nothing extra (never negative)
    quick = model.Costs({"create": 0.0}, 5000.0, 5000.0)
    assert model.predict_config("x", {"venv": quick}, "cold", MIX).phases["install"] == 3.0


def test_a_profile_s_own_ready_check_trace_replaces_the_scaled_install_s() -> None:
    """The import phase of a profile whose ready check was traced (tools/import_ops.py) costs
    that trace, unscaled; any other profile's, the traced install's import scaled by files."""
    mix = model.load_opmix("pip")
    shipped = {load_scenario(n).wheels for n in ("smoke", "torch-like", "diffusers-like")}
    assert set(mix["imports"]) == shipped  # every shipped synthetic profile's, nothing else
    fast = model.fast_costs(mix)
    volume = model.Costs({op: fast.ms[op] + 1.0 for op in opmix.OPS}, None, None)  # +1 ms each
    roles = {"venv": volume, "tmpdir": fast, "cache": None}
    torch = model.Size.of(load_profile("torch-cpu-like"))
    own = mix["imports"]["torch-cpu-like"]["venv"]
    p = model.predict_config("x", roles, "cold", mix, torch)
    length = p.phases["import"]
    sent = model.stats_sent(own, length, 1.0, model.ATTR_CACHE_S)
    expected = (own["stat_miss"] + own["open_read"] + sent) / 1000.0
    assert p.storage_s["import"] == pytest.approx(expected, rel=0.02)
    # torch's ready check stats twice the missing paths of smoke's scaled by installed files
    scaled = dict(mix, imports={})
    q = model.predict_config("x", roles, "cold", scaled, torch)
    assert p.storage_s["import"] > 1.4 * q.storage_s["import"]
    k = model.scales("import", torch, model.Size.traced(mix))[0]
    smoke = mix["ops"]["cold"]["import"]["venv"]
    assert own["stat_miss"] > 1.8 * smoke["stat_miss"] * k
    # a profile without its own trace: the install's import, scaled
    other = model.Size("custom", torch.files, torch.bytes, torch.dists, torch.opened)
    assert model.import_mix(mix, other) == (smoke, 750 / 87, 750 / 87)  # by the files opened
    assert model.predict_config("x", roles, "cold", mix, other).storage_s[
        "import"
    ] == pytest.approx(q.storage_s["import"])
    unknown = model.Size("custom", torch.files, torch.bytes, torch.dists)  # no fan-out
    assert model.import_mix(mix, unknown)[1] == torch.files / 1202  # by installed files


def test_pip_s_own_start_in_the_venv_does_not_scale_with_the_wheels() -> None:
    """While it downloads, pip imports itself from the venv and writes its own bytecode
    there (~1,700 operations): torch-like's one wheel paid a third of it, and a layered
    venv with nothing to install none (its first start: 4.2 s predicted, 13.7 s measured)."""
    mix = model.load_opmix("pip")
    fast = model.fast_costs(mix)
    volume = model.Costs({op: fast.ms[op] + 1.0 for op in opmix.OPS}, None, None)
    tsc = load_scenario("torch-like")
    delta, _ = model.Size.split(load_profile(tsc.wheels), tsc.image)
    assert delta.dists == 0
    traced = model.Size.traced(mix)
    assert model.scales("download", delta, traced, "venv") == (1.0, 1.0)
    assert model.scales("download", delta, traced, "tmpdir")[0] == 0.0
    p = model.predict_config("x", {"venv": volume, "tmpdir": fast, "cache": None}, "cold", mix,
                             delta)  # fmt: skip
    own = mix["ops"]["cold"]["download"]["venv"]
    length = p.phases["download"]
    expected = model.storage_seconds(own, volume, fast, 1.0, 1.0, length, model.ATTR_CACHE_S)
    assert p.storage_s["download"] == pytest.approx(expected, rel=0.05)
    assert p.storage_s["download"] > 1.0  # about 1,700 round trips at +1 ms


def test_a_layered_venv_s_ready_check_is_its_parts_share_of_what_the_whole_opens() -> None:
    """smoke's layered venv installs smoke-core, a third of smoke's files but 63 of the 87
    its ready check opens: its restart was predicted at 0.19 s (by files) against 0.60 s
    measured, the persistent venv's 0.52 against 0.55."""
    mix = model.load_opmix("pip")
    sc = load_scenario("lifecycle")
    whole = model.Size.of(load_profile(sc.wheels))
    delta, image = model.Size.split(load_profile(sc.wheels), sc.image)
    assert (delta.opened, image.opened, whole.opened) == (63, 24, 87)
    assert delta.share == pytest.approx(63 / 87) and delta.files / whole.files < 0.35
    own = mix["imports"]["smoke"]["venv"]
    assert model.import_mix(mix, delta) == (own, delta.share, delta.share)
    fast = model.fast_costs(mix)
    volume = model.Costs({op: fast.ms[op] + 1.0 for op in opmix.OPS}, None, None)
    ready = {
        s.name: model.predict_config("x", {"venv": volume}, "cold", mix, s).phases["import"]
        for s in (whole, delta, image)
    }
    assert ready[whole.name] * 0.6 < ready[delta.name] < ready[whole.name]
    # the fast part of a part's ready check: its share of the whole profile's own
    f = model.fast_phases(mix, "cold", image, model.Size.traced(mix), cpu_s=None)
    assert f["import"] == pytest.approx(mix["fast"]["smoke"]["cold"]["import"] * image.share)
    # torch-like's image holds all of torch: its local ready check is torch's own
    tsc = load_scenario("torch-like")
    tdelta, timage = model.Size.split(load_profile(tsc.wheels), tsc.image)
    assert (tdelta.share, timage.share) == (0.0, 1.0)
    t = model.fast_phases(mix, "cold", timage, model.Size.traced(mix))
    assert t["import"] == pytest.approx(mix["fast"]["torch-cpu-like"]["cold"]["import"])


def test_fast_folders_predict_the_recorded_fast_times() -> None:
    mix = model.load_opmix("pip")
    fc = mix["fast_costs"]
    same = model.Costs(
        {k: v for k, v in fc.items() if k in opmix.OPS}, fc["write_mbps"], fc["read_mbps"]
    )
    for p in model.predict_scenario(load_scenario("smoke"), {"target": same, "tmp": same}):
        state = "warm" if p.config == "warm-cache-on-target" else "cold"
        assert p.phases == pytest.approx(mix["fast"]["smoke"][state])


def test_costs_from_a_probe_and_from_its_json_agree(tmp_path: Path) -> None:
    result = probe(tmp_path, files=200, write_mb=8, seconds=0.2, write_seconds=0.5, locks=False)
    assert model.Costs.from_probe(result) == model.Costs.from_probe(result_to_dict(result))
    assert set(model.Costs.from_probe(result).ms) == set(opmix.OPS)


def test_the_runner_hook_predicts_from_a_probe_document(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    doc = probe_roles({"target": tmp_path / "a", "tmp": tmp_path / "b"}, seconds=0.05)
    assert doc["cpu_s"] > 0
    got = model.predicted_s(load_scenario("smoke"), "naive", doc)
    assert math.isfinite(got) and got > 0
    with pytest.raises(Exception, match="no config 'nope'"):
        model.predicted_s(load_scenario("smoke"), "nope", doc)


def _doc(fast_ms: float, slow_ms: float) -> dict:
    """A probe document of a tmp (``fast_ms`` per operation) and a target (``slow_ms``)."""
    ops = [op for op in opmix.OPS if op != "fsync"]

    def folder(path: str, ms: float) -> dict:
        each = {op: {"count": 100, "ms_each": ms} for op in ops}
        return {"path": path, **each, "fsync": {"count": 10, "p50_ms": ms}}

    return {
        "paths": [folder("/t", slow_ms), folder("/m", fast_ms)],
        "roles": {"target": "/t", "tmp": "/m"},
        "cpu_s": 0.25,
    }


def test_the_run_s_own_fast_trials_give_the_fast_part() -> None:
    """A run's measured all-on-tmp trial is the model's F for the others: naive is predicted
    as that trial plus naive's storage part, whatever the recorded F or the CPU sample say."""
    scen, doc = load_scenario("smoke"), _doc(0.01, 1.0)
    measured = {"venv": 0.3, "download": 1.5, "install": 0.5, "compile": 0.6, "import": 0.05}
    fast = model.fast_from_trials(scen, doc, {"venv-on-tmp": measured})
    assert set(fast) == {"cold", "warm"}
    # tmp costs about what the recorded fast folder costs: F is the trial itself
    assert sum(fast["cold"].values()) == pytest.approx(sum(measured.values()), rel=0.05)
    with_run = model.predicted_by_config(scen, doc, fast)
    alone = model.predicted_by_config(scen, doc)
    storage = alone["naive"] - alone["venv-on-tmp"]  # naive's extra, by the same model
    assert storage > 1.0
    assert with_run["naive"] == pytest.approx(sum(measured.values()) + storage, rel=0.05)
    assert with_run["venv-on-tmp"] == pytest.approx(sum(measured.values()), rel=0.05)
    # the warm state, not measured, gets the recorded warm F at the cold one's ratio
    mix = model.load_opmix("pip")
    ratio = sum(fast["cold"].values()) / sum(mix["fast"]["smoke"]["cold"].values())
    assert sum(fast["warm"].values()) == pytest.approx(
        ratio * sum(mix["fast"]["smoke"]["warm"].values()), rel=0.01
    )


def test_only_the_reference_config_gives_f_and_a_volume_trial_only_when_it_is_that() -> None:
    """F comes from the scenario's config with the smallest storage part (venv-on-tmp), not
    from whichever ran first: a naive trial measured alone gives no F, since storage time the
    model missed would land in it (ext4 here: venv-on-tmp predicted +98 % from naive's F).
    Where naive is the reference (no config off the volume), F is its time less the model's
    storage part; unless that part is most of the trial, when F would be a small difference
    of two large numbers."""
    scen = load_scenario("smoke")
    true_f = {"venv": 0.4, "download": 1.6, "install": 0.6, "compile": 0.7, "import": 0.05}
    mix, size = model.load_opmix("pip"), model.Size.of(_smoke_profile())
    for slow_ms, usable in ((0.05, True), (1.0, False)):
        doc = _doc(0.01, slow_ms)
        target = model.Costs.from_probe(doc["paths"][0])
        roles = dict.fromkeys(("venv", "tmpdir", "cache"), target)
        naive = model.predict_config("naive", roles, "cold", mix, size, fast_s=true_f)
        assert model.fast_from_trials(scen, doc, {"naive": naive.phases}) == {}
        alone = scen.select(["naive"])
        fast = model.fast_from_trials(alone, doc, {"naive": naive.phases})
        if not usable:
            assert naive.total_s > 2 * sum(true_f.values()) and fast == {}  # mostly storage
            continue
        assert sum(fast["cold"].values()) == pytest.approx(sum(true_f.values()), rel=0.05)
        got = model.predicted_by_config(scen, doc, fast)
        assert got["venv-on-tmp"] == pytest.approx(sum(true_f.values()), rel=0.05)
        assert got["naive"] == pytest.approx(naive.total_s, rel=0.05)
    # once the reference ran, its F stands, whatever else ran before it
    doc = _doc(0.01, 0.05)
    slow = {p: 2 * v for p, v in true_f.items()}  # naive slowed by what the model missed
    fast = model.fast_from_trials(scen, doc, {"naive": slow, "venv-on-tmp": true_f})
    assert sum(fast["cold"].values()) == pytest.approx(sum(true_f.values()), rel=0.05)


def _smoke_profile():  # noqa: ANN202
    from iobench.wheels.profile import load_profile

    return load_profile("smoke")


def test_a_shared_warm_cache_counts_for_the_trial_whose_install_used_it() -> None:
    """The warm cache lives in the placement's folder, not the trial's: its calls count for
    the trial whose pip made them (from the exec'd command line), priming's for nobody."""
    w = "/r/.iobench-scratch/RUN/.warm-cache-target-pip-copy-virtualenv/cache"
    t = "/r/.iobench-scratch/RUN/warm-r1"
    p = "/r/.iobench-scratch/RUN/warm-r1/prime-venv"
    trace = f"""\
400 execve("{p}/bin/python", ["{p}/bin/python", "-m", "pip", "install", "x"], 0x7 /* 1 var */) = 0
400 openat(AT_FDCWD</w>, "{w}/http/a", O_WRONLY|O_CREAT, 0644) = 3<{w}/http/a>
500 execve("{t}/venv/bin/python", ["{t}/venv/bin/python", "-m", "pip", "install", "x"], 0x7 /* 1 var */) = 0
500 clone3({{flags=CLONE_VM|CLONE_VFORK, exit_signal=SIGCHLD}}, 88) = 501
501 openat(AT_FDCWD</w>, "{w}/http/a", O_RDONLY|O_CLOEXEC) = 3<{w}/http/a>
500 newfstatat(AT_FDCWD</w>, "{w}/http/b", 0x7ffe, 0) = -1 ENOENT (No such file or directory)
"""
    counts = opmix.count_trace(trace.splitlines(keepends=True))
    assert set(counts) == {("warm-r1", "download", "cache")}
    assert _ops(counts[("warm-r1", "download", "cache")]) == {"open_read": 1, "stat_miss": 1}


def test_a_busy_cpu_holds_back_the_mostly_cpu_configs_until_the_run_measures_them() -> None:
    """Other processes used 1.9 CPUs while the probe timed the CPU: the configs whose time is
    mostly CPU (all on tmp) get no figure from that time; naive, mostly storage at 1 ms a
    call, keeps its; the run's own fast trials bring the others back."""
    scen = load_scenario("smoke")
    quiet, busy = _doc(0.01, 1.0), {**_doc(0.01, 1.0), "cpu_others": 1.9}
    assert model.cpu_contended(quiet) is None and model.cpu_contended(busy) == 1.9
    assert model.cpu_contended({**quiet, "cpu_others": 0.3}) is None  # below CONTENDED_CPUS
    alone = model.predicted_by_config(scen, quiet, hold_back_when_busy=True)
    held = model.predicted_by_config(scen, busy, hold_back_when_busy=True)
    assert model.predicted_by_config(scen, busy) == alone  # doctor's and --dry-run's figures
    assert held["naive"] == alone["naive"] and held["tmp-fix"] == alone["tmp-fix"]
    assert held["venv-on-tmp"] is None and held["warm-cache-on-target"] is None
    assert alone["venv-on-tmp"] is not None
    measured = {"venv": 0.3, "download": 1.5, "install": 0.5, "compile": 0.6, "import": 0.05}
    fast = model.fast_from_trials(scen, busy, {"venv-on-tmp": measured})
    back = model.predicted_by_config(scen, busy, fast, hold_back_when_busy=True)
    assert back["venv-on-tmp"] == pytest.approx(sum(measured.values()), rel=0.05)


@pytest.mark.timing  # the CPU shares it compares need no other test on the CPUs
def test_the_cpu_calibration_sees_other_processes_on_the_cpus() -> None:
    """Two busy loops beside the calibration: their CPU time is counted as the others', and
    the job's best time is slower than on the CPUs alone (no bar on how much: the load
    of the machine under the test decides)."""
    import subprocess
    import sys
    import time

    from iobench.predict.probe import calibrate_cpu

    alone_s, alone_others = calibrate_cpu(runs=2)
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        time.sleep(0.3)
        shared_s, shared_others = calibrate_cpu(runs=2)
    finally:
        for p in loops:
            p.kill()
            p.wait()
    # the loops get at least the CPUs the job leaves them: n - 1 of n while it holds one (CI:
    # 0.99 of 1 on 2 cores, the job kept its core), less what sampling the counters misses
    floor = 0.9 * min(2, (os.cpu_count() or 1) - 1)
    assert shared_others >= floor and shared_others > alone_others, (alone_others, shared_others)
    assert alone_s > 0 and shared_s > 0
