"""The ``weights`` kind's config and settings: the role a model's weights live on (``weights``:
a Hugging Face cache, ``HF_HOME``), the role they are copied or restored to before loading
(``copy_to``, or ``off``: loaded where they lie) and whether a packed copy is restored instead of
the files (``pack``); and the ``[workload]`` table a load takes (docs/weights.md): the model's
shape and size, how it is sharded, how the loader reads it. ``[workload.by_config.NAME]``
changes any of it for one config (a loader with many readers, say).

The model is a decoder of the Llama family's shape: an embedding and an output head of
``vocab`` x ``hidden``, then as many layers as ``model_mb`` holds, each with attention (grouped
queries: 4 query heads a key/value head), a gated MLP (``hidden`` x 8/3, a multiple of 256)
and two norms; written in module order into shards of at most ``shard_mb``, as
``save_pretrained`` does."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from iobench.errors import ScenarioError
from iobench.rundir.kinds import weights as rows
from iobench.scenario import schema, settings
from iobench.scenario.config import Config, ScenarioKind, placed
from iobench.scenario.schema import where
from iobench.scenario.settings import AbsPath, Number, Word, setting

KEYS = frozenset({"weights", "copy_to", "pack", "description"})
PACKS = ("off", "tar")
#: bytes an element of each dtype takes, and its name in a safetensors header
DTYPES = {"float16": (2, "F16"), "float32": (4, "F32")}


@dataclass(frozen=True)
class WeightsConfig(Config):
    """Where the weights lie, where they are copied first (``off``: loaded in place), and
    whether a packed copy is restored instead of the files."""

    weights: str
    copy_to: str = "off"
    pack: str = "off"

    def summary(self) -> str:
        pack = f" pack={self.pack}" if self.pack != "off" else ""
        return f"weights={self.weights} copy_to={self.copy_to}{pack}"

    def roles(self) -> set[str]:
        return {self.weights, self.copy_to} - {"", "off"}

    def held_mb(self, size_mb: float) -> dict[str, float]:
        """The model (and its packed copy) on its role, a copy on the local one."""
        need = {self.weights: size_mb * (2 if self.pack != "off" else 1)}
        if self.copy_to != "off":
            need[self.copy_to] = need.get(self.copy_to, 0.0) + size_mb
        return need

    def add_written(self, out: dict[str, float], size_mb: float) -> None:
        """The model once per run on its role (and its packed copy once), a copy a trial on the
        local role."""
        once = size_mb * (2 if self.pack != "off" else 1)
        out[self.weights] = max(out.get(self.weights, 0.0), once)
        if self.copy_to != "off":
            out[self.copy_to] = out.get(self.copy_to, 0.0) + size_mb


@dataclass(frozen=True)
class Settings:
    """The weights' settings for one config (docs/weights.md says what each means)."""

    model_mb: float = setting(Number(float, 1, 1_000_000), 320.0)  # the model's size
    hidden: int = setting(Number(int, 64, 65_536), 1024)  # the model's width
    vocab: int = setting(Number(int, 16, 1_000_000), 32_000)  # rows of embedding and head
    dtype: str = setting(Word(tuple(DTYPES)), "float16")
    shard_mb: float = setting(Number(float, 1, 1_000_000), 5000.0)  # save_pretrained's 5GB
    source: str = setting(AbsPath(), "")  # a real model folder, only ever read ("": generated)
    load: str = setting(Word(("mmap", "sequential", "concurrent")), "mmap")
    readers: int = setting(Number(int, 1, 256), 8)  # concurrent's threads
    read_mb: float = setting(Number(float, 0.0625, 1024), 8.0)  # a reader's request
    framework: str = setting(Word(("auto", "numpy", "torch")), "auto")
    python: str = setting(AbsPath(), "")  # the loader's interpreter ("": iobench's own)
    seed: int = setting(Number(int, 0, 2**31 - 1), 1)

    @property
    def itemsize(self) -> int:
        return DTYPES[self.dtype][0]

    @property
    def intermediate(self) -> int:
        """The MLP's width: 8/3 of hidden, up to a multiple of 256 (Llama's rule)."""
        return 256 * math.ceil(self.hidden * 8 / 3 / 256)

    def layer(self, i: int) -> list[tuple[str, tuple[int, ...]]]:
        """Layer ``i``'s tensors, in module order: (name, shape)."""
        h, kv, ff = self.hidden, max(1, self.hidden // 4), self.intermediate
        p = f"model.layers.{i}."
        return [
            (p + "input_layernorm.weight", (h,)),
            (p + "self_attn.q_proj.weight", (h, h)),
            (p + "self_attn.k_proj.weight", (kv, h)),
            (p + "self_attn.v_proj.weight", (kv, h)),
            (p + "self_attn.o_proj.weight", (h, h)),
            (p + "post_attention_layernorm.weight", (h,)),
            (p + "mlp.gate_proj.weight", (ff, h)),
            (p + "mlp.up_proj.weight", (ff, h)),
            (p + "mlp.down_proj.weight", (h, ff)),
        ]

    @property
    def layers(self) -> int:
        """As many layers as ``model_mb`` holds beside the embedding and the head (one at least)."""
        fixed = (2 * self.vocab * self.hidden + self.hidden) * self.itemsize
        per = sum(math.prod(s) for _, s in self.layer(0)) * self.itemsize
        return max(1, round((self.model_mb * 1e6 - fixed) / per))

    def tensors(self) -> list[tuple[str, tuple[int, ...]]]:
        """Every tensor in module order (the order ``save_pretrained`` fills its shards in)."""
        out: list[tuple[str, tuple[int, ...]]] = [
            ("model.embed_tokens.weight", (self.vocab, self.hidden))
        ]
        for i in range(self.layers):
            out += self.layer(i)
        return [*out, ("model.norm.weight", (self.hidden,)),
                ("lm_head.weight", (self.vocab, self.hidden))]  # fmt: skip

    def shards(self) -> list[list[tuple[str, tuple[int, ...]]]]:
        """The tensors in files of at most ``shard_mb`` (a larger tensor alone in its own)."""
        limit, out, size = self.shard_mb * 1e6, [[]], 0  # type: ignore[var-annotated]
        for name, shape in self.tensors():
            n = math.prod(shape) * self.itemsize
            if out[-1] and size + n > limit:
                out.append([])
                size = 0
            out[-1].append((name, shape))
            size += n
        return out

    @property
    def mb(self) -> float:
        """The model's tensors in MB (10^6 bytes)."""
        return sum(math.prod(s) for _, s in self.tensors()) * self.itemsize / 1e6

    def model_key(self) -> str:
        """What the generated model depends on: configs that agree on it share one copy."""
        return (
            f"{self.hidden}-{self.vocab}-{self.layers}-{self.dtype}-{self.shard_mb:g}-{self.seed}"
        )


def config(name: str, table: dict, defaults: dict, src: str, key: str) -> WeightsConfig:
    schema.unknown_keys(table, KEYS, src, key)
    weights, copy = placed(table, defaults, src, key, ("weights", "copy_to"), (
        "the role holding the model's folder",
        "where the weights already are (copy_to names the role they are copied to, or 'off')",
    ))  # fmt: skip
    t = {**defaults, **table}
    pack = schema.choice(t.get("pack", "off"), PACKS, src, f"{key}.pack")
    if pack != "off" and copy == "off":
        raise ScenarioError(
            f"{where(src, key + '.pack')}: a packed copy is restored to a role: set copy_to"
        )
    text = schema.text(t.get("description", ""), src, f"{key}.description")
    return WeightsConfig(name, weights, copy, pack, description=text)


def settings_of(table: Mapping[str, Any], config: str, where: str) -> Settings:
    return settings.settings_for(Settings, table, config, where)


def model_mb(table: Mapping[str, Any]) -> float | None:
    """MB the generated model takes, the largest of any config (None: a ``source``)."""
    sizes = [settings_of(table, "", "workload")]
    sizes += [settings_of(table, str(n), "workload") for n in table.get("by_config", {}) or {}]
    return None if all(s.source for s in sizes) else max(s.mb for s in sizes if not s.source)


KIND = ScenarioKind(
    rows=rows.KIND, config=config, config_keys=KEYS, settings=settings_of, size_mb=model_mb
)

__all__ = ["KIND", "PACKS", "Settings", "WeightsConfig", "config", "settings_of"]
