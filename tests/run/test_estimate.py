"""estimate.py: a planned run's wall time, from an earlier run here or from a probe and the
model, as a range — and none where neither can say."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import standin

from iobench.__main__ import main
from iobench.run import estimate as est
from iobench.run import plan as run_plan
from iobench.run.plan import RunRequest
from iobench.rundir.folder import RunDir

DATA = Path(__file__).resolve().parents[1] / "data"


def _plan(tmp_path: Path, scenario: Path | str, *extra: str) -> run_plan.RunPlan:
    target, tmp, results = standin.roles(tmp_path)
    req = RunRequest(scenario=str(scenario), target=target, tmp=tmp, results=results,
                     no_probe=True, **dict(extra))  # type: ignore[arg-type]  # fmt: skip
    return run_plan.check(req)


def test_spans_read_in_one_unit_or_two() -> None:
    assert est._span(14.2, 35.0) == "14–35 s"
    assert est._span(28, 190) == "28 s to 3 min"
    assert est._span(2400, 4500) == "40–75 min"
    assert est._span(3 * 3600, 9 * 3600) == "3.0–9.0 h"


def test_an_earlier_run_here_times_the_next_one_from_its_own_trials(tmp_path: Path) -> None:
    path = standin.scenario(tmp_path)
    assert main(standin.argv(tmp_path, path, "--quiet")) == 0
    run = next((tmp_path / "results").iterdir())
    rows = RunDir(run).trials(latest_only=True)
    per = {r.config: [] for r in rows}
    for r in rows:
        per[r.config].append(r.time_to_ready_s)
    overhead = json.loads((run / "meta.json").read_text())["overhead"]
    factor = max(1.0, overhead["wall_s"] / overhead["trials_s"])

    plan = _plan(tmp_path, path)
    names = [c.name for c in plan.scenario.configs for _ in range(plan.repeats)]
    got = est.from_earlier_run(plan.results_root, plan.scenario, plan.roles["target"], names, None)
    assert got is not None and run.name in got.source
    assert got.low_s == pytest.approx(sum(min(v) * 2 for v in per.values()) * factor, rel=0.02)
    assert got.high_s == pytest.approx(sum(max(v) * 2 for v in per.values()) * factor, rel=0.02)
    # --repeats auto's soonest end (one round each) lowers the low end only
    soon = est.from_earlier_run(plan.results_root, plan.scenario, plan.roles["target"], names, 1)
    assert soon is not None and soon.low_s == pytest.approx(got.low_s / 2, rel=0.02)
    assert soon.high_s == got.high_s
    # another target, or a config the earlier run never measured: not this run's figure
    elsewhere = est.from_earlier_run(plan.results_root, plan.scenario, tmp_path, names, None)
    assert elsewhere is None
    assert est.from_earlier_run(plan.results_root, plan.scenario, plan.roles["target"],
                                [*names, "unmeasured"], None) is None  # fmt: skip


def test_the_model_times_a_profiled_scenario_and_leaves_nothing_behind(tmp_path: Path) -> None:
    plan = _plan(tmp_path, DATA / "tiny.toml")
    before = {p for role in plan.roles.values() for p in role.iterdir()}
    names = [c.name for c in plan.scenario.configs]
    got = est.from_model(plan.scenario, plan.roles, names, None)
    assert got is not None and 0 < got.low_s < got.high_s
    assert got.high_s / got.low_s == pytest.approx(est.MODEL_HIGH / est.MODEL_LOW)
    assert {p for role in plan.roles.values() for p in role.iterdir()} == before
    line, probed = est.estimate(plan, names, None)
    assert probed and line.startswith("time      about ") and "probe" in line


def test_no_source_says_so_and_how_to_get_one(tmp_path: Path) -> None:
    plan = _plan(tmp_path, DATA / "tiny.toml", ("package", ["six"]))
    line, probed = est.estimate(plan, [c.name for c in plan.scenario.configs], None)
    assert not probed and line.startswith("time      no estimate") and "--repeats 1" in line
