"""What an install's counts scale with (installed files, bytes, distributions, the files its
ready check opens), and how the traced operation mix of one profile scales to another's size:
the model's one scaling rule (``scales``), and a profile's own traced import where it has one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


@dataclass(frozen=True)
class Size:
    """What an install's counts scale with: installed files, bytes and distributions, and
    the files its ready check opens (the profile's import fan-out; 0 where not known)."""

    name: str
    files: int
    bytes: int
    dists: int
    opened: int = 0
    #: a layered venv's part: the profile it is part of, and its share of that one's opened files
    part_of: str = ""
    share: float = 1.0

    @classmethod
    def of(cls, profile: Any) -> Size:
        """From a :class:`iobench.wheels.profile.Profile`."""
        return cls(profile.name, profile.file_count, profile.total_bytes, len(profile.dists),
                   _opened(profile.dists))  # fmt: skip

    @classmethod
    def traced(cls, opmix: dict[str, Any]) -> Size:
        """The install an operation mix was traced on (:func:`load_opmix`)."""
        return cls(opmix["profile"], opmix["files"], opmix["bytes"], opmix["dists"],
                   int(opmix.get("opened", 0)))  # fmt: skip

    @classmethod
    def split(cls, profile: Any, image: Sequence[str]) -> tuple[Size, Size]:
        """A layered venv's two parts of ``profile``: what it installs (the distributions
        the image lacks) and what it reads from the image (``image``: requirements). The
        install's phases scale from the traced install; the ready check is each part's
        share of what the whole one opens (smoke's layered venv: smoke-core, a fifth of the
        installed files and two thirds of what the import opens)."""
        held = {canonicalize_name(Requirement(r).name) for r in image}
        parts: tuple[list[Any], list[Any]] = ([], [])
        for d in profile.dists:
            parts[canonicalize_name(d.name) in held].append(d)
        whole = Size.of(profile)
        out = []
        for part, ds in zip(("delta", "image"), parts, strict=True):
            files, opened = sum(d.file_count for d in ds), _opened(ds)
            share = opened / whole.opened if whole.opened else files / max(whole.files, 1)
            out.append(cls(f"{profile.name}:{part}", files, sum(d.total_bytes for d in ds),
                           len(ds), opened, profile.name, share))  # fmt: skip
        return out[0], out[1]


def _opened(dists: Sequence[Any]) -> int:
    """The files the ready check opens in these distributions (their import fan-out)."""
    return sum(d.imports.files for d in dists if getattr(d, "imports", None))


def size_of(cfg: Any, scenario: Any, profile: Any) -> Size:
    """What ``cfg`` installs of ``profile``: the whole of it, or for a layered venv what the
    scenario's image lacks."""
    layered = getattr(cfg, "strategy", "") == "layered-venv" and getattr(scenario, "image", ())
    return Size.split(profile, scenario.image)[0] if layered else Size.of(profile)


def scales(phase: str, size: Size, traced: Size, role: str = "") -> tuple[float, float]:
    """(operations, bytes) scale of a phase: the venv is the same for every install, and so
    is what pip does in the venv while it downloads (it imports itself and writes its own
    bytecode: 1,700 operations that a layered venv with nothing to install pays too); the
    download's other operations go with the number of wheels, the import with the files the
    ready check opens (where both profiles say), the rest with installed files."""
    if phase == "venv" or (phase == "download" and role == "venv"):
        return 1.0, 1.0
    k_b = size.bytes / traced.bytes
    if phase == "download":
        return size.dists / traced.dists, k_b
    if phase == "import" and size.opened and traced.opened:
        return size.opened / traced.opened, size.opened / traced.opened
    return size.files / traced.files, k_b


def own_import(opmix: dict[str, Any], size: Size) -> tuple[dict[str, Any], float] | None:
    """The venv role's operations and bytes of ``size``'s own ready check, where ``opmix``
    has its profile's trace (``[pip.imports.<profile>]``, tools/import_ops.py), and the
    share of it ``size`` stands for (a layered venv's part); else None (the traced
    install's import, scaled, stands for it). A ready check is not an install: torch's
    stats 2,498 paths that are not there, where smoke's scaled by files would stat 1,250."""
    own = opmix.get("imports", {}).get(size.part_of or size.name, {}).get("venv")
    return (own, size.share) if own else None


def import_mix(opmix: dict[str, Any], size: Size) -> tuple[dict[str, Any], float, float]:
    """(operations, their scale, the bytes' scale) of ``size``'s cold ready check in the venv."""
    own = own_import(opmix, size)
    if own:
        return own[0], own[1], own[1]
    mix = opmix["ops"]["cold"].get("import", {}).get("venv") or {}
    return mix, *scales("import", size, Size.traced(opmix))


__all__ = ["Size", "import_mix", "own_import", "scales", "size_of"]
