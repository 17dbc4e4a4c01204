"""Warm caches primed once per placement and reused across repeats while they stay the same.

A warm-cache trial needs a cache that an untimed install filled. Priming before every
repeat costs a full install each time; instead the run keeps one primed cache per
*placement* — the role that holds it, the installer, its link mode and the venv creator —
in that role's run folder, and hands it to every warm trial of that placement.

A reused cache must be the cache the trial would have had after a fresh priming, so its
fingerprint (every entry's relative path, type and size, sorted) is taken after priming
and again after each trial that used it, outside the timed interval. A trial that changed
it (an installer that rewrites its cache on a warm install) spoils it: the next trial of
that placement primes a fresh one. So every warm trial starts from the same cache content.

A cold trial fills a cache exactly as a priming install does (the same install, into the
same placement, from an empty cache). When a warm config of the run shares its placement
and none is primed yet, the cold trial's cache is *adopted* — moved into the placement's
folder by one rename, after the trial, outside its timed interval — and the priming
install is saved.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from iobench.scenario.kinds.install import InstallConfig as Config
from iobench.system.scratch import Scratch, remove

#: the folder, in a role's run folder, holding one placement's primed cache
PREFIX = ".warm-cache-"


def fingerprint(root: Path) -> str:
    """A digest of the tree's names, types and sizes (not contents: cheap on a slow volume)."""
    digest = hashlib.sha256()
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        rel = os.path.relpath(folder, root)
        for name in sorted(files):
            try:
                size = os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                size = -1
            digest.update(f"{rel}/{name}\0{size}\n".encode("utf-8", "surrogateescape"))
        for name in dirs:
            digest.update(f"{rel}/{name}/\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def placement(cfg: Config) -> str:
    """Which configs may share a primed cache: same role, installer, link mode, creator."""
    return f"{cfg.cache}-{cfg.installer}-{cfg.link_mode}-{cfg.venv_creator}"


def wanted(configs: Iterable[object]) -> set[str]:
    """The placements of the warm configs among ``configs`` (configs that install nothing
    keep no installer's cache)."""
    return {placement(c) for c in configs if isinstance(c, Config) and c.cache_state == "warm"}


def feeds(cold: object, warm: object) -> bool:
    """True when ``cold``'s trial leaves a cache that ``warm``'s trials can adopt (what
    ``WarmCaches.adopt`` takes; the trial order puts such a cold config first); configs that
    install nothing keep no installer's cache."""
    return (
        isinstance(cold, Config)
        and isinstance(warm, Config)
        and cold.cache_state == "cold"
        and warm.cache_state == "warm"
        and cold.cache != "off"
        and placement(cold) == placement(warm)
    )


@dataclass
class WarmCaches:
    """The run's primed caches: where each placement's lives, and its fingerprint."""

    scratch: dict[str, Scratch]
    wanted: set[str] = field(default_factory=set)  # placements of the run's warm configs
    prints: dict[str, str] = field(default_factory=dict)  # placement -> fingerprint when primed
    primed: int = 0  # priming installs done
    reused: int = 0  # warm trials that found their cache primed and unchanged
    adopted: int = 0  # primed caches that a cold trial filled (no priming install)

    def path(self, cfg: Config) -> Path:
        """The placement's cache folder (created empty when missing)."""
        folder = self.scratch[cfg.cache].run_root / f"{PREFIX}{placement(cfg)}" / "cache"
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def ready(self, cfg: Config) -> bool:
        """True when the placement's cache is primed and was unchanged by its last trial."""
        if placement(cfg) in self.prints:
            self.reused += 1
            return True
        return False

    def reset(self, cfg: Config) -> Path:
        """An empty cache folder for a fresh priming."""
        self.prints.pop(placement(cfg), None)
        folder = self.path(cfg)
        remove(folder)
        folder.mkdir()
        return folder

    def mark_primed(self, cfg: Config) -> None:
        self.primed += 1
        self.prints[placement(cfg)] = fingerprint(self.path(cfg))

    def counts(self) -> dict[str, int]:
        """meta.json's overhead counts: priming installs, reuses, caches adopted."""
        return {"primes": self.primed, "primes_reused": self.reused, "primes_adopted": self.adopted}

    def adopt(self, cfg: Config, cache: Path) -> bool:
        """After a cold trial that ended ok: move its filled ``cache`` into the placement's
        folder when a warm config wants that placement and none is primed; True if moved."""
        key = placement(cfg)
        if cfg.cache == "off" or key not in self.wanted or key in self.prints:
            return False
        if not cache.is_dir() or not any(cache.iterdir()):
            return False
        folder = self.path(cfg)
        remove(folder)
        os.rename(cache, folder)  # both in the role's run folder: one filesystem
        self.prints[key] = fingerprint(folder)
        self.adopted += 1
        return True

    def check(self, cfg: Config) -> bool:
        """After a trial: True if the cache is as primed; else it is spoilt (primed again next)."""
        key = placement(cfg)
        if key in self.prints and fingerprint(self.path(cfg)) == self.prints[key]:
            return True
        self.prints.pop(key, None)
        return False


__all__ = ["PREFIX", "WarmCaches", "feeds", "fingerprint", "placement"]
