"""Scenarios: TOML files that say what to measure, how to check it, and in which configs.

A scenario is validated once, by ``scenario_from_dict``, into frozen dataclasses; every
error names the file and the key (``scenarios/x.toml: configs.naive.cache_state: 'hot' is
not one of cold, warm``), so a typo fails before anything is created. Files speak only the
schema: an unknown table or key is an error, a requirement is a requirement (PEP 508, a
path or a URL; never a pip option), and every number is finite and in a sane range. The
scenario a run stored in its meta.json goes through the same validator on --resume
(``iobench.scenario.stored``). Configs come from ``[configs.NAME]`` tables, from a ``[matrix]``
(the product of axes, minus ``exclude``), or both; what a config holds, and what the
``[workload]`` table takes, is its kind's (``iobench.scenario.kinds``): this module never asks
which kind it reads.

A matrix config without a ``name`` pattern is named from its axes in the order written,
``venv-target_tmpdir-tmp_cache-off_state-cold`` (``cache_state`` is labelled ``state``).
"""

from __future__ import annotations

import itertools
import math
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from iobench.errors import ScenarioError
from iobench.rundir import kinds as rows
from iobench.scenario import kinds, settings
from iobench.scenario.config import Config, ScenarioKind
from iobench.scenario.requirements import dist_name, requirement_problem
from iobench.scenario.schema import (
    check_name,
    choice,
    text,
    toml_key,
    unknown_keys,
    where,
)
from iobench.scenario.vocab import MAX_CONFIGS, named_list, repeats_value
from iobench.units import did_you_mean

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]  # not in every lint venv

SCENARIO_DIR = Path(__file__).parent / "shipped"
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
    "default_configs",
)
SIZE_MB_MAX = 10_000_000.0  # 10 TB
# the default name of a matrix config: "venv-target_tmpdir-tmp_cache-off_state-cold"
# (axis-value pairs joined by '_', in the order the axes are written)
_AXIS_LABEL = {"cache_state": "state"}
#: a stored config's values for the fields its kind does not use (dropped on --resume)
NEUTRAL = ("", "off", "cold", "pip", "on", "reinstall", "virtualenv", "default", "beside")


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
    #: the configs a run measures when ``--configs`` names none (empty: every config); the
    #: others stay declared, for ``--configs`` to name
    default_configs: tuple[str, ...] = ()

    @property
    def installs(self) -> bool:
        """Trials install packages into venvs (the kind says so: ``rundir.kind.Kind.installs``)."""
        return kinds.kind(self.kind).installs

    @property
    def lifecycle(self) -> bool:
        """Trials measure a restart after the first start: some config names a start-up
        strategy (scenarios without one keep their first-start-only meaning)."""
        return any(c.restarts for c in self.configs)

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
        return Scenario(**{**self.__dict__, "configs": picked, "default_configs": ()})

    def by_default(self) -> Scenario:
        """The configs a run without ``--configs`` measures (``default_configs``, else all)."""
        return self.select(list(self.default_configs)) if self.default_configs else self

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
        if not data["default_configs"]:
            data.pop("default_configs")
        return data


def config_keys(kind: str) -> set[str]:
    """The keys a config of this workload kind may hold."""
    return set(kinds.kind(kind).config_keys)


def make_config(name: str, table: object, defaults: dict, src: str, key: str, kind: str) -> Config:
    """One config of a scenario of ``kind`` from its table (and the file's [defaults])."""
    if not isinstance(table, dict):
        raise ScenarioError(f"{where(src, key)}: expected a table")
    return kinds.kind(kind).config(name, table, defaults, src, key)


def _matrix_axes(table: dict, src: str, kind: str) -> tuple[dict, list[dict], str]:
    """A [matrix] table's axes, excludes and name pattern, each checked against the schema."""
    axes = {k: v for k, v in table.items() if k not in ("exclude", "name")}
    for k, v in axes.items():
        if k not in config_keys(kind) - {"description"}:
            raise ScenarioError(f"{where(src, 'matrix.' + k)}: not a config axis")
        if not isinstance(v, list) or not v or len(v) > 100:
            raise ScenarioError(
                f"{where(src, 'matrix.' + k)}: expected a non-empty list (at most 100 values)"
            )
    if math.prod(len(v) for v in axes.values()) > MAX_CONFIGS:
        raise ScenarioError(
            f"{where(src, 'matrix')}: {math.prod(len(v) for v in axes.values()):,} combinations; "
            f"at most {MAX_CONFIGS:,} configs (fewer values per axis)"
        )
    excludes = table.get("exclude", [])
    if not isinstance(excludes, list) or not all(isinstance(e, dict) for e in excludes):
        raise ScenarioError(f"{where(src, 'matrix.exclude')}: expected a list of tables")
    for i, e in enumerate(excludes):
        unknown_keys(e, axes, src, f"matrix.exclude[{i}]", "axis")
    pattern = table.get("name", "")
    if not isinstance(pattern, str):
        raise ScenarioError(
            f'{where(src, "matrix.name")}: expected a pattern string such as "{{venv}}-{{cache}}"'
        )
    return axes, excludes, pattern


def _matrix(table: dict, defaults: dict, src: str, kind: str) -> list[Config]:
    axes, excludes, pattern = _matrix_axes(table, src, kind)
    keys = list(axes)
    out = []
    for combo in itertools.product(*(axes[k] for k in keys)):
        values = dict(zip(keys, combo))
        if any(all(values.get(k) == v for k, v in e.items()) for e in excludes):
            continue
        full = {**defaults, **values}
        if kinds.kind(kind).impossible(full):
            continue  # an impossible combination, not an error in a product
        if pattern:
            try:
                name = pattern.format(**{k: full.get(k, "") for k in config_keys(kind)})
            except (KeyError, IndexError, ValueError, AttributeError, TypeError) as exc:
                raise ScenarioError(f"{where(src, 'matrix.name')}: bad pattern ({exc})") from None
            check_name(name, "generated config name", src, "matrix.name")
        else:
            name = "_".join(f"{_AXIS_LABEL.get(k, k)}-{values[k]}" for k in keys)
            check_name(
                name,
                "generated config name",
                src,
                "matrix",
                ' (set matrix.name to a pattern such as "{venv}-{cache}")',
            )
        out.append(make_config(name, values, defaults, src, f"matrix[{name}]", kind))
    return out


def _packages(value: object, src: str, key: str = "scenario.packages") -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(p, str) for p in value):
        raise ScenarioError(f"{where(src, key)}: expected a non-empty list of requirement strings")
    for i, req in enumerate(value):
        problem = requirement_problem(req)
        if problem:
            raise ScenarioError(f"{where(src, f'{key}[{i}]')}: {req[:80]!r}: {problem}")
    return tuple(value)


def _ready(value: object, src: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ScenarioError(
            f"{where(src, 'scenario.ready')}: expected Python code to run in the new venv"
        )
    try:
        compile(value, f"{src}:scenario.ready", "exec")
    except (SyntaxError, ValueError) as exc:
        raise ScenarioError(
            f"{where(src, 'scenario.ready')}: not valid Python ({getattr(exc, 'msg', exc)})"
        ) from None
    return value


def _numbers(s: dict, src: str) -> tuple[int, bool, float | None]:
    """repeats (and whether "auto") and size_mb: finite and in a sane range."""
    repeats, auto = repeats_value(s.get("repeats", 3), where(src, "scenario.repeats"))
    size_mb = s.get("size_mb")
    if size_mb is not None and (
        not isinstance(size_mb, (int, float))
        or isinstance(size_mb, bool)
        or not math.isfinite(size_mb)
        or not 0 <= size_mb <= SIZE_MB_MAX
    ):
        raise ScenarioError(
            f"{where(src, 'scenario.size_mb')}: expected a number from 0 to {SIZE_MB_MAX:.0f}"
        )
    return repeats, auto, float(size_mb) if size_mb is not None else None


def _configs(data: dict, defaults: dict, src: str, legacy: bool, kind: str) -> tuple[Config, ...]:
    raw_configs = data.get("configs", {})
    if not isinstance(raw_configs, dict):
        raise ScenarioError(f"{where(src, 'configs')}: expected tables [configs.NAME]")
    configs: list[Config] = []
    for cname, table in raw_configs.items():
        key = f"configs.{toml_key(cname)}"
        check_name(cname, "config name", src, key, legacy=legacy)
        configs.append(make_config(cname, table, defaults, src, key, kind))
    if "matrix" in data:
        if not isinstance(data["matrix"], dict):
            raise ScenarioError(f"{where(src, 'matrix')}: expected a table")
        configs.extend(_matrix(data["matrix"], defaults, src, kind))
    if not configs:
        raise ScenarioError(f"{src}: no configs (add [configs.NAME] tables or a [matrix])")
    seen: set[str] = set()
    for c in configs:
        if c.name in seen:
            raise ScenarioError(f"{where(src, 'configs')}: config name '{c.name}' used twice")
        seen.add(c.name)
    return tuple(configs)


def _check_workload(
    spec: ScenarioKind, workload: dict, configs: tuple[Config, ...], at: str
) -> None:
    """The [workload] table holds what the kind takes, for every config; its
    [workload.by_config.NAME] names a config of the file (a selection may run fewer)."""
    settings.check_by_config(workload, [c.name for c in configs], at)
    for c in configs:
        spec.settings(workload, c.name, at)


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
    name = check_name(s.get("name"), "scenario name", src, "scenario.name", legacy=legacy_names)
    kind = choice(s.get("kind", rows.DEFAULT), tuple(kinds.KINDS), src, "scenario.kind")
    spec = kinds.kind(kind)
    installs = spec.installs  # other kinds install nothing: no packages, no ready check
    packages = _packages(s.get("packages"), src) if installs or s.get("packages") else ()
    wheels = s.get("wheels")
    if wheels is not None and (not isinstance(wheels, str) or not wheels or "\0" in wheels):
        raise ScenarioError(f"{where(src, 'scenario.wheels')}: expected a profile name or path")
    if wheels and wheels.endswith(".toml") and not Path(wheels).is_absolute():
        wheels = str((Path(src).parent / wheels).resolve())  # relative to the scenario file
    ready = _ready(s.get("ready"), src) if installs or s.get("ready") else ""
    workload = data.get("workload", {})
    if not isinstance(workload, dict):
        raise ScenarioError(f"{where(src, 'workload')}: expected a table [workload]")
    repeats, auto, size_mb = _numbers(s, src)
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise ScenarioError(f"{where(src, 'defaults')}: expected a table")
    unknown_keys(defaults, config_keys(kind), src, "defaults")
    configs = _configs(data, defaults, src, legacy_names, kind)
    _check_workload(spec, workload, configs, where(src, "workload"))
    image = _packages(s["image"], src, "scenario.image") if s.get("image") else ()
    spec.check(configs, image, src)
    default = _default_configs(s.get("default_configs"), configs, src)
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
        description=text(s.get("description", ""), src, "scenario.description"),
        size_mb=size_mb if size_mb is not None else spec.size_mb(workload),
        workload=workload,
        image=image,
        default_configs=default,
    )


def _default_configs(value: object, configs: tuple[Config, ...], src: str) -> tuple[str, ...]:
    """``default_configs``: names of the scenario's own configs, each once."""
    if value is None:
        return ()
    key = where(src, "scenario.default_configs")
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ScenarioError(f"{key}: expected a non-empty list of config names")
    names = [c.name for c in configs]
    for v in value:
        if v not in names:
            hint = did_you_mean(v[:80], names)
            raise ScenarioError(f"{key}: no config '{v[:80]}'{': ' + hint if hint else ''}")
    if len(set(value)) != len(value):
        raise ScenarioError(f"{key}: a config named twice")
    return tuple(value)


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
