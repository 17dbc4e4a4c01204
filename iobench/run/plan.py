"""Everything `iobench run` checks before it creates anything, giving a typed RunPlan.

Why: a run that fails on its fifth trial because uv is missing, or after creating a run
folder because two options contradict, wastes the user's time and leaves things behind
(hyperfine's rule: validate every option before running). So every check lives here and
runs first: option combinations, the scenario, the roles (with their defaults), where the
results go, the installers and tools the configs need, free space, the package index, and
whether a resumed run still matches. The runner trusts the plan and checks nothing.

The roles' defaults are chosen in ``run/roles.py`` and said in the plan's ``notes``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import os
import secrets
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iobench import redact
from iobench.cost.idle import CostOptions
from iobench.errors import IOBenchError, UsageError
from iobench.fleet.comm import INSTALL_LINE
from iobench.fleet.volume import default_worker_id
from iobench.run import guard, space
from iobench.run import roles as run_roles
from iobench.run.earlystop import MIN_GIVE_UP
from iobench.run.resume import ResumeState, resume_state
from iobench.rundir.folder import RunDir
from iobench.rundir.meta import RunMeta
from iobench.rundir.records import safe_name_problem
from iobench.scenario import axes
from iobench.scenario.load import Scenario, load_scenario
from iobench.scenario.vocab import MAX_REPEATS
from iobench.system.removal import QUIET_S
from iobench.trial import installers
from iobench.trial.index import check_mbit
from iobench.trial.kinds import check_here
from iobench.trial.strategies import choose_method

#: the trial time limit's default: this much, plus TRIAL_S_PER_MB per MB the scenario installs
TRIAL_BASE_S = 600.0
TRIAL_S_PER_MB = 2.0
#: the longest time any option may give (about 11 days): larger numbers are typos
MAX_SECONDS = 1e6


@dataclass
class RunRequest:
    """What `iobench run` was asked, as its command line gave it (``cli/run.py`` fills it
    from argparse; nothing below the command line sees argparse)."""

    scenario: str | None = None
    target: Path | None = None
    tmp: Path | None = None
    path: list[tuple[str, Path]] = field(default_factory=list)  # --path NAME=DIR
    trust_owner: list[str] = field(default_factory=list)  # --trust-owner USER
    results: Path | None = None
    configs: str | None = None
    package: list[str] = field(default_factory=list)
    requirements: Path | None = None
    installer: str | None = None
    venv_creator: str | None = None
    matrix: list[tuple[str, list[str]]] = field(default_factory=list)
    repeats: int | None = None  # with repeats_auto: the most rounds (--repeats auto[:N])
    repeats_auto: bool = False  # --repeats auto[:N]: stop repeating once settled
    give_up_after: float | None = None
    trial_timeout: float | None = None
    sample_hz: float = 10.0
    stall_after: float = 30.0
    stall_timeout: float | None = None
    hung_after: float | None = None
    lock_wait: float = 0.0
    label: str = ""
    wheelhouse: Path | None = None
    index_url: str | None = None
    extra_index_url: list[str] = field(default_factory=list)
    index_mbit: float | None = None
    no_reuse_downloads: bool = False  # every cold trial downloads from the real index
    python: str | None = None
    resume: Path | None = None
    order_seed: int | None = None
    cache_mode: str | None = None
    pack_method: str | None = None
    no_probe: bool = False
    fleet: bool = False  # --fleet: every MPI rank runs this plan (docs/fleet.md)
    ranks: list[int] = field(default_factory=list)  # --ranks 1,2,4: fleet sizes swept
    stagger: float = 0.0  # --stagger S: rank k starts k x S after the agreed start
    fleet_dir: Path | None = None  # --fleet-dir DIR: this worker's run folder under DIR/workers
    worker_id: str | None = None  # --worker-id: its name there (default <host>-<pid>)
    cost: CostOptions | None = None
    command: list[str] = field(default_factory=list)


@dataclass
class RunPlan:
    """A validated `iobench run`: what to run, where, and the decisions made on the way."""

    scenario: Scenario
    roles: dict[str, Path]
    results_root: Path
    repeats: int
    trial_timeout_s: float
    sample_hz: float = 10.0
    stall_after: float = 30.0
    stall_timeout: float | None = None
    label: str = ""
    wheelhouse: Path | None = None
    index_url: str | None = None
    extra_index_urls: list[str] = field(default_factory=list)  # --extra-index-url, beside the index
    index_mbit: float | None = None
    reuse_downloads: bool = True  # real packages: downloaded once, served on loopback
    python: str | None = None  # interpreter for the venvs (None: the one running iobench)
    resume: Path | None = None
    resume_meta: RunMeta | None = None
    lock_wait: float = 0.0
    hung_after_s: float = QUIET_S  # a removal without progress this long: the volume hung
    order_seed: int = 0
    same_storage: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # said at the start of the run
    command: list[str] = field(default_factory=list)
    cost: Any = None  # the report's cost options (iobench.cost.idle.CostOptions) or None
    cache_mode: str = "cold"  # restarts (lifecycle scenarios): iobench.trial.coldcache.MODES
    pack_method: str = "auto"  # packed-venv's archive (vocab.PACK_METHODS), or several: M1,M2
    probe: bool = True  # probe the roles at the start, for predicted_s (iobench.run.policy)
    give_up_after: float | None = None  # end a trial past K x the best median (docs/early-stop.md)
    trusted_owners: list[str] = field(default_factory=list)  # --trust-owner: roles they own
    repeats_auto: bool = False  # stop repeating once settled; ``repeats`` is then the maximum
    fleet: bool = False  # every MPI rank runs this plan (iobench.run.fleet)
    fleet_sizes: list[int] = field(default_factory=list)  # --ranks; empty: every rank at once
    stagger_s: float = 0.0
    fleet_dir: Path | None = None  # a worker of a --fleet-dir: its folder's parent's parent
    worker_id: str = ""

    @property
    def synthetic(self) -> bool:
        """The scenario's synthetic wheels, generated and served on loopback."""
        return self.wheelhouse is None and bool(self.scenario.wheels and not self.index_url)

    @property
    def downloads_once(self) -> bool:
        """Real packages from a real index, downloaded once at the start and served on
        loopback to every trial (iobench.trial.downloads; --no-reuse-downloads: not)."""
        return (
            self.reuse_downloads
            and self.scenario.installs
            and self.wheelhouse is None
            and not self.synthetic
        )

    @property
    def local_index(self) -> bool:
        """The trials install from iobench's loopback index (a wheelhouse, synthetic wheels,
        or the packages downloaded once)."""
        return self.wheelhouse is not None or self.synthetic or self.downloads_once


def check(request: RunRequest) -> RunPlan:
    """Validate `iobench run`'s arguments and the machine; raise one IOBenchError line."""
    req = dataclasses.replace(request)  # the checks normalise a few values in their copy
    auto = _repeats_auto(req)
    _check_options(req)
    state = resume_state(RunDir.open(req.resume)) if req.resume is not None else None
    meta = state.meta if state is not None else None
    auto = auto or (meta is not None and req.repeats is None and bool(meta.repeats_auto))
    scenario, repeats = _scenario(req, state)
    # a scenario that says repeats = "auto:N" repeats until settled unless --repeats says more
    auto = auto or (state is None and req.repeats is None and scenario.repeats_auto)
    _check_size(scenario, repeats)
    owners, named = guard.preflight(req, scenario.workload, meta)  # before anything is made
    results = (req.results or Path("results")).resolve()  # phases run elsewhere: absolute
    roles, notes = run_roles.resolve(req.target, req.tmp, req.path, state, scenario)
    plan = RunPlan(
        scenario=scenario,
        roles=roles,
        results_root=results,
        repeats=repeats,
        trial_timeout_s=req.trial_timeout or default_trial_timeout(scenario),
        sample_hz=req.sample_hz,
        stall_after=req.stall_after,
        stall_timeout=req.stall_timeout,
        label=req.label,
        wheelhouse=req.wheelhouse,
        index_url=req.index_url,
        index_mbit=req.index_mbit,
        # a resumed run keeps where its trials installed from (a remote one stays remote)
        reuse_downloads=not req.no_reuse_downloads
        and not (meta is not None and meta.index_kind == "remote"),
        python=req.python,
        resume=req.resume.resolve() if req.resume is not None else None,
        resume_meta=meta,
        lock_wait=req.lock_wait,
        hung_after_s=req.hung_after or QUIET_S,
        order_seed=_order_seed(meta, req.order_seed),
        notes=notes + named,
        command=req.command or ["iobench", *sys.argv[1:]],
        cost=req.cost,
        # a resume keeps the run's unless told otherwise (and then refuses: _check_resume)
        cache_mode=req.cache_mode or (meta.cache_mode if meta else "cold"),
        pack_method=req.pack_method or (meta.pack_method if meta else "auto"),
        probe=not req.no_probe and scenario.installs,  # predictions are of installs
        give_up_after=req.give_up_after,
        repeats_auto=auto,
        trusted_owners=owners,
        **_fleet(req, meta),
    )
    if plan.fleet or plan.fleet_dir:
        plan.probe = False  # one client's model: a fleet's workers probe each other's load
        plan.notes.append("fleet run: no probe and no trial predictions (a fleet's: iobench fleet)")
    check_machine(plan, req.extra_index_url)
    plan.same_storage = run_roles.same_storage(scenario, roles)
    plan.notes += [run_roles.same_storage_note(group, roles) for group in plan.same_storage]
    plan.notes += run_roles.results_note(plan.results_root, roles["target"])
    plan.notes += run_roles.recent_deletions(plan.results_root, roles)
    return plan


def _check_size(scenario: Scenario, repeats: int) -> None:
    if len(scenario.configs) * repeats > MAX_TRIALS:
        raise UsageError(
            f"{len(scenario.configs):,} configs x {repeats:,} repeats = "
            f"{len(scenario.configs) * repeats:,} trials: at most {MAX_TRIALS:,} in one run "
            "(pick configs with --configs, or fewer --repeats)"
        )


def check_machine(plan: RunPlan, extra_index_urls: list[str]) -> None:
    """What the plan needs of this machine: its roles, the workload's settings, the tools,
    the package indexes, free space, and (a resume) that nothing the run depends on changed."""
    scenario, roles = plan.scenario, plan.roles
    run_roles.check_roles_used(scenario, roles)
    run_roles.check_results_place(plan.results_root, roles)
    configs = [c.name for c in scenario.configs]
    check_here(scenario.kind, scenario.workload, configs, f"{scenario.source}: workload")
    if scenario.installs:
        check_tools(scenario, plan.python)
    packing = [m for c in scenario.configs if (m := c.packs(plan.pack_method))]
    for method in dict.fromkeys(packing):  # one that cannot run here fails before anything runs
        choose_method(method)
    plan.extra_index_urls = [axes.extra_index_url(u) for u in extra_index_urls]
    check_index(plan)
    if plan.resume_meta is None:
        space.check(scenario, roles)
    else:
        check_resume(plan.resume_meta, plan)


def default_trial_timeout(scenario: Scenario) -> float:
    """A generous wall-clock limit for one trial: 10 minutes plus 2 s per MB installed."""
    return TRIAL_BASE_S + TRIAL_S_PER_MB * (scenario.size_mb or space.DEFAULT_SIZE_MB)


# ---------------------------------------------------------------- options
#: trials in one run at most: 10,000 trials of even 10 s each are more than a day
MAX_TRIALS = 10_000


def _check_options(req: RunRequest) -> None:
    if req.wheelhouse is not None and not req.wheelhouse.is_dir():
        raise UsageError(f"--wheelhouse: {req.wheelhouse} is not a folder")
    if req.sample_hz > 100:
        raise UsageError(
            f"--sample-hz {req.sample_hz:g}: at most 100 (each tick reads /proc; more measures the sampler)"
        )
    if req.sample_hz < 0.1:
        raise UsageError(
            f"--sample-hz {req.sample_hz:g}: at least 0.1 (slower sampling misses whole phases)"
        )
    if req.repeats is not None and req.repeats > MAX_REPEATS:
        raise UsageError(f"--repeats {req.repeats}: at most {MAX_REPEATS}")
    hung = req.hung_after
    if hung is not None and not 1 <= hung <= MAX_SECONDS:
        raise UsageError(f"--hung-after {hung:g}: between 1 and {MAX_SECONDS:g} s")
    for flag in ("stall_after", "stall_timeout", "trial_timeout", "lock_wait"):
        value = getattr(req, flag)
        if value is not None and math.isfinite(value) and value > MAX_SECONDS:
            raise UsageError(f"--{flag.replace('_', '-')} {value:g}: at most {MAX_SECONDS:g} s")
    if not math.isfinite(req.lock_wait) or req.lock_wait < 0:
        raise UsageError(f"--lock-wait must be a number of seconds >= 0, not {req.lock_wait}")
    if req.python is not None:
        found = shutil.which(req.python)
        if found is None:
            raise UsageError(f"--python {req.python}: no such interpreter")
        req.python = found
    if req.resume is not None and req.scenario is not None:
        raise UsageError("--resume continues a run with its own scenario; drop --scenario")
    if req.index_url and req.wheelhouse:
        raise UsageError("give --wheelhouse or --index-url, not both")
    if req.pack_method is not None:  # one method, or several compared as configs (axes)
        req.pack_method = ",".join(axes.pack_methods(req.pack_method))


def _fleet(req: RunRequest, meta: RunMeta | None) -> dict[str, Any]:
    """The plan's fleet fields; a resumed fleet run keeps its own (docs/fleet.md)."""
    was = (meta.fleet or {}) if meta is not None else {}
    fleet = req.fleet or was.get("engine") == "mpi"
    if req.ranks and not fleet:
        raise UsageError("--ranks sweeps a fleet's size: give --fleet too, under mpirun")
    if req.stagger and not fleet:
        raise UsageError("--stagger spreads a fleet's starts: give --fleet too, under mpirun")
    if not math.isfinite(req.stagger) or not 0 <= req.stagger <= MAX_SECONDS:
        raise UsageError(f"--stagger {req.stagger:g}: seconds between 0 and {MAX_SECONDS:g}")
    if fleet and req.fleet_dir is not None:
        raise UsageError("--fleet (MPI ranks) or --fleet-dir (workers on their own), not both")
    if req.worker_id is not None and req.fleet_dir is None:
        raise UsageError("--worker-id names a worker of a --fleet-dir: give --fleet-dir too")
    if fleet and importlib.util.find_spec("mpi4py") is None:
        raise UsageError(f"--fleet needs mpi4py, which this Python lacks: {INSTALL_LINE}")
    if fleet and (req.repeats_auto or (meta is not None and meta.repeats_auto)):
        raise UsageError("--fleet runs fixed repeats: every rank must run the same trials")
    worker = ""
    if req.fleet_dir is not None:
        if req.resume is not None:
            raise UsageError("--resume a --fleet-dir worker by its own folder, without --fleet-dir")
        if not req.fleet_dir.is_dir():
            raise UsageError(f"--fleet-dir: {req.fleet_dir} is not a folder")
        worker = req.worker_id or default_worker_id()
        if problem := safe_name_problem(worker):
            raise UsageError(f"--worker-id {worker!r}: {problem}")
    return {
        "fleet": fleet,
        "fleet_sizes": sorted(set(req.ranks)) or list(was.get("sizes") or []),
        "stagger_s": req.stagger or float(was.get("stagger_s") or 0.0),
        "fleet_dir": req.fleet_dir.resolve() if req.fleet_dir is not None else None,
        "worker_id": worker,
    }


def _repeats_auto(req: RunRequest) -> bool:
    """``--repeats auto[:N]``: N rounds at most plus the rule of docs/early-stop.md (a resumed
    auto run stays one); ``--give-up-after`` checked."""
    k = req.give_up_after
    if k is not None and not (math.isfinite(k) and k >= MIN_GIVE_UP):
        raise UsageError(
            f"--give-up-after {k:g}: at least {MIN_GIVE_UP:g} (less ends trials by noise)"
        )
    return req.repeats_auto


def _scenario(req: RunRequest, state: ResumeState | None) -> tuple[Scenario, int]:
    """The scenario (a resumed run's own, or --scenario) with --package and --configs applied."""
    if state is not None:
        scenario = state.scenario
        repeats = req.repeats or state.repeats
    else:
        scenario = load_scenario(req.scenario or "smoke")
        repeats = req.repeats or scenario.repeats
        if not req.configs:  # the scenario's default set, before the axes rename its configs
            scenario = scenario.by_default()
        if scenario.wheels and not req.package and (req.index_url or req.wheelhouse):
            # the synthetic names (smoke-core, ...) must never be fetched from a real index
            raise UsageError(
                f"scenario {scenario.name} installs synthetic wheels served by iobench; "
                "--index-url and --wheelhouse need real packages (a scenario such as torch, or --package REQ)"
            )
    scenario = axes.apply(  # --requirements, --installer, --venv-creator, --matrix, --pack-method
        scenario,  # a resumed run's configs hold their pack methods already (its meta.json's)
        axes.axes_from(
            req.installer, req.venv_creator, req.matrix, req.pack_method if state is None else None
        ),
        req.requirements,
        bool(req.package),
        resumed=state is not None,
    )
    if req.package:
        scenario = scenario.with_packages(req.package)
    if req.configs:
        scenario = scenario.select([c.strip() for c in req.configs.split(",") if c.strip()])
    return scenario, repeats


def _order_seed(meta: RunMeta | None, asked: int | None = None) -> int:
    """The seed of the trial order: a resumed run keeps its own, so its plan is the same
    (a run from before the order was shuffled gets a new one); else ``--order-seed``, else
    a random one."""
    if meta is not None and meta.order_seed is not None:
        return meta.order_seed
    if asked is not None:
        if not 0 <= asked < 2**32:
            raise UsageError(f"--order-seed must be in 0 .. {2**32 - 1} (got {asked})")
        return asked
    return secrets.randbits(32)


# ---------------------------------------------------------------- tools, space, index
def check_tools(scenario: Scenario, python: str | None) -> None:
    """The installers and venv creator the configs need are present (before the first trial)."""
    installers.check_tools(scenario.configs, python)


def check_index(plan: RunPlan) -> None:
    """Index options that go together, and a remote index that answers."""
    if plan.index_mbit is not None and not plan.local_index:
        raise UsageError(
            "--index-mbit needs the local index (--wheelhouse, a synthetic scenario, or the "
            "packages downloaded once: drop --no-reuse-downloads)"
        )
    check_mbit(plan.index_mbit)  # finite and in range, before anything is made
    if plan.extra_index_urls and (plan.wheelhouse is not None or plan.synthetic):
        raise UsageError(
            "--extra-index-url goes beside a real index (PyPI or --index-url), not iobench's local one"
        )
    for url in filter(None, [plan.index_url, *plan.extra_index_urls]):
        check_reachable(url)


def check_reachable(url: str) -> None:
    """Fail the run early, once, if the index cannot be reached at all. Any HTTP answer
    (even 401 or 404 at the root) counts as reachable: pip may still work with it.
    Credentials in the URL are sent as Basic auth, never as part of the host."""
    import base64
    import urllib.error
    import urllib.parse
    import urllib.request

    parts = urllib.parse.urlsplit(url)
    headers = {}
    if parts.username is not None:
        token = (
            f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        )
        headers["Authorization"] = "Basic " + base64.b64encode(token.encode()).decode()
        netloc = parts.hostname or ""
        if parts.port:
            netloc += f":{parts.port}"
        url = urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers=headers), timeout=15
        ) as resp:  # noqa: S310
            resp.read(1)
    except urllib.error.HTTPError:
        return
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise IOBenchError(
            f"package index {redact.redact(url)} cannot be reached: {reason}"
        ) from None


# ---------------------------------------------------------------- resume
def _interpreter(path: str | None) -> str | None:
    """One interpreter under its one name: a venv's ``python`` and ``python3`` are links to
    the same program (a run started by the ``iobench`` script records one, ``python -m
    iobench --resume`` the other)."""
    return os.path.realpath(path) if path else path


def check_resume(meta: RunMeta, plan: RunPlan) -> None:
    """Refuse to resume when what the run's trials depend on changed since it started: one
    table of checked keys (as pyperf checks its metadata before runs merge), each with the
    run's value, this plan's, and whether it applies."""
    configs = [c.name for c in plan.scenario.configs]
    lifecycle = plan.scenario.lifecycle
    checked: list[tuple[str, object, object, bool]] = [
        ("scenario/configs", (meta.scenario_name, meta.config_names),
         (plan.scenario.name, configs), True),
        ("roles", {k: str(v) for k, v in meta.role_paths.items()},
         {k: str(Path(v).resolve()) for k, v in plan.roles.items()}, True),
        ("repeats", meta.repeats, plan.repeats, meta.repeats is not None),
        ("packages", list(meta.scenario.get("packages", [])),
         [redact.redact(p) for p in plan.scenario.packages], True),
        ("--python", _interpreter(meta.venv_python), _interpreter(plan.python or sys.executable),
         meta.venv_python is not None),
        ("the package index", meta.index_kind, "local" if plan.local_index else "remote",
         meta.index_kind is not None),
        ("--cache-mode", meta.cache_mode, plan.cache_mode, lifecycle),
        ("--pack-method", meta.pack_method, plan.pack_method, lifecycle),
    ]  # fmt: skip
    for what, was, now, applies in checked:
        if applies and was != now:
            raise UsageError(f"cannot resume {meta.run_id}: {what} changed (was {was}, now {now})")


__all__ = [
    "RunPlan",
    "check",
    "default_trial_timeout",
]
