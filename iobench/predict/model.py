"""Predict a config's time-to-ready, per phase, from a probe of each folder it uses.

The formula (docs/prediction.md has the why, the inputs and the measured error):

    T(phase) = F(phase)
             + Σ_role Σ_op  N(phase, role, op) · k · (c_op(where role lives) − c_op(fast))⁺
             + Σ_role  k_b · [ W(phase, role) · (1/w(where) − 1/w(fast))⁺ + R(phase, role) · (1/r(where) − 1/r(fast))⁺ ]

- ``F``: the phase's wall time with every role on tmpfs (the fast role), measured per
  installer, profile and cache state (``iobench/predict/opmix.toml``; another profile's are
  scaled like its operations), or passed in from a run's own all-on-tmp trials;
- ``N``, ``W``, ``R``: operations and bytes written/read per phase and role, counted by
  tracing one install (:mod:`iobench.predict.opmix`), same file;
- ``c_op``: milliseconds per operation from :mod:`iobench.predict.probe` (create, stat, stat of a
  missing name, cold open+read, chmod, rename, unlink, mkdir, fsync p50), ``w``/``r``:
  its write and cold-read MB/s; ``fast``: the same probe of the tmpfs the fast times were
  measured on (recorded with them), so the fast time is not paid twice;
- ``k``: how the phase scales from the traced profile to the one predicted — 1 for the
  venv, wheels for the download, installed files for install, compile and import;
  ``k_b``: installed bytes.
"""

from __future__ import annotations

import copy
import functools
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iobench.errors import UsageError
from iobench.predict.opmix import OPS
from iobench.predict.size import Size, import_mix, own_import, scales, size_of
from iobench.rundir.records import PHASES
from iobench.wheels.profile import load_profile

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]  # not in every lint venv

OPMIX_FILE = Path(__file__).parent / "opmix.toml"
#: how long a client trusts cached attributes: libfuse's and the lab's default (NFS: acregmin 3 s)
ATTR_CACHE_S = 1.0
#: a measured config gives F only when the model's storage part is at most this share of it
MAX_REFERENCE_STORAGE = 0.5
_ITERATIONS = 6


@dataclass(frozen=True)
class Costs:
    """What one folder charges: ms per operation and MB/s (None: not measured)."""

    ms: dict[str, float]
    write_mbps: float | None = None
    read_mbps: float | None = None

    @classmethod
    def from_probe(cls, probe: Any) -> Costs:
        """From a :class:`iobench.predict.probe.ProbeResult` or its JSON form (``result_to_dict``)."""
        if isinstance(probe, dict):
            ms = {
                op: float(v["ms_each"])
                for op in OPS
                if op != "fsync" and isinstance(v := probe.get(op), dict) and v.get("count")
            }
            if isinstance(f := probe.get("fsync"), dict) and f.get("count"):
                ms["fsync"] = float(f["p50_ms"])
            w, r = probe.get("write") or {}, probe.get("read") or {}
            return cls(ms, w.get("mean_mbps"), r.get("mbps"))
        ms = {op: v for op in OPS if (v := probe.ms(op)) is not None}
        return cls(ms, probe.write.mean_mbps if probe.write else None, probe.read_mbps)


@dataclass(frozen=True)
class Prediction:
    """Predicted seconds per phase of one config, and their sum (time-to-ready)."""

    config: str
    phases: dict[str, float]
    storage_s: dict[str, float] = field(default_factory=dict)  # the storage part of each phase

    @property
    def total_s(self) -> float:
        return sum(self.phases.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "predicted_s": round(self.total_s, 3),
            "phases": {p: round(v, 3) for p, v in self.phases.items()},
            "storage_s": {p: round(v, 3) for p, v in self.storage_s.items()},
        }


@functools.lru_cache(maxsize=8)
def _toml_file(path: Path, stamp: tuple[int, int]) -> dict[str, Any]:
    """The parsed file, once per version of it (``stamp``: mtime and size): a run's
    predictions read it twice per trial and config, ~5 ms of TOML parsing each time."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{path}: cannot be read as TOML ({exc})") from None


def read_toml(path: Path) -> dict[str, Any]:
    """One of the model's data files (``opmix.toml``, ``lifecycle.toml``), parsed once per
    version of it; not to be changed by the caller."""
    try:
        st = path.stat()
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read as TOML ({exc})") from None
    return _toml_file(path, (st.st_mtime_ns, st.st_size))


def load_opmix(installer: str = "pip", path: Path = OPMIX_FILE) -> dict[str, Any]:
    """The traced operation mix and fast times of ``installer`` (a copy: callers may change it)."""
    data = read_toml(path)
    if installer not in data:
        raise UsageError(
            f"{path}: no operation mix for installer '{installer}' (has: {', '.join(sorted(data))})"
        )
    return copy.deepcopy(data[installer])


def fast_costs(opmix: dict[str, Any]) -> Costs:
    """The costs of the tmpfs the fast times of ``opmix`` were measured on."""
    fc = opmix["fast_costs"]
    return Costs(
        {op: float(v) for op, v in fc.items() if op in OPS},
        fc.get("write_mbps"),
        fc.get("read_mbps"),
    )


def _excess_ms(op: str, where: Costs, fast: Costs) -> float:
    """What one ``op`` costs in ``where`` over the fast folder, in ms (0 when not probed)."""
    slow = where.ms.get(op)
    base = fast.ms.get(op, 0.0)
    return max(0.0, slow - base) if slow is not None else 0.0


def _excess_s_per_mb(where: float | None, fast: float | None) -> float:
    """Seconds per MB moved at ``where`` MB/s over the fast folder's (0 when not probed)."""
    if not where or where <= 0:
        return 0.0
    return max(0.0, 1.0 / where - (1.0 / fast if fast else 0.0))


def stats_sent(mix: dict[str, Any], phase_s: float | None, k: float, attr_cache_s: float) -> float:
    """Stats of one role that reach the server in a phase lasting ``phase_s``: read off the
    traced stat curve at (phase length per traced install) / attribute-cache time,
    log-linearly between its points; once per path and phase when there is no curve."""
    curve = mix.get("stat_curve")
    if k <= 0:  # nothing of it installed (a layered venv over an image holding it all)
        return 0.0
    if not curve or phase_s is None or attr_cache_s <= 0:
        return float(mix.get("stat", 0)) * k
    x = max(phase_s / k / attr_cache_s, 1e-9)
    pts = [(float(r), float(n)) for r, n in curve]
    if x <= pts[0][0]:
        return pts[0][1] * k
    for (x0, n0), (x1, n1) in zip(pts, pts[1:], strict=False):
        if x <= x1:
            f = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
            return (n0 + f * (n1 - n0)) * k
    return pts[-1][1] * k


def storage_seconds(
    mix: dict[str, Any],
    where: Costs,
    fast: Costs,
    k: float,
    k_b: float,
    phase_s: float | None = None,
    attr_cache_s: float = 1.0,
) -> float:
    """Extra seconds one role's operations and bytes cost in ``where`` over the fast folder,
    in a phase lasting ``phase_s`` (which decides how many stats the client cache answers)."""
    ops = sum(float(mix.get(op, 0)) * _excess_ms(op, where, fast) for op in OPS if op != "stat") * k
    ops += stats_sent(mix, phase_s, k, attr_cache_s) * _excess_ms("stat", where, fast)
    mb_w = float(mix.get("bytes_written", 0)) / 1e6
    mb_r = float(mix.get("bytes_read", 0)) / 1e6
    data = mb_w * _excess_s_per_mb(where.write_mbps, fast.write_mbps) + mb_r * _excess_s_per_mb(
        where.read_mbps, fast.read_mbps
    )
    return ops / 1000.0 + data * k_b


def fast_phases(
    opmix: dict[str, Any], state: str, size: Size, traced: Size, cpu_s: float | None = None
) -> dict[str, float]:
    """The all-on-tmpfs phase times: measured for this profile, else the traced one's scaled;
    times this machine's :func:`iobench.predict.probe.cpu_seconds` over the one recorded with them."""
    measured = opmix["fast"].get(size.name, {}).get(state)
    if measured:
        return {p: float(v) * _cpu(opmix, size.name, cpu_s) for p, v in measured.items()}
    base = opmix["fast"][traced.name][state]
    cpu = _cpu(opmix, traced.name, cpu_s)
    out = {p: float(base.get(p, 0.0)) * scales(p, size, traced)[0] * cpu for p in PHASES}
    whole = opmix["fast"].get(size.part_of, {}).get(state) if size.part_of else None
    if whole:  # a part's ready check: its share of the whole profile's own
        out["import"] = (
            float(whole.get("import", 0.0)) * size.share * _cpu(opmix, size.part_of, cpu_s)
        )
    return out


def _cpu(opmix: dict[str, Any], source: str, cpu_s: float | None) -> float:
    """This machine's CPU sample over the one recorded with ``source``'s fast times."""
    then = opmix.get("fast_cpu_s", {}).get(source)
    return cpu_s / float(then) if cpu_s and then else 1.0


def predict_config(
    name: str,
    roles: dict[str, Costs | None],
    cache_state: str,
    opmix: dict[str, Any],
    size: Size | None = None,
    fast_s: dict[str, float] | None = None,
    attr_cache_s: float = ATTR_CACHE_S,
    cpu_s: float | None = None,
) -> Prediction:
    """Predict one config: ``roles`` maps venv/tmpdir/cache to the costs of its folder
    (None for a cache that is off); ``size``: the profile to install (default: the traced
    one); ``fast_s`` overrides the recorded all-on-tmpfs phase times."""
    state = "warm" if cache_state == "warm" else "cold"
    traced = Size.traced(opmix)
    size = size or traced
    fast = fast_costs(opmix)
    base = fast_s or fast_phases(opmix, state, size, traced, cpu_s)
    phases: dict[str, float] = {}
    storage: dict[str, float] = {}
    own = own_import(opmix, size)
    for phase in PHASES:
        mixes = [
            (m, w, *scales(phase, size, traced, r))
            for r, w in roles.items()
            if w is not None and (m := opmix["ops"][state].get(phase, {}).get(r))
        ]
        if phase == "import" and own and (venv := roles.get("venv")) is not None:
            mixes = [(own[0], venv, own[1], own[1])]
        fast_s_phase = float(base.get(phase, 0.0))
        length: float | None = None
        for _ in range(_ITERATIONS):  # the phase's length decides how many stats are cached
            extra = sum(
                storage_seconds(m, w, fast, k, k_b, length, attr_cache_s) for m, w, k, k_b in mixes
            )
            length = fast_s_phase + extra
        storage[phase] = extra
        phases[phase] = fast_s_phase + extra
    return Prediction(name, phases, storage)


def predict_scenario(
    scenario: Any,
    folders: dict[str, Costs],
    profile: Any | None = None,
    fast_s: dict[str, dict[str, float]] | None = None,
    cpu_s: float | None = None,
) -> list[Prediction]:
    """Predict every config of a :class:`iobench.scenario.load.Scenario`; ``folders`` maps role
    names (target, tmp, ...) to costs. ``profile``: the wheel profile to scale to (default:
    the scenario's own, when it has one). ``fast_s``: measured all-on-tmp phase times per
    cache state ("cold"/"warm"), e.g. from a run's venv-on-tmp trials; else the recorded
    ones scaled by ``cpu_s`` (:func:`iobench.predict.probe.cpu_seconds` now)."""
    if profile is None and getattr(scenario, "wheels", None):
        profile = load_profile(scenario.wheels)
    out = []
    for cfg in scenario.configs:
        state = _state(cfg)
        size = size_of(cfg, scenario, profile) if profile else None
        pred = predict_config(
            cfg.name,
            _role_costs(cfg, folders),
            cfg.cache_state,
            load_opmix(cfg.installer),
            size,
            (fast_s or {}).get(state),
            cpu_s=cpu_s,
        )
        out.append(pred)
    return out


def unpredictable(cfg: Any, scenario: Any) -> str | None:
    """Why ``cfg`` of ``scenario`` cannot be predicted (its row's ``predicted_s`` stays
    empty rather than holding a guess), or None: only what was traced is predicted."""
    if not getattr(scenario, "wheels", None):
        return "no wheel profile: the size of what is installed is unknown"
    if cfg.installer != "pip":
        return f"installer {cfg.installer} is not traced (iobench/predict/opmix.toml)"
    if cfg.venv_creator != "virtualenv":
        return f"venv creator {cfg.venv_creator} is not traced"
    return None


def _role_costs(cfg: Any, folders: dict[str, Costs]) -> dict[str, Costs | None]:
    return {
        "venv": folders[cfg.venv],
        "tmpdir": folders[cfg.tmpdir],
        "cache": folders[cfg.cache] if cfg.cache != "off" else None,
    }


def folders_of(probes: dict[str, Any]) -> dict[str, Costs]:
    """Each role's costs from a probe document (``probe_roles``): the roles that were probed."""
    by_path = {p["path"]: Costs.from_probe(p) for p in probes.get("paths", [])}
    return {r: by_path[p] for r, p in probes.get("roles", {}).items() if p in by_path}


def _state(cfg: Any) -> str:
    return "warm" if cfg.cache_state == "warm" else "cold"


def _references(scenario: Any, folders: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """Per cache state, the config whose storage part (at the recorded ``F``) is smallest —
    the same reference all run long — and the scenario's wheel profile (None: none to rank)."""
    profile = None
    refs: dict[str, tuple[float, Any]] = {}  # state -> (storage part, config)
    for cfg in scenario.configs:
        if unpredictable(cfg, scenario) or cfg.compile != "on" or not cfg.roles() <= set(folders):
            continue
        if profile is None:
            profile = load_profile(scenario.wheels)
        pred = predict_config(
            cfg.name, _role_costs(cfg, folders), cfg.cache_state, load_opmix(cfg.installer),
            Size.of(profile),
        )  # fmt: skip
        storage, state = sum(pred.storage_s.values()), _state(cfg)
        if state not in refs or storage < refs[state][0]:
            refs[state] = (storage, cfg)
    return {state: cfg for state, (_, cfg) in refs.items()}, profile


def fast_from_trials(
    scenario: Any, probes: dict[str, Any], measured: dict[str, dict[str, float]]
) -> dict[str, dict[str, float]]:
    """``F`` per cache state from a run's own trials: the reference config's phase times less
    the storage part the model gives its folders (so a config on a tmp that is not tmpfs
    still yields ``F``). ``measured``: per config, the median seconds of each phase of its
    latest ok trials (pip, virtualenv, bytecode on). Per state, the reference is the
    scenario's config whose storage part is smallest (the one the model says least about;
    on a pod the all-on-tmp config), measured or not: only its trials give ``F``, and only
    while its storage part is at most ``MAX_REFERENCE_STORAGE`` of its time. A state whose
    reference has not run gets the other state's ``F`` at the recorded ratio between the
    two; with neither, the caller keeps the recorded ``F`` scaled by the CPU sample.

    Why a run's trial: ``F`` recorded once on another moment's load scales with the machine
    only through a CPU job's time, which follows a shared machine's load badly
    (docs/prediction.md); a trial of this run measured it minutes ago, under the load the
    next trial will see. Why only the reference's: any storage time the model misses lands
    in ``F``. On this VM's ext4 the probe found tmpfs-like costs while naive took 2.9-5.1 s
    against venv-on-tmp's 1.9 s, and ``F`` from naive's first trial predicted venv-on-tmp's
    at +87-98 %."""
    folders = folders_of(probes)
    refs, profile = _references(scenario, folders)
    out: dict[str, dict[str, float]] = {}
    for state, cfg in refs.items():
        phases = measured.get(cfg.name)
        if not phases or any(phases.get(p) is None for p in PHASES):
            continue  # the reference has not run yet
        pred = predict_config(
            cfg.name, _role_costs(cfg, folders), cfg.cache_state, load_opmix(cfg.installer),
            Size.of(profile), fast_s=phases,
        )  # fmt: skip
        if sum(pred.storage_s.values()) > MAX_REFERENCE_STORAGE * sum(phases.values()):
            continue  # F would be a small difference of two large numbers: 5 % off in the
            # storage part of a trial that is 90 % storage is 50 % off in F (seen at 2 ms)
        out[state] = {
            p: max(phases[p] - pred.storage_s.get(p, 0.0), 0.05 * phases[p]) for p in PHASES
        }
    if len(out) == 1 and profile is not None:  # the other state: recorded F, same ratio
        (have, fast), other = next(iter(out.items())), "warm" if "cold" in out else "cold"
        opmix = load_opmix("pip")
        traced = Size.traced(opmix)
        rec_have = fast_phases(opmix, have, Size.of(profile), traced)
        rec_other = fast_phases(opmix, other, Size.of(profile), traced)
        ratio = sum(fast.values()) / max(sum(rec_have.values()), 1e-9)
        out[other] = {p: v * ratio for p, v in rec_other.items()}
    return out


def predicted_by_config(
    scenario: Any,
    probes: dict[str, Any],
    fast_s: dict[str, dict[str, float]] | None = None,
    *,
    hold_back_when_busy: bool = False,
) -> dict[str, float | None]:
    """Every config's predicted time-to-ready from a run's probe document (``probe_roles``);
    None for the configs :func:`unpredictable` names and where a role was not probed.
    ``fast_s``: ``F`` per cache state from the run's own trials (:func:`fast_from_trials`);
    else the recorded ``F`` scaled by the probe's ``cpu_s``. ``hold_back_when_busy`` (a
    run's own figures): None, too, for a mostly-CPU config while :func:`cpu_contended`."""
    folders = folders_of(probes)
    profile = None
    out: dict[str, float | None] = {}
    for cfg in scenario.configs:
        if unpredictable(cfg, scenario) or not cfg.roles() <= set(folders):
            out[cfg.name] = None
            continue
        if profile is None:
            profile = load_profile(scenario.wheels)
        pred = predict_config(
            cfg.name, _role_costs(cfg, folders), cfg.cache_state, load_opmix(cfg.installer),
            size_of(cfg, scenario, profile), (fast_s or {}).get(_state(cfg)),
            cpu_s=probes.get("cpu_s"),
        )  # fmt: skip
        skip = pred.phases.get("compile", 0.0) if cfg.compile != "on" else 0.0
        total = pred.total_s - skip
        mostly_cpu = sum(pred.storage_s.values()) < 0.5 * total
        measured = (fast_s or {}).get(_state(cfg))
        if hold_back_when_busy and mostly_cpu and not measured and cpu_contended(probes):
            out[cfg.name] = None  # its time is the CPU's, and the CPU's speed is not known
            continue
        out[cfg.name] = total
    return out


#: other processes' average use of the CPUs during the calibration above which its time is a
#: share of a busy machine, not the machine's speed (docs/prediction.md)
CONTENDED_CPUS = 0.5


def cpu_contended(probes: dict[str, Any]) -> float | None:
    """The CPUs other processes used while the probe timed this machine's CPU, when that is
    ``CONTENDED_CPUS`` or more: the recorded fast part scaled by that time overstates an
    install (two burners: the job 1.6x slower, a smoke install 1.03-1.11x), so the configs whose time
    is mostly CPU are not predicted until the run's own trials give their fast part."""
    others = probes.get("cpu_others")
    if isinstance(others, (int, float)) and others >= CONTENDED_CPUS:
        return float(others)
    return None


def predicted_s(scenario: Any, config_name: str, probes: dict[str, Any]) -> float | None:
    """One config's predicted time-to-ready from a run's probe document (``probe_roles``):
    the figure recorded as ``predicted_s`` beside ``time_to_ready_s``; None when the config
    cannot be predicted (:func:`unpredictable`)."""
    found = predicted_by_config(scenario, probes)
    if config_name not in found:
        raise UsageError(f"no config '{config_name}' in scenario '{scenario.name}'")
    return found[config_name]


__all__ = ["ATTR_CACHE_S", "CONTENDED_CPUS", "Costs", "OPMIX_FILE", "Prediction", "Size", "cpu_contended", "fast_costs", "fast_from_trials", "fast_phases", "folders_of", "import_mix", "load_opmix", "own_import", "predict_config", "predict_scenario", "predicted_by_config", "predicted_s", "read_toml", "scales", "size_of", "stats_sent", "storage_seconds", "unpredictable"]  # fmt: skip
