"""The ``dataset`` kind's config and settings: where the training data lives (``data``) and the
role it is copied to before the epochs (``stage``, or ``off``: read in place), and the
``[workload]`` table a training loop's reads take (docs/dataset.md): the data's shape, the
loader, the emulated accelerator. ``[workload.by_config.NAME]`` changes any of it for one
config (more loader workers, say)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from iobench.rundir.kinds import dataset as rows
from iobench.scenario import schema, settings
from iobench.scenario.config import Config, ScenarioKind, placed
from iobench.scenario.settings import AbsPath, Number, Word, setting

KEYS = frozenset({"data", "stage", "description"})


@dataclass(frozen=True)
class DataConfig(Config):
    """Where the data lies, and where it is copied first (``off``: read where it lies)."""

    data: str
    stage: str = "off"

    def summary(self) -> str:
        return f"data={self.data} stage={self.stage}"

    def roles(self) -> set[str]:
        return {self.data, self.stage} - {"", "off"}

    def held_mb(self, size_mb: float) -> dict[str, float]:
        return dict.fromkeys(self.roles(), size_mb)

    def add_written(self, out: dict[str, float], size_mb: float) -> None:
        """The data once per run on its role, and a copy a trial on the stage role."""
        out.setdefault(self.data, size_mb)
        if self.stage != "off":
            out[self.stage] = out.get(self.stage, 0.0) + size_mb


@dataclass(frozen=True)
class Settings:
    """The dataset's settings for one config (docs/dataset.md says what each means)."""

    files: int = setting(Number(int, 1, 10_000_000), 256)
    file_mb: float = setting(Number(float, 0.001, 4096), 1.0)
    size_sd: float = setting(Number(float, 0, 3), 0.0)  # lognormal spread of the file sizes
    format: str = setting(Word(("jsonl", "binary")), "jsonl")
    source: str = setting(AbsPath(), "")  # an existing folder, only ever read ("": generated)
    batch: int = setting(Number(int, 1, 100_000), 8)  # files per batch
    workers: int = setting(Number(int, 0, 256), 2)  # loader processes (0: the loop reads)
    prefetch: int = setting(Number(int, 1, 64), 2)  # batches each worker reads ahead
    epochs: int = setting(Number(int, 1, 1000), 1)
    compute_ms: float = setting(Number(float, 0, 600_000), 25.0)  # the accelerator, a batch
    compute_sd_ms: float = setting(Number(float, 0, 600_000), 0.0)
    loader: str = setting(Word(("auto", "plain", "torch")), "auto")
    python: str = setting(AbsPath(), "")  # the loader's interpreter ("": iobench's own)
    seed: int = setting(Number(int, 0, 2**31 - 1), 1)

    @property
    def mb(self) -> float:
        """The data's size in MB (10^6 bytes), one epoch."""
        return self.files * self.file_mb

    def data_key(self) -> str:
        """What the generated data depends on: configs that agree on it share one copy."""
        return f"{self.files}-{self.file_mb:g}-{self.size_sd:g}-{self.format}-{self.seed}"


def config(name: str, table: dict, defaults: dict, src: str, key: str) -> DataConfig:
    schema.unknown_keys(table, KEYS, src, key)
    data, stage = placed(table, defaults, src, key, ("data", "stage"), (
        "the role holding the data",
        "where the data already is (stage names the role it is copied to, or 'off')",
    ))  # fmt: skip
    text = schema.text({**defaults, **table}.get("description", ""), src, f"{key}.description")
    return DataConfig(name, data, stage, description=text)


def settings_of(table: Mapping[str, Any], config: str, where: str) -> Settings:
    return settings.settings_for(Settings, table, config, where)


def data_mb(table: Mapping[str, Any]) -> float | None:
    """MB the scenario's generated data takes (None: a ``source`` folder, nothing generated)."""
    s = settings_of(table, "", "workload")
    return None if s.source else s.mb


KIND = ScenarioKind(
    rows=rows.KIND, config=config, config_keys=KEYS, settings=settings_of, size_mb=data_mb
)

__all__ = ["KIND", "DataConfig", "Settings", "config", "settings_of"]
