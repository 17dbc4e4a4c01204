"""What ``iobench doctor`` foresees: the predicted time-to-ready of the shipped profiles per
config from its probes, graded against the bar for a warning, and whether its two looks
at the target (the probes at the start, the small-file probes again at the end) agree.

A warning from a prediction needs both looks past the bar (the milder grade wins): on a
filesystem whose speed moves by the minute, one look decided WARN or ok by its moment
(docs/doctor.md).
"""

from __future__ import annotations

import math
from typing import Any

from iobench.errors import IOBenchError
from iobench.predict import traps
from iobench.predict.finding import LEVELS, Finding
from iobench.predict.model import folders_of, predict_scenario
from iobench.scenario.load import load_scenario

#: the shipped profiles the doctor predicts
PREDICT_SCENARIOS = ("torch-like", "diffusers-like")


def predict_all(
    doc: dict[str, Any], scenarios: tuple[str, ...] = PREDICT_SCENARIOS
) -> dict[str, list[dict[str, Any]]]:
    """Predicted time-to-ready per config of each shipped scenario that exists."""

    folders = folders_of(doc)
    out: dict[str, list[dict[str, Any]]] = {}
    for name in scenarios:
        try:
            preds = predict_scenario(load_scenario(name), folders, cpu_s=doc.get("cpu_s"))
        except (IOBenchError, KeyError):
            continue  # not shipped, or a config using a role doctor did not probe
        out[name] = [p.to_dict() for p in preds]
    return out


#: a slow target is worth a warning past both: this many times the best config's time...
SLOW_RATIO = 1.5
#: ...and this many seconds more per start
SLOW_EXTRA_S = 10.0
#: the predictions of back-to-back doctors on one machine move by up to ~20 % (the probe on a
#: busy machine): a warning needs both figures this far past their bar, "ok" this far below;
#: in between the finding is "info" (exit 0), so the verdict does not flip between runs
PREDICT_MARGIN = 1.25
#: a figure that moved more than this between the check's two looks is reported as moving
MOVED_RATIO = 1.5


def grade(naive: float, best: float) -> str:
    """ok, info (near the bar) or warn for everything-on-the-target against the best."""
    ratio, extra = naive / best if best > 0 else math.inf, naive - best
    m = PREDICT_MARGIN
    if ratio > SLOW_RATIO * m and extra > SLOW_EXTRA_S * m:
        return "warn"
    if ratio > SLOW_RATIO / m and extra > SLOW_EXTRA_S / m:
        return "info"
    return "ok"


def measure_lines(scen: str, best: str, pair_s: float) -> tuple[str, ...]:
    """The run that measures ``best`` against everything on the target, and what it costs:
    the predicted seconds of one trial each, times the scenario's rounds, and its disk."""
    try:
        scenario = load_scenario(scen)
        rounds, mb = scenario.repeats, scenario.size_mb
        about = next((c.description for c in scenario.configs if c.name == best), "")
    except IOBenchError:
        rounds, mb, about = 2, None, ""
    minutes = rounds * pair_s / 60
    disk = f", {mb / 1000:.1f} GB on the target and tmp" if mb else ""
    return (
        f"iobench run --scenario {scen} --configs naive,{best}",
        f"  {best}: {about}" if about else f"  {best}: the fastest placement predicted",
        f"  at least {max(1, round(minutes))} min of trials ({rounds} rounds of 2; the predicted time "
        f"to ready, before set-up and restarts){disk};"
        " --dry-run prints the plan first",
    )


def prediction_findings(
    predictions: dict[str, list[dict[str, Any]]],
    again: dict[str, list[dict[str, Any]]] | None = None,
) -> list[Finding]:
    """One finding per scenario. ``again``: the predictions from the second look at the end
    of the check; a warning needs both looks past the bar (the milder grade wins), and a
    figure that moved is given at both moments."""
    out: list[Finding] = []
    for scen, preds in predictions.items():
        by = {p["config"]: p["predicted_s"] for p in preds}
        best = min(by, key=by.__getitem__)
        naive = by.get("naive")
        if naive is None:
            out.append(
                Finding("ok", "predict", f"{scen}: fastest {best} ~{by[best]:.0f} s to ready")
            )
            continue
        text = f"{scen}: everything on the target takes ~{naive:.0f} s to ready, {best} ~{by[best]:.0f} s"
        level = grade(naive, by[best])
        later = {p["config"]: p["predicted_s"] for p in (again or {}).get(scen, [])}
        if later.get("naive") and later.get(best):
            second = grade(later["naive"], later[best])
            level = min(level, second, key=LEVELS.index)
            if max(naive, later["naive"]) > MOVED_RATIO * min(naive, later["naive"]):
                text += (f" (~{later['naive']:.0f} s and ~{later[best]:.0f} s at the end of "
                         "this check: the target's speed moved while it was checked)")  # fmt: skip
        measure = measure_lines(scen, best, naive + by[best])
        if level == "warn":
            out.append(Finding("warn", "predict", text, measure=measure))
        elif level == "info":
            out.append(Finding("info", "predict", text + " (near the bar for a warning)",
                               measure=measure))  # fmt: skip
        else:
            out.append(
                Finding("ok", "predict", f"{scen}: fastest {best} ~{by[best]:.0f} s to ready")
            )
    return out


def create_moved(first: dict[str, Any], again: dict[str, Any], target: str) -> list[Finding]:
    """An info finding when the target's small-file create cost moved past MOVED_RATIO
    between the two looks, with the known cause where it applies: ext4 without a journal
    skips inodes deleted in the last seconds, scanning past each (a kernel profile here:
    61 % of a create in ``recently_deleted``; 0.05 ms a create after a quiet minute, 0.5-1 ms
    after thousands of deletions: a trial's venv, a probe's files)."""
    a, b = ((c.ms.get("create") if (c := folders_of(doc).get("target")) else None)
            for doc in (first, again))  # fmt: skip
    if not a or not b or max(a, b) <= MOVED_RATIO * min(a, b):
        return []
    text = (f"the target's small-file create cost moved from {a:.3f} ms to {b:.3f} ms within "
            "this check")  # fmt: skip
    if traps.ext4_without_journal(target):
        text += (": ext4 without a journal passes over inodes deleted in the last seconds, so "
                 "creates are slower for a while after many deletions (a removed venv, a "
                 "finished trial)")  # fmt: skip
    return [Finding("info", "probe", text)]


__all__ = [
    "MOVED_RATIO",
    "PREDICT_MARGIN",
    "PREDICT_SCENARIOS",
    "SLOW_EXTRA_S",
    "SLOW_RATIO",
    "create_moved",
    "grade",
    "predict_all",
    "prediction_findings",
]
