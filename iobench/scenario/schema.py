"""The scenario file's schema helpers: every check names the file and the key.

Shared by the generic loader (``iobench.scenario.load``) and each kind's config and settings
(``iobench.scenario.kinds``), so a kind's errors read like every other: ``scenarios/x.toml:
configs.naive.cache_state: 'hot' is not one of cold, warm``.

Scenario and config names become path components, so they are checked against ``NAME_RE``
(letters, digits, '.', '_', '-'; first a letter or digit; at most ``NAME_MAX``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from iobench.errors import ScenarioError
from iobench.rundir.records import SAFE_NAME_MAX, SAFE_NAME_RE

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
_BARE_KEY_RE = re.compile(r"^[A-Za-z0-9_-]+$")


def where(src: str, key: str) -> str:
    return f"{src}: {key}"


def toml_key(name: str) -> str:
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


def check_name(
    name: object, what: str, src: str, key: str, hint: str = "", legacy: bool = False
) -> str:
    problem = name_problem(name, legacy)
    if problem:
        raise ScenarioError(f"{where(src, key)}: {what} {problem}{hint}")
    return name  # type: ignore[return-value]


def choice(value: object, allowed: tuple[str, ...], src: str, key: str) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ScenarioError(f"{where(src, key)}: {value!r} is not one of {', '.join(allowed)}")
    return value


def role(value: object, src: str, key: str, allow_off: bool = False) -> str:
    """A role name (``target``, ``tmp``, a ``--path`` name), or ``off`` where it may be."""
    if not isinstance(value, str) or not value:
        raise ScenarioError(f"{where(src, key)}: expected a role name (e.g. target, tmp)")
    if value == "off" and not allow_off:
        raise ScenarioError(f"{where(src, key)}: 'off' is only allowed for cache")
    problem = name_problem(value)
    if problem:
        raise ScenarioError(f"{where(src, key)}: role {problem}")
    return value


def text(value: object, src: str, key: str) -> str:
    if not isinstance(value, str):
        raise ScenarioError(f"{where(src, key)}: expected a string")
    return value


def unknown_keys(
    table: dict, allowed: Iterable[str], src: str, key: str, what: str = "key"
) -> None:
    """Scenario files speak only the schema: a key it does not define is an error, not ignored."""
    unknown = sorted(str(k) for k in table if k not in set(allowed))
    if unknown:
        at = f"{src}: {key}" if key else src
        raise ScenarioError(
            f"{at}: unknown {what}(s) {', '.join(unknown)} (known: {', '.join(sorted(allowed))})"
        )


__all__ = ["NAME_MAX", "NAME_RE", "NAME_RULE", "check_name", "choice", "name_problem", "role",
           "text", "toml_key", "unknown_keys", "where"]  # fmt: skip
