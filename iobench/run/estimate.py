"""How long a planned run will take, as a range, before it starts (``--dry-run``).

Why: on a pod that bills by the minute, "35 trials" says nothing until it says "about 40 to
75 minutes". Two sources, the better first:

1. **An earlier run here** — the latest run in the results folder of the same scenario on
   the same target folder with a finished trial of every planned config: each config's
   fastest and slowest trial (first start and restart together) times the trials planned,
   and that run's own overhead (run wall over its trials' time) on top.
2. **The model** — a probe of each role (about a second each; what it writes is removed)
   and each config's predicted time-to-ready (:mod:`iobench.predict.model`), with a
   start-up strategy's persist step and restart on top in a lifecycle run
   (:mod:`iobench.predict.lifecycle`), given a range of 0.7 to 2 times the figure: the
   errors docs/prediction.md records run from -34 % (the fast configs, from the probe
   alone) to about +100 % beside a noisy neighbour.

Neither applies (real packages, first run here): the estimate says so and how to get one
(``--repeats 1`` measures each config once). With ``--repeats auto`` the low end counts the
rounds a run settles in at the soonest, the high end every planned trial.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iobench.errors import IOBenchError
from iobench.predict.lifecycle import predict_lifecycle
from iobench.predict.model import Size, folders_of, predicted_by_config, size_of, unpredictable
from iobench.predict.probe import probe_roles
from iobench.rundir.folder import RunDir
from iobench.rundir.meta import overhead_ratio
from iobench.trial.strategies import StrategyError, choose_method
from iobench.wheels.profile import load_profile

#: the model's range around its figure (see the module's docstring)
MODEL_LOW, MODEL_HIGH = 0.7, 2.0
#: a run without a recorded overhead is taken to spend this much besides its trials
DEFAULT_OVERHEAD = 1.15


@dataclass(frozen=True)
class Estimate:
    """A run's wall time, low to high, and where the figures came from."""

    low_s: float
    high_s: float
    source: str
    left_out: int = 0  # planned trials neither source could time

    def line(self) -> str:
        """The dry run's ``time`` line."""
        out = f"time      about {_span(self.low_s, self.high_s)} ({self.source})"
        if self.left_out:
            out += f"; {self.left_out} trial(s) of configs it cannot time are not in it"
        return out


def _duration(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    if s < 2 * 3600:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def _span(low: float, high: float) -> str:
    a, b = _duration(low), _duration(high)
    if a.split()[-1] == b.split()[-1]:  # one unit: "14–35 s"
        return f"{a.split()[0]}–{b}"
    return f"{a} to {b}"


def _counts(configs: Sequence[str], planned: Sequence[str], auto_rounds: int | None) -> tuple[
    dict[str, int], dict[str, int]]:  # fmt: skip
    """Trials per config at the high end (all planned) and the low end (``auto_rounds`` each)."""
    high = {c: sum(1 for p in planned if p == c) for c in configs}
    low = {c: min(n, auto_rounds) if auto_rounds else n for c, n in high.items()}
    return low, high


def _trial_s(row: Any) -> float:
    """A trial's measured time: its first start (with a strategy's persist step, which
    ``first_start_s`` holds), and its restart where it had one."""

    def seconds(name: str) -> float | None:
        v = getattr(row, name, None)
        return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None

    first = seconds("first_start_s")
    return (first if first is not None else seconds("time_to_ready_s") or 0.0) + (
        seconds("restart_s") or 0.0
    )


def from_earlier_run(
    results: Path,
    scenario: Any,
    target: Path,
    planned: Sequence[str],
    auto_rounds: int | None,
) -> Estimate | None:
    """The range from the latest earlier run of this scenario (its name and packages) on this
    target (None: none)."""
    if not results.is_dir():
        return None
    wanted = set(planned)
    for folder in sorted((p for p in results.iterdir() if p.is_dir()), reverse=True):
        try:
            rd = RunDir.open(folder)
            meta = rd.meta()
            role = meta.roles.get("target")
            same = meta.scenario_name == scenario.name and tuple(
                meta.scenario.get("packages") or ()
            ) == tuple(scenario.packages)
            if not same or role is None or role.path != str(target):
                continue
            rows = [r for r in rd.trials(latest_only=True) if r.status == "ok"]
        except (IOBenchError, OSError, ValueError, json.JSONDecodeError):
            continue
        times: dict[str, list[float]] = {}
        for r in rows:
            if r.config in wanted and _trial_s(r) > 0:
                times.setdefault(r.config, []).append(_trial_s(r))
        if set(times) != wanted:
            continue
        low_n, high_n = _counts(sorted(wanted), planned, auto_rounds)
        recorded = overhead_ratio(meta.overhead)
        factor = max(1.0, recorded or DEFAULT_OVERHEAD)
        low = sum(min(times[c]) * n for c, n in low_n.items()) * factor
        high = sum(max(times[c]) * n for c, n in high_n.items()) * factor
        said = f"its overhead {factor:.2f}x" if recorded else f"an overhead of {factor:.2f}x"
        return Estimate(
            low, high, f"from run {meta.run_id}: its fastest and slowest trials, {said}"
        )
    return None


def _pack_method(asked: str) -> str:
    """The archive ``auto`` makes here (tar when none of its tools is installed)."""
    if asked != "auto":
        return asked.split(",")[0]  # several: each config names its own
    try:
        return choose_method("auto")
    except StrategyError:
        return "tar"


def _with_lifecycle(
    scenario: Any, doc: dict[str, Any], timed: dict[str, float], pack_method: str
) -> dict[str, float]:
    """Each config's first start plus its strategy's persist step and restart; a config whose
    lifecycle the model cannot time is left out."""
    folders, profile = folders_of(doc), load_profile(scenario.wheels)
    image = Size.split(profile, scenario.image)[1] if scenario.image else None
    run_method = _pack_method(pack_method)  # "auto" looks at this machine's tools: once
    out = {}
    for cfg in scenario.configs:
        if cfg.name not in timed:
            continue
        method = _pack_method(cfg.pack_method) if cfg.pack_method else run_method
        life = predict_lifecycle(cfg, folders, size_of(cfg, scenario, profile), method,
                                 cpu_s=doc.get("cpu_s"), image=image)  # fmt: skip
        if life is not None:
            out[cfg.name] = timed[cfg.name] + life.total_s
    return out


def from_model(
    scenario: Any,
    roles: dict[str, Path],
    planned: Sequence[str],
    auto_rounds: int | None,
    pack_method: str = "auto",
) -> Estimate | None:
    """The range from a short probe of each role and the model (None: no config predictable).
    ``pack_method``: the run's ``--pack-method`` (a lifecycle run's archives)."""
    names = {c.name for c in scenario.configs if unpredictable(c, scenario) is None}
    if not names:
        return None
    used = sorted(set().union(*(c.roles() for c in scenario.configs)) & set(roles))
    made: dict[str, Path] = {}
    try:
        for role in used:
            made[role] = Path(tempfile.mkdtemp(prefix=".iobench-estimate-", dir=roles[role]))
        doc = probe_roles(dict(made), 0.1, locks=False, cpu_runs=1, write_mb=16.0, files=200,
                          fsyncs=20)  # fmt: skip
    except (OSError, IOBenchError):
        return None
    finally:
        for path in made.values():
            shutil.rmtree(path, ignore_errors=True)  # made by mkdtemp above: ours alone
    predicted = predicted_by_config(scenario, doc)
    timed = {c: s for c, s in predicted.items() if s is not None and c in names}
    if scenario.lifecycle:
        timed = _with_lifecycle(scenario, doc, timed, pack_method)
    if not timed:
        return None
    low_n, high_n = _counts(sorted(timed), planned, auto_rounds)
    left = sum(1 for p in planned if p not in timed)
    base_low = sum(timed[c] * n for c, n in low_n.items()) * DEFAULT_OVERHEAD
    base_high = sum(timed[c] * n for c, n in high_n.items()) * DEFAULT_OVERHEAD
    steps = ", persist steps and restarts included" if scenario.lifecycle else ""
    return Estimate(base_low * MODEL_LOW, base_high * MODEL_HIGH,
                    "from a 1 s probe of each role and the model, whose figure it spans "
                    f"{MODEL_LOW:g}-{MODEL_HIGH:g}x{steps}", left)  # fmt: skip


def estimate(plan: Any, planned: Sequence[str], auto_rounds: int | None) -> tuple[str, bool]:
    """The dry run's ``time`` line for ``planned`` (a config name per trial), and whether the
    roles were probed for it (their files are gone again)."""
    target = plan.roles.get("target")
    found = (
        from_earlier_run(plan.results_root, plan.scenario, target, planned, auto_rounds)
        if target is not None
        else None
    )
    probed = False
    if found is None and plan.scenario.installs:
        found = from_model(plan.scenario, plan.roles, planned, auto_rounds, plan.pack_method)
        probed = found is not None
    if found is None:
        return ("time      no estimate: no earlier run of this scenario on this target, and the "
                "model cannot time these configs (iobench run --repeats 1 measures each once)",
                False)  # fmt: skip
    return found.line(), probed


__all__ = ["Estimate", "estimate", "from_earlier_run", "from_model"]
