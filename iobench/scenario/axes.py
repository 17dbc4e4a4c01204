"""Axes from the command line: ``--installer``, ``--venv-creator``, ``--matrix KEY=V1,V2``,
``--requirements`` and ``--extra-index-url``, applied to a loaded scenario before anything runs.

Each axis is crossed with every config of the scenario: ``--installer pip,uv`` on a scenario
with configs ``naive`` and ``tmp-fix`` gives ``naive_pip``, ``naive_uv``, ``tmp-fix_pip`` and
``tmp-fix_uv``. An axis with one value sets that key on every config and adds no suffix
(``--installer uv`` runs the scenario with uv). A link mode is uv's: a pip config crossed
with link modes runs once, with pip's copy. A pack method is packed-venv's and fan-out's:
``--pack-method squashfs-loop,squashfs-fuse`` (several values; one value stays the run's
setting) makes each of their configs one per method (``packed-venv_squashfs-loop``, ...)
and leaves the others as they are. Every value goes through the scenario's own validator,
so a bad one is the same one line a TOML file would get.
"""

from __future__ import annotations

import itertools
import math
import urllib.parse
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from iobench import redact
from iobench.errors import ScenarioError, UsageError
from iobench.scenario.config import Config
from iobench.scenario.load import Scenario, config_keys, make_config
from iobench.scenario.requirements import requirement_problem
from iobench.scenario.schema import check_name
from iobench.scenario.vocab import MAX_CONFIGS, PACK_METHODS, PACKING
from iobench.units import did_you_mean

#: config keys an axis may vary (not a config's name, description or strategy)
AXIS_KEYS = (
    "installer",
    "venv_creator",
    "link_mode",
    "compile",
    "pycache",
    "cache_state",
    "venv",
    "tmpdir",
    "cache",
    "pack_method",
)
#: how an axis is written in a generated config name (the value alone for the installer)
_LABEL = {"installer": "", "venv_creator": "by", "link_mode": "link", "cache_state": "state",
          "pack_method": ""}  # fmt: skip
_MAX_INCLUDE_DEPTH = 10


def matrix_spec(text: str) -> tuple[str, list[str]]:
    """``KEY=V1,V2`` (``--matrix``'s value); UsageError when it is not one."""
    key, sep, values = text.partition("=")
    key = key.strip().replace("-", "_")
    vals = [v.strip() for v in values.split(",") if v.strip()]
    if not sep or not vals:
        raise UsageError(f"{text!r}: expected KEY=V1,V2 (e.g. link_mode=hardlink,copy)")
    if key not in AXIS_KEYS:
        raise UsageError(f"{text!r}: {key!r} is not an axis (known: {', '.join(AXIS_KEYS)})")
    return key, vals


def pack_methods(text: str) -> list[str]:
    """``--pack-method``'s value: one method, or several to compare (``M1,M2``), each known."""
    methods = list(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    for m in methods or [text]:
        if m not in ("auto", *PACK_METHODS):
            hint = did_you_mean(m, ("auto", *PACK_METHODS))
            raise UsageError(
                f"--pack-method {m!r}: unknown method{'; ' + hint if hint else ''} (known: auto, "
                f"{', '.join(PACK_METHODS)}; several, compared as configs: squashfs-loop,tar+zstd)"
            )
    return methods


def axes_from(
    installer: str | None,
    venv_creator: str | None,
    matrix: list[tuple[str, list[str]]],
    pack_method: str | None = None,
) -> list[tuple[str, list[str]]]:
    """The axes given: ``--installer``, ``--venv-creator``, each ``--matrix`` and
    ``--pack-method`` when it lists several methods, a key once."""
    axes: list[tuple[str, list[str]]] = []
    for key, value in (("installer", installer), ("venv_creator", venv_creator)):
        if value:
            axes.append(matrix_spec(f"{key}={value}"))
    axes += list(matrix)
    if pack_method and len(methods := pack_methods(pack_method)) > 1:
        axes.append(("pack_method", methods))
    seen: set[str] = set()
    for key, _ in axes:
        if key in seen:
            raise UsageError(
                f"axis {key} given twice (--installer, --venv-creator, --pack-method and "
                "--matrix each name one)"
            )
        seen.add(key)
    return axes


def cross(scenario: Scenario, axes: list[tuple[str, list[str]]]) -> Scenario:
    """The scenario with every config crossed with the axes (see the module doc)."""
    if not axes:
        return scenario
    where = "--matrix"
    combos = len(scenario.configs) * math.prod(len(vals) for _, vals in axes)
    if combos > MAX_CONFIGS:
        raise ScenarioError(
            f"{where}: {len(scenario.configs)} configs crossed with these axes make {combos:,}; "
            f"at most {MAX_CONFIGS:,} (fewer values per axis)"
        )
    configs: list[Config] = []
    names: set[str] = set()
    for cfg in scenario.configs:
        keys = config_keys(scenario.kind)
        base = {k: v for k, v in asdict(cfg).items() if k in keys}
        for combo in itertools.product(*(vals for _, vals in axes)):
            table = {**base, **dict(zip((k for k, _ in axes), combo))}
            if table.get("installer") != "uv":
                table["link_mode"] = "default"  # pip has no link mode: one config, pip's copy
            if table.get("strategy") not in PACKING:
                table["pack_method"] = ""  # nothing packed: one config, as it was
            name = _name(cfg.name, axes, table)
            if name in names:
                continue
            if table.get("cache") == "off" and table.get("cache_state", "cold") != "cold":
                continue  # impossible, as in a TOML [matrix]
            check_name(name, "generated config name", where, f"configs.{name}")
            configs.append(make_config(name, table, {}, where, f"configs.{name}", scenario.kind))
            names.add(name)
    return replace(scenario, configs=tuple(configs))


def _name(base: str, axes: list[tuple[str, list[str]]], table: dict[str, Any]) -> str:
    parts = [base]
    for key, vals in axes:
        if len(vals) < 2 or (key == "link_mode" and table.get("installer") != "uv"):
            continue
        if key == "pack_method" and not table[key]:
            continue
        label, value = _LABEL.get(key, key), str(table[key]).replace("+", "-")  # tar+zstd
        parts.append(f"{label}-{value}" if label else value)
    return "_".join(parts)


# ---------------------------------------------------------------- requirement files
def read_requirements(path: Path, depth: int = 0) -> list[str]:
    """The requirements of a pip ``-r`` file, each checked with ``packaging``; ``-r`` includes
    are followed (relative to the file). Comments, blank lines and ``\\`` continuations as
    pip reads them. Options other than ``-r`` are refused in one line naming file and line:
    iobench installs requirements, and the index comes from ``--index-url``/``--extra-index-url``."""
    if depth > _MAX_INCLUDE_DEPTH:
        raise UsageError(f"{path}: -r includes nested more than {_MAX_INCLUDE_DEPTH} deep")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(
            f"--requirements {path}: cannot be read ({getattr(exc, 'strerror', None) or exc})"
        ) from None
    out: list[str] = []
    for number, line in _logical_lines(text):
        where = f"{path}:{number}"
        if line.startswith(("-r", "--requirement")):
            include = (
                line.split("=", 1)[1]
                if line.startswith("--requirement=")
                else line.split(None, 1)[-1]
            )
            include = include[2:] if include.startswith("-r") else include
            out += read_requirements(path.parent / include.strip(), depth + 1)
            continue
        if line.startswith("-") or " --" in line:
            shown = redact.redact_text(line)[:80]
            raise UsageError(
                f"{where}: {shown!r}: pip options are not taken from a requirements file "
                "(only requirements and -r); give --index-url/--extra-index-url on the command line"
            )
        problem = requirement_problem(line)
        if problem:
            raise UsageError(f"{where}: {redact.redact_text(line)[:80]!r}: {problem}")
        out.append(line)
    if depth == 0 and not out:
        raise UsageError(f"--requirements {path}: no requirements in it")
    return out


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each logical line: continuations joined, comments dropped."""
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        if not pending:
            start = number
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1]
            continue
        line = _strip_comment(pending + raw).strip()
        pending = ""
        if line:
            out.append((start, line))
    last = _strip_comment(pending).strip()
    if last:
        out.append((start, last))
    return out


def _strip_comment(line: str) -> str:
    """pip's rule: ``#`` at the start of a line or after whitespace begins a comment."""
    if line.lstrip().startswith("#"):
        return ""
    for i, ch in enumerate(line):
        if ch == "#" and i > 0 and line[i - 1].isspace():
            return line[:i]
    return line


def extra_index_url(url: str) -> str:
    """An ``--extra-index-url``: http(s) or file, with a host; refused in one redacted line."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https", "file") or (
        parts.scheme != "file" and not parts.hostname
    ):
        raise UsageError(
            f"--extra-index-url {redact.redact(url)!r}: expected an http(s):// or file:// index URL"
        )
    return url


def apply(
    scenario: Scenario,
    axes: list[tuple[str, list[str]]],
    requirements: Path | None,
    packages_given: bool,
    resumed: bool,
) -> Scenario:
    """``--requirements`` and the axes on a loaded scenario (a resumed run keeps its own)."""
    if resumed:
        if axes or requirements:
            raise UsageError(
                "--resume continues a run with its own configs and packages; "
                "drop --installer/--venv-creator/--matrix/--requirements"
            )
        return scenario
    if requirements is not None:
        if packages_given:
            raise UsageError("give --requirements or --package, not both")
        scenario = replace(scenario, packages=tuple(read_requirements(requirements)))
    try:
        return cross(scenario, axes)
    except ScenarioError as exc:
        raise UsageError(str(exc)) from None


def index_args(urls: list[str]) -> tuple[str, ...]:
    """The installer arguments of the extra indexes (pip and uv spell them alike)."""
    return tuple(a for url in urls for a in ("--extra-index-url", url))


__all__ = [
    "AXIS_KEYS",
    "apply",
    "axes_from",
    "cross",
    "extra_index_url",
    "index_args",
    "matrix_spec",
    "pack_methods",
    "read_requirements",
]
