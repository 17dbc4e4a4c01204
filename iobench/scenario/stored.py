"""A scenario read back from a run's meta.json (for ``--resume``): the stored form
(``Scenario.to_dict()``) turned back into the TOML document's shape and checked by
``iobench.scenario.load.scenario_from_dict``, the one validator."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from iobench.errors import RunDirError, ScenarioError
from iobench.rundir import kinds as rows
from iobench.scenario.load import NEUTRAL, SCENARIO_KEYS, Scenario, config_keys, scenario_from_dict
from iobench.scenario.schema import name_problem, unknown_keys


def scenario_from_meta(data: object, where: str = "meta.json") -> Scenario:
    """Rebuild the resolved scenario stored in a run's meta.json (for --resume).

    The stored form (``Scenario.to_dict()``) is turned back into the TOML document's shape
    and checked by ``scenario_from_dict``, the one validator, with the names older runs
    hold still accepted. Anything malformed is one RunDirError line naming ``where`` and
    the key. Unknown keys are refused rather than ignored: a key this version does not
    know may change what a trial measures, and resuming without it would silently mix
    trials run under different conditions. Resume such a run with the iobench that
    started it.
    """
    if not isinstance(data, dict):
        raise RunDirError(f"{where}: scenario: expected a table, got {type(data).__name__}")
    stored = ("source", "configs", "extra", "workload")
    try:
        unknown_keys(data, (*SCENARIO_KEYS, *stored), where, "scenario", "key")
        doc = {"scenario": {k: data[k] for k in SCENARIO_KEYS if k in data and data[k] is not None},
               "configs": _configs_from_meta(data.get("configs"), where, data.get("kind")),
               **({"workload": data["workload"]} if data.get("workload") else {})}  # fmt: skip
        if "repeats" not in data:
            raise ScenarioError(f"{where}: scenario.repeats: missing")
        scenario = scenario_from_dict(doc, where, legacy_names=True)
    except ScenarioError as exc:
        raise RunDirError(str(exc)) from None
    source, extra, wheels = data.get("source"), data.get("extra", {}), data.get("wheels")
    if not isinstance(source, str) or not isinstance(extra, dict):
        raise RunDirError(f"{where}: scenario.source/extra: expected a string and a table")
    if wheels is not None and name_problem(wheels) and not _stored_path(wheels):
        raise RunDirError(
            f"{where}: scenario.wheels: {str(wheels)[:80]!r} is neither a profile name nor an "
            "absolute path without '..'"
        )
    # the stored wheels path was resolved when the run started: keep it as it is
    return replace(scenario, source=source, wheels=wheels, extra=extra)


def _stored_path(value: str) -> bool:
    """A path a run stored (resolved when it started): absolute, without '..'."""
    path = Path(value)
    return path.is_absolute() and ".." not in path.parts and "\0" not in value


def _configs_from_meta(raw: object, where: str, kind: object) -> dict[str, dict]:
    """meta.json's list of configs as the TOML document's ``configs`` tables (each with the
    keys its kind takes: the stored form holds every field, neutral where the kind has none)."""
    keep = config_keys(str(kind or rows.DEFAULT)) | {"name"}
    if not isinstance(raw, list) or not raw:
        raise ScenarioError(f"{where}: scenario.configs: expected a non-empty list of configs")
    tables: dict[str, dict] = {}
    for i, c in enumerate(raw):
        if not isinstance(c, dict):
            raise ScenarioError(
                f"{where}: scenario.configs[{i}]: expected a table, got {type(c).__name__}"
            )
        name = c.get("name")
        problem = name_problem(name, legacy=True)
        if problem:
            raise ScenarioError(f"{where}: scenario.configs[{i}].name: {problem}")
        if name in tables:
            raise ScenarioError(
                f"{where}: scenario.configs[{i}].name: config name '{name}' used twice"
            )
        tables[str(name)] = {
            k: v for k, v in c.items() if k != "name" and (k in keep or v not in NEUTRAL)
        }
    return tables


__all__ = ["scenario_from_meta"]
