"""The ``checkpoint`` kind's config and settings: the role a checkpoint is saved to (``save``:
the GPU waits for it) and the role it is copied to in the background (``copy_to``, or ``off``),
and the ``[workload]`` table a trainer's saves take (docs/checkpoint.md): the checkpoint's size,
its shards, its tensors, how it is written. ``[workload.by_config.NAME]`` changes any of it for
one config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from iobench.rundir.kinds import checkpoint as rows
from iobench.scenario import schema, settings
from iobench.scenario.config import Config, ScenarioKind, placed
from iobench.scenario.settings import AbsPath, Number, Word, setting

KEYS = frozenset({"save", "copy_to", "description"})


@dataclass(frozen=True)
class SaveConfig(Config):
    """Where the checkpoint is saved, and where it is copied after (``off``: nowhere)."""

    save: str
    copy_to: str = "off"

    def summary(self) -> str:
        return f"save={self.save} copy_to={self.copy_to}"

    def roles(self) -> set[str]:
        return {self.save, self.copy_to} - {"", "off"}

    def held_mb(self, size_mb: float) -> dict[str, float]:
        return dict.fromkeys(self.roles(), size_mb)

    def add_written(self, out: dict[str, float], size_mb: float) -> None:
        """A checkpoint a trial on its save role, and on its copy's."""
        for role in self.roles():
            out[role] = out.get(role, 0.0) + size_mb


@dataclass(frozen=True)
class Settings:
    """The checkpoint's settings for one config (docs/checkpoint.md)."""

    checkpoint_mb: float = setting(Number(float, 0.001, 10_000_000), 256.0)
    shards: int = setting(Number(int, 1, 1024), 1)  # files, one writer process each
    tensor_mb: float = setting(Number(float, 0.001, 64), 64.0)  # the largest tensor
    format: str = setting(Word(("auto", "torch", "raw")), "auto")
    python: str = setting(AbsPath(), "")  # the saver's interpreter ("": iobench's own)
    seed: int = setting(Number(int, 0, 2**31 - 1), 1)

    def shard_bytes(self) -> list[int]:
        """Each shard's tensor bytes: equal shares, the remainder spread over the first ones."""
        total = max(self.shards, round(self.checkpoint_mb * 1e6))
        share, extra = divmod(total, self.shards)
        return [share + (1 if i < extra else 0) for i in range(self.shards)]


def config(name: str, table: dict, defaults: dict, src: str, key: str) -> SaveConfig:
    schema.unknown_keys(table, KEYS, src, key)
    save, copy = placed(table, defaults, src, key, ("save", "copy_to"), (
        "the role the checkpoint is saved to",
        "where the checkpoint is saved (copy_to names the role it is copied to, or 'off')",
    ))  # fmt: skip
    text = schema.text({**defaults, **table}.get("description", ""), src, f"{key}.description")
    return SaveConfig(name, save, copy, description=text)


def settings_of(table: Mapping[str, Any], config: str, where: str) -> Settings:
    return settings.settings_for(Settings, table, config, where)


def checkpoint_mb(table: Mapping[str, Any]) -> float:
    """MB one checkpoint takes (the free-space check's figure), the largest of any config."""
    sizes = [settings_of(table, "", "workload").checkpoint_mb]
    for name in table.get("by_config", {}) or {}:
        sizes.append(settings_of(table, str(name), "workload").checkpoint_mb)
    return max(sizes)


KIND = ScenarioKind(
    rows=rows.KIND, config=config, config_keys=KEYS, settings=settings_of, size_mb=checkpoint_mb
)

__all__ = ["KIND", "SaveConfig", "Settings", "config", "settings_of"]
