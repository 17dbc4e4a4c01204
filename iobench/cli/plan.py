"""`iobench run --dry-run`: the checked plan of a run, printed; nothing is created.

What it shows comes from the same ``run_plan.check`` a real run passes, so a dry run
fails exactly where the run would: the trials in their order, each role's folder with its
filesystem and free space against what the scenario needs there, where the packages come
from and how many installs download them, and where the results would go.
"""

from __future__ import annotations

from typing import Any

from rich.filesize import decimal


def _source(plan: Any) -> str:
    sc = plan.scenario
    if plan.wheelhouse is not None:
        return f"the wheels in {plan.wheelhouse}, served on a loopback index (no network)"
    if plan.index_url:
        return f"{plan.index_url} (network)"
    if plan.synthetic:
        return f"synthetic wheels of profile {sc.wheels}, generated and served on a loopback index (no network)"
    where = f"{plan.index_url}" if plan.index_url else "pip's configured index"
    if plan.downloads_once:
        return (
            f"{where}, downloaded once into iobench's cache (reused by later runs) and served "
            "on a loopback index at that download's rate (--no-reuse-downloads: every cold "
            "install downloads)"
        )
    return f"{where} (network; your pip configuration applies)"


def _trials(plan: Any) -> list[Any]:
    from iobench.run.order import plan_trials

    done: set[str] = set()
    if plan.resume is not None:
        from iobench.rundir.folder import RunDir

        done = RunDir(plan.resume).done_trial_ids()
    return plan_trials(plan.scenario.configs, plan.repeats, plan.order_seed, done)


def role_lines(plan: Any) -> list[str]:
    """One line per role: folder, filesystem, free space and what the scenario needs there."""
    from iobench.run import facts, space

    need = space.need_mb(plan.scenario)
    lines = []
    for role, path in plan.roles.items():
        fs = facts.mount_of(path)
        free = fs.get("free_bytes")
        needs = (
            f"; needs about {decimal(int(need[role] * 1e6))}"
            if role in need
            else "; unused by these configs"
        )
        lines.append(
            f"  {role:<8} {path}  ({fs.get('fstype', '?')} at {fs.get('mountpoint', '?')}, "
            f"{decimal(free) + ' free' if free is not None else 'free space unknown'}{needs})"
        )
    return lines


def _index_line(plan: Any, trials: list[Any], cold: int, primings: int) -> str:
    """What the run will pull from the index and write to each role, in bytes (estimates:
    run/space.written_mb)."""
    from iobench.run import space
    from iobench.scenario.kinds.install import WHEELS_SHARE

    mb = space.written_mb(plan.scenario, [t.config for t in trials], cold + primings)
    order = [r for r in plan.roles if r in mb] + sorted(r for r in mb if r not in plan.roles)
    roles = ", ".join(f"{r} {decimal(int(mb[r] * 1e6))}" for r in order if r != "index")
    share = f"the wheels taken as {WHEELS_SHARE:.0%} of the installed size"
    if plan.downloads_once:  # one download; the installs read it back over loopback
        once = space.written_mb(plan.scenario, [], 1)["index"]
        return (
            f"bytes     about {decimal(int(once * 1e6))} from the index, once ({share}; none "
            f"when an earlier run's download is reused), {decimal(int(mb['index'] * 1e6))} "
            f"over loopback; written: {roles}"
        )
    return (
        f"bytes     about {decimal(int(mb['index'] * 1e6))} from the index "
        f"({cold} cold install(s) and up to {primings} priming, {share}); written: {roles}"
    )


def _install_lines(
    plan: Any, trials: list[Any], cold: int, primings: int, warm: list[Any]
) -> list[str]:
    """What an install run downloads, and the bytes it moves."""
    return [
        f"downloads {cold} cold install(s) download every package"
        + (
            f", {len(warm)} warm trial(s) download nothing after at most {primings} untimed "
            "priming install(s) (one per cache placement, none when a cold trial of that "
            "placement filled it first, again only if a trial changed that cache)"
            if warm
            else ""
        )
        + f"; from {_source(plan)}",
        _index_line(plan, trials, cold, primings),
    ]


def _data_size(sc: Any) -> str:
    return f"about {decimal(int(sc.size_mb * 1e6))} of data" if sc.size_mb else "size not stated"


def _written_line(plan: Any, trials: list[Any]) -> str:
    """What a run of another kind writes to each role (the data once, a staged copy a trial)."""
    from iobench.run import space

    mb = space.written_mb(plan.scenario, [t.config for t in trials], 0)
    order = [r for r in plan.roles if r in mb]
    return "bytes     written: " + ", ".join(f"{r} {decimal(int(mb[r] * 1e6))}" for r in order)


def _config_lines(sc: Any) -> list[str]:
    """A line per config: its places and axes, and its strategy when it has one."""
    return [
        f"  {c.name:<24} {c.summary()}"
        + (f" strategy={c.strategy}" if getattr(c, "strategy", "reinstall") != "reinstall" else "")
        for c in sc.configs
    ]


def plan_lines(plan: Any) -> list[str]:
    """The dry run's output for a checked ``run_plan.RunPlan``."""
    from iobench.run.earlystop import MIN_ROUNDS
    from iobench.run.estimate import estimate
    from iobench.trial import warmcache

    sc = plan.scenario
    trials = _trials(plan)
    warm = [t for t in trials if warmcache.wanted([t.config])]  # a primed installer's cache
    primings = len(warmcache.wanted(t.config for t in warm))
    cold = len(trials) - len(warm)
    size = (
        f"about {decimal(int(sc.size_mb * 1e6))} installed per trial"
        if sc.size_mb
        else "size not stated"
    )
    time_line, probed = estimate(
        plan, [t.config.name for t in trials], MIN_ROUNDS if plan.repeats_auto else None
    )
    lines = [
        "dry run: nothing was "
        + ("kept (a short probe of each role removed its files)" if probed else "created")
        + "; drop --dry-run to run this plan",
        f"scenario  {sc.name}: {sc.description}",
        f"packages  {', '.join(sc.packages)} ({size})"
        if sc.installs
        else f"workload  {sc.kind} ({_data_size(sc)})",
        *([f"ready     {sc.ready}"] if sc.installs else []),
        f"trials    {'at most ' if plan.repeats_auto else ''}{len(trials)} "
        f"({len(sc.configs)} configs x {plan.repeats} repeats"
        + (", fewer once settled: --repeats auto" if plan.repeats_auto else "")
        + (f", {plan.resume} continued" if plan.resume is not None else "")
        + ")"
        + (f"; limit {plan.trial_timeout_s:.0f} s each" if plan.trial_timeout_s else ""),
        time_line,
        *(
            _install_lines(plan, trials, cold, primings, warm)
            if sc.installs
            else [_written_line(plan, trials)]
        ),
        *(
            ["events    each trial is a first start, then a restart from what its strategy kept"]
            if getattr(sc, "lifecycle", False)
            else []
        ),
        "roles",
        *role_lines(plan),
        "configs",
        *_config_lines(sc),
        ("order     " if plan.resume is not None else "order     (a new run draws its own seed) ")
        + ", ".join(t.trial_id for t in trials),
        f"results   {plan.results_root}/<run-id>/",
    ]
    return lines + list(plan.notes)
