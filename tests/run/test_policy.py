"""What a run decides from its own figures (iobench/run/policy.py), on the stand-in workload:
the give-up bound that censors a slow config's trial, the --repeats auto rule that stops once
settled or at its maximum, and what meta.json records of both. (The lab's end-to-end test,
tests/run/test_earlystop_e2e.py, adds the probe's predictions on a real slow volume.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import standin
from helpers.files import read_csv

#: naive on a target that costs 40 ms a file (0.8 s a trial), venv-on-tmp on tmp (~0.05 s)
SLOW_TARGET = "delay_ms = { target = 40 }\n"


@pytest.mark.timing  # one slow start of the fast config (a loaded machine) keeps it unsettled
@pytest.mark.parametrize("seed", [1, 2])
def test_give_up_censors_the_slow_config_and_repeats_auto_stops_once_settled(
    tmp_path: Path, seed: int
) -> None:
    rc, run = standin.run(tmp_path, SLOW_TARGET, "--repeats", "auto:4", "--give-up-after", "3",
                          "--order-seed", str(seed), "--quiet")  # fmt: skip
    assert rc == 0  # a censored trial is a result, not a failure
    rows = read_csv(run / "trials.csv")
    meta = json.loads((run / "meta.json").read_text())
    auto = meta["repeats_auto"]
    assert auto["max"] == 4 and meta["give_up_after"] == 3
    assert auto["rounds_run"] == 2 and "settled" in auto["stopped_because"], (auto, rows)
    fast = [float(r["time_to_ready_s"]) for r in rows if r["config"] == "venv-on-tmp"]
    assert len(fast) == 2 and all(r["status"] == "ok" for r in rows if r["config"] == "venv-on-tmp")
    censored = [r for r in rows if r["status"] == "censored"]
    assert censored and all(r["config"] == "naive" for r in censored)
    for r in censored:  # K x the best median so far, which only venv-on-tmp has
        bound = float(r["censored_after_s"])
        basis = float(r["error"].rsplit(", ", 1)[1].split(" s)")[0])  # "... the best X, 0.1 s)"
        assert (
            r["time_to_ready_s"] == "" and "given up in the stand-in's writer after" in r["error"]
        )
        assert bound == pytest.approx(3 * basis, abs=0.16) and bound < 0.8
        assert min(fast) - 0.05 <= basis <= max(fast) + 0.05  # the error rounds to 0.1 s
        assert not list((tmp_path / "target").glob(f".iobench-scratch/*/{r['trial_id']}"))
    naive = [r for r in rows if r["config"] == "naive"]
    if naive[0]["status"] == "censored":  # given up in its every trial: no candidate, no round 2
        assert [r["trial_id"] for r in naive] == ["naive-r1"]
        assert auto["not_repeated"] == ["naive-r2"]
    else:  # it ran before any median existed (no prediction for a stand-in): no bound then
        assert naive[0]["status"] == "ok" and float(naive[0]["time_to_ready_s"]) > 0.7
        assert [r["status"] for r in naive] == ["ok", "censored"]
    assert all(r["predicted_s"] == "" for r in rows)  # nothing predicts a stand-in


def test_repeats_auto_runs_to_its_maximum_when_nothing_settles(tmp_path: Path) -> None:
    """Two configs on one folder's filesystem with the same work: the interval of their ratio
    never narrows enough to be settled, so the run says it reached its maximum."""
    rc, run = standin.run(tmp_path, "rate = 200\n", "--repeats", "auto:3", "--quiet")
    meta = json.loads((run / "meta.json").read_text())
    auto = meta["repeats_auto"]
    assert rc == 0 and auto["max"] == 3 and auto["rounds_run"] in (2, 3)
    if auto["rounds_run"] == 3:
        assert "maximum" in auto["stopped_because"], auto
    assert len(read_csv(run / "trials.csv")) == 2 * auto["rounds_run"]
