"""The ``standin`` kind's settings: iobench's own tests' stand-in for an install (hyperfine's
mock executor). Its configs are the install kind's (venv, TMPDIR, cache, a start-up strategy:
the stand-in is that kind's fake, the one kind that takes another's declarations); its
``[workload]`` table says what its writer does:

- ``files`` (40), ``kb`` (4): how many files, how large;
- ``rate`` (0: as fast as it can): files per second at most;
- ``delay_ms`` (``{}``): extra milliseconds per file on a role, e.g. ``{ target = 5 }``, a
  slow target without a FUSE mount;
- ``pause_s`` (0): a pause without any I/O half-way through (a stall);
- ``exit`` (0): the writer's exit status (non-zero: the step fails, as an installer can).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from iobench.errors import ScenarioError
from iobench.rundir.kinds import standin as rows
from iobench.scenario import settings
from iobench.scenario.kinds import install
from iobench.scenario.settings import Number, setting

_DELAY_MS = Number(float, 0, 60_000)


@dataclass(frozen=True)
class Settings:
    """The stand-in's settings for one config."""

    files: int = setting(Number(int, 1, 1_000_000), 40)
    kb: float = setting(Number(float, 0, 1_048_576), 4.0)
    rate: float = setting(Number(float, 0, 1e7), 0.0)
    pause_s: float = setting(Number(float, 0, 86_400), 0.0)
    exit: int = setting(Number(int, 0, 255), 0)
    delay_ms: Mapping[str, float] = field(default_factory=dict)  # role -> ms (read below)

    def delay_s(self, role: str) -> float:
        return float(self.delay_ms.get(role, 0.0)) / 1000.0


def _read(table: Mapping[str, Any], where: str) -> dict[str, Any]:
    out = settings.read_table(table, settings.spec_of(Settings), where, extra=("delay_ms",))
    if "delay_ms" in table:
        value = table["delay_ms"]
        if not isinstance(value, Mapping):
            raise ScenarioError(f"{where}.delay_ms: expected a table of role = milliseconds")
        out["delay_ms"] = {
            str(role): float(settings.number(ms, _DELAY_MS, f"{where}.delay_ms.{role}"))
            for role, ms in value.items()
        }
    return out


def settings_of(table: Mapping[str, Any], config: str, where: str) -> Settings:
    """The stand-in's settings for ``config``: the table, then its ``by_config`` entry."""
    own = settings.config_table(table, config, where)
    return Settings(**{**_read(table, where), **_read(own, f"{where}.by_config.{config}")})


KIND = replace(install.KIND, rows=rows.KIND, settings=settings_of)

__all__ = ["KIND", "Settings", "settings_of"]
