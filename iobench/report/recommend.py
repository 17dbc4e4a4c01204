"""Turn a config that won beyond noise into a start script and Dockerfile lines that work
when pasted, derived from what was measured on this machine, never from a fixed belief.

Only a verdict of kind ``advice`` (report/verdict.py) earns a script. The script sets the
places the winning config used — ``VIRTUAL_ENV``, ``TMPDIR``, ``PIP_CACHE_DIR`` /
``PIP_NO_CACHE_DIR`` for pip or ``UV_CACHE_DIR`` / ``UV_NO_CACHE`` for uv, bytecode and uv
link-mode settings — and makes the venv the way the trials did, or says where it differs.
It runs on a stock Debian 12 / Ubuntu 24.04 image with ``bash -e`` (``python3``, with the
``python3-venv`` package), carries the caveats of its places as comments, and never points
into iobench's own folders: the roles' paths are the user's folders, and one that lay inside
iobench's clone is replaced by the clone's parent.
"""

from __future__ import annotations

import math
import posixpath
import shlex
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iobench.cost import format_usd as usd
from iobench.report.summary import Summary
from iobench.report.units import fmt_s
from iobench.report.verdict import same_filesystem

SCRATCH = ".iobench-scratch"
DOCKER_SHM_MB = 64


@dataclass(frozen=True)
class Recommendation:
    """What to set, and what it saves against the baseline, with the figures behind it."""

    config: str
    baseline: str | None
    shell: list[str]
    dockerfile: list[str]
    notes: list[str] = field(default_factory=list)
    saving_s: float = math.nan
    saving_pct: float = math.nan
    saving_usd_per_start: float = math.nan
    saving_usd_per_month: float = math.nan
    winner_s: float = math.nan
    baseline_s: float = math.nan
    changes: list[str] = field(default_factory=list)

    def saving_line(self, price_label: str | None, starts_per_month: float) -> str:
        """``Saves 0.6 s (25%) per cold start`` (+ dollars when a price is known)."""
        text = (
            f"Saves {fmt_s(self.saving_s)} ({self.saving_pct:.0f}%) per cold start against "
            f"{self.baseline}"
        )
        if not math.isnan(self.saving_usd_per_start) and price_label:
            text += (
                f", {usd(self.saving_usd_per_start)} per start and "
                f"{usd(self.saving_usd_per_month)} a month at {starts_per_month:g} starts "
                f"({price_label})"
            )
        return text + "."


def _role(roles: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = roles.get(name)
    return value if isinstance(value, Mapping) else {}


def iobench_clone(path: str) -> Path | None:
    """The iobench source folder that ``path`` lies in, if any: this package's own (an
    editable install) or any folder above ``path`` holding ``pyproject.toml`` and
    ``iobench/__init__.py`` (a clone installed with ``pip install .``)."""
    here = Path(__file__).resolve().parents[2]
    p = Path(path)
    for folder in (p, *p.parents):
        if folder == here or (
            (folder / "pyproject.toml").is_file() and (folder / "iobench" / "__init__.py").is_file()
        ):
            return folder
    return None


def user_path(
    roles: Mapping[str, Any], name: str, own: Path | None = None
) -> tuple[str, str | None]:
    """A role's folder for the script, and a note when it had to be moved out of iobench's own.

    A path inside a ``.iobench-scratch`` folder becomes the folder holding it; a path inside
    iobench's clone (``own``) becomes the clone's parent (the same filesystem, the user's).
    """
    raw = _role(roles, name).get("path")
    if not raw:
        return "/" + name, f"meta.json records no path for role '{name}'; the script uses /{name}"
    path = posixpath.normpath(str(raw))
    parts = path.split("/")
    if SCRATCH in parts:
        path = "/".join(parts[: parts.index(SCRATCH)]) or "/"
    own = own or iobench_clone(path)
    if own is not None and (path == str(own) or path.startswith(str(own) + "/")):
        parent = str(own.parent)
        return parent, (
            f"role '{name}' was iobench's own folder ({path}); the script uses its parent "
            f"{parent}, on the same filesystem: change it to your own folder on that volume"
        )
    return path, None


def _q(path: str) -> str:
    """Shell-quote only when needed, so the usual paths stay readable."""
    return shlex.quote(path)


def env_for(
    config: Mapping[str, Any], roles: Mapping[str, Any], own: Path | None = None
) -> tuple[list[tuple[str, str]], list[str]]:
    """(variable, value) pairs for one config's placement, and notes about them."""
    installer = str(config.get("installer") or "pip")
    pairs: list[tuple[str, str]] = []
    notes: list[str] = []

    def place(role: str, sub: str | None) -> str:
        path, note = user_path(roles, role, own)
        if note and note not in notes:
            notes.append(note)
        return posixpath.join(path, sub) if sub else path

    venv_role = str(config.get("venv_role") or "target")
    pairs.append(("VIRTUAL_ENV", place(venv_role, "venv")))
    tmp_role = str(config.get("tmpdir_role") or "")
    if tmp_role:
        pairs.append(("TMPDIR", place(tmp_role, None if tmp_role == "tmp" else "tmp")))
    cache_role = str(config.get("cache_role") or "")
    cached = cache_role not in ("", "off")
    if installer == "uv":
        if not cached:
            pairs.append(("UV_NO_CACHE", "1"))
        else:
            pairs.append(("UV_CACHE_DIR", place(cache_role, "uv-cache")))
            link = str(config.get("link_mode") or "default")
            if link != "default":  # the measured link mode (iobench.installers.LINK_MODES)
                pairs.append(("UV_LINK_MODE", link))
            elif same_filesystem(roles, cache_role, venv_role) is False:
                pairs.append(("UV_LINK_MODE", "copy"))
                notes.append(
                    f"the uv cache ({cache_role}) and the venv ({venv_role}) are on different "
                    "filesystems, so uv cannot hard-link; UV_LINK_MODE=copy says so up front"
                )
        if str(config.get("compile")) == "on":
            pairs.append(("UV_COMPILE_BYTECODE", "1"))
    else:
        pairs.append(("PIP_NO_CACHE_DIR", "1") if not cached
                     else ("PIP_CACHE_DIR", place(cache_role, "pip-cache")))  # fmt: skip
        if str(config.get("compile")) == "off":
            pairs.append(("PIP_NO_COMPILE", "1"))
    if str(config.get("compile")) == "off":
        notes.append(
            "bytecode is not compiled at install: that cost moves to the first import, which every "
            "cold restart with a fresh venv pays again (measured here in the import phase)"
        )
    return pairs, notes


def caveats(config: Mapping[str, Any], roles: Mapping[str, Any]) -> list[str]:
    """What a user must know about the places the script uses (one sentence each)."""
    out = []
    used = {str(config.get(c) or "") for c in ("venv_role", "tmpdir_role", "cache_role")}
    for name in sorted(used - {"", "off"}):
        role = _role(roles, name)
        if role.get("fstype") == "tmpfs":
            out.append(
                f"{role.get('path') or name} is tmpfs: it is RAM (it counts against the pod's "
                "memory), it is emptied at every restart, and in a Docker container /dev/shm "
                f"holds only {DOCKER_SHM_MB} MB unless started with --shm-size (e.g. --shm-size=16g)"
            )
    cache_role = str(config.get("cache_role") or "")
    if str(config.get("cache_state")) == "warm" and cache_role not in ("", "off"):
        out.append(
            f"this was measured with a warm cache on '{cache_role}': it only pays off if that "
            "cache survives between starts (a persistent volume); a fresh pod starts cold"
        )
    venv_role = str(config.get("venv_role") or "")
    if venv_role == "tmp" or _role(roles, venv_role).get("fstype") == "tmpfs":
        out.append(
            "the venv lives on tmp, which does not survive a restart: the start script must "
            "rebuild it (and reinstall every package) at every start"
        )
    return out


def venv_lines(meta: Mapping[str, Any]) -> list[str]:
    """Make the venv with stock tools, as close to the trials' as they allow, saying how close."""
    venv = (meta.get("versions") or {}).get("venv") or {}
    venv = venv if isinstance(venv, Mapping) else {}
    creator = f"virtualenv {venv['virtualenv']}" if venv.get("virtualenv") else "virtualenv"
    pip = venv.get("pip")
    lines = _comments([
        f"the trials made venvs with {creator}" + (f", seeded with pip {pip}" if pip else "")
        + "; this uses python3 -m venv (Debian/Ubuntu: apt-get install python3-venv), which "
        "seeds the system's pip" + (", so pip is then brought to the measured version"
                                    if pip else " (the pip version may differ)"),
    ]) + [
        'python3 -m venv "$VIRTUAL_ENV"',
        'export PATH="$VIRTUAL_ENV/bin:$PATH"',
    ]  # fmt: skip
    if pip:
        lines.append(f"python3 -m pip install --quiet --disable-pip-version-check 'pip=={pip}'")
    return lines


def _comments(texts: list[str], width: int = 92) -> list[str]:
    """Sentences as ``#`` comment lines wrapped to ``width``."""
    out = []
    for text in texts:
        out += textwrap.wrap(
            text,
            width,
            initial_indent="# ",
            subsequent_indent="#   ",
            break_on_hyphens=False,
            break_long_words=False,
        )
    return out


def shell_lines(
    pairs: list[tuple[str, str]], installer: str, meta: Mapping[str, Any], comments: list[str]
) -> list[str]:
    """The start script: caveats as comments, exports, folders, then the venv."""
    lines = _comments(comments)
    lines += [f"export {name}={_q(value)}" for name, value in pairs]
    dirs = [n for n, _ in pairs if n in ("TMPDIR", "PIP_CACHE_DIR", "UV_CACHE_DIR")]
    if dirs:
        lines.append("mkdir -p " + " ".join(f'"${n}"' for n in dirs))
    lines += venv_lines(meta)
    if installer == "uv":
        lines.append("# then install your packages with: uv pip install ... (uv is not part of "
                     "Debian/Ubuntu; install it first)")  # fmt: skip
    else:
        lines.append(
            "# then install your packages, e.g.: python3 -m pip install -r requirements.txt"
        )
    return lines


def dockerfile_lines(pairs: list[tuple[str, str]], comments: list[str]) -> list[str]:
    """``ENV`` lines with the same values (the venv itself is made at start, see notes)."""
    out = _comments(comments)
    out += [f"ENV {name}={_q(value)}" for name, value in pairs]
    out.append('ENV PATH="$VIRTUAL_ENV/bin:$PATH"')
    return out


def recommend(
    summary: Summary, meta: Mapping[str, Any], own: Path | None = None
) -> Recommendation | None:
    """The start script for a verdict that earned one (kind ``advice``), else None."""
    verdict = summary.verdict
    if not verdict.advise or verdict.advised is None:
        return None
    roles = meta.get("roles") or {}
    table = summary.table.set_index("config")
    win = table.loc[verdict.advised].to_dict()
    installer = str(win.get("installer") or "pip")
    pairs, place_notes = env_for(win, roles, own)
    cav = caveats(win, roles)
    head = [f"iobench: {verdict.headline}", *cav, *place_notes]  # they travel in the script
    notes = [
        *place_notes,
        *verdict.notes,
        "network volumes are often mounted only when the pod starts: create the venv in the "
        "start script (or entrypoint), not in a Dockerfile RUN step",
    ]
    base = table.loc[summary.baseline] if summary.baseline in table.index else None
    base_s = float(base["median_time_to_ready_s"]) if base is not None else math.nan
    win_s = float(win["median_time_to_ready_s"])
    usd_saved = (
        float(base["cost_per_start_usd"]) - float(win["cost_per_start_usd"])
        if base is not None
        else math.nan
    )
    return Recommendation(
        config=verdict.advised,
        baseline=summary.baseline,
        shell=shell_lines(pairs, installer, meta, head),
        dockerfile=dockerfile_lines(pairs, cav),
        notes=notes,
        winner_s=win_s,
        baseline_s=base_s,
        saving_s=base_s - win_s,
        saving_pct=100.0 * (base_s - win_s) / base_s if base_s > 0 else math.nan,
        saving_usd_per_start=usd_saved,
        saving_usd_per_month=usd_saved * summary.options.starts_per_month,
        changes=list(verdict.changes),
    )
