"""A persist step's manifest (``iobench-venv.json`` beside the archive or copied tree): what
it holds, and the check every manifest read back passes before a restore uses it.

Why: a manifest is read back from the target volume, by the same run later (a restart) or
by other workers (a fleet's fan-out restores rank 0's archive). Its ``archive`` is joined to
the store's path and its ``venv`` replaced by the new path in the venv's scripts: an
absolute or ``..`` archive name would leave the store, and an empty ``venv`` would insert
the new path between every byte of the scripts. So, like every file read back, it is
untrusted input: each key is checked against what a persist step writes.
"""

from __future__ import annotations

import os
from typing import Any

from iobench.trial.squashfs import WAYS

#: the manifest's file name in a store
MANIFEST = "iobench-venv.json"
MANIFEST_SCHEMA = 1  # a manifest without "restore" (a squashfs way) restores as "squashfs"
#: the archive each pack method makes (a cache's: "cache" for "venv")
ARCHIVES = {"tar": "venv.tar", "tar+zstd": "venv.tar.zst", "squashfs": "venv.sqfs"}
#: what a copied tree is called in its store
TREE = "venv"


def archive_name(method: str, tree: str = "venv") -> str:
    """The file a pack of ``tree`` ("venv" or "cache") with ``method`` makes."""
    return ARCHIVES[method].replace("venv", tree)


def manifest_problem(data: Any) -> str:
    """What is wrong with a manifest read back ('' when it is what a persist step writes)."""
    if not isinstance(data, dict):
        return "not a JSON object"
    kind, tree, method = data.get("kind"), data.get("tree", "venv"), data.get("method")
    if kind not in ("archive", "tree") or tree not in ("venv", "cache"):
        return f"kind {kind!r} / tree {tree!r} is not one a persist step writes"
    if (kind, method) != ("tree", "copy") and (kind != "archive" or method not in ARCHIVES):
        return f"method {method!r} is not one of {', '.join(ARCHIVES)} (or a copied tree)"
    expected = TREE if kind == "tree" else archive_name(str(method), str(tree))
    if data.get("archive") != expected:  # a name, never a path out of the store
        return f"archive {data.get('archive')!r} is not {expected!r}"
    venv = data.get("venv")
    if not isinstance(venv, str) or not os.path.isabs(venv) or os.path.normpath(venv) != venv:
        return f"venv {venv!r} is not an absolute, normal path"
    if venv == "/" or "\0" in venv:
        return f"venv {venv!r} is not a folder a venv is made in"
    if data.get("restore", "") not in ("", *WAYS) or (data.get("restore") and method != "squashfs"):
        return f"restore {data.get('restore')!r} is not a squashfs way ({', '.join(WAYS)})"
    if not isinstance(data.get("tool"), str):
        return f"tool {data.get('tool')!r} is not a name"
    for key in ("bytes", "files"):
        value = data.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return f"{key} {value!r} is not a count"
    return ""


__all__ = ["ARCHIVES", "MANIFEST", "MANIFEST_SCHEMA", "TREE", "archive_name", "manifest_problem"]
