"""A run's set-up before its first trial: the package index it installs from, the roles'
scratch folders it claims, and the warm-up venv (the runner's first steps, kept here so
the runner reads as its loop)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from iobench import redact
from iobench.cost.idle import CostOptions, options_to_meta
from iobench.errors import LockHeldError
from iobench.run import facts
from iobench.run.fleet import FleetRun
from iobench.run.plan import RunPlan
from iobench.rundir import kinds
from iobench.rundir.fleet import WORKERS
from iobench.rundir.folder import RunDir, utcnow
from iobench.rundir.meta import RunMeta
from iobench.scenario import axes
from iobench.system.lock import TargetLock
from iobench.system.removal import is_local
from iobench.system.scratch import Scratch
from iobench.trial import downloads, installers
from iobench.trial.context import TrialContext
from iobench.trial.index import LocalIndex
from iobench.trial.installers import IndexSpec
from iobench.trial.progress import Progress
from iobench.wheels.cache import cached_wheels
from iobench.wheels.profile import load_profile

#: a fleet rank's scratch folder's suffix
_RANK = re.compile(r"\.w\d+$")


# ---------------------------------------------------------------- what meta.json says of the plan
def run_meta(p: RunPlan, run_id: str, index_meta: dict) -> RunMeta:
    """meta.json of a new run: what ran, where, on what, with which decisions (checked)."""
    return RunMeta.from_json(
        {
            "iobench_version": facts.__version__,
            "run_id": run_id,
            "command": redact.redact_argv(p.command),
            "label": redact.redact(p.label),  # every value through the one rule
            "started_at": utcnow(),
            "ended_at": None,
            "status": "running",
            "scenario": {
                **p.scenario.to_dict(),
                "packages": [redact.redact(x) for x in p.scenario.packages],
            },
            "repeats": p.repeats,
            "order_seed": p.order_seed,
            "roles": {name: facts.mount_of(path) for name, path in p.roles.items()},
            "same_storage": p.same_storage,
            "role_notes": p.notes,
            "host": facts.host_info(),
            # the prefetched facts not ready yet are filled in after the warm-up (Runner)
            "versions": facts.versions(wait=False, installers=p.scenario.installs),
            "pip_config": (
                facts.pip_config(isolated=p.local_index, wait=False) if p.scenario.installs else {}
            ),
            "index": index_meta,
            "gpu": facts.gpu_info(),
            "pricing": options_to_meta(p.cost or CostOptions()),
            "sample_hz": p.sample_hz,
            "cache_mode": p.cache_mode,
            "pack_method": p.pack_method,
            "stall_after_s": p.stall_after,
            "stall_timeout_s": p.stall_timeout,
            "trial_timeout_s": p.trial_timeout_s,
            "venv_python": p.python or sys.executable,
            "trusted_owners": p.trusted_owners,
            "env": facts.redact_env(dict(os.environ)),
        },
        "meta.json",
    )


def start_index(plan: RunPlan, progress: Progress) -> tuple[LocalIndex | None, IndexSpec, dict]:
    """The loopback index over --wheelhouse or the scenario's synthetic wheels, if any; the
    spec the installers use and meta.json's ``index``."""
    folder, source, mbit = plan.wheelhouse, str(plan.wheelhouse), plan.index_mbit
    url = redact.redact(plan.index_url or "pip's configured index")
    index_args = [*(["--index-url", plan.index_url] if plan.index_url else []),
                  *axes.index_args(plan.extra_index_urls)]  # fmt: skip
    downloaded: dict[str, Any] = {}
    if plan.synthetic and plan.scenario.wheels:
        profile = load_profile(plan.scenario.wheels)
        progress.message(f"wheels: profile {profile.name} ({profile.file_count} files)")
        folder = cached_wheels(profile)
        source = f"synthetic profile {profile.name} ({profile.fingerprint()})"
    elif plan.downloads_once:
        got = downloads.fetch(plan.scenario.packages, plan.python or sys.executable, index_args,
                              url, progress.message)  # fmt: skip
        folder, source = got.folder, got.source()
        mbit = plan.index_mbit or got.mbit_per_s  # the first download's rate, unless told
        downloaded = {"downloaded_from": url, "download_bytes": got.bytes,
                      "download_s": round(got.seconds, 3)}  # fmt: skip
    if folder is None:
        remote = IndexSpec(
            plan.index_url, local=False, extra_args=axes.index_args(plan.extra_index_urls)
        )
        return None, remote, {"kind": "remote", "url": url}
    index = LocalIndex(folder, mbit).start()
    # meta.json keeps its key "mbps" (megabits/s): renaming a key is a format version
    meta = {"kind": "local", "source": source, "url": index.url, "mbps": mbit, **downloaded}
    return index, IndexSpec(index.url, local=True), meta


def run_folder(plan: RunPlan, fleet: FleetRun, run_id: str, index_meta: dict) -> RunDir:
    """The run's folder, made or reopened: rank 0's (or a run of one's) in the results,
    another rank's own in ``<run>/workers/w<rank>``, a --fleet-dir worker's in
    ``DIR/workers/<id>``; a resumed rank whose folder is on another host's disk starts one."""
    f = fleet.fleet
    if plan.resume is not None:
        path = plan.resume if f.leads else plan.resume / WORKERS / f.worker
        if path.exists():
            rd = RunDir.open(path)
            rd.ensure_folders()  # a copied run folder may have lost its empty logs/
            rd.update_meta(status="running", resumed_at=utcnow(), order_seed=plan.order_seed)
            return rd
        folder, name = path.parent, path.name
    elif fleet.on and not f.leads:
        folder, name = plan.results_root / run_id / WORKERS, f.worker
    elif plan.fleet_dir is not None:
        folder, name = plan.fleet_dir / WORKERS, plan.worker_id
    else:
        folder, name = plan.results_root, run_id
    meta = run_meta(plan, run_id, index_meta)
    return RunDir.create(folder, run_id, replace(meta, fleet=fleet.meta()), folder=name)


def lock_target(
    plan: RunPlan, run_id: str, progress: Progress, join: bool = False
) -> TargetLock | None:
    """One iobench run per target at a time: two would spoil each other's figures.
    ``join``: a fleet's rank other than 0 (None when its target is rank 0's, already
    locked for this run; another host's own target it locks as a run of one would)."""
    scratch = Scratch(plan.roles["target"], run_id).ensure()
    quiet_s = None if is_local(scratch.root) else plan.hung_after_s  # its file I/O in a child
    lock = TargetLock(scratch.root, run_id, wait_s=plan.lock_wait, quiet_s=quiet_s)
    try:
        lock.acquire()
    except LockHeldError as exc:
        if join and getattr(exc.holder, "run_id", None) == run_id:
            return None
        raise
    if lock.took_over:
        progress.message(
            f"warning: took over a stale lock on {plan.roles['target']}: {lock.took_over}"
        )
    return lock


def claim_scratch(plan: RunPlan, run_id: str, progress: Progress) -> dict[str, Scratch]:
    """Each role's scratch folder with this run's folder in it (a fleet's rank: its own,
    ``<run id>.w<rank>``); says what other runs left."""
    scratch: dict[str, Scratch] = {}
    kept = {"target"} if plan.scenario.lifecycle else set()  # where strategies keep their venv
    roles = set().union(*(c.roles() for c in plan.scenario.configs)) | {"tmp"} | kept
    for role in sorted(roles):
        scratch[role] = Scratch(plan.roles[role], run_id).ensure().claim()
        if not is_local(scratch[role].root):  # a volume that may hang: trial folders are
            scratch[role].quiet_s = plan.hung_after_s  # made in a watched child
        ours = _RANK.sub("", run_id)  # a fleet's other ranks: <run id>.w<rank>
        left = [q.name for q in scratch[role].leftovers() if _RANK.sub("", q.name) != ours]
        if left:
            progress.message(
                f"note: {scratch[role].root} holds scratch of other or crashed runs "
                f"({', '.join(left[:3])}{'...' if len(left) > 3 else ''}); "
                f"`iobench clean {plan.roles[role]}` removes it once no run uses it"
            )
    return scratch


def trial_context(
    plan: RunPlan,
    rd: RunDir,
    scratch: dict[str, Scratch],
    index_spec: IndexSpec,
    index: LocalIndex | None,
    progress: Progress,
    **run_parts: Any,
) -> TrialContext:
    """The context a run's trials share: the plan's settings, what the run made, and each
    role's filesystem type as meta.json recorded it."""
    meta = rd.meta()
    cwd = scratch["tmp"].run_root / "cwd"  # empty, local: `python -c` puts it on sys.path
    cwd.mkdir(exist_ok=True)
    return TrialContext(
        run_id=meta.run_id,
        packages=list(plan.scenario.packages),
        image=tuple(plan.scenario.image),
        ready=plan.scenario.ready,
        roles=plan.roles,
        scratch=scratch,
        logs=rd.logs_path(),  # through the held descriptor: pip's --log lands in this folder
        cwd=cwd,
        index_spec=index_spec,
        index=index,
        progress=progress,
        sample_hz=plan.sample_hz,
        stall_after=plan.stall_after,
        stall_timeout=plan.stall_timeout,
        trial_timeout_s=plan.trial_timeout_s,
        python=plan.python,
        lifecycle=plan.scenario.lifecycle,
        cache_mode=plan.cache_mode,
        pack_method=plan.pack_method,
        kind=plan.scenario.kind,
        params=plan.scenario.workload,
        fstypes={name: role.fstype for name, role in meta.roles.items()},
        **run_parts,
    )


def late_facts(rd: RunDir, venv: dict[str, Any]) -> dict[str, Any]:
    """meta.json's changes once the warm-up is done: what the venvs are made of, and the
    facts its first writing did not wait for (``facts.with_late_facts``); {} when none."""
    meta = rd.meta()
    versions, pip_config = facts.with_late_facts(
        {**meta.versions, **({"venv": venv} if venv else {})}, meta.pip_config
    )
    if versions == meta.versions and pip_config == meta.pip_config:
        return {}
    return {"versions": versions, "pip_config": pip_config}


@contextmanager
def warming_up(
    ctx: TrialContext, tmp: Scratch, remove: Callable[[Path, Path], None]
) -> Iterator[dict[str, Any]]:
    """Create one venv, untimed, while the ``with`` block runs (the run's probe), then remove
    it, so the first trial does not pay virtualenv's one-time app-data extraction; the dict
    it yields then holds what the venvs are made of (Python, seeded pip).

    Beside the probe, not after it: the venv is a CPU-bound process on tmp, the probe a few
    small-file loops (mostly on the target) and a sequential write; on 2 cores they overlap
    (0.4 s saved of the run's set-up), and only the first trial's prediction reads the probe
    before the run's own trials replace its fast part."""
    found: dict[str, Any] = {}
    if not kinds.kind(ctx.kind).installs:  # no venvs to make: nothing to warm up
        yield found
        return
    d = tmp.trial_dir("warm-up")
    child = subprocess.Popen(
        installers.venv_command(d / "venv", ctx.python),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield found
        try:
            child.wait(timeout=600)
        except subprocess.TimeoutExpired:
            pass
        else:
            found.update(installers.venv_contents(d / "venv") or {})
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        remove(d, tmp.root)


__all__ = [
    "claim_scratch",
    "run_folder",
    "late_facts",
    "lock_target",
    "run_meta",
    "start_index",
    "trial_context",
    "warming_up",
]
