"""The start script's folders: each role's path as the user's own folder, never iobench's
(its clone, its ``.iobench-scratch`` trial folders), the tmp role in a per-user folder."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from pathlib import Path

from iobench import shell
from iobench.rundir.meta import RoleInfo

SCRATCH = ".iobench-scratch"


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
    roles: Mapping[str, RoleInfo], name: str, own: Path | None = None
) -> tuple[str, str | None]:
    """A role's folder for the script, and a note when it had to be moved out of iobench's own.

    A path inside a ``.iobench-scratch`` folder becomes the folder holding it; a path inside
    iobench's clone (``own``) becomes the clone's parent (the same filesystem, the user's).
    The tmp role (a shared temporary folder: /tmp, /dev/shm) becomes the user's own folder
    in it (``iobench.shell.per_user``).
    """
    raw = roles[name].path if name in roles else ""
    if not raw:
        return "/" + name, f"meta.json records no path for role '{name}'; the script uses /{name}"
    path = posixpath.normpath(str(raw))
    parts = path.split("/")
    if SCRATCH in parts:
        path = "/".join(parts[: parts.index(SCRATCH)]) or "/"
    own = own or iobench_clone(path)
    note = None
    if own is not None and (path == str(own) or path.startswith(str(own) + "/")):
        path, note = (
            str(own.parent),
            (
                f"role '{name}' was iobench's own folder ({path}); the script uses its parent "
                f"{own.parent}, on the same filesystem: change it to your own folder on that volume"
            ),
        )
    return (shell.per_user(path) if name == "tmp" else path), note
