"""A workload kind's ``[workload]`` table: its numbers and words checked against the kind's own
settings, and ``[workload.by_config.NAME]`` applied on top for one config.

Each kind (``iobench.scenario.kinds``) declares what it takes once, as a frozen dataclass whose
fields carry their rule (``setting``: a number's type and range, a word's choices, a path) and
default; this module is the one place that reads such a table, so every kind's errors name the
file, the key and what was expected.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from iobench.errors import ScenarioError


@dataclass(frozen=True)
class Number:
    """A numeric setting: ``int`` or ``float``, from ``low`` to ``high`` inclusive."""

    kind: type
    low: float
    high: float


@dataclass(frozen=True)
class Word:
    """A text setting: one of ``choices``, or any string when ``choices`` is empty."""

    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class AbsPath:
    """A path setting: absolute, without NUL (or "" for none); whether it exists is the kind's
    to check, on the machine that runs it."""


Spec = Mapping[str, "Number | Word | AbsPath"]
S = TypeVar("S")


def setting(rule: Number | Word | AbsPath, default: Any) -> Any:
    """A settings field: its rule and default, declared once (the dataclass is the spec)."""
    return dataclasses.field(default=default, metadata={"rule": rule})


def spec_of(cls: type) -> dict[str, Number | Word | AbsPath]:
    """The rules of a settings dataclass's fields (those declared with ``setting``)."""
    return {f.name: f.metadata["rule"] for f in dataclasses.fields(cls) if "rule" in f.metadata}


def settings_for(cls: type[S], table: Mapping[str, Any], config: str, where: str) -> S:
    """``config``'s settings of the kind whose dataclass is ``cls``: the table's, then its
    ``[workload.by_config.NAME]`` on top, each checked."""
    return cls(**for_config(table, spec_of(cls), config, where))


def number(value: object, spec: Number, where: str) -> int | float:
    """``value`` as the spec's type, or a ScenarioError naming ``where`` and the range."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok and spec.kind is int:
        ok = float(value).is_integer()  # type: ignore[arg-type]
    if not ok or not math.isfinite(float(value)) or not spec.low <= float(value) <= spec.high:  # type: ignore[arg-type]
        raise ScenarioError(f"{where}: expected a number from {spec.low:g} to {spec.high:g}")
    number = float(value)  # type: ignore[arg-type]  # checked above: an int or a float
    return int(number) if spec.kind is int else number


def read_table(
    table: Mapping[str, Any], spec: Spec, where: str, extra: Sequence[str] = ()
) -> dict[str, Any]:
    """The settings of one table that ``spec`` knows, checked; ``extra`` keys are the
    caller's to check (left out here); any other key is an error listing the known ones."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        rule = spec.get(key)
        if isinstance(rule, Number):
            out[key] = number(value, rule, f"{where}.{key}")
        elif isinstance(rule, AbsPath):
            if not isinstance(value, str) or (
                value and (not os.path.isabs(value) or "\0" in value)
            ):
                raise ScenarioError(
                    f"{where}.{key}: expected an absolute path, not {str(value)[:80]!r}"
                )
            out[key] = value
        elif isinstance(rule, Word):
            if not isinstance(value, str) or (rule.choices and value not in rule.choices):
                allowed = f"one of {', '.join(rule.choices)}" if rule.choices else "a string"
                raise ScenarioError(f"{where}.{key}: expected {allowed}")
            out[key] = value
        elif key not in (*extra, "by_config"):
            known = ", ".join([*spec, *extra, "by_config"])
            raise ScenarioError(f"{where}.{key}: not a setting of this workload (known: {known})")
    return out


def for_config(table: Mapping[str, Any], spec: Spec, config: str, where: str) -> dict[str, Any]:
    """One config's settings: the table's, then its ``[workload.by_config.NAME]`` on top."""
    own = config_table(table, config, where)
    return {
        **read_table(table, spec, where),
        **read_table(own, spec, f"{where}.by_config.{config}"),
    }


def config_table(table: Mapping[str, Any], config: str, where: str) -> Mapping[str, Any]:
    """``[workload.by_config.NAME]`` for ``config`` (empty when it has none)."""
    by_config = table.get("by_config", {})
    if not isinstance(by_config, Mapping):
        raise ScenarioError(f"{where}.by_config: expected tables [workload.by_config.NAME]")
    own = by_config.get(config, {})
    if not isinstance(own, Mapping):
        raise ScenarioError(f"{where}.by_config.{config}: expected a table")
    return own


def check_by_config(table: Mapping[str, Any], configs: Sequence[str], where: str) -> None:
    """Every ``by_config`` entry names a config of the scenario file (checked when it is
    read: ``--configs`` may then run only some of them)."""
    by_config = table.get("by_config", {}) or {}
    if not isinstance(by_config, Mapping):
        raise ScenarioError(f"{where}.by_config: expected tables [workload.by_config.NAME]")
    for name in by_config:
        if name not in configs:
            raise ScenarioError(f"{where}.by_config.{name}: no such config")


__all__ = [
    "AbsPath",
    "Number",
    "Spec",
    "Word",
    "setting",
    "settings_for",
    "spec_of",
    "for_config",
    "check_by_config",
    "config_table",
    "number",
    "read_table",
]
