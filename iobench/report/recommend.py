"""Turn the fastest measured config into the lines a user pastes into a start script or a
Dockerfile — derived from what was measured on this machine, never from a fixed belief.

Each config says where the venv, TMPDIR and cache lived (by role); the run's meta.json says
which path each role was. The lines set exactly those places: ``VIRTUAL_ENV`` (and
``PATH``), ``TMPDIR``, ``PIP_CACHE_DIR`` / ``PIP_NO_CACHE_DIR`` for pip or ``UV_CACHE_DIR``
/ ``UV_NO_CACHE`` for uv, plus bytecode and uv link-mode settings where the config implies
them.
"""

from __future__ import annotations

import math
import posixpath
import shlex
from dataclasses import dataclass, field, replace
from typing import Any

from iobench.cost import format_usd as usd
from iobench.report.summary import Summary


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

    def headline(self, price_label: str | None, starts_per_month: float) -> str:
        """One sentence: the winner and what it saves, in seconds and dollars."""
        if self.baseline is None or self.baseline == self.config:
            return (
                f"Fastest: {self.config} ({self.winner_s:.1f} s median time-to-ready); "
                "it is also the baseline, so keep what you have."
            )
        text = (
            f"Fastest: {self.config} ({self.winner_s:.1f} s) vs {self.baseline} "
            f"({self.baseline_s:.1f} s): saves {self.saving_s:.1f} s ({self.saving_pct:.0f}%) "
            "per cold start"
        )
        if not math.isnan(self.saving_usd_per_start) and price_label:
            text += (
                f", {usd(self.saving_usd_per_start)} per start and "
                f"{usd(self.saving_usd_per_month)} a month at {starts_per_month:g} starts "
                f"({price_label})"
            )
        return text + "."


def differences(winner: dict[str, Any], baseline: dict[str, Any]) -> list[str]:
    """What the winner does differently from the baseline, in words."""
    out = []
    for what, role_col, fs_col in (
        ("venv", "venv_role", "venv_fstype"),
        ("TMPDIR", "tmpdir_role", "tmpdir_fstype"),
        ("cache", "cache_role", "cache_fstype"),
    ):
        a, b = str(winner.get(role_col) or ""), str(baseline.get(role_col) or "")
        if a != b:
            fa, fb = winner.get(fs_col) or "", baseline.get(fs_col) or ""
            sa = f"{a} ({fa})" if fa and a != "off" else a
            sb = f"{b} ({fb})" if fb and b != "off" else b
            out.append(f"{what} on {sa} instead of {sb}")
    for what, col in (
        ("installer", "installer"),
        ("cache", "cache_state"),
        ("bytecode compile", "compile"),
    ):
        a, b = str(winner.get(col) or ""), str(baseline.get(col) or "")
        if a != b:
            out.append(f"{what} {a} instead of {b}")
    return out


def _role(roles: dict[str, Any], name: str) -> dict[str, Any]:
    value = roles.get(name)
    return value if isinstance(value, dict) else {}


def _path(roles: dict[str, Any], name: str) -> str:
    """The role's path from meta.json, or a visible placeholder when it is not recorded."""
    path = _role(roles, name).get("path")
    return str(path) if path else f"<{name} path>"


def _same_filesystem(roles: dict[str, Any], a: str, b: str) -> bool | None:
    ra, rb = _role(roles, a), _role(roles, b)
    for key in ("device", "mountpoint"):
        if ra.get(key) and rb.get(key):
            return ra[key] == rb[key]
    return None


def _q(path: str) -> str:
    """Shell-quote only when needed, so the usual paths stay readable."""
    return path if path == shlex.quote(path) else shlex.quote(path)


def env_for(
    config: dict[str, Any], roles: dict[str, Any]
) -> tuple[list[tuple[str, str]], list[str]]:
    """(variable, value) pairs for one summary row's placement, and notes about them."""
    installer = str(config.get("installer") or "pip")
    pairs: list[tuple[str, str]] = []
    notes: list[str] = []
    venv_role = str(config.get("venv_role") or "")
    venv = posixpath.join(_path(roles, venv_role), "venv") if venv_role else "<venv path>"
    pairs.append(("VIRTUAL_ENV", venv))
    pairs.append(("PATH", "$VIRTUAL_ENV/bin:$PATH"))
    tmp_role = str(config.get("tmpdir_role") or "")
    if tmp_role:
        pairs.append(("TMPDIR", _path(roles, tmp_role)))
    cache_role = str(config.get("cache_role") or "")
    if installer == "uv":
        if cache_role in ("", "off"):
            pairs.append(("UV_NO_CACHE", "1"))
        else:
            pairs.append(("UV_CACHE_DIR", posixpath.join(_path(roles, cache_role), "uv-cache")))
            if _same_filesystem(roles, cache_role, venv_role) is False:
                pairs.append(("UV_LINK_MODE", "copy"))
                notes.append(
                    f"the uv cache ({cache_role}) and the venv ({venv_role}) are on different "
                    "filesystems, so uv cannot hard-link; UV_LINK_MODE=copy says so up front"
                )
        if str(config.get("compile")) == "on":
            pairs.append(("UV_COMPILE_BYTECODE", "1"))
    else:
        if cache_role in ("", "off"):
            pairs.append(("PIP_NO_CACHE_DIR", "1"))
        else:
            pairs.append(("PIP_CACHE_DIR", posixpath.join(_path(roles, cache_role), "pip-cache")))
        if str(config.get("compile")) == "off":
            pairs.append(("PIP_NO_COMPILE", "1"))
    if str(config.get("cache_state")) == "warm" and cache_role not in ("", "off"):
        notes.append(
            f"this was measured with a warm cache on '{cache_role}': it only pays off if that "
            "cache survives between pod starts (a persistent volume); a fresh pod starts cold"
        )
    return pairs, notes


def shell_lines(pairs: list[tuple[str, str]], installer: str) -> list[str]:
    """``export`` lines, then the commands that make the venv the lines point at."""
    lines = []
    for name, value in pairs:
        if name == "PATH":
            lines.append('export PATH="$VIRTUAL_ENV/bin:$PATH"')
        else:
            lines.append(f"export {name}={_q(value)}")
    dirs = [n for n, _ in pairs if n in ("TMPDIR", "PIP_CACHE_DIR", "UV_CACHE_DIR")]
    if dirs:
        lines.append("mkdir -p " + " ".join(f'"${n}"' for n in dirs))
    if installer == "uv":
        lines.append('uv venv "$VIRTUAL_ENV"')
    else:
        lines.append('python -m venv "$VIRTUAL_ENV"')
    return lines


def dockerfile_lines(pairs: list[tuple[str, str]]) -> list[str]:
    """``ENV`` lines with the same values (the venv itself is made at start, see notes)."""
    out = []
    for name, value in pairs:
        if name == "PATH":
            out.append('ENV PATH="$VIRTUAL_ENV/bin:$PATH"')
        else:
            out.append(f"ENV {name}={_q(value)}")
    return out


def recommend(summary: Summary, meta: dict[str, Any]) -> Recommendation | None:
    """The recommendation for the run's fastest config, or None when nothing succeeded."""
    if summary.winner is None:
        return None
    roles = meta.get("roles") or {}
    table = summary.table.set_index("config")
    win = table.loc[summary.winner].to_dict()
    installer = str(win.get("installer") or "pip")
    pairs, notes = env_for(win, roles)
    if any(v.startswith("<") for _, v in pairs):
        notes.append("meta.json does not record every role's path; replace the <...> placeholders")
    notes.append(
        "network volumes are often mounted only when the pod starts: create the venv in the "
        "start script (or entrypoint), not in a Dockerfile RUN step"
    )
    rec = Recommendation(
        config=summary.winner,
        baseline=summary.baseline,
        shell=shell_lines(pairs, installer),
        dockerfile=dockerfile_lines(pairs),
        notes=notes,
        winner_s=float(win["median_time_to_ready_s"]),
    )
    if summary.baseline is not None and summary.baseline != summary.winner:
        base = table.loc[summary.baseline]
        base_s = float(base["median_time_to_ready_s"])
        saving = base_s - rec.winner_s
        usd = float(base["cost_per_start_usd"]) - float(win["cost_per_start_usd"])
        rec = replace(
            rec,
            changes=differences(win, base.to_dict()),
            baseline_s=base_s,
            saving_s=saving,
            saving_pct=100.0 * saving / base_s if base_s > 0 else math.nan,
            saving_usd_per_start=usd,
            saving_usd_per_month=usd * summary.options.starts_per_month,
        )
    elif summary.baseline == summary.winner:
        rec = replace(rec, baseline_s=rec.winner_s, saving_s=0.0, saving_pct=0.0)
    return rec
