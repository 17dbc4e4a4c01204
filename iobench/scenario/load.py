"""Scenarios: TOML files that say what to install, how to check it, and in which configs.

A scenario is validated once, by ``scenario_from_dict``, into frozen dataclasses; every
error names the file and the key (``scenarios/x.toml: configs.naive.cache_state: 'hot' is
not one of cold, warm``), so a typo fails before anything is created. Files speak only the
schema: an unknown table or key is an error, a requirement is a requirement (PEP 508, a
path or a URL; never a pip option), and every number is finite and in a sane range. The
scenario a run stored in its meta.json goes through the same validator on --resume
(``iobench.scenario.stored``). Configs come from ``[configs.NAME]`` tables, from a ``[matrix]``
(the product of axes, minus ``exclude``), or both.

Scenario and config names become path components, so they are checked against
``NAME_RE`` (letters, digits, '.', '_', '-'; first a letter or digit; at most ``NAME_MAX``).
A matrix config without a ``name`` pattern is named from its axes in the order written,
``venv-target_tmpdir-tmp_cache-off_state-cold`` (``cache_state`` is labelled ``state``).
"""

from __future__ import annotations

import itertools
import json
import math
import re
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from iobench.errors import ScenarioError
from iobench.rundir.records import SAFE_NAME_MAX, SAFE_NAME_RE
from iobench.scenario import settings
from iobench.scenario.requirements import dist_name, requirement_problem
from iobench.scenario.vocab import (
    CACHE_STATES,
    INSTALLERS,
    LINK_MODES,
    MAX_CONFIGS,
    ON_OFF,
    PACK_METHODS,
    PACKING,
    PYCACHE,
    STRATEGIES,
    VENV_CREATORS,
    WORKLOADS,
    named_list,
    repeats_value,
)
from iobench.units import did_you_mean

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]  # not in every lint venv

SCENARIO_DIR = Path(__file__).parent / "shipped"
_CONFIG_KEYS = {
    "venv",
    "tmpdir",
    "cache",
    "cache_state",
    "installer",
    "compile",
    "description",
    "strategy",
}
#: vocab: VENV_CREATORS, LINK_MODES, PYCACHE, PACK_METHODS (packed-venv's and fan-out's)
_CONFIG_KEYS |= {"venv_creator", "link_mode", "pycache", "pack_method"}
#: a ``dataset`` config's keys: the role the training data lives on, the role it is copied to
#: before the epochs (``off``: read in place), and its description (iobench.trial.dataset)
_DATA_KEYS = {"data", "stage", "description"}
#: a ``checkpoint`` config's keys: the role the checkpoint is saved to (the GPU waits for it),
#: the role it is copied to in the background (``off``: none), and its description
#: (iobench.trial.checkpoint)
_CKPT_KEYS = {"save", "copy_to", "description"}
#: the kinds whose config places one thing on a role and may copy it to another: kind ->
#: (the role's key, what it holds, the copy's key, what naming the same role for both means)
_PLACED = {
    "dataset": ("data", "the role holding the data", "stage",
                "where the data already is (stage names the role it is copied to, or 'off')"),
    "checkpoint": ("save", "the role the checkpoint is saved to", "copy_to",
                   "where the checkpoint is saved (copy_to names the role it is copied to, "
                   "or 'off')"),
}  # fmt: skip
# the schema: what each table may hold (anything else is an error naming file and key)
_TABLES = ("scenario", "defaults", "configs", "matrix", "workload")
SCENARIO_KEYS = (
    "name",
    "kind",
    "packages",
    "wheels",
    "ready",
    "repeats",
    "description",
    "size_mb",
    "image",
)
SIZE_MB_MAX = 10_000_000.0  # 10 TB
# Scenario and config names become path components (venv folders, samples/<trial_id>.csv,
# logs): letters, digits, '.', '_', '-', not starting with '.' or '-' (so no '..', no
# hidden files, nothing an option parser takes for a flag), and short enough for a path.
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
NAME_MAX = 80
NAME_RULE = (
    f"must be 1-{NAME_MAX} letters, digits, '.', '_' or '-', starting with a letter or digit"
)
# Runs made before names were checked may hold the old default matrix names, which contain
# '=' (venv=target-tmpdir=tmp): harmless in a path, so --resume still accepts them (the
# run directory's own rule for names read back, iobench.rundir.records.SAFE_NAME_RE).
# the default name of a matrix config: "venv-target_tmpdir-tmp_cache-off_state-cold"
# (axis-value pairs joined by '_', in the order the axes are written)
_AXIS_LABEL = {"cache_state": "state"}
_BARE_KEY_RE = re.compile(r"^[A-Za-z0-9_-]+$")
#: a stored config's values for the fields its kind does not use (dropped on --resume)
NEUTRAL = ("", "off", "cold", "pip", "on", "reinstall", "virtualenv", "default", "beside")


@dataclass(frozen=True)
class Config:
    """Where each thing lives, by role, and how the install is done."""

    name: str
    venv: str
    tmpdir: str
    cache: str  # a role, or "off"
    cache_state: str = "cold"
    installer: str = "pip"
    compile: str = "on"
    description: str = ""
    strategy: str = "reinstall"  # iobench.trial.strategies: where the venv lives between starts
    venv_creator: str = "virtualenv"  # iobench.scenario.vocab.VENV_CREATORS
    link_mode: str = "default"  # uv's UV_LINK_MODE (iobench.scenario.vocab.LINK_MODES); uv only
    pycache: str = "beside"  # where imports write bytecode (iobench.scenario.vocab.PYCACHE)
    pack_method: str = ""  # a packing strategy's archive and restore ("": the run's --pack-method)
    data: str = ""  # a dataset config's data role ("" for installs: they read no data)
    stage: str = "off"  # a dataset config's local copy of the data, or "off" (read in place)
    save: str = ""  # a checkpoint config's role the save goes to ("" for other kinds)
    copy_to: str = "off"  # a checkpoint config's background copy's role, or "off"

    def summary(self) -> str:
        """Where things live and how, in one line (``iobench scenarios``, the dry run)."""
        if self.data:
            return f"data={self.data} stage={self.stage}"
        return (
            f"venv={self.venv} tmpdir={self.tmpdir} cache={self.cache} {self.cache_state} "
            f"{self.installer} compile={self.compile}"
            + (f" venv_creator={self.venv_creator}" if self.venv_creator != "virtualenv" else "")
            + (f" link_mode={self.link_mode}" if self.link_mode != "default" else "")
            + (f" pycache={self.pycache}" if self.pycache != "beside" else "")
            + (f" pack_method={self.pack_method}" if self.pack_method else "")
        )

    def roles(self) -> set[str]:
        """Every role the config puts something on (its trials get a folder on each)."""
        used = {self.venv, self.tmpdir, self.data, self.save} | {self.cache, self.stage}
        return (used | {self.copy_to}) - {"", "off"}


@dataclass(frozen=True)
class Scenario:
    """A validated scenario."""

    name: str
    source: str
    kind: str
    packages: tuple[str, ...]
    wheels: str | None  # synthetic profile name/path, served from the loopback index
    ready: str
    repeats: int
    configs: tuple[Config, ...]
    description: str = ""
    size_mb: float | None = None  # estimated installed size, for the free-space check
    extra: dict = field(default_factory=dict)
    workload: dict = field(default_factory=dict)  # the [workload] table: the kind's settings
    repeats_auto: bool = False  # repeats = "auto[:N]": repeat until settled, ``repeats`` at most
    image: tuple[str, ...] = ()  # what the pod's image holds (layered-venv's base)

    @property
    def installs(self) -> bool:
        """Trials install packages into venvs (the ``install`` kind)."""
        return self.kind == "install"

    @property
    def lifecycle(self) -> bool:
        """Trials measure a restart after the first start: some config names a strategy other
        than ``reinstall`` (scenarios without one keep their first-start-only meaning)."""
        return any(c.strategy != "reinstall" for c in self.configs)

    def config(self, name: str) -> Config:
        for c in self.configs:
            if c.name == name:
                return c
        names = [c.name for c in self.configs]
        hint = did_you_mean(name[:80], names)
        raise ScenarioError(
            f"unknown config '{name[:80]}' in scenario {self.name}"
            f"{': ' + hint if hint else ''} (known: {named_list(names)})"
        )

    def select(self, names: list[str] | None) -> Scenario:
        """The same scenario with only the named configs, in the order given."""
        if not names:
            return self
        seen: set[str] = set()
        for n in names:
            if n in seen:
                raise ScenarioError(
                    f"--configs: config '{n}' given twice (each config runs once per repeat)"
                )
            seen.add(n)
        picked = tuple(self.config(n) for n in names)
        return Scenario(**{**self.__dict__, "configs": picked})

    def with_packages(self, packages: list[str]) -> Scenario:
        """The same scenario installing other requirements (e.g. a pinned torch). A scenario
        of synthetic wheels (smoke) keeps its configs but not its wheels, its size or its
        ready check, which imports a synthetic module: the packages come from a real index
        and are ready when each requirement's distribution is installed."""
        for req in packages:
            problem = requirement_problem(req)
            if problem:
                raise ScenarioError(f"--package {req[:80]!r}: {problem}")
        given = tuple(p.strip() for p in packages)
        if not self.wheels:
            return replace(self, packages=given)
        names = tuple(n for n in map(dist_name, given) if n)
        ready = f"import importlib.metadata as m; [m.version(n) for n in {names!r}]"
        about = f"{self.name}'s configs installing {', '.join(names)} from a real index"
        return replace(
            self, packages=given, wheels=None, ready=ready, size_mb=None, description=about
        )

    def to_dict(self) -> dict:
        """The stored form (meta.json): the TOML's shape, ``repeats`` as written there."""
        data = asdict(self)
        if data.pop("repeats_auto"):
            data["repeats"] = f"auto:{self.repeats}"
        return data


def _where(src: str, key: str) -> str:
    return f"{src}: {key}"


def _key(name: str) -> str:
    """A name as a TOML key: bare if it can be, quoted otherwise (``configs."../x"``)."""
    return name if _BARE_KEY_RE.match(name) else json.dumps(name)


def name_problem(name: object, legacy: bool = False) -> str | None:
    """Why ``name`` cannot be a scenario or config name (a path component), or None.

    ``legacy``: also accept the names older runs hold ('=' allowed, up to 200 characters).
    """
    if not isinstance(name, str) or not name:
        return "missing or not a string"
    most = SAFE_NAME_MAX if legacy else NAME_MAX
    if len(name) > most:
        return f"{name[:20]!r}... is {len(name)} characters; names must be at most {most}"
    if not (SAFE_NAME_RE if legacy else NAME_RE).match(name):
        return f"{name[:80]!r} {NAME_RULE}"
    return None


def _check_name(
    name: object, what: str, src: str, key: str, hint: str = "", legacy: bool = False
) -> str:
    problem = name_problem(name, legacy)
    if problem:
        raise ScenarioError(f"{_where(src, key)}: {what} {problem}{hint}")
    return name  # type: ignore[return-value]


def _choice(value: object, allowed: tuple[str, ...], src: str, key: str) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ScenarioError(f"{_where(src, key)}: {value!r} is not one of {', '.join(allowed)}")
    return value


def _role(value: object, src: str, key: str, allow_off: bool = False) -> str:
    if not isinstance(value, str) or not value:
        raise ScenarioError(f"{_where(src, key)}: expected a role name (e.g. target, tmp)")
    if value == "off" and not allow_off:
        raise ScenarioError(f"{_where(src, key)}: 'off' is only allowed for cache")
    problem = name_problem(value)
    if problem:
        raise ScenarioError(f"{_where(src, key)}: role {problem}")
    return value


def _text(value: object, src: str, key: str) -> str:
    if not isinstance(value, str):
        raise ScenarioError(f"{_where(src, key)}: expected a string")
    return value


def unknown_keys(
    table: dict, allowed: Iterable[str], src: str, key: str, what: str = "key"
) -> None:
    """Scenario files speak only the schema: a key it does not define is an error, not ignored."""
    unknown = sorted(str(k) for k in table if k not in set(allowed))
    if unknown:
        where = f"{src}: {key}" if key else src
        raise ScenarioError(
            f"{where}: unknown {what}(s) {', '.join(unknown)} (known: {', '.join(sorted(allowed))})"
        )


def _config(name: str, table: dict, defaults: dict, src: str, key: str, kind: str) -> Config:
    if not isinstance(table, dict):
        raise ScenarioError(f"{_where(src, key)}: expected a table")
    if kind in _PLACED:
        return _placed_config(name, table, defaults, src, key, kind)
    unknown_keys(table, _CONFIG_KEYS, src, key)
    t = {**defaults, **table}
    for needed in ("venv", "tmpdir", "cache"):
        if needed not in t:
            raise ScenarioError(f"{_where(src, key + '.' + needed)}: missing")
    cfg = Config(
        name=name,
        venv=_role(t["venv"], src, f"{key}.venv"),
        tmpdir=_role(t["tmpdir"], src, f"{key}.tmpdir"),
        cache=_role(t["cache"], src, f"{key}.cache", allow_off=True),
        cache_state=_choice(t.get("cache_state", "cold"), CACHE_STATES, src, f"{key}.cache_state"),
        installer=_choice(t.get("installer", "pip"), INSTALLERS, src, f"{key}.installer"),
        compile=_choice(t.get("compile", "on"), ON_OFF, src, f"{key}.compile"),
        description=_text(t.get("description", ""), src, f"{key}.description"),
        strategy=_strategy(t, src, key),
        **_install_axes(t, src, key),
    )
    if cfg.strategy != "reinstall":  # the strategy decides where its venv (and cache) live
        chosen = STRATEGIES[cfg.strategy]
        cfg = replace(cfg, venv=chosen.venv_role or cfg.venv, cache=chosen.cache_role or cfg.cache)
        if chosen.cache_role and cfg.cache_state != "cold":
            raise ScenarioError(
                f"{_where(src, key)}: {cfg.strategy} fills its cache at the first start "
                f"(cache_state cold, not {cfg.cache_state})"
            )
    if cfg.cache == "off" and cfg.cache_state != "cold":
        raise ScenarioError(
            f"{_where(src, key)}: a {cfg.cache_state} cache needs a cache role, not 'off'"
        )
    return cfg


def _placed_config(name: str, table: dict, defaults: dict, src: str, key: str, kind: str) -> Config:
    """A ``dataset`` config (where the data lives, where it is copied first) or a
    ``checkpoint`` config (where it is saved, where it is copied after): a role and a second
    role or ``off``; no venv, TMPDIR or installer cache (the rest is the [workload]'s)."""
    first, holds, second, same = _PLACED[kind]
    unknown_keys(table, config_keys(kind), src, key)
    t = {**defaults, **table}
    if first not in t:
        raise ScenarioError(f"{_where(src, key + '.' + first)}: missing ({holds})")
    role = _role(t[first], src, f"{key}.{first}")
    copy = t.get(second, "off")
    if copy != "off":
        copy = _role(copy, src, f"{key}.{second}")
    if copy == role:
        raise ScenarioError(f"{_where(src, key + '.' + second)}: {copy!r} is {same}")
    return Config(name=name, venv="", tmpdir="", cache="off", **{first: role, second: copy},
                  description=_text(t.get("description", ""), src, f"{key}.description"))  # fmt: skip


def _install_axes(t: dict, src: str, key: str) -> dict[str, str]:
    """venv_creator, link_mode (a link mode is uv's: pip always copies), pycache and
    pack_method (a packing strategy's)."""
    link = _choice(t.get("link_mode", "default"), LINK_MODES, src, f"{key}.link_mode")
    if link != "default" and t.get("installer", "pip") != "uv":
        raise ScenarioError(
            f"{_where(src, key + '.link_mode')}: {link!r} is uv's; pip always copies"
        )
    creator = _choice(
        t.get("venv_creator", "virtualenv"), VENV_CREATORS, src, f"{key}.venv_creator"
    )
    pycache = _choice(t.get("pycache", "beside"), PYCACHE, src, f"{key}.pycache")
    pack = t.get("pack_method", "")
    pack = _choice(pack, ("auto", *PACK_METHODS), src, f"{key}.pack_method") if pack != "" else ""
    if pack and t.get("strategy", "reinstall") not in PACKING:
        raise ScenarioError(f"{_where(src, key + '.pack_method')}: only for strategies that pack "
                            f"a venv ({', '.join(PACKING)})")  # fmt: skip
    return {"venv_creator": creator, "link_mode": link, "pycache": pycache, "pack_method": pack}


def _strategy(t: dict, src: str, key: str) -> str:
    return _choice(t.get("strategy", "reinstall"), tuple(STRATEGIES), src, f"{key}.strategy")


def _matrix_axes(table: dict, src: str, kind: str) -> tuple[dict, list[dict], str]:
    """A [matrix] table's axes, excludes and name pattern, each checked against the schema."""
    axes = {k: v for k, v in table.items() if k not in ("exclude", "name")}
    for k, v in axes.items():
        if k not in config_keys(kind) - {"description"}:
            raise ScenarioError(f"{_where(src, 'matrix.' + k)}: not a config axis")
        if not isinstance(v, list) or not v or len(v) > 100:
            raise ScenarioError(
                f"{_where(src, 'matrix.' + k)}: expected a non-empty list (at most 100 values)"
            )
    if math.prod(len(v) for v in axes.values()) > MAX_CONFIGS:
        raise ScenarioError(
            f"{_where(src, 'matrix')}: {math.prod(len(v) for v in axes.values()):,} combinations; "
            f"at most {MAX_CONFIGS:,} configs (fewer values per axis)"
        )
    excludes = table.get("exclude", [])
    if not isinstance(excludes, list) or not all(isinstance(e, dict) for e in excludes):
        raise ScenarioError(f"{_where(src, 'matrix.exclude')}: expected a list of tables")
    for i, e in enumerate(excludes):
        unknown_keys(e, axes, src, f"matrix.exclude[{i}]", "axis")
    pattern = table.get("name", "")
    if not isinstance(pattern, str):
        raise ScenarioError(
            f'{_where(src, "matrix.name")}: expected a pattern string such as "{{venv}}-{{cache}}"'
        )
    return axes, excludes, pattern


def config_keys(kind: str) -> set[str]:
    """The keys a config of this workload kind may hold."""
    return {"dataset": _DATA_KEYS, "checkpoint": _CKPT_KEYS}.get(kind, _CONFIG_KEYS)


def _matrix(table: dict, defaults: dict, src: str, kind: str) -> list[Config]:
    axes, excludes, pattern = _matrix_axes(table, src, kind)
    keys = list(axes)
    out = []
    for combo in itertools.product(*(axes[k] for k in keys)):
        values = dict(zip(keys, combo))
        if any(all(values.get(k) == v for k, v in e.items()) for e in excludes):
            continue
        full = {**defaults, **values}
        if full.get("cache") == "off" and full.get("cache_state", "cold") != "cold":
            continue  # impossible combination, not an error in a product
        if full.get("installer", "pip") != "uv" and full.get("link_mode", "default") != "default":
            continue  # a link mode is uv's
        if pattern:
            try:
                name = pattern.format(**{k: full.get(k, "") for k in config_keys(kind)})
            except (KeyError, IndexError, ValueError, AttributeError, TypeError) as exc:
                raise ScenarioError(f"{_where(src, 'matrix.name')}: bad pattern ({exc})") from None
            _check_name(name, "generated config name", src, "matrix.name")
        else:
            name = "_".join(f"{_AXIS_LABEL.get(k, k)}-{values[k]}" for k in keys)
            _check_name(
                name,
                "generated config name",
                src,
                "matrix",
                ' (set matrix.name to a pattern such as "{venv}-{cache}")',
            )
        out.append(_config(name, values, defaults, src, f"matrix[{name}]", kind))
    return out


def _packages(value: object, src: str, key: str = "scenario.packages") -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(p, str) for p in value):
        raise ScenarioError(f"{_where(src, key)}: expected a non-empty list of requirement strings")
    for i, req in enumerate(value):
        problem = requirement_problem(req)
        if problem:
            raise ScenarioError(f"{_where(src, f'{key}[{i}]')}: {req[:80]!r}: {problem}")
    return tuple(value)


def _ready(value: object, src: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ScenarioError(
            f"{_where(src, 'scenario.ready')}: expected Python code to run in the new venv"
        )
    try:
        compile(value, f"{src}:scenario.ready", "exec")
    except (SyntaxError, ValueError) as exc:
        raise ScenarioError(
            f"{_where(src, 'scenario.ready')}: not valid Python ({getattr(exc, 'msg', exc)})"
        ) from None
    return value


def _numbers(s: dict, src: str) -> tuple[int, bool, float | None]:
    """repeats (and whether "auto") and size_mb: finite and in a sane range."""
    repeats, auto = repeats_value(s.get("repeats", 3), _where(src, "scenario.repeats"))
    size_mb = s.get("size_mb")
    if size_mb is not None and (
        not isinstance(size_mb, (int, float))
        or isinstance(size_mb, bool)
        or not math.isfinite(size_mb)
        or not 0 <= size_mb <= SIZE_MB_MAX
    ):
        raise ScenarioError(
            f"{_where(src, 'scenario.size_mb')}: expected a number from 0 to {SIZE_MB_MAX:.0f}"
        )
    return repeats, auto, float(size_mb) if size_mb is not None else None


def _configs(data: dict, defaults: dict, src: str, legacy: bool, kind: str) -> tuple[Config, ...]:
    raw_configs = data.get("configs", {})
    if not isinstance(raw_configs, dict):
        raise ScenarioError(f"{_where(src, 'configs')}: expected tables [configs.NAME]")
    configs: list[Config] = []
    for cname, table in raw_configs.items():
        key = f"configs.{_key(cname)}"
        _check_name(cname, "config name", src, key, legacy=legacy)
        configs.append(_config(cname, table, defaults, src, key, kind))
    if "matrix" in data:
        if not isinstance(data["matrix"], dict):
            raise ScenarioError(f"{_where(src, 'matrix')}: expected a table")
        configs.extend(_matrix(data["matrix"], defaults, src, kind))
    if not configs:
        raise ScenarioError(f"{src}: no configs (add [configs.NAME] tables or a [matrix])")
    seen: set[str] = set()
    for c in configs:
        if c.name in seen:
            raise ScenarioError(f"{_where(src, 'configs')}: config name '{c.name}' used twice")
        seen.add(c.name)
    return tuple(configs)


def scenario_from_dict(data: dict, src: str, legacy_names: bool = False) -> Scenario:
    """Validate a parsed TOML document (``src`` names it in errors): the one validator.

    ``legacy_names``: accept the names older runs hold (for a scenario read back from a
    run's meta.json by ``scenario_from_meta``).
    """
    if not isinstance(data, dict):
        raise ScenarioError(f"{src}: expected a table")
    unknown_keys(data, _TABLES, src, "", "table")
    s = data.get("scenario")
    if not isinstance(s, dict):
        raise ScenarioError(f"{src}: missing [scenario] table")
    unknown_keys(s, SCENARIO_KEYS, src, "scenario")
    name = _check_name(s.get("name"), "scenario name", src, "scenario.name", legacy=legacy_names)
    kind = _choice(s.get("kind", "install"), WORKLOADS, src, "scenario.kind")
    installs = kind == "install"  # other kinds install nothing: no packages, no ready check
    packages = _packages(s.get("packages"), src) if installs or s.get("packages") else ()
    wheels = s.get("wheels")
    if wheels is not None and (not isinstance(wheels, str) or not wheels or "\0" in wheels):
        raise ScenarioError(f"{_where(src, 'scenario.wheels')}: expected a profile name or path")
    if wheels and wheels.endswith(".toml") and not Path(wheels).is_absolute():
        wheels = str((Path(src).parent / wheels).resolve())  # relative to the scenario file
    ready = _ready(s.get("ready"), src) if installs or s.get("ready") else ""
    workload = data.get("workload", {})
    if not isinstance(workload, dict):
        raise ScenarioError(f"{_where(src, 'workload')}: expected a table [workload]")
    repeats, auto, size_mb = _numbers(s, src)
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise ScenarioError(f"{_where(src, 'defaults')}: expected a table")
    unknown_keys(defaults, config_keys(kind), src, "defaults")
    configs = _configs(data, defaults, src, legacy_names, kind)
    # [workload.by_config.NAME] names a config of the file (a selection may run fewer)
    settings.check_by_config(workload, [c.name for c in configs], _where(src, "workload"))
    image = _packages(s["image"], src, "scenario.image") if s.get("image") else ()
    layered = [c.name for c in configs if STRATEGIES[c.strategy].layered]
    if layered and not image:
        raise ScenarioError(
            f"{_where(src, 'scenario.image')}: layered-venv (config {layered[0]}) needs the "
            'packages the pod\'s image holds, e.g. image = ["torch==2.13.0"]'
        )
    return Scenario(
        name=name,
        source=src,
        kind=kind,
        packages=packages,
        wheels=wheels,
        ready=ready,
        repeats=repeats,
        repeats_auto=auto,
        configs=configs,
        description=_text(s.get("description", ""), src, "scenario.description"),
        size_mb=size_mb,
        workload=workload,
        image=image,
    )


def shipped() -> list[str]:
    """Names of the scenarios that come with iobench."""
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.toml"))


def load_scenario(name_or_path: str) -> Scenario:
    """Load a shipped scenario by name, or any scenario TOML by path."""
    path = Path(name_or_path)
    if path.suffix != ".toml" and not path.exists():
        path = SCENARIO_DIR / f"{name_or_path}.toml"
        if not path.is_file():
            hint = did_you_mean(str(name_or_path), shipped())
            raise ScenarioError(
                f"unknown scenario '{name_or_path}'{': ' + hint if hint else ''} "
                f"(shipped: {', '.join(shipped())}; or give a .toml path)"
            )
    if not path.is_file():
        raise ScenarioError(f"scenario file {path} does not exist")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path}: not valid TOML ({exc})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{path}: cannot be read ({exc})") from None
    return scenario_from_dict(data, str(path))
