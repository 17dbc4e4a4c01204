"""Shell lines iobench prints for users to paste: quoting, and folders of the user's own.

Why: a start script (``iobench report``) or a fix (``iobench doctor``) that puts a venv, a
TMPDIR or a cache at a predictable name in a shared folder (``/tmp/venv``, ``/dev/shm/tmp``)
and reuses what it finds there runs another user's code: who creates ``/tmp/venv`` first
with a ``.pth`` file in it, or owns the TMPDIR that pip unpacks into, runs code as whoever
follows the script. So every folder such lines make goes through :data:`PRIVATE_DIR`: made
0700, and refused — the script stops there, saying why — when it is a link, belongs to
someone else, or others may write it. Places on a shared temporary folder sit in a per-user
folder (:func:`per_user`) so that two users of one machine do not refuse each other.
"""

from __future__ import annotations

import posixpath
import re
import shlex

#: the running user's uid, as the shell spells it where the script runs
USER_MARK = "$(id -u)"

#: the lines of a shell function that makes its argument a folder of your own, or fails (a script
#: under ``set -e`` stops there; a pasted line says why and leaves the shell open)
PRIVATE_DIR = (
    "private_dir() {  # a folder of yours only: made 0700; a link or another's is refused",
    '    mkdir -p -m 0700 "$1" && [ ! -L "$1" ] && [ -O "$1" ] \\',
    '        && [ -z "$(find "$1" -maxdepth 0 -perm /022)" ] && return 0',
    '    echo "refusing $1: a link, another user\'s folder, or writable by others" \\',
    '        "(code planted there would run as you): remove it or choose another path" >&2',
    "    return 1",
    "}",
)


def per_user(folder: str) -> str:
    """``folder/iobench-$(id -u)``: the user's own folder inside a shared one."""
    return posixpath.join(folder, f"iobench-{USER_MARK}")


def quote(value: str) -> str:
    """``value`` as one shell word: single-quoted only when needed, so usual paths stay
    readable; double-quoted around :data:`USER_MARK`, which must expand."""
    if USER_MARK not in value:
        return shlex.quote(value)
    parts = [re.sub(r'([\\"$`])', r"\\\1", part) for part in value.split(USER_MARK)]
    return '"' + USER_MARK.join(parts) + '"'


def private_dir(path: str = "", variable: str = "") -> str:
    """The line that makes ``path``, or the folder the shell ``variable`` names, private
    (or stops the script)."""
    return f'private_dir "${variable}"' if variable else f"private_dir {quote(path)}"


__all__ = ["PRIVATE_DIR", "USER_MARK", "per_user", "private_dir", "quote"]
