"""Writing files: every file iobench writes goes through here, so that none follows a link.

Why: iobench runs as root on shared machines and writes into folders that other users can
write: a run folder received from someone (``iobench report RUN_DIR``), a shared results
folder, the path given to ``--export-json``. Opening such a name for writing follows a
symlink another user planted there, and root overwrites whatever it points at (seen:
``report.html`` and ``--export-json`` links to system files, overwritten).

Method (what ``meta.json`` always had): the content goes to a new temporary file in the
same folder, created with ``O_CREAT|O_EXCL|O_NOFOLLOW`` under a random name (no planted name
can be it) relative to a descriptor of that folder; then ``os.replace`` puts it in place. A
rename replaces a link found at the name; it never writes through it. Readers never see a
half-written file; a full disk leaves the old file and no temporary; the error names the
file. Appends (a run's ``trials.csv``) open with ``O_NOFOLLOW``: a link there is refused.
Files are private to their owner (0600: they hold command lines, index hosts, the
environment) unless the caller says otherwise.

A link on the way to the folder is followed only if root or the running user owns it (the
kernel's ``protected_symlinks`` rule for sticky folders, applied everywhere, as not every
machine sets it): another user's link ``/tmp/out -> /root/secrets`` makes ``--export-json
/tmp/out/x.json`` refuse, in one line, rather than write into the folder it points at.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

from iobench.errors import SafetyError

#: owner read/write only
PRIVATE = 0o600


def check_links(folder: Path | str) -> None:
    """Raise SafetyError when a link on the way to ``folder`` is owned by another user than
    root or the running one (links of ours and root's are followed). The path is walked as
    the kernel walks it: ``..`` after a link leaves the link's target, and a link's own
    target is walked component by component (a link it leads to is checked too)."""
    me = os.geteuid()
    text = os.fspath(folder)
    todo = [p for p in reversed(text.split("/")) if p]  # the next component last
    if not text.startswith("/"):
        todo += [p for p in reversed(os.getcwd().split("/")) if p]
    cur, hops = "/", 0
    while todo:
        part = todo.pop()
        if part == ".":
            continue
        if part == "..":
            cur = os.path.dirname(cur)
            continue
        walked = os.path.join(cur, part)
        try:
            st = os.lstat(walked)
        except OSError:
            return  # not there (yet): the open that follows says so, naming it
        if not stat.S_ISLNK(st.st_mode):
            cur = walked
            continue
        if st.st_uid not in (0, me):
            raise SafetyError(
                f"refusing to write through {walked}: a link owned by uid {st.st_uid}, "
                "not by you or root (give a path without it)"
            )
        hops += 1
        if hops > 40:  # the kernel's own limit: a loop
            raise SafetyError(f"refusing to write through {walked}: too many links")
        target = os.readlink(walked)
        todo += [p for p in reversed(target.split("/")) if p]
        if target.startswith("/"):
            cur = "/"


def _named(exc: OSError, path: Path | str) -> OSError:
    """``exc`` naming ``path`` (a full disk's error said only "No space left on device")."""
    return OSError(exc.errno, exc.strerror or str(exc), str(path))


def write(
    path: Path | str, data: str | bytes, mode: int = PRIVATE, in_place_when_full: bool = False
) -> None:
    """Put ``data`` at ``path`` atomically, never through a link found there.

    Raises OSError naming ``path``; on failure the old file (if any) is unchanged and no
    temporary file is left. ``in_place_when_full``: on a full disk (no room for the
    temporary copy) overwrite the existing file in its own blocks instead — not atomic, the
    last resort of a file that must not keep a stale state (meta.json's "running", which
    keeps trailing blanks as room for it: they are dropped when that is what makes it fit)."""
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    check_links(path.parent)
    try:
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise _named(exc, path.parent) from None
    tmp = f".{path.name}.{secrets.token_hex(4)}.tmp"
    try:
        try:
            fd = os.open(
                tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=folder
            )
        except OSError as exc:
            raise _named(exc, path) from None
        try:
            os.fchmod(fd, mode)  # whatever the umask
            _write_all(fd, raw)
            os.close(fd)
            fd = -1
            os.replace(tmp, path.name, src_dir_fd=folder, dst_dir_fd=folder)
        except OSError as exc:
            if fd != -1:
                os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=folder)
            if in_place_when_full and exc.errno in _FULL and _overwrite(folder, path, raw):
                return
            raise _named(exc, path) from None
    finally:
        os.close(folder)


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
    blocks a full disk does not have, and a half-written file is worse than an old one. A
    link is refused. Raises OSError naming ``path``."""
    try:
        fd = os.open(path.name, os.O_WRONLY | os.O_NOFOLLOW, dir_fd=folder)
    except OSError:
        return False
    try:
        size = os.fstat(fd).st_size
        if len(raw) > size:
            raw = raw.rstrip() + b"\n"  # trailing blanks are room kept for this (meta.json)
        if len(raw) > size:
            return False
        _write_all(fd, raw)
        os.ftruncate(fd, len(raw))
        os.fsync(fd)
    except OSError as exc:
        raise _named(exc, path) from None
    finally:
        os.close(fd)
    return True


def fresh(path: Path | str, mode: int = PRIVATE) -> Path:
    """An empty file at ``path`` that iobench made, for another program to write into by
    name (pip's ``--log`` opens its path for appending and follows a link): whatever was at
    the name is removed first — a link itself, never what it points at — and the file is
    made with ``O_CREAT|O_EXCL|O_NOFOLLOW``. Returns ``path``; errors name it."""
    path = Path(path)
    check_links(path.parent)
    try:
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise _named(exc, path.parent) from None
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path.name, dir_fd=folder)
        fd = os.open(
            path.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=folder
        )
        os.fchmod(fd, mode)
        os.close(fd)
    except OSError as exc:
        raise _named(exc, path) from None
    finally:
        os.close(folder)
    return path


@contextlib.contextmanager
def appending(
    path: Path | str, mode: int = PRIVATE, read: bool = False
) -> Iterator[io.TextIOWrapper]:
    """A text file open for appending at ``path`` (made with ``mode`` if new); a link at
    the name is refused (ELOOP), never followed. ``read``: also readable (to look at the
    last byte). Errors name the file."""
    flags = (os.O_RDWR if read else os.O_WRONLY) | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
    check_links(Path(path).parent)
    try:
        fd = os.open(path, flags, mode)
    except OSError as exc:
        raise _named(exc, path) from None
    fh = open(fd, "a+" if read else "a", newline="", encoding="utf-8")  # noqa: SIM115
    try:
        yield fh
        fh.flush()
        os.fsync(fh.fileno())
    except OSError as exc:
        raise _named(exc, path) from None
    finally:
        with contextlib.suppress(OSError):
            fh.close()


def open_stream(path: Path | str, mode: int = PRIVATE) -> io.BufferedRandom:
    """``path`` made empty and open for reading and writing (an installer's output streams
    into it); a link at the name is refused (ELOOP), never followed. Errors name the file."""
    check_links(Path(path).parent)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
        os.fchmod(fd, mode)
    except OSError as exc:
        raise _named(exc, path) from None
    return open(fd, "w+b")  # noqa: SIM115


__all__ = ["PRIVATE", "appending", "check_links", "fresh", "open_stream", "write"]
