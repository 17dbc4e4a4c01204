"""A shared cache of generated wheelhouses, one per profile fingerprint, safe when several
processes generate the same one at once (a private temp folder renamed into place)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from iobench.errors import UsageError
from iobench.wheels.profile import Profile
from iobench.wheels.synth import synthesize


def default_cache_dir() -> Path:
    """Where generated wheels are kept between runs (XDG cache)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "iobench" / "wheels"


def cached_wheels(profile: Profile, cache_dir: Path | None = None) -> Path:
    """A wheelhouse for the profile, generated once and then reused (keyed by fingerprint).

    Concurrency: the wheels are generated into a private temp folder beside the entry
    (``.NAME-FP.XXXX.tmp``), marked complete, and the whole folder is renamed into place.
    Rename is atomic, so a reader sees either no entry or a complete one; if another
    process renamed its copy in first, ours is discarded and theirs is used. An entry
    without ``.complete`` can only be left by an older iobench that generated in place
    and was interrupted: it is moved aside and removed.
    """
    parent = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    root = parent / f"{profile.name}-{profile.fingerprint()}"
    done = root / ".complete"
    if done.is_file():
        return root
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.", suffix=".tmp", dir=parent))
    except OSError as exc:
        raise UsageError(
            f"wheel cache {parent}: cannot create a folder there ({exc.strerror or exc})"
        ) from None
    try:
        synthesize(profile, tmp)
        (tmp / ".complete").write_text(
            json.dumps({"profile": profile.name, "files": profile.file_count})
        )
        os.chmod(tmp, 0o755)  # mkdtemp makes it 0700
        for _ in range(5):
            try:
                os.rename(tmp, root)
                return root
            except OSError:
                if done.is_file():
                    return root  # another process won; ours is removed below
                if not root.exists():
                    continue  # it vanished between our rename and the check: try again
                _discard_stale(root, parent)
        raise UsageError(
            f"wheel cache {root}: cannot be put in place (is another process removing it?)"
        )
    except OSError as exc:
        raise UsageError(
            f"wheel cache {parent}: cannot write there ({exc.strerror or exc})"
        ) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _discard_stale(root: Path, parent: Path) -> None:
    """Move an incomplete entry aside (one atomic rename, so only one process does it) and delete it."""
    trash = Path(tempfile.mkdtemp(prefix=f".{root.name}.", suffix=".stale", dir=parent))
    moved = trash / "entry"
    try:
        os.rename(root, moved)
        if (moved / ".complete").is_file():
            # another process put its complete copy in place between our look and our move:
            # give it back (if a third one got there first, that one is as good)
            os.rename(moved, root)
    except OSError:
        pass  # someone else moved it, or the entry is back: the caller looks again
    shutil.rmtree(trash, ignore_errors=True)


__all__ = ["cached_wheels", "default_cache_dir"]
