"""What every kind's config is, and what the scenario loader asks of a kind.

A config is named and says where its kind's things live, by role; each kind declares its own
(``iobench.scenario.kinds``): an install's venv, TMPDIR and cache, a dataset's data and its
copy, a checkpoint's save and its copy. What the run asks of any config — its roles, its line
in the plan, the room it needs, whether its trials measure a restart — is a method here, so the
run never asks which kind it holds.

``ScenarioKind`` is the record a kind's scenario file declares: its config keys and their
reader, its ``[workload]`` settings (one dataclass: each field's type, range and default in
one place, ``iobench.scenario.settings``), and the size its data takes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from iobench.errors import ScenarioError
from iobench.rundir.kind import Kind
from iobench.scenario import schema
from iobench.scenario.schema import where


@dataclass(frozen=True)
class Config:
    """A named config: where a kind's things live (each kind's subclass says what)."""

    name: str
    description: str = field(default="", kw_only=True)

    def summary(self) -> str:
        """Where things live and how, in one line (``iobench scenarios``, the dry run)."""
        return ""

    def roles(self) -> set[str]:
        """Every role the config puts something on (its trials get a folder on each)."""
        return set()

    @property
    def restarts(self) -> bool:
        """Its trials measure a restart after the first start (a start-up strategy)."""
        return False

    def held_mb(self, size_mb: float) -> dict[str, float]:
        """MB each role holds at once during one trial, for a scenario of ``size_mb``."""
        return {}

    def add_written(self, out: dict[str, float], size_mb: float) -> None:
        """Add the MB one trial writes on each role to ``out`` (what a run writes once, such
        as generated data, is added once)."""

    def download_mb(self, size_mb: float) -> float:
        """MB one trial downloads from the package index (0: it installs nothing)."""
        return 0.0

    def packs(self, run_method: str) -> str | None:
        """The archive method its start-up strategy packs with (``run_method``: the run's
        ``--pack-method``), None when it packs nothing."""
        return None


#: a config's factory: (name, its table, [defaults], file, key) -> the config
MakeConfig = Callable[[str, dict, dict, str, str], Config]


def _no_settings(table: Mapping[str, Any], config: str, where: str) -> None:
    if {k for k in table if k != "by_config"}:
        raise ScenarioError(f"{where}: this workload takes no [workload] settings")


@dataclass(frozen=True)
class ScenarioKind:
    """A kind as the scenario file knows it (see the module docstring)."""

    rows: Kind  # the kind at the bottom: its name and traits
    config: MakeConfig
    config_keys: frozenset[str]
    #: (the [workload] table, a config's name, where) -> that config's settings, checked
    settings: Callable[[Mapping[str, Any], str, str], Any] = _no_settings
    #: MB the scenario's data takes from its [workload] (None: the scenario's size_mb)
    size_mb: Callable[[Mapping[str, Any]], float | None] = lambda table: None
    #: a [matrix] product's value set that cannot be a config (skipped, not an error)
    impossible: Callable[[dict], bool] = lambda values: False
    #: the kind's rules over a whole scenario: (its configs, its image's packages, the file)
    check: Callable[[tuple[Config, ...], tuple[str, ...], str], None] = lambda c, i, s: None

    @property
    def name(self) -> str:
        return self.rows.name

    @property
    def installs(self) -> bool:
        """A scenario of this kind names packages and a ready check."""
        return self.rows.installs


def placed(
    table: dict, defaults: dict, src: str, key: str, keys: tuple[str, str], words: tuple[str, str]
) -> tuple[str, str]:
    """A config that puts one thing on a role and may copy it to another: ``(role, copy)``,
    the copy a role or ``off``. ``keys``: the two keys; ``words``: what the first holds, and
    what naming one role for both would mean."""
    first, second = keys
    t = {**defaults, **table}
    if first not in t:
        raise ScenarioError(f"{where(src, key + '.' + first)}: missing ({words[0]})")
    role = schema.role(t[first], src, f"{key}.{first}")
    copy = t.get(second, "off")
    if copy != "off":
        copy = schema.role(copy, src, f"{key}.{second}")
    if copy == role:
        raise ScenarioError(f"{where(src, key + '.' + second)}: {copy!r} is {words[1]}")
    return role, copy


__all__ = ["Config", "MakeConfig", "ScenarioKind", "placed"]
