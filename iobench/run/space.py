"""How much a run writes, and where: the space each role needs at once (checked before a
run), and the bytes each role and the index see over the run (the dry run says them).

One estimate for both: a trial writes its venv (the scenario's installed size) on the venv
role, its downloads (``WHEELS_SHARE`` of that) into TMPDIR, and a cold trial fills its cache.
A ``dataset`` config's data (the scenario's size) is written once on its data role and copied
to its stage role by every trial. A ``checkpoint`` config's checkpoint (the scenario's size) is
written by every trial on its save role and, when it copies it, on its copy's role too.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from iobench.errors import UsageError
from iobench.scenario.load import Config, Scenario

#: the installed size assumed for a scenario that states none
DEFAULT_SIZE_MB = 50.0

#: the packages' download (wheels) as a share of their installed size: the estimate the space
#: check and the dry run's byte counts use (torch's CUDA wheels: ~2.5 GB for ~6 GB installed)
WHEELS_SHARE = 0.4


def need_mb(scenario: Scenario) -> dict[str, float]:
    """MB each role holds at once in one trial: a venv, its downloads, its cache."""
    size_mb = scenario.size_mb or DEFAULT_SIZE_MB
    need: dict[str, float] = {}
    for c in scenario.configs:
        if c.data:
            for role in {c.data, c.stage} - {"off"}:
                need[role] = max(need.get(role, 0.0), size_mb)
            continue
        if c.save:
            for role in {c.save, c.copy_to} - {"off"}:
                need[role] = max(need.get(role, 0.0), size_mb)
            continue
        need[c.venv] = max(need.get(c.venv, 0.0), size_mb)
        need[c.tmpdir] = max(need.get(c.tmpdir, 0.0), size_mb * WHEELS_SHARE)
        if c.cache != "off":
            need[c.cache] = max(need.get(c.cache, 0.0), size_mb * WHEELS_SHARE)
    return need


def written_mb(scenario: Scenario, configs: Sequence[Config], cold: int) -> dict[str, float]:
    """MB written per role over the trials of ``configs`` (one entry per trial), and under
    ``"index"`` the MB the ``cold`` cold installs download: each trial writes its venv, its
    downloads into TMPDIR, and a cold one fills its cache (the WHEELS_SHARE estimate)."""
    size_mb = scenario.size_mb or DEFAULT_SIZE_MB
    wheels = size_mb * WHEELS_SHARE
    out: dict[str, float] = {"index": cold * wheels}
    for c in configs:
        if c.data:
            out.setdefault(c.data, size_mb)  # generated once per run
            if c.stage != "off":
                out[c.stage] = out.get(c.stage, 0.0) + size_mb
            continue
        if c.save:
            for role in {c.save, c.copy_to} - {"off"}:
                out[role] = out.get(role, 0.0) + size_mb
            continue
        out[c.venv] = out.get(c.venv, 0.0) + size_mb
        out[c.tmpdir] = out.get(c.tmpdir, 0.0) + wheels
        if c.cache != "off" and c.cache_state != "warm":
            out[c.cache] = out.get(c.cache, 0.0) + wheels
    return out


def free_mb(path: Path) -> float:
    """MB free for an unprivileged writer at ``path``."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize / 1e6


def check(scenario: Scenario, roles: dict[str, Path]) -> None:
    """Each filesystem has room for what the roles on it will hold at once."""
    need = need_mb(scenario)
    shared: dict[int, float] = {}
    for role, mb in need.items():
        dev = os.stat(roles[role]).st_dev
        shared[dev] = shared.get(dev, 0.0) + mb
    for role, path in roles.items():
        if role not in need:
            continue
        free = free_mb(path)
        want = shared[os.stat(path).st_dev]
        if free < want:
            flag = role if role in ("target", "tmp") else "path " + role
            raise UsageError(
                f"--{flag}: {path} has {free:.0f} MB free; scenario {scenario.name} needs about {want:.0f} MB there"
            )


__all__ = ["DEFAULT_SIZE_MB", "WHEELS_SHARE", "check", "free_mb", "need_mb", "written_mb"]
