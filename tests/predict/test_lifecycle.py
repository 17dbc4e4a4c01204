"""The lifecycle model: each strategy's persist step and restart from a probe — the formula
with hand-made costs, the shipped step times, and the dry run of a lifecycle scenario."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from iobench.predict import lifecycle, model
from iobench.rundir.records import PHASES
from iobench.scenario.load import load_scenario
from iobench.scenario.vocab import STRATEGIES

OPMIX = model.load_opmix("pip")
FAST = model.fast_costs(OPMIX)
TRACED = model.Size.traced(OPMIX)


def _slower(ms: float, mbps: float = 100.0) -> model.Costs:
    """A folder every operation of which costs ``ms`` more than the fast one."""
    return model.Costs({op: v + ms for op, v in FAST.ms.items()}, mbps, mbps)


def _configs() -> dict[str, object]:
    return {c.name: c for c in load_scenario("lifecycle").configs}


def test_every_strategy_is_timed_or_said_to_be_left_out() -> None:
    cfgs = _configs()
    folders = {"target": _slower(1.0), "tmp": FAST}
    timed = {
        name
        for name, cfg in cfgs.items()
        if lifecycle.predict_lifecycle(cfg, folders, TRACED, "squashfs") is not None
    }
    assert timed == set(cfgs)  # the lifecycle scenario has every strategy but fan-out
    assert set(STRATEGIES) - {c.strategy for c in cfgs.values()} == {"fan-out"}
    assert lifecycle.predict_lifecycle(cfgs["reinstall"], {"tmp": FAST}, TRACED, "tar") is None


def test_the_trees_are_what_the_traced_install_left() -> None:
    venv = lifecycle.tree(OPMIX, "venv", PHASES, TRACED)
    cold = OPMIX["ops"]["cold"]
    files = sum(cold[p].get("venv", {}).get("create", 0) - cold[p].get("venv", {}).get(
        "unlink", 0) for p in PHASES)  # fmt: skip
    assert venv.files == pytest.approx(files) and 2000 < venv.files < 4000
    assert (
        venv.bytes
        == lifecycle.load_steps()["profile"]["venv_bytes"]
        == pytest.approx(venv.bytes, abs=1)
    )
    # a profile twice as large: everything but the venv's seed and pip's own bytecode doubles
    big = model.Size("big", TRACED.files * 2, TRACED.bytes * 2, TRACED.dists * 2)
    grown = lifecycle.tree(OPMIX, "venv", PHASES, big)
    base = lifecycle.tree(OPMIX, "venv", ("venv", "download"), TRACED)
    assert base == lifecycle.tree(OPMIX, "venv", ("venv", "download"), big)
    assert grown.files == pytest.approx(2 * venv.files - base.files)
    assert grown.bytes == pytest.approx(2 * venv.bytes - base.bytes)


def test_on_the_fast_folder_only_the_measured_steps_remain() -> None:
    cfgs = _configs()
    steps = lifecycle.load_steps()
    on_tmpfs = {"target": FAST, "tmp": FAST}
    copied = lifecycle.predict_lifecycle(cfgs["copied-venv"], on_tmpfs, TRACED, "tar", cpu_s=None)
    assert copied is not None
    assert copied.parts["copy-out"] == pytest.approx(steps["fast"]["copy-out"])
    assert copied.parts["copy-in"] == pytest.approx(steps["fast"]["copy-in"])
    assert copied.persist_s == pytest.approx(steps["fast"]["copy-out"])
    # the CPU sample scales them as it scales F: a machine twice as slow, twice the time
    slow = lifecycle.predict_lifecycle(cfgs["copied-venv"], on_tmpfs, TRACED, "tar",
                                       cpu_s=2 * steps["cpu_s"])  # fmt: skip
    assert slow is not None and slow.persist_s == pytest.approx(2 * copied.persist_s)


def test_a_copied_venv_pays_per_file_and_a_packed_one_per_byte() -> None:
    cfgs = _configs()
    venv = lifecycle.tree(OPMIX, "venv", PHASES, TRACED)
    steps = lifecycle.load_steps()
    one_ms = {"target": _slower(1.0, mbps=1e9), "tmp": FAST}  # round trips, no bandwidth cost
    copied = lifecycle.predict_lifecycle(cfgs["copied-venv"], one_ms, TRACED, "tar")
    assert copied is not None
    # cp -a out: a create and two attribute calls per file, a mkdir and two per folder
    out = steps["fast"]["copy-out"] + (3 * venv.files + 3 * venv.dirs) / 1000
    assert copied.parts["copy-out"] == pytest.approx(out, rel=1e-3)
    back = steps["fast"]["copy-in"] + 2 * (venv.files + venv.dirs) / 1000
    assert copied.parts["copy-in"] == pytest.approx(back, rel=1e-3)
    packed = lifecycle.predict_lifecycle(cfgs["packed-venv"], one_ms, TRACED, "tar")
    assert packed is not None
    assert packed.parts["pack"] == pytest.approx(steps["fast"]["pack.tar"] + 0.001, rel=1e-3)
    # a slow link instead: the archive's bytes are what the packed venv pays
    narrow = {"target": model.Costs(dict(FAST.ms), 10.0, 10.0), "tmp": FAST}
    packed = lifecycle.predict_lifecycle(cfgs["packed-venv"], narrow, TRACED, "tar")
    archive_mb = venv.bytes * steps["ratio"]["tar"] / 1e6
    excess = 1 / 10.0 - 1 / FAST.write_mbps
    assert packed is not None
    assert packed.parts["pack"] == pytest.approx(steps["fast"]["pack.tar"] + archive_mb * excess)
    # a mounted image reads only what the ready check reads: less than extracting it whole
    mounted = lifecycle.predict_lifecycle(cfgs["packed-venv"], narrow, TRACED, "squashfs-loop")
    extracted = lifecycle.predict_lifecycle(cfgs["packed-venv"], narrow, TRACED, "squashfs-extract")
    assert mounted is not None and extracted is not None
    assert mounted.parts["pack"] == extracted.parts["pack"]
    assert mounted.parts["restore"] < extracted.parts["restore"]
    # a tree ten times larger: packing and extracting grow with its bytes, a mount does not
    big = model.Size("big", TRACED.files * 10, TRACED.bytes * 10, TRACED.dists)
    grown = lifecycle.tree(OPMIX, "venv", PHASES, big).bytes / venv.bytes
    on_tmpfs = {"target": FAST, "tmp": FAST}
    for method, restore in (("squashfs-loop", 1.0), ("squashfs-extract", grown)):
        small = lifecycle.predict_lifecycle(cfgs["packed-venv"], on_tmpfs, TRACED, method)
        large = lifecycle.predict_lifecycle(cfgs["packed-venv"], on_tmpfs, big, method)
        assert small is not None and large is not None
        assert large.parts["pack"] == pytest.approx(small.parts["pack"] * grown)
        assert large.parts["restore"] == pytest.approx(small.parts["restore"] * restore)


def test_the_restart_is_the_ready_check_where_the_venv_lies_or_the_install_again() -> None:
    cfgs = _configs()
    folders = {"target": _slower(1.0), "tmp": FAST}
    persistent = lifecycle.predict_lifecycle(cfgs["persistent-venv"], folders, TRACED, "tar")
    kept_local = lifecycle.predict_lifecycle(cfgs["packed-venv"], folders, TRACED, "tar")
    assert persistent is not None and kept_local is not None
    assert persistent.persist_s == 0 and set(persistent.parts) == {"ready"}
    assert persistent.parts["ready"] > kept_local.parts["ready"]  # its imports cross the link
    again = lifecycle.predict_lifecycle(cfgs["reinstall"], folders, TRACED, "tar")
    assert again is not None and again.persist_s == 0
    first = model.predict_config("r", model_roles(cfgs["reinstall"], folders), "warm", OPMIX,
                                 TRACED)  # fmt: skip
    assert again.restart_s == pytest.approx(first.total_s)  # its cache on the target is warm
    cached = lifecycle.predict_lifecycle(cfgs["packed-cache"], folders, TRACED, "tar")
    assert cached is not None and set(cached.parts) == {"pack-cache", "restore-cache", "install"}


def model_roles(cfg: object, folders: dict[str, model.Costs]) -> dict[str, model.Costs | None]:
    return {
        "venv": folders[cfg.venv],  # type: ignore[attr-defined]
        "tmpdir": folders[cfg.tmpdir],  # type: ignore[attr-defined]
        "cache": folders[cfg.cache] if cfg.cache != "off" else None,  # type: ignore[attr-defined]
    }


def test_the_dry_run_of_a_lifecycle_run_counts_persist_steps_and_restarts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from iobench.run import estimate as est
    from iobench.run import plan as run_plan
    from iobench.run.plan import RunRequest

    probes: list[dict] = []  # one real probe for both estimates: a disk's costs move between two
    real = est.probe_roles

    def once(*args: object, **kwargs: object) -> dict:
        if not probes:
            probes.append(real(*args, **kwargs))
        return probes[0]

    monkeypatch.setattr(est, "probe_roles", once)

    (tmp_path / "t").mkdir()
    (tmp_path / "tmp").mkdir()
    req = RunRequest(scenario="lifecycle", target=tmp_path / "t", tmp=tmp_path / "tmp",
                     results=tmp_path / "results", no_probe=True)  # type: ignore[arg-type]  # fmt: skip
    plan = run_plan.check(req)
    names = [c.name for c in plan.scenario.configs]
    got = est.from_model(plan.scenario, plan.roles, names, None, "tar")
    assert got is not None and got.left_out == 0 and "restarts included" in got.source
    # the same configs as a scenario of first starts only (every one a reinstall): less
    firsts = replace(plan.scenario, configs=tuple(replace(c, strategy="reinstall") for c in
                                                  plan.scenario.configs))  # fmt: skip
    assert not firsts.lifecycle
    alone = est.from_model(firsts, plan.roles, names, None, "tar")
    assert alone is not None and "restarts" not in alone.source and alone.low_s < got.low_s
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == []  # the probe's files gone


def test_a_layered_venv_installs_and_reads_from_the_target_only_what_the_image_lacks() -> None:
    from iobench.wheels.profile import load_profile

    scenario = load_scenario("lifecycle")
    profile = load_profile(scenario.wheels)
    delta, image = model.Size.split(profile, scenario.image)
    assert delta.dists == 1 and image.dists == 2  # smoke-core; smoke-ext and smoke-data
    assert delta.files + image.files == profile.file_count
    assert delta.bytes + image.bytes == profile.total_bytes
    cfgs = _configs()
    assert model.size_of(cfgs["layered-venv"], scenario, profile) == delta
    assert model.size_of(cfgs["persistent-venv"], scenario, profile) == model.Size.of(profile)
    folders = {"target": _slower(1.0), "tmp": FAST}
    whole = model.Size.of(profile)
    layered = lifecycle.predict_lifecycle(cfgs["layered-venv"], folders, delta, "tar",
                                          image=image)  # fmt: skip
    kept = lifecycle.predict_lifecycle(cfgs["persistent-venv"], folders, whole, "tar")
    assert layered is not None and kept is not None
    assert 0 < layered.restart_s < kept.restart_s
    # its two reads: the delta from the target, the image's part from local disk
    steps = lifecycle._Steps(cfgs["layered-venv"], folders, delta, None, OPMIX,
                             lifecycle.load_steps(), image)  # fmt: skip
    assert layered.parts["ready"] == pytest.approx(
        steps.ready(folders["target"]) + steps.ready(FAST, image)
    )
    # an image that holds everything: nothing installed, nothing of it read from the target
    nothing, everything = model.Size.split(profile, ["smoke-core", *scenario.image])
    assert nothing.files == 0 and everything.files == profile.file_count
    pred = model.predict_config("l", {"venv": folders["target"]}, "cold", OPMIX, nothing)
    assert pred.phases["install"] == pred.phases["compile"] == pred.phases["import"] == 0
