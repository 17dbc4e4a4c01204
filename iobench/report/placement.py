"""Where a config puts things, and which of its moves are real: roles on one filesystem.

Why apart from the verdict: "venv on tmp instead of target" is only a change when the two
roles are different storage. The columns that say where a config puts things and how it
installs, and the rule that a move between roles of one filesystem (same device and mount
point) is moot, are read by the verdict, the start script and the summary alike.
"""

from __future__ import annotations

from collections.abc import Mapping

from iobench.rundir import kinds
from iobench.rundir.meta import RoleInfo

#: where a config puts things: (what, trials.csv role column), every kind's places
PLACES = tuple((p.what, p.role) for p in kinds.all_places())
#: the role columns whose ``off`` means "not copied", and the words for it
COPY_OFF = {p.role: p.off for p in kinds.all_places() if p.off}
#: how a config does its work: (what, trials.csv column), every kind's choices
HOW = tuple((c.what, c.column) for c in kinds.all_choices())
FACT_COLUMNS = tuple(c for _, c in PLACES + HOW)


def _fs_key(role: RoleInfo) -> tuple[str, str] | None:
    return (role.device, role.mountpoint) if role.device and role.mountpoint else None


def same_filesystem(roles: Mapping[str, RoleInfo], a: str, b: str) -> bool | None:
    """Whether roles a and b sit on one filesystem (same device and mount point); None = unknown."""
    if a == b:
        return True
    ra, rb = roles.get(a), roles.get(b)
    if ra is None or rb is None:
        return None
    ka, kb = _fs_key(ra), _fs_key(rb)
    return None if ka is None or kb is None else ka == kb


def shared_storage_lines(roles: Mapping[str, RoleInfo]) -> list[str]:
    """One sentence per group of roles that sit on one filesystem (empty when none do)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for name, role in roles.items():
        key = _fs_key(role)
        if key is not None:
            groups.setdefault(key, []).append(str(name))
    out = []
    for (device, mount), names in groups.items():
        if len(names) > 1:
            fstype = next((roles[n].fstype for n in names if roles[n].fstype), "")
            where = f"{fstype or 'filesystem'} at {mount}, device {device}"
            out.append(
                f"Same storage: {' and '.join(names)} are one filesystem ({where}); configs that "
                "only move things between them compare that filesystem with itself, and any "
                "difference between them is noise or order, never advice."
            )
    return out


def differences(
    win: Mapping[str, str], base: Mapping[str, str], roles: Mapping[str, RoleInfo]
) -> tuple[list[str], list[str]]:
    """What the winner does differently from the baseline: (real changes, moot moves).

    A moot move puts something on another role of the same filesystem.
    """
    real: list[str] = []
    moot: list[str] = []
    for what, col in PLACES:
        a, b = str(win.get(col) or ""), str(base.get(col) or "")
        if a == b:
            continue
        text = f"{what} on {_where(a, roles)} instead of {_where(b, roles)}"
        if col in COPY_OFF:  # "off": not copied (the data read in place, the save left local)
            text = f"{what} to {_where(a, roles)}" if b == "off" else text
            text = (
                f"{COPY_OFF[col]} instead of copied to {_where(b, roles)}" if a == "off" else text
            )
        (moot if "off" not in (a, b) and same_filesystem(roles, a, b) else real).append(text)
    for what, col in HOW:
        a, b = str(win.get(col) or ""), str(base.get(col) or "")
        if a != b:
            real.append(f"{what} {a} instead of {b}")
    return real, moot


def _where(role: str, roles: Mapping[str, RoleInfo]) -> str:
    r = roles.get(role)
    fs = r.fstype if r is not None else None
    return f"{role} ({fs})" if fs and role != "off" else role


__all__ = [
    "COPY_OFF",
    "FACT_COLUMNS",
    "HOW",
    "PLACES",
    "differences",
    "same_filesystem",
    "shared_storage_lines",
]
