"""Whom a folder lets change what iobench runs: OpenSSH's StrictModes, for every folder
iobench executes code from or reads configuration from.

Why: iobench runs as root on shared machines. A folder that another user owns — or any
folder above it that others can write and that is not sticky — lets that user rename what
iobench put there and put their own in its place: a venv whose interpreter root then runs,
a wheel root then installs and imports, a ``pip.conf`` that names their index. The rule is
the one ``sshd`` applies to ``~/.ssh``: the folder and every folder above it belong to root,
the running user or an owner the user said to trust (``--trust-owner``, recorded in
meta.json), and none is writable by others unless sticky (as ``/tmp`` is).

What is checked: each role folder and the scratch folder in it (``iobench.system.scratch``),
the lab's state folder, the per-user folders the tools read (``HOME`` and the XDG base
folders: pip's and uv's configuration, virtualenv's seed wheels, iobench's generated
wheels; ``TMPDIR``), the folders a run writes into (``--results``, ``--fleet-dir``, a
resumed run folder) and the interpreters it runs (``--python``, a scenario's, a resumed
run's) before a run starts. Every other write (``report --out``, the exports) meets the
same rule in ``iobench.files``, which holds the rule itself and the trusted owners.
"""

from __future__ import annotations

import errno
import os
import pwd
import stat
from collections.abc import Mapping
from pathlib import Path

from iobench.errors import SafetyError
from iobench.files import TRUSTED_UIDS, problem_on_the_way, user_name

#: the per-user folders that pip, uv, virtualenv and iobench read code or configuration
#: from, and the temporary folder iobench's own measurements build venvs in
USER_DIRS = ("HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "TMPDIR")
#: the configuration files the tools read when named in the environment (an index URL, a
#: find-links folder, a constraint: what root installs and then imports)
CONFIG_FILES = ("PIP_CONFIG_FILE", "UV_CONFIG_FILE", "VIRTUALENV_CONFIG_FILE")


def trust_owners(uids: set[int]) -> None:
    """Trust folders these users own as roles and above them (``--trust-owner``; meta.json
    records them): the user says that none of them would swap what iobench runs."""
    TRUSTED_UIDS.clear()
    TRUSTED_UIDS.update(uids)


def user_login(uid: int) -> str:
    """The login name of ``uid`` (its number when it has none)."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def strict_modes_problem(path: Path, what: str, fix: str = "", harm: str = "") -> str | None:
    """Why another user could change ``what`` at ``path`` (or below it), or None.

    ``path`` and every folder above it, walked as the kernel walks it (``iobench.files``:
    each folder judged on its own descriptor, a link followed only when its owner is
    trusted): owned by root, the running user or a trusted owner, and not writable by
    others unless sticky; ``path`` itself, when a file, writable by its owner only. A path
    that does not exist yet is judged by the folders that would hold it. ``fix``: a first
    remedy to name before the usual ones; ``harm``: what the swap would do (by default, have
    the running user run their code)."""
    refused = problem_on_the_way(path)
    if refused is None:
        return None
    me = os.geteuid()
    first = f"{fix}, " if fix else ""
    folder, uid = refused.where, refused.uid
    where = "in" if os.path.abspath(path) == folder else "below"
    if refused.link:
        return (
            f"{folder} is a link owned by {user_name(uid or 0)}, who could point it elsewhere and "
            f"swap {what}: give the path without it, or pass --trust-owner {user_login(uid or 0)}"
        )
    if uid is not None:
        name = user_login(uid)
        return (
            f"{folder} belongs to {user_name(uid)}, who could swap {what} {where} it and "
            f"{harm or f'have {user_name(me)} run their code'}: {first}chown it to {user_login(me)}, "
            f"run iobench as {name}, or pass --trust-owner {name}"
        )
    return (
        f"{folder} is writable by other users and not sticky (mode "
        f"{stat.S_IMODE(refused.mode):04o}): another user could swap {what} {where} it; "
        f"{first}chmod go-w it (or +t, as /tmp)"
    )


def check_user_dirs(env: Mapping[str, str] | None = None) -> None:
    """Refuse a run whose ``HOME`` (or an XDG base folder that is set), or a configuration
    file the environment names to pip, uv or virtualenv, another user could change: the tools
    iobench runs read their configuration and seed wheels there, and iobench keeps its
    generated wheels there. ``sudo`` without ``-H`` keeps the calling
    user's ``HOME`` on some systems, which is exactly this case."""
    env = os.environ if env is None else env
    for name in USER_DIRS:
        value = env.get(name)
        if not value or not os.path.isabs(value):
            continue
        problem = strict_modes_problem(
            Path(value),
            f"the configuration, caches and wheels that pip, uv, virtualenv and iobench read from {name}",
            fix=f"set {name} to a folder of your own (sudo -H)" if name == "HOME" else "",
        )
        if problem:
            raise SafetyError(f"{name}={value}: {problem}")
    for name in CONFIG_FILES:
        value = env.get(name)
        if not value or value == os.devnull:  # /dev/null: no configuration at all
            continue
        problem = strict_modes_problem(
            Path(os.path.abspath(value)), f"the configuration {name} names"
        )
        if problem:
            raise SafetyError(f"{name}={value}: {problem}")


def private_dir_problem(path: Path) -> str | None:
    """Why ``path`` is not a folder iobench may use as its own (scratch, lab state), or None.

    Opened with O_NOFOLLOW|O_DIRECTORY and judged by fstat of that very descriptor, so a
    link swapped in between a check and its use is refused, not followed.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            return f"{path} is a symlink or not a folder; iobench will not use it as scratch"
        return f"cannot open scratch folder {path}: {exc.strerror}"
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    me = os.geteuid()
    if st.st_uid != me:
        return (
            f"{path} belongs to {user_name(st.st_uid)}, not to you ({user_name(me)}); iobench uses only "
            f"scratch folders it made as you (on filesystems that do not keep owners, such as vfat or "
            f"NFS with root_squash, give a role folder on another filesystem)"
        )
    if st.st_mode & 0o022:
        return (
            f"{path} is writable by other users (mode {stat.S_IMODE(st.st_mode):04o}); another user could "
            f"plant programs in it: remove it (or chmod go-w it if it is yours)"
        )
    return None


__all__ = [
    "TRUSTED_UIDS",
    "CONFIG_FILES",
    "USER_DIRS",
    "check_user_dirs",
    "private_dir_problem",
    "strict_modes_problem",
    "trust_owners",
    "user_login",
    "user_name",
]
