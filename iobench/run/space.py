"""How much a run writes, and where: the space each role needs at once (checked before a
run), and the bytes each role and the index see over the run (the dry run says them).

One estimate for both, each config saying its own (``iobench.scenario.config.Config``): an
install's venv (the scenario's installed size), its downloads and its cache; a training set
written once and copied by every trial; a checkpoint written, and copied, by every trial.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from iobench.errors import UsageError
from iobench.scenario.config import Config
from iobench.scenario.load import Scenario

#: the installed size assumed for a scenario that states none
DEFAULT_SIZE_MB = 50.0


def need_mb(scenario: Scenario) -> dict[str, float]:
    """MB each role holds at once in one trial (each config says its own: a venv, its
    downloads and its cache; the data and its copy; a checkpoint and its copy)."""
    size_mb = scenario.size_mb or DEFAULT_SIZE_MB
    need: dict[str, float] = {}
    for c in scenario.configs:
        for role, mb in c.held_mb(size_mb).items():
            need[role] = max(need.get(role, 0.0), mb)
    return need


def written_mb(scenario: Scenario, configs: Sequence[Config], cold: int) -> dict[str, float]:
    """MB written per role over the trials of ``configs`` (one entry per trial), and under
    ``"index"`` the MB the ``cold`` cold installs download (each config says what one trial
    writes: ``Config.add_written``)."""
    size_mb = scenario.size_mb or DEFAULT_SIZE_MB
    downloads = max((c.download_mb(size_mb) for c in configs), default=0.0)
    out: dict[str, float] = {"index": cold * downloads}
    for c in configs:
        c.add_written(out, size_mb)
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


__all__ = ["DEFAULT_SIZE_MB", "check", "free_mb", "need_mb", "written_mb"]
