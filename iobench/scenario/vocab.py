"""The words a scenario may use, in one place: installers, cache states, venv creators, uv's
link modes, the start-up strategies (what each keeps and loses); the kinds of work are their
registries' (``iobench.scenario.kinds``).

Data only, at the bottom of the scenario wing, so that validating a scenario needs none of
the code that carries the words out (``iobench.trial``)."""

from __future__ import annotations

from dataclasses import dataclass

from iobench.errors import ScenarioError

#: the installers a config may name
INSTALLERS = ("pip", "uv")
#: the most configs one scenario may expand to (a [matrix], --matrix): more is a mistake,
#: and generating them would take longer than any run; --configs then picks from them
MAX_CONFIGS = 4096
#: a config's cache at the start of a trial: empty, primed by an untimed install, or
#: ``shared``: one empty cache that every worker of a fleet trial installs through at once
CACHE_STATES = ("cold", "warm", "shared")
ON_OFF = ("on", "off")
#: uv's link modes (``UV_LINK_MODE``); ``default`` leaves uv to choose (clone on macOS,
#: hardlink on Linux, with a fall-back to copy when the cache is on another filesystem)
LINK_MODES = ("default", "clone", "hardlink", "copy", "symlink")
#: where an import's bytecode goes: ``beside`` its source (Python's default, in the venv's
#: ``__pycache__``) or ``local``: PYTHONPYCACHEPREFIX in the config's TMPDIR role, local disk
PYCACHE = ("beside", "local")


#: how the venv is made (see ``venv_command``)
VENV_CREATORS = ("virtualenv", "venv", "venv-without-pip", "uv")


@dataclass(frozen=True)
class Strategy:
    """One start-up strategy, as data (docs/strategies.md has the table)."""

    name: str
    venv_role: str | None  # where the ready check's venv lives; None: as the config says
    first_start: tuple[str, ...]  # steps after the install
    restart: tuple[str, ...]  # steps before the ready check ("install" = the whole install)
    persists: str  # what it keeps on the target
    lost_at_restart: str
    after_package_change: str
    cache_role: str | None = None  # where the installer's cache lives; None: as the config says
    layered: bool = False  # the venv sits over the image's packages (the scenario's ``image``)


STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in (
        Strategy(
            "reinstall",
            None,
            (),
            ("install",),
            "the package cache, when the config keeps it on the target",
            "the whole venv: every start installs again",
            "nothing: the next start installs the new list",
        ),
        Strategy(
            "persistent-venv",
            "target",
            (),
            (),
            "the venv itself",
            "nothing on the volume; the page, name and attribute caches go cold",
            "install into the venv on the volume (pip runs at volume speed)",
        ),
        Strategy(
            "packed-venv",
            "tmp",
            ("pack",),
            ("restore",),
            "one archive of the venv (tar, tar+zstd or a squashfs image)",
            "the venv on tmp: each restart restores it from the archive",
            "install on tmp, then pack again (the archive is one file: rewrite it whole)",
        ),
        Strategy(
            "copied-venv",
            "tmp",
            ("copy-out",),
            ("copy-in",),
            "a copy of the venv tree",
            "the venv on tmp: each restart copies the tree back file by file",
            "install on tmp, then copy the tree out again",
        ),
        Strategy(
            "packed-cache",
            "tmp",
            ("pack-cache",),
            ("restore-cache", "install"),
            "one archive of the installer's cache (tar or tar+zstd: pip and uv write to it)",
            "the venv and the cache on tmp: each restart restores the cache from the archive, "
            "then installs from it on local disk (nothing downloaded)",
            "install on tmp from the restored cache (only new packages download), then pack "
            "the cache again: it survives a change of the package list",
            cache_role="tmp",
        ),
        Strategy(
            "layered-venv",
            "target",
            (),
            (),
            "a venv over the image's packages (--system-site-packages) holding only what the "
            "image lacks",
            "nothing on the volume; the image's packages are on local disk, the caches go cold",
            "install the new packages into the venv on the volume (at volume speed); a change "
            "in the image's part needs a new image",
            layered=True,
        ),
        Strategy(
            "prewarm",
            "target",
            ("record",),
            ("prewarm",),
            "the venv itself, and the list of its files the ready check opened",
            "nothing on the volume; the caches go cold, and the restart reads the recorded "
            "files in parallel before the ready check",
            "install into the venv on the volume; the next first start records the list again",
        ),
        Strategy(
            "fan-out",
            "tmp",
            ("pack",),
            ("restore",),
            "one archive of the venv, packed by the fleet's first worker (rank 0)",
            "the venv on tmp: each restart restores it from the one archive, every worker at once",
            "one worker installs on tmp and packs again; the others wait for it and restore",
        ),
    )
}
#: the strategy whose first start differs by worker: rank 0 installs and packs, the others wait
#: for its archive on the target and restore it (docs/fleet.md); alone, it is packed-venv
FAN_OUT = "fan-out"
#: strategies that keep one archive of the venv (``--pack-method`` applies to them)
PACKING = ("packed-venv", FAN_OUT)
#: their archive, and how it is restored (``--pack-method``, a config's ``pack_method``): a
#: squashfs image mounted the best way this pod allows (``squashfs``), loop-mounted, mounted
#: by squashfuse or extracted by unsquashfs (iobench.trial.squashfs); a tar archive, zstd or
#: plain. ``auto`` is the best of ``squashfs``, ``tar+zstd`` and ``tar`` that runs here.
PACK_METHODS = ("squashfs", "squashfs-loop", "squashfs-fuse", "squashfs-extract", "tar+zstd", "tar")


def strategy(name: str) -> Strategy | None:
    """The strategy called ``name``, or None."""
    return STRATEGIES.get(name)


def named_list(names: list[str] | tuple[str, ...], most: int = 12) -> str:
    """``a, b, c`` for an error line; a long list ends ``… (and 2,036 more)``."""
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown}, … (and {len(names) - most:,} more)"


#: repeats = "auto" (a scenario) and --repeats auto: the most rounds unless ``auto:N``
AUTO_MAX_REPEATS = 5
#: rounds before the early-stop rule may stop a run (the tie rule needs two values a side)
MIN_AUTO_ROUNDS = 2

#: trials per config a scenario may ask for
MAX_REPEATS = 1000


def repeats_value(repeats: object, where: str) -> tuple[int, bool]:
    """``repeats``: N trials per config, or ``"auto"`` / ``"auto:N"`` (repeat until the
    verdict is settled, at most N rounds: docs/early-stop.md) as (N, True)."""
    auto = False
    if isinstance(repeats, str) and repeats.partition(":")[0] == "auto":
        most = repeats.partition(":")[2]
        auto, repeats = True, int(most) if most.isdigit() else AUTO_MAX_REPEATS
    low = MIN_AUTO_ROUNDS if auto else 1  # auto:N: the tie rule needs two rounds
    if (
        not isinstance(repeats, int)
        or isinstance(repeats, bool)
        or not low <= repeats <= MAX_REPEATS
    ):
        raise ScenarioError(
            f"{where}: expected an integer from 1 to {MAX_REPEATS}, "
            f'or "auto" / "auto:N" (N from {MIN_AUTO_ROUNDS})'
        )
    return repeats, auto
