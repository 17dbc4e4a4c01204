"""The ``install`` kind's config: where the venv, TMPDIR and the installer's cache live, how the
install is done (installer, cache state, bytecode, venv creator, uv's link mode, where imports
write bytecode) and the start-up strategy that keeps the venv between starts
(docs/strategies.md). It takes no ``[workload]`` table: what it installs is the scenario's
``packages`` (or synthetic ``wheels``) and its ``ready`` check."""

from __future__ import annotations

from dataclasses import dataclass, replace

from iobench.errors import ScenarioError
from iobench.rundir.kinds import install as rows
from iobench.scenario import schema
from iobench.scenario.config import Config, ScenarioKind
from iobench.scenario.schema import where
from iobench.scenario.vocab import (
    CACHE_STATES,
    INSTALLERS,
    LINK_MODES,
    ON_OFF,
    PACK_METHODS,
    PACKING,
    PYCACHE,
    STRATEGIES,
    VENV_CREATORS,
)

#: the packages' download (wheels) as a share of their installed size: the estimate the space
#: check and the dry run's byte counts use (torch's CUDA wheels: ~2.5 GB for ~6 GB installed)
WHEELS_SHARE = 0.4

KEYS = frozenset(
    {"venv", "tmpdir", "cache", "cache_state", "installer", "compile", "description", "strategy",
     "venv_creator", "link_mode", "pycache", "pack_method"}
)  # fmt: skip


@dataclass(frozen=True)
class InstallConfig(Config):
    """Where each thing lives, by role, and how the install is done."""

    venv: str
    tmpdir: str
    cache: str  # a role, or "off"
    cache_state: str = "cold"
    installer: str = "pip"
    compile: str = "on"
    strategy: str = "reinstall"  # iobench.trial.strategies: where the venv lives between starts
    venv_creator: str = "virtualenv"  # iobench.scenario.vocab.VENV_CREATORS
    link_mode: str = "default"  # uv's UV_LINK_MODE (iobench.scenario.vocab.LINK_MODES); uv only
    pycache: str = "beside"  # where imports write bytecode (iobench.scenario.vocab.PYCACHE)
    pack_method: str = ""  # a packing strategy's archive and restore ("": the run's --pack-method)

    def summary(self) -> str:
        return (
            f"venv={self.venv} tmpdir={self.tmpdir} cache={self.cache} {self.cache_state} "
            f"{self.installer} compile={self.compile}"
            + (f" venv_creator={self.venv_creator}" if self.venv_creator != "virtualenv" else "")
            + (f" link_mode={self.link_mode}" if self.link_mode != "default" else "")
            + (f" pycache={self.pycache}" if self.pycache != "beside" else "")
            + (f" pack_method={self.pack_method}" if self.pack_method else "")
            + (f" strategy={self.strategy}" if self.strategy != "reinstall" else "")
        )

    def roles(self) -> set[str]:
        return {self.venv, self.tmpdir, self.cache} - {"", "off"}

    @property
    def restarts(self) -> bool:
        return self.strategy != "reinstall"

    def held_mb(self, size_mb: float) -> dict[str, float]:
        """A venv, its downloads and its cache."""
        need = {self.tmpdir: size_mb * WHEELS_SHARE}
        if self.cache != "off":
            need[self.cache] = max(need.get(self.cache, 0.0), size_mb * WHEELS_SHARE)
        need[self.venv] = max(need.get(self.venv, 0.0), size_mb)
        return need

    def add_written(self, out: dict[str, float], size_mb: float) -> None:
        """Its venv, its downloads into TMPDIR, and a cold cache filled."""
        wheels = size_mb * WHEELS_SHARE
        out[self.venv] = out.get(self.venv, 0.0) + size_mb
        out[self.tmpdir] = out.get(self.tmpdir, 0.0) + wheels
        if self.cache != "off" and self.cache_state != "warm":
            out[self.cache] = out.get(self.cache, 0.0) + wheels

    def download_mb(self, size_mb: float) -> float:
        return size_mb * WHEELS_SHARE

    def packs(self, run_method: str) -> str | None:
        return (self.pack_method or run_method) if self.strategy in PACKING else None


def config(name: str, table: dict, defaults: dict, src: str, key: str) -> InstallConfig:
    schema.unknown_keys(table, KEYS, src, key)
    t = {**defaults, **table}
    for needed in ("venv", "tmpdir", "cache"):
        if needed not in t:
            raise ScenarioError(f"{where(src, key + '.' + needed)}: missing")
    cfg = InstallConfig(
        name=name,
        venv=schema.role(t["venv"], src, f"{key}.venv"),
        tmpdir=schema.role(t["tmpdir"], src, f"{key}.tmpdir"),
        cache=schema.role(t["cache"], src, f"{key}.cache", allow_off=True),
        cache_state=schema.choice(t.get("cache_state", "cold"), CACHE_STATES, src, f"{key}.cache_state"),
        installer=schema.choice(t.get("installer", "pip"), INSTALLERS, src, f"{key}.installer"),
        compile=schema.choice(t.get("compile", "on"), ON_OFF, src, f"{key}.compile"),
        description=schema.text(t.get("description", ""), src, f"{key}.description"),
        strategy=schema.choice(t.get("strategy", "reinstall"), tuple(STRATEGIES), src, f"{key}.strategy"),
        **_axes(t, src, key),
    )  # fmt: skip
    if cfg.strategy != "reinstall":  # the strategy decides where its venv (and cache) live
        chosen = STRATEGIES[cfg.strategy]
        cfg = replace(cfg, venv=chosen.venv_role or cfg.venv, cache=chosen.cache_role or cfg.cache)
        if chosen.cache_role and cfg.cache_state != "cold":
            raise ScenarioError(
                f"{where(src, key)}: {cfg.strategy} fills its cache at the first start "
                f"(cache_state cold, not {cfg.cache_state})"
            )
    if cfg.cache == "off" and cfg.cache_state != "cold":
        raise ScenarioError(
            f"{where(src, key)}: a {cfg.cache_state} cache needs a cache role, not 'off'"
        )
    return cfg


def _axes(t: dict, src: str, key: str) -> dict[str, str]:
    """venv_creator, link_mode (a link mode is uv's: pip always copies), pycache and
    pack_method (a packing strategy's)."""
    link = schema.choice(t.get("link_mode", "default"), LINK_MODES, src, f"{key}.link_mode")
    if link != "default" and t.get("installer", "pip") != "uv":
        raise ScenarioError(
            f"{where(src, key + '.link_mode')}: {link!r} is uv's; pip always copies"
        )
    creator = schema.choice(
        t.get("venv_creator", "virtualenv"), VENV_CREATORS, src, f"{key}.venv_creator"
    )
    pycache = schema.choice(t.get("pycache", "beside"), PYCACHE, src, f"{key}.pycache")
    pack = t.get("pack_method", "")
    pack = (
        schema.choice(pack, ("auto", *PACK_METHODS), src, f"{key}.pack_method")
        if pack != ""
        else ""
    )
    if pack and t.get("strategy", "reinstall") not in PACKING:
        raise ScenarioError(f"{where(src, key + '.pack_method')}: only for strategies that pack "
                            f"a venv ({', '.join(PACKING)})")  # fmt: skip
    return {"venv_creator": creator, "link_mode": link, "pycache": pycache, "pack_method": pack}


def impossible(values: dict) -> bool:
    """A matrix product's combination that cannot be a config: a warm cache that is off, a
    link mode with pip."""
    if values.get("cache") == "off" and values.get("cache_state", "cold") != "cold":
        return True
    return (
        values.get("installer", "pip") != "uv" and values.get("link_mode", "default") != "default"
    )


def check(configs: tuple[Config, ...], image: tuple[str, ...], src: str) -> None:
    """A layered venv sits over the image's packages: the scenario must say what they are."""
    layered = [c.name for c in configs if STRATEGIES[getattr(c, "strategy", "reinstall")].layered]
    if layered and not image:
        raise ScenarioError(
            f"{where(src, 'scenario.image')}: layered-venv (config {layered[0]}) needs the "
            'packages the pod\'s image holds, e.g. image = ["torch==2.13.0"]'
        )


KIND = ScenarioKind(
    rows=rows.KIND, config=config, config_keys=KEYS, impossible=impossible, check=check
)

__all__ = ["KIND", "KEYS", "WHEELS_SHARE", "InstallConfig", "config"]
