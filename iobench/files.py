"""Writing files: every file iobench writes goes through here, so that none follows a link
and none lands in a folder another user can change.

Why: iobench runs as root on shared machines and writes into folders that other users may
reach: a run folder received from someone (``iobench report RUN_DIR``), a shared results
folder or ``--fleet-dir``, the path given to ``--export-json``. Opening such a name for
writing follows a symlink another user planted there, and root overwrites whatever it points
at (seen: ``report.html`` and ``--export-json`` links to system files, overwritten); a
folder its owner can rename lets them swap it, between iobench's making a file and a
program's opening it by name, for a tree of their own (seen: root's pip appending its log
through a link into a private file of root's).

Method — one walk, then descriptors. The folder is reached from ``/`` one component at a
time, each opened with ``O_DIRECTORY|O_NOFOLLOW`` relative to the descriptor of the one
before (openat) and judged by ``fstat`` of that very descriptor: owned by root, the running
user or an owner the user said to trust (``--trust-owner``), and not writable by others
unless sticky (the role folders' rule, OpenSSH's StrictModes). A link on the way is followed
only when one of those owns it (the kernel's ``protected_symlinks``, applied everywhere),
its target walked the same way (``..`` after a link leaves the link's target, as in the
kernel); ``/proc/PID/fd/N`` is the folder that descriptor holds. What is checked is what is
used: no name is looked up twice, so swapping a folder for a link between a check and a use
(``renameat2(RENAME_EXCHANGE)`` in a loop) finds nothing to swap.

The file is then made relative to the final descriptor: the content goes to a temporary file
created with ``O_CREAT|O_EXCL|O_NOFOLLOW`` under a random name, and a rename puts it in
place; a link found at the name is replaced, never written through. Readers never see a
half-written file; a full disk leaves the old file and no temporary; the error names the
file. Appends (a run's ``trials.csv``) open with ``O_NOFOLLOW``: a link there is refused.
Files are private to their owner (0600: they hold command lines, index hosts, the
environment) unless the caller says otherwise.

A run holds its folder open (``Folder``) and makes every file through that descriptor; a
program it starts that writes by name (pip's ``--log``) is given a path through the held
descriptor (``Folder.path_for``: ``/proc/PID/fd/N/name``), which the kernel resolves to that
very folder wherever it has been moved.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import pwd
import re
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

from iobench.errors import SafetyError

#: owner read/write only
PRIVATE = 0o600
#: a folder iobench makes on the way to one it writes into
FOLDER_MODE = 0o755

#: uids whose folders and links the user said to trust on top of root's and their own
#: (``--trust-owner``, set by ``iobench.system.trust.trust_owners``; meta.json records them)
TRUSTED_UIDS: set[int] = set()

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: the kernel's own limit of links in one lookup
MAX_LINKS = 40
#: the folders this process holds open, by descriptor: their paths, for messages
_HELD: dict[int, Path] = {}
_PROC_FD = re.compile(r"^/proc/(self|\d+)/fd$")


def trusted(uid: int) -> bool:
    """Whether folders and links ``uid`` owns may be on the way to what iobench runs or writes."""
    return uid in (0, os.geteuid()) or uid in TRUSTED_UIDS


def open_to_others(mode: int) -> bool:
    """Writable by group or others and not sticky: they may rename what is in it."""
    return bool(mode & 0o022) and not mode & stat.S_ISVTX


def user_name(uid: int) -> str:
    """``user NAME (uid N)`` for messages."""
    try:
        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


class Refused(SafetyError):
    """A folder or link on the way that another user controls: ``where`` is it; ``uid``
    its owner when that is the reason (else it is open to others, ``mode``); ``link``: it is
    a link. The message is for writes; ``iobench.system.trust`` words it for what it runs."""

    def __init__(self, where: str, uid: int | None, mode: int, link: bool = False) -> None:
        self.where, self.uid, self.mode, self.link = where, uid, mode, link
        swap = "who could swap what iobench writes there for a link to another file"
        super().__init__(
            f"refusing to write through {where}: a link owned by uid {uid}, not by you or root "
            "(give a path without it)"
            if link
            else f"refusing to write into {where}: it belongs to {user_name(uid)}, {swap} "
            "(give a folder of your own, or chown it)"
            if uid is not None
            else f"refusing to write into {where}: it is writable by other users and not "
            f"sticky (mode {stat.S_IMODE(mode):04o}), {swap} (give a folder of your own, or "
            "chmod go-w it)"
        )


def _judge(fd: int, where: str) -> int:
    """``fd``, a folder's, or Refused (``fd`` is then closed) when another user controls it."""
    st = os.fstat(fd)
    if not trusted(st.st_uid) or open_to_others(st.st_mode):
        os.close(fd)
        raise Refused(where, None if trusted(st.st_uid) else st.st_uid, st.st_mode)
    return fd


def shown(path: Path | str) -> str:
    """``path`` for a message: a path through a folder this process holds open
    (``/proc/PID/fd/N/...``) as that folder's own path."""
    text = os.fspath(path)
    parts = text.split("/", 5)
    if len(parts) >= 5 and parts[1] == "proc" and parts[3] == "fd" and parts[4].isdigit():
        held = _HELD.get(int(parts[4]))
        if held is not None and parts[2] in ("self", _proc_pid()):
            return str(held / parts[5]) if len(parts) > 5 else str(held)
    return text


def _proc_pid() -> str:
    """This process's number as /proc names it (it differs from getpid() in another
    namespace's /proc)."""
    try:
        return os.readlink("/proc/self")
    except OSError:
        return str(os.getpid())


def _named(exc: OSError, path: Path | str) -> OSError:
    """``exc`` naming ``path`` (a full disk's error said only "No space left on device")."""
    return OSError(exc.errno, exc.strerror or str(exc), shown(path))


def _walk(text: str, make: int | None, upto_missing: bool = False) -> tuple[int, str, bool]:
    """A descriptor of the folder ``text`` names, the path walked, and whether it was all
    there; each component judged (see the module docstring). ``make``: a missing folder is
    made with this mode. ``upto_missing``: stop where the path does not exist yet (the
    folder that would hold it; the third value is then False)."""
    if not text.startswith("/"):
        text = os.path.join(os.getcwd(), text)
    todo = [p for p in reversed(text.split("/")) if p]  # the next component last
    fd = _judge(os.open("/", _DIR), "/")
    at, hops = "/", 0
    try:
        while todo:
            part = todo.pop()
            if part == ".":
                continue
            where = os.path.dirname(at) if part == ".." else os.path.join(at, part)
            try:
                nfd, where = _step(fd, at, part, where, make)
            except OSError as exc:
                if exc.errno == errno.ENOENT and upto_missing:
                    return fd, at, False
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR) or part == "..":
                    raise _named(exc, where) from None
                st = os.stat(part, dir_fd=fd, follow_symlinks=False)
                hops += 1
                if stat.S_ISDIR(st.st_mode) and hops <= MAX_LINKS:
                    todo.append(part)  # a link a moment ago, a folder now: look again
                    continue
                if not stat.S_ISLNK(st.st_mode):
                    raise _named(exc, where) from None
                if not trusted(st.st_uid):
                    raise Refused(where, st.st_uid, st.st_mode, link=True) from None
                if hops > MAX_LINKS:
                    raise SafetyError(
                        f"refusing to write through {where}: too many links"
                    ) from None
                target = os.readlink(part, dir_fd=fd)
                todo += [p for p in reversed(target.split("/")) if p]
                if target.startswith("/"):
                    os.close(fd)
                    fd = -1
                    fd, at = _judge(os.open("/", _DIR), "/"), "/"
                continue
            _judge(nfd, where)
            os.close(fd)
            fd, at = nfd, where
    except BaseException:
        if fd != -1:
            os.close(fd)
        raise
    return fd, at, True


def _step(fd: int, at: str, part: str, where: str, make: int | None) -> tuple[int, str]:
    """``part`` of the folder ``fd`` (whose path is ``at``) opened without following a link,
    made first when missing and ``make`` is given; a descriptor in ``/proc/PID/fd`` is a
    magic link, which the kernel follows to the very folder it names (not by its text)."""
    if _PROC_FD.match(at) and part.isdigit():
        nfd = os.open(part, _DIR & ~os.O_NOFOLLOW, dir_fd=fd)
        if at in (f"/proc/{_proc_pid()}/fd", "/proc/self/fd"):
            where = str(_HELD.get(int(part), where))
        return nfd, where
    try:
        return os.open(part, _DIR, dir_fd=fd), where
    except FileNotFoundError:
        if make is None:
            raise
    with contextlib.suppress(FileExistsError):  # made meanwhile: judged all the same
        os.mkdir(part, make, dir_fd=fd)
    return os.open(part, _DIR, dir_fd=fd), where


def _is_link(fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def problem_on_the_way(path: Path | str, hops: int = 0) -> Refused | None:
    """The folder or link on the way to ``path`` (a folder or a file) that another user
    controls, or None; a path that does not exist yet is judged by the folders that would
    hold it. For ``iobench.system.trust``, which words the refusal for what it guards."""
    text = os.path.join(os.getcwd(), os.fspath(path))  # not normalised: x/.. is the kernel's
    parent, name = os.path.split(text.rstrip("/") or "/")
    try:
        fd, at, whole = _walk(parent, None, upto_missing=True)
    except Refused as exc:
        return exc
    except OSError:
        return None  # not a folder on the way: the use that follows says so, naming it
    try:
        if not whole or not name:
            return None
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            return None
        where = os.path.join(at, name)
        if stat.S_ISLNK(st.st_mode):  # named through a link (bin/python3 -> python3.11)
            if not trusted(st.st_uid):
                return Refused(where, st.st_uid, st.st_mode, link=True)
            if hops >= MAX_LINKS:
                return None  # a loop: the use that follows fails on it
            return problem_on_the_way(os.path.join(at, os.readlink(name, dir_fd=fd)), hops + 1)
        if stat.S_ISDIR(st.st_mode):
            try:
                os.close(_judge(os.open(name, _DIR, dir_fd=fd), where))
            except Refused as exc:
                return exc
            return None
        if not trusted(st.st_uid) or st.st_mode & 0o022:  # a file: writable by its owner only
            return Refused(where, None if trusted(st.st_uid) else st.st_uid, st.st_mode)
        return None
    finally:
        os.close(fd)


class Folder:
    """A folder held open for writing, reached by the judged walk (``open_folder``): the
    files iobench makes in it are made relative to this descriptor, whatever happens to
    the names above it. Close it (or use it as a context manager) when done."""

    def __init__(self, fd: int, path: Path) -> None:
        self.fd, self.path = fd, path
        _HELD[fd] = path

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd != -1:
            _HELD.pop(self.fd, None)
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    def path_for(self, name: str = "") -> Path:
        """A path to ``name`` in this very folder for another program (pip's ``--log``):
        through this process's descriptor, so the kernel finds this folder wherever it is."""
        held = Path(f"/proc/{_proc_pid()}/fd/{self.fd}")
        if not held.is_dir():  # no /proc: the folder's own path (it was judged)
            held = self.path
        return held / name if name else held

    def folder(self, name: str, make: int | None = None) -> Folder:
        """Its sub-folder ``name`` (made with mode ``make`` if missing and ``make`` is given),
        held open; a link there is refused (ELOOP), never followed."""
        where = self.path / name
        try:
            fd, _ = _step(self.fd, "", name, "", make)
        except OSError as exc:
            if exc.errno == errno.ENOTDIR and _is_link(self.fd, name):  # what O_DIRECTORY says
                exc = OSError(errno.ELOOP, "a link, not a folder")
            raise _named(exc, where) from None
        _judge(fd, str(where))
        return Folder(fd, where)

    def mkdir(self, name: str, mode: int = FOLDER_MODE) -> Folder:
        """A new sub-folder ``name`` (FileExistsError when the name is taken), held open."""
        try:
            os.mkdir(name, mode, dir_fd=self.fd)
        except OSError as exc:  # FileExistsError stays one
            raise _named(exc, self.path / name) from None
        return self.folder(name)

    def write(
        self, name: str, data: str | bytes, mode: int = PRIVATE, in_place_when_full: bool = False
    ) -> None:
        """Put ``data`` at ``name`` atomically, never through a link found there.

        Raises OSError naming the file; on failure the old file (if any) is unchanged and no
        temporary file is left. ``in_place_when_full``: on a full disk (no room for the
        temporary copy) overwrite the existing file in its own blocks instead — not atomic, the
        last resort of a file that must not keep a stale state (meta.json's "running", which
        keeps trailing blanks as room for it: they are dropped when that is what makes it fit)."""
        path = self.path / name
        raw = data.encode("utf-8") if isinstance(data, str) else data
        tmp = f".{name}.{secrets.token_hex(4)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(tmp, flags, mode, dir_fd=self.fd)
        except OSError as exc:
            if in_place_when_full and exc.errno in _FULL and _overwrite(self.fd, path, raw):
                return
            raise _named(exc, path) from None
        try:
            os.fchmod(fd, mode)  # whatever the umask
            _write_all(fd, raw)
            os.close(fd)
            fd = -1
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except OSError as exc:
            if fd != -1:
                os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=self.fd)
            if in_place_when_full and exc.errno in _FULL and _overwrite(self.fd, path, raw):
                return
            raise _named(exc, path) from None

    def fresh(self, name: str, mode: int = PRIVATE) -> Path:
        """An empty file ``name`` that iobench made, for another program to write into by
        name (pip's ``--log`` opens its path for appending and follows a link): whatever was
        at the name is removed first — a link itself, never what it points at — and the file
        is made with ``O_CREAT|O_EXCL|O_NOFOLLOW``. Returns the path to give that program
        (``path_for``); errors name the file."""
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=self.fd)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(name, flags, mode, dir_fd=self.fd)
            os.fchmod(fd, mode)
            os.close(fd)
        except OSError as exc:
            raise _named(exc, self.path / name) from None
        return self.path_for(name)

    def open_fd(self, name: str, flags: int, mode: int = PRIVATE) -> int:
        """``name`` opened with ``flags`` (``O_NOFOLLOW`` added: a link is refused) relative
        to this folder; errors name the file."""
        try:
            return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=self.fd)
        except OSError as exc:
            raise _named(exc, self.path / name) from None


def open_folder(path: Path | str, make: int | None = None) -> Folder:
    """``path``, a folder, held open after the judged walk (module docstring); ``make``: the
    folders missing on the way are made with this mode. Raises Refused (a SafetyError) when
    another user controls a folder or link on the way, else OSError naming the path."""
    fd, _, _ = _walk(os.fspath(path), make)
    return Folder(fd, Path(shown(path)))


def make_folders(path: Path | str, mode: int = FOLDER_MODE) -> None:
    """``path`` and the folders on the way to it made where missing, by the judged walk."""
    open_folder(path, make=mode).close()


def _write_all(fd: int, raw: bytes) -> None:
    """All of ``raw`` to ``fd`` (``os.write`` may write less than it is given)."""
    view = memoryview(raw)
    while view:
        view = view[os.write(fd, view) :]


#: a disk without room: no temporary copy can be made
_FULL = {errno.ENOSPC, errno.EDQUOT}


def _overwrite(folder: int, path: Path, raw: bytes) -> bool:
    """Write ``raw`` over the existing file ``path`` in its own blocks, then cut it to
    length; False (nothing written) when ``raw`` is longer than the file: that would need
    blocks a full disk does not have, and a half-written file is worse than an old one.
    Trailing blanks of ``raw`` are room kept for this (meta.json): dropped when that makes
    it fit, and what is left of the file's room kept as blanks, for the next update. A link
    is refused. Raises OSError naming ``path``."""
    try:
        fd = os.open(path.name, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
    except OSError:
        return False
    try:
        size = os.fstat(fd).st_size
        if len(raw) > size:
            room = raw != raw.rstrip() + b"\n"
            raw = raw.rstrip() + b"\n"
            if len(raw) > size:
                return False
            if room and len(raw) + 1 < size:
                raw += b" " * (size - len(raw) - 1) + b"\n"
        _write_all(fd, raw)
        os.ftruncate(fd, len(raw))
        os.fsync(fd)
    except OSError as exc:
        raise _named(exc, path) from None
    finally:
        os.close(fd)
    return True


# ---------------------------------------------------------------- by path: the same, one walk each
def write(
    path: Path | str, data: str | bytes, mode: int = PRIVATE, in_place_when_full: bool = False
) -> None:
    """``Folder.write`` into the folder holding ``path``, reached by the judged walk."""
    path = Path(path)
    with open_folder(path.parent) as folder:
        folder.write(path.name, data, mode, in_place_when_full)


def fresh(path: Path | str, mode: int = PRIVATE) -> Path:
    """``Folder.fresh`` in the folder holding ``path``; returns ``path``."""
    path = Path(path)
    with open_folder(path.parent) as folder:
        folder.fresh(path.name, mode)
    return path


@contextlib.contextmanager
def appending(
    path: Path | str, mode: int = PRIVATE, read: bool = False
) -> Iterator[io.TextIOWrapper]:
    """A text file open for appending at ``path`` (made with ``mode`` if new); a link at
    the name is refused (ELOOP), never followed. ``read``: also readable (to look at the
    last byte). Errors name the file."""
    path = Path(path)
    with open_folder(path.parent) as folder:
        with appending_in(folder, path.name, mode, read) as fh:
            yield fh


@contextlib.contextmanager
def appending_in(
    folder: Folder, name: str, mode: int = PRIVATE, read: bool = False
) -> Iterator[io.TextIOWrapper]:
    """``appending`` relative to a held folder."""
    flags = (os.O_RDWR if read else os.O_WRONLY) | os.O_APPEND | os.O_CREAT
    fd = folder.open_fd(name, flags, mode)
    fh = open(fd, "a+" if read else "a", newline="", encoding="utf-8")  # noqa: SIM115
    try:
        yield fh
        fh.flush()
        os.fsync(fh.fileno())
    except OSError as exc:
        raise _named(exc, folder.path / name) from None
    finally:
        with contextlib.suppress(OSError):
            fh.close()


def open_stream(path: Path | str, mode: int = PRIVATE) -> io.BufferedRandom:
    """``path`` made empty and open for reading and writing (an installer's output streams
    into it); a link at the name is refused (ELOOP), never followed. Errors name the file."""
    path = Path(path)
    with open_folder(path.parent) as folder:
        fd = folder.open_fd(path.name, os.O_RDWR | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)
    except OSError as exc:
        os.close(fd)
        raise _named(exc, path) from None
    return open(fd, "w+b")  # noqa: SIM115


__all__ = [
    "FOLDER_MODE", "PRIVATE", "TRUSTED_UIDS", "Folder", "Refused", "appending", "appending_in",
    "fresh", "make_folders", "open_folder", "open_stream", "open_to_others",
    "problem_on_the_way", "shown", "trusted", "user_name", "write",
]  # fmt: skip
