"""Predict a start-up strategy's persist step and cold restart from the probe that predicts
its first start (what ``--dry-run`` needs to time a lifecycle run; docs/prediction.md).

    persist = P(step) · s  +  the step's operations and bytes on the target, at its excess cost
    restart = R(step) · s  +  the restore's operations and bytes on the target, at its excess cost
            + the ready check: the model's import phase, the venv where the strategy keeps it
            + the install again, for reinstall (the cache warm when kept on the target) and
              packed-cache (from its restored cache, every role on local disk)

- **The trees**: what a step moves is what the traced install left behind
  (:mod:`iobench.predict.opmix`): the venv's files, folders and bytes are the creations in
  the venv role over every phase, the cache's those of the download phase in the cache
  role, scaled to the profile predicted as the model scales them (the venv's seed and
  pip's bytecode of itself stay as traced).
- **P and R**: each step's time with the target on tmpfs, measured for the smoke profile
  (``lifecycle.toml``, beside ``opmix.toml``: copying, compressing, mounting, with every
  byte in memory), scaled by the bytes moved (a mount's time does not grow with the tree)
  and by the CPU sample as ``F`` is.
- **The operations on the target**, per step: ``cp -a`` out creates each file, sets its
  mode and times (two attribute calls, priced as the probe's chmod) and makes each folder;
  ``cp -a`` back opens and reads each file and folder; a pack creates one archive and writes
  it (bytes = the venv's times the archive's measured ratio); an extracting restore reads it
  whole; a mounted squashfs reads the archive's share of what the ready check reads;
  prewarm's restart reads the ready check's files in batches of 64, 32 at once.
- ``excess``: as the model's, the target's cost over the fast folder's (the tmpfs P and R
  were measured on), so the fast part is not paid twice.

A layered venv's ready check is two: what the image lacks, read from the target, and the
image's part, read from local disk (:meth:`iobench.predict.model.Size.split`). Approximated:
fan-out as one pod's packed-venv (a fleet's restores share the volume); prewarm's record
step as one more ready check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iobench.errors import UsageError
from iobench.predict.model import (
    Costs,
    Size,
    fast_costs,
    import_mix,
    load_opmix,
    predict_config,
    read_toml,
    scales,
    storage_seconds,
)
from iobench.rundir.records import PHASES
from iobench.trial.prewarm import PREWARM_JOBS

STEPS_FILE = Path(__file__).parent / "lifecycle.toml"
#: the restores that mount the archive (the rest extract it whole)
_MOUNTED = ("squashfs", "squashfs-loop", "squashfs-fuse")
#: the parts that are a first start's persist step (the rest are the restart's)
_PERSIST = ("pack", "copy-out", "pack-cache", "record")


@dataclass(frozen=True)
class Tree:
    """What a step moves: files, folders and bytes."""

    files: float
    dirs: float
    bytes: float


@dataclass(frozen=True)
class Lifecycle:
    """A strategy's predicted persist step and restart, in seconds, with their parts."""

    config: str
    persist_s: float
    restart_s: float
    parts: dict[str, float]

    @property
    def total_s(self) -> float:
        return self.persist_s + self.restart_s


def load_steps(path: Path = STEPS_FILE) -> dict[str, Any]:
    """The measured fast step times and archive ratios."""
    return read_toml(path)


def tree(opmix: dict[str, Any], role: str, phases: tuple[str, ...], size: Size) -> Tree:
    """The files, folders and bytes the traced install (cold) left in ``role`` over
    ``phases``, scaled to ``size`` as the model scales each phase (the venv's own seed and
    pip's bytecode of itself: the same for every install)."""
    traced = Size.traced(opmix)
    files = dirs = data = 0.0
    for phase in phases:
        mix = opmix["ops"]["cold"].get(phase, {}).get(role) or {}
        k, k_b = scales(phase, size, traced, role)
        files += max(0.0, float(mix.get("create", 0)) - float(mix.get("unlink", 0))) * k
        dirs += float(mix.get("mkdir", 0)) * k
        data += float(mix.get("bytes_written", 0)) * k_b
    return Tree(files, dirs, data)


def _fast(steps: dict[str, Any], key: str, scale: float, cpu: float) -> float:
    found = steps["fast"].get(key)
    if found is None:
        raise UsageError(f"{STEPS_FILE}: no fast time for step '{key}'")
    return float(found) * scale * cpu


class _Steps:
    """One config's figures: what its steps move, what they cost, and its ready check."""

    def __init__(self, cfg: Any, folders: dict[str, Costs], size: Size, cpu_s: float | None,
                 opmix: dict[str, Any], steps: dict[str, Any], image: Size | None) -> None:  # fmt: skip
        self.cfg, self.folders, self.size, self.cpu_s = cfg, folders, size, cpu_s
        self.image = image
        self.opmix, self.steps = opmix, steps
        self.fast, self.target = fast_costs(opmix), folders["target"]
        self.venv = tree(opmix, "venv", PHASES, size)
        self.s = self.venv.bytes / float(steps["profile"]["venv_bytes"])  # steps go with bytes
        then = steps.get("cpu_s")
        self.cpu = cpu_s / float(then) if cpu_s and then else 1.0

    def on_target(self, **mix: float) -> float:
        """What operations and bytes (an operation mix: ``create=``, ``bytes_read=``, ...)
        cost on the target over the fast folder: the model's storage part, unscaled."""
        return storage_seconds(mix, self.target, self.fast, 1.0, 1.0)

    def measured(self, key: str, scale: float) -> float:
        """A step's time on tmpfs (``lifecycle.toml``), scaled and at this machine's CPU."""
        return _fast(self.steps, key, scale, self.cpu)

    def ready(self, where: Costs, size: Size | None = None) -> float:
        """The ready check with the venv (or ``size`` of it) in ``where``, its caches cold:
        the import phase."""
        pred = predict_config(self.cfg.name, {"venv": where}, "cold", self.opmix,
                              size or self.size, cpu_s=self.cpu_s)  # fmt: skip
        return pred.phases["import"]

    def install(self, state: str) -> float:
        """The whole install again, the config's roles, the cache ``state``."""
        cfg, f = self.cfg, self.folders
        roles = {"venv": f[cfg.venv], "tmpdir": f[cfg.tmpdir],
                 "cache": f[cfg.cache] if cfg.cache != "off" else None}  # fmt: skip
        pred = predict_config(cfg.name, roles, state, self.opmix, self.size, cpu_s=self.cpu_s)
        skip = pred.phases.get("compile", 0.0) if cfg.compile != "on" else 0.0
        return pred.total_s - skip

    def reinstall(self, method: str) -> dict[str, float]:
        return {"install": self.install("warm" if self.cfg.cache == "target" else "cold")}

    def in_place(self, method: str) -> dict[str, float]:
        return {"ready": self.ready(self.target)}

    def layered(self, method: str) -> dict[str, float]:
        """The ready check reads what the image lacks from the target, the rest locally."""
        local = self.ready(self.folders[self.cfg.tmpdir], self.image) if self.image else 0.0
        return {"ready": self.ready(self.target) + local}

    def prewarm(self, method: str) -> dict[str, float]:
        """The ready check once more, listing its files; at the restart they are read in
        batches of 64, 32 batches at once, before the ready check."""
        n, nbytes = _import_reads(self.opmix, self.size)
        at_once = max(1.0, min(PREWARM_JOBS, math.ceil(n / 64)))
        reads = self.on_target(open_read=n, bytes_read=nbytes)
        return {
            "record": self.ready(self.target),
            "prewarm": self.measured("prewarm", 1.0) + reads / at_once,
            "ready": self.ready(self.target),
        }

    def packed(self, method: str) -> dict[str, float]:
        known = method.startswith("squashfs") or method in self.steps["ratio"]
        method = method if known else "squashfs"
        kind = "squashfs" if method.startswith("squashfs") else method
        ratio = float(self.steps["ratio"][kind])
        archive = self.venv.bytes * ratio
        if method in _MOUNTED:  # the ready check reads the archive's share of its files
            read = self.on_target(open_read=1, bytes_read=_import_reads(self.opmix, self.size)[1]
                                  * ratio)  # fmt: skip
        else:
            read = self.on_target(open_read=1, bytes_read=archive)
        restore = "squashfs-loop" if method == "squashfs" else method
        grows = 1.0 if method in _MOUNTED else self.s  # a mount's time is not the tree's
        return {
            "pack": self.measured(f"pack.{kind}", self.s)
            + self.on_target(create=1, bytes_written=archive),
            "restore": self.measured(f"restore.{restore}", grows) + read,
            "ready": self.ready(self.folders[self.cfg.venv]),
        }

    def copied(self, method: str) -> dict[str, float]:
        """``cp -a`` out: a create and two attribute calls (mode, times) per file, a mkdir
        and two per folder; ``cp -a`` back: an open+read and a stat per file and folder."""
        t = self.venv
        out = self.on_target(create=t.files, chmod=2 * (t.files + t.dirs), mkdir=t.dirs,
                             bytes_written=t.bytes)  # fmt: skip
        back = self.on_target(open_read=t.files + t.dirs, stat=t.files + t.dirs,
                              bytes_read=t.bytes)  # fmt: skip
        return {
            "copy-out": self.measured("copy-out", self.s) + out,
            "copy-in": self.measured("copy-in", self.s) + back,
            "ready": self.ready(self.folders[self.cfg.venv]),
        }

    def packed_cache(self, method: str) -> dict[str, float]:
        cache = tree(self.opmix, "cache", ("download",), self.size)
        archive = cache.bytes * float(self.steps["ratio"]["cache"])
        c = cache.bytes / float(self.steps["profile"]["cache_bytes"])
        return {
            "pack-cache": self.measured("pack-cache", c)
            + self.on_target(create=1, bytes_written=archive),
            "restore-cache": self.measured("restore-cache", c)
            + self.on_target(open_read=1, bytes_read=archive),
            "install": self.install("warm"),
        }


#: each strategy's steps (fan-out alone is packed-venv)
_BY_STRATEGY = {
    "reinstall": _Steps.reinstall,
    "persistent-venv": _Steps.in_place,
    "layered-venv": _Steps.layered,
    "prewarm": _Steps.prewarm,
    "packed-venv": _Steps.packed,
    "fan-out": _Steps.packed,
    "copied-venv": _Steps.copied,
    "packed-cache": _Steps.packed_cache,
}


def predict_lifecycle(
    cfg: Any,
    folders: dict[str, Costs],
    size: Size,
    pack_method: str,
    cpu_s: float | None = None,
    opmix: dict[str, Any] | None = None,
    steps: dict[str, Any] | None = None,
    image: Size | None = None,
) -> Lifecycle | None:
    """The persist step and restart of ``cfg`` (a scenario config with a ``strategy``),
    ``folders`` mapping roles to costs, ``size`` what it installs (a layered venv: what the
    image lacks, ``image`` the rest; :meth:`Size.split`), ``pack_method`` the restore a
    packing strategy uses (``auto`` resolved: squashfs, tar+zstd, tar, or a squashfs way).
    None: a strategy it does not know, or a role not probed."""
    how = _BY_STRATEGY.get(getattr(cfg, "strategy", "") or "")
    if how is None or "target" not in folders or not cfg.roles() <= set(folders):
        return None
    one = _Steps(cfg, folders, size, cpu_s, opmix or load_opmix(cfg.installer),
                 steps or load_steps(), image)  # fmt: skip
    parts = how(one, pack_method)
    persist = sum(v for k, v in parts.items() if k in _PERSIST)
    return Lifecycle(cfg.name, persist, sum(parts.values()) - persist, parts)


def _import_reads(opmix: dict[str, Any], size: Size) -> tuple[float, float]:
    """The files the ready check opens in the venv, and the bytes it reads there."""
    mix, k, k_b = import_mix(opmix, size)
    return float(mix.get("open_read", 0)) * k, float(mix.get("bytes_read", 0)) * k_b


__all__ = ["Lifecycle", "Tree", "load_steps", "predict_lifecycle", "tree"]
