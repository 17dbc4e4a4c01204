"""Scenarios: TOML files that say what to install, how to check it, and in which configs.

A scenario is validated once into frozen dataclasses; every error names the file and the
key (``scenarios/x.toml: configs.naive.cache_state: 'hot' is not one of cold, warm``), so
a typo fails before anything is created. Configs come from ``[configs.NAME]`` tables, from
a ``[matrix]`` (the product of axes, minus ``exclude``), or both.

Scenario and config names become path components, so they are checked against
``NAME_RE`` (letters, digits, '.', '_', '-'; first a letter or digit; at most ``NAME_MAX``).
A matrix config without a ``name`` pattern is named from its axes in the order written,
``venv-target_tmpdir-tmp_cache-off_state-cold`` (``cache_state`` is labelled ``state``).
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from iobench.errors import RunDirError, ScenarioError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

SCENARIO_DIR = Path(__file__).parent / "scenarios"
INSTALLERS = ("pip", "uv")
CACHE_STATES = ("cold", "warm")
ON_OFF = ("on", "off")
KINDS = ("install",)
_CONFIG_KEYS = {"venv", "tmpdir", "cache", "cache_state", "installer", "compile", "description"}
# Scenario and config names become path components (venv folders, samples/<trial_id>.csv,
# logs): letters, digits, '.', '_', '-', not starting with '.' or '-' (so no '..', no
# hidden files, nothing an option parser takes for a flag), and short enough for a path.
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
NAME_MAX = 80
NAME_RULE = f"must be 1-{NAME_MAX} letters, digits, '.', '_' or '-', starting with a letter or digit"
# the default name of a matrix config: "venv-target_tmpdir-tmp_cache-off_state-cold"
# (axis-value pairs joined by '_', in the order the axes are written)
_AXIS_LABEL = {"cache_state": "state"}
_BARE_KEY_RE = re.compile(r"^[A-Za-z0-9_-]+$")


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

    def roles(self) -> set[str]:
        return {self.venv, self.tmpdir} | ({self.cache} if self.cache != "off" else set())


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

    def config(self, name: str) -> Config:
        for c in self.configs:
            if c.name == name:
                return c
        raise ScenarioError(
            f"unknown config '{name}' in scenario {self.name} "
            f"(known: {', '.join(c.name for c in self.configs)})"
        )

    def select(self, names: list[str] | None) -> Scenario:
        """The same scenario with only the named configs, in the order given."""
        if not names:
            return self
        seen: set[str] = set()
        for n in names:
            if n in seen:
                raise ScenarioError(f"--configs: config '{n}' given twice (each config runs once per repeat)")
            seen.add(n)
        picked = tuple(self.config(n) for n in names)
        return Scenario(**{**self.__dict__, "configs": picked})

    def with_packages(self, packages: list[str]) -> Scenario:
        """The same scenario installing other requirements (e.g. a pinned torch)."""
        for req in packages:
            if not req.strip() or req.strip().startswith("-"):
                raise ScenarioError(f"--package {req!r}: expected a requirement such as torch==2.13.0")
        return Scenario(**{**self.__dict__, "packages": tuple(p.strip() for p in packages)})

    def to_dict(self) -> dict:
        return asdict(self)


def _where(src: str, key: str) -> str:
    return f"{src}: {key}"


def _key(name: str) -> str:
    """A name as a TOML key: bare if it can be, quoted otherwise (``configs."../x"``)."""
    return name if _BARE_KEY_RE.match(name) else json.dumps(name)


def name_problem(name: object) -> str | None:
    """Why ``name`` cannot be a scenario or config name (a path component), or None."""
    if not isinstance(name, str) or not name:
        return "missing or not a string"
    if len(name) > NAME_MAX:
        return f"{name[:20]!r}... is {len(name)} characters; names must be at most {NAME_MAX}"
    if not NAME_RE.match(name):
        return f"{name!r} {NAME_RULE}"
    return None


def _check_name(name: object, what: str, src: str, key: str, hint: str = "") -> str:
    problem = name_problem(name)
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
    return value


def _config(name: str, table: dict, defaults: dict, src: str, key: str) -> Config:
    if not isinstance(table, dict):
        raise ScenarioError(f"{_where(src, key)}: expected a table")
    unknown = set(table) - _CONFIG_KEYS
    if unknown:
        raise ScenarioError(f"{_where(src, key)}: unknown key(s) {', '.join(sorted(unknown))}")
    t = {**defaults, **table}
    for required in ("venv", "tmpdir", "cache"):
        if required not in t:
            raise ScenarioError(f"{_where(src, key + '.' + required)}: missing")
    cfg = Config(
        name=name,
        venv=_role(t["venv"], src, f"{key}.venv"),
        tmpdir=_role(t["tmpdir"], src, f"{key}.tmpdir"),
        cache=_role(t["cache"], src, f"{key}.cache", allow_off=True),
        cache_state=_choice(t.get("cache_state", "cold"), CACHE_STATES, src, f"{key}.cache_state"),
        installer=_choice(t.get("installer", "pip"), INSTALLERS, src, f"{key}.installer"),
        compile=_choice(t.get("compile", "on"), ON_OFF, src, f"{key}.compile"),
        description=str(t.get("description", "")),
    )
    if cfg.cache == "off" and cfg.cache_state == "warm":
        raise ScenarioError(f"{_where(src, key)}: a warm cache needs a cache role, not 'off'")
    return cfg


def _matrix(table: dict, defaults: dict, src: str) -> list[Config]:
    axes = {k: v for k, v in table.items() if k not in ("exclude", "name")}
    for k, v in axes.items():
        if k not in _CONFIG_KEYS - {"description"}:
            raise ScenarioError(f"{_where(src, 'matrix.' + k)}: not a config axis")
        if not isinstance(v, list) or not v:
            raise ScenarioError(f"{_where(src, 'matrix.' + k)}: expected a non-empty list")
    excludes = table.get("exclude", [])
    if not isinstance(excludes, list) or not all(isinstance(e, dict) for e in excludes):
        raise ScenarioError(f"{_where(src, 'matrix.exclude')}: expected a list of tables")
    pattern = table.get("name", "")
    if not isinstance(pattern, str):
        raise ScenarioError(f"{_where(src, 'matrix.name')}: expected a pattern string such as \"{{venv}}-{{cache}}\"")
    keys = list(axes)
    out = []
    for combo in itertools.product(*(axes[k] for k in keys)):
        values = dict(zip(keys, combo))
        if any(all(values.get(k) == v for k, v in e.items()) for e in excludes):
            continue
        full = {**defaults, **values}
        if full.get("cache") == "off" and full.get("cache_state") == "warm":
            continue  # impossible combination, not an error in a product
        if pattern:
            try:
                name = pattern.format(**{k: full.get(k, "") for k in _CONFIG_KEYS})
            except (KeyError, IndexError, ValueError, AttributeError, TypeError) as exc:
                raise ScenarioError(f"{_where(src, 'matrix.name')}: bad pattern ({exc})") from None
            _check_name(name, "generated config name", src, "matrix.name")
        else:
            name = "_".join(f"{_AXIS_LABEL.get(k, k)}-{values[k]}" for k in keys)
            _check_name(
                name, "generated config name", src, "matrix",
                " (set matrix.name to a pattern such as \"{venv}-{cache}\")",
            )
        out.append(_config(name, values, defaults, src, f"matrix[{name}]"))
    return out


def scenario_from_dict(data: dict, src: str) -> Scenario:
    """Validate a parsed TOML document (``src`` names it in errors)."""
    s = data.get("scenario")
    if not isinstance(s, dict):
        raise ScenarioError(f"{src}: missing [scenario] table")
    name = _check_name(s.get("name"), "scenario name", src, "scenario.name")
    kind = _choice(s.get("kind", "install"), KINDS, src, "scenario.kind")
    packages = s.get("packages")
    if not isinstance(packages, list) or not packages or not all(isinstance(p, str) for p in packages):
        raise ScenarioError(f"{_where(src, 'scenario.packages')}: expected a non-empty list of requirement strings")
    wheels = s.get("wheels")
    if wheels is not None and not isinstance(wheels, str):
        raise ScenarioError(f"{_where(src, 'scenario.wheels')}: expected a profile name or path")
    if wheels and wheels.endswith(".toml") and not Path(wheels).is_absolute():
        wheels = str((Path(src).parent / wheels).resolve())  # relative to the scenario file
    ready = s.get("ready")
    if not isinstance(ready, str) or not ready.strip():
        raise ScenarioError(f"{_where(src, 'scenario.ready')}: expected Python code to run in the new venv")
    try:
        compile(ready, f"{src}:scenario.ready", "exec")
    except SyntaxError as exc:
        raise ScenarioError(f"{_where(src, 'scenario.ready')}: not valid Python ({exc.msg})") from None
    repeats = s.get("repeats", 3)
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise ScenarioError(f"{_where(src, 'scenario.repeats')}: expected an integer >= 1")
    size_mb = s.get("size_mb")
    if size_mb is not None and (not isinstance(size_mb, (int, float)) or size_mb < 0):
        raise ScenarioError(f"{_where(src, 'scenario.size_mb')}: expected a number >= 0")
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise ScenarioError(f"{_where(src, 'defaults')}: expected a table")
    configs: list[Config] = []
    raw_configs = data.get("configs", {})
    if not isinstance(raw_configs, dict):
        raise ScenarioError(f"{_where(src, 'configs')}: expected tables [configs.NAME]")
    for cname, table in raw_configs.items():
        key = f"configs.{_key(cname)}"
        _check_name(cname, "config name", src, key)
        configs.append(_config(cname, table, defaults, src, key))
    if "matrix" in data:
        if not isinstance(data["matrix"], dict):
            raise ScenarioError(f"{_where(src, 'matrix')}: expected a table")
        configs.extend(_matrix(data["matrix"], defaults, src))
    if not configs:
        raise ScenarioError(f"{src}: no configs (add [configs.NAME] tables or a [matrix])")
    seen: set[str] = set()
    for c in configs:
        if c.name in seen:
            raise ScenarioError(f"{_where(src, 'configs')}: config name '{c.name}' used twice")
        seen.add(c.name)
    return Scenario(
        name=name,
        source=src,
        kind=kind,
        packages=tuple(packages),
        wheels=wheels,
        ready=ready,
        repeats=repeats,
        configs=tuple(configs),
        description=str(s.get("description", "")),
        size_mb=float(size_mb) if size_mb is not None else None,
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
            raise ScenarioError(
                f"unknown scenario '{name_or_path}' (shipped: {', '.join(shipped())}; or give a .toml path)"
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


# Runs made before names were checked may hold the old default matrix names, which contain
# '=' (venv=target-tmpdir=tmp): harmless in a path, so --resume still accepts them.
_META_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._=-]*$")


def _meta_name_ok(name: str) -> bool:
    return bool(_META_NAME_RE.match(name)) and len(name) <= 200


def scenario_from_meta(data: object, where: str = "meta.json") -> Scenario:
    """Rebuild the resolved scenario stored in a run's meta.json (for --resume).

    Anything malformed is one RunDirError line naming ``where`` and the key. Unknown keys,
    in the scenario or in a config, are refused rather than ignored: a key this version does
    not know may change what a trial measures (a newer iobench's config option), and
    resuming without it would silently mix trials run under different conditions. Resume
    such a run with the iobench version that started it.
    """
    def bad(key: str, msg: str) -> RunDirError:
        return RunDirError(f"{where}: {key}: {msg}")

    if not isinstance(data, dict):
        raise bad("scenario", f"expected a table, got {type(data).__name__}")
    known = {f.name for f in fields(Scenario)}
    unknown = sorted(str(k) for k in set(data) - known)
    if unknown:
        raise bad("scenario", f"unknown key(s) {', '.join(unknown)} (written by another iobench version?)")
    for key in ("name", "source", "kind", "ready"):
        if not isinstance(data.get(key), str):
            raise bad(f"scenario.{key}", "missing or not a string")
    if not _meta_name_ok(data["name"]):
        raise bad("scenario.name", f"{data['name']!r} is not a safe name for files and folders")
    if data["kind"] not in KINDS:
        raise bad("scenario.kind", f"{data['kind']!r} is not one of {', '.join(KINDS)}")
    packages = data.get("packages")
    if not isinstance(packages, list) or not packages or not all(isinstance(p, str) for p in packages):
        raise bad("scenario.packages", "expected a non-empty list of requirement strings")
    wheels = data.get("wheels")
    if wheels is not None and not isinstance(wheels, str):
        raise bad("scenario.wheels", "expected a profile name or path, or null")
    repeats = data.get("repeats")
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise bad("scenario.repeats", "expected an integer >= 1")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise bad("scenario.description", "expected a string")
    size_mb = data.get("size_mb")
    if size_mb is not None and (
        not isinstance(size_mb, (int, float)) or isinstance(size_mb, bool) or size_mb < 0
    ):
        raise bad("scenario.size_mb", "expected a number >= 0, or null")
    extra = data.get("extra", {})
    if not isinstance(extra, dict):
        raise bad("scenario.extra", "expected a table")
    raw = data.get("configs")
    if not isinstance(raw, list) or not raw:
        raise bad("scenario.configs", "expected a non-empty list of configs")
    configs: list[Config] = []
    seen: set[str] = set()
    for i, c in enumerate(raw):
        key = f"scenario.configs[{i}]"
        if not isinstance(c, dict):
            raise bad(key, f"expected a table, got {type(c).__name__}")
        unknown = sorted(str(k) for k in set(c) - _CONFIG_KEYS - {"name"})
        if unknown:
            raise bad(key, f"unknown key(s) {', '.join(unknown)} (written by another iobench version?)")
        cname = c.get("name")
        if not isinstance(cname, str) or not _meta_name_ok(cname):
            raise bad(f"{key}.name", f"{cname!r} is not a safe name for files and folders")
        if cname in seen:
            raise bad(f"{key}.name", f"config name '{cname}' used twice")
        seen.add(cname)
        table = {k: v for k, v in c.items() if k != "name"}
        try:
            configs.append(_config(cname, table, {}, where, key))
        except ScenarioError as exc:
            raise RunDirError(str(exc)) from None
    return Scenario(
        name=data["name"],
        source=data["source"],
        kind=data["kind"],
        packages=tuple(packages),
        wheels=wheels,
        ready=data["ready"],
        repeats=repeats,
        configs=tuple(configs),
        description=description,
        size_mb=float(size_mb) if size_mb is not None else None,
        extra=extra,
    )
