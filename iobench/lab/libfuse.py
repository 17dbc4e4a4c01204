"""What the lab asks of libfuse 3 beyond what mfusepy wraps: data that never passes through
Python, listings with attributes, ``renameat2`` flags, and the cache notifications of a flush.

Data path. mfusepy's ``read`` and ``write`` copy every byte through Python: a write arrives
in libfuse's request buffer, is copied into a ``bytes`` (``ctypes.string_at``) and then into
the backing file; a read is ``pread`` into a new ``bytes``, copied into libfuse's buffer
(``memmove``) and written to ``/dev/fuse``. At 1 MiB requests those copies, made while
holding the interpreter's lock, and the allocations are most of the daemon's cost per byte.
The lab answers libfuse's ``read_buf`` and ``write_buf`` instead:

- a read is answered with a *file-descriptor buffer* (``FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK``:
  the backing file's descriptor and offset, :func:`reply_from_fd`); libfuse then moves the
  bytes itself, with ``splice`` from the backing file into ``/dev/fuse`` when
  ``FUSE_CAP_SPLICE_WRITE`` is on (:class:`LabFUSE` asks for it), else with one ``pread``
  into its own buffer. libfuse frees the vector with ``free()``, so it is ``malloc``'d here.
- a write's request is copied by libfuse (``fuse_buf_copy``, :func:`copy_to_fd`) from its
  own buffer — or the pipe it spliced the request into (``FUSE_CAP_SPLICE_READ``, libfuse's
  default) — into the backing file: ``pwrite`` or ``splice``, with the interpreter's lock
  released.

mfusepy's own ``fuse_bufvec`` declares ``buf`` as a pointer; in ``fuse_common.h`` it is an
array of one ``struct fuse_buf`` inside the vector, so the lab declares both structures
itself (:class:`FuseBuf`, :class:`FuseBufVec`).

Request size: libfuse 3 sizes its buffer for 256 pages (``FUSE_MAX_MAX_PAGES``), so the
kernel sends writes of up to 1 MiB (``max_write``, ``max_pages``), NFS's usual
``wsize``/``rsize`` on EFS. Reads come in the size of the kernel's readahead window; the
fuse kind sets the mount's ``read_ahead_kb`` to the same 1 MiB
(:data:`iobench.lab.kinds.fuse.READAHEAD_KB`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from typing import Any

if "FUSE_LIBRARY_PATH" not in os.environ:
    # mfusepy prefers libfuse2 when installed; this project needs libfuse3.
    os.environ["FUSE_LIBRARY_NAME"] = "fuse3"

import mfusepy  # noqa: E402

#: fuse_common.h: capabilities the lab changes in ``init``
FUSE_CAP_SPLICE_WRITE = 1 << 7
FUSE_CAP_READDIRPLUS_AUTO = 1 << 14  # the kernel's adaptive READDIRPLUS
#: enum fuse_buf_flags
FUSE_BUF_IS_FD = 1 << 1
FUSE_BUF_FD_SEEK = 1 << 2
FUSE_BUF_FD_RETRY = 1 << 3
_FUSE_READDIR_PLUS = 1  # enum fuse_readdir_flags: the kernel asked for READDIRPLUS
_FUSE_FILL_DIR_PLUS = 2  # enum fuse_fill_dir_flags: this entry's attributes are complete

_libc = ctypes.CDLL(None, use_errno=True)
_libc.malloc.restype = ctypes.c_void_p
_libc.malloc.argtypes = [ctypes.c_size_t]


class FuseBuf(ctypes.Structure):
    """``struct fuse_buf``: memory or a file descriptor, with a position."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("flags", ctypes.c_int),
        ("mem", ctypes.c_void_p),
        ("fd", ctypes.c_int),
        ("pos", ctypes.c_int64),
    ]


class FuseBufVec(ctypes.Structure):
    """``struct fuse_bufvec`` with its one inline buffer."""

    _fields_ = [
        ("count", ctypes.c_size_t),
        ("idx", ctypes.c_size_t),
        ("off", ctypes.c_size_t),
        ("buf", FuseBuf * 1),
    ]


def _buffer_lib() -> Any:
    lib = mfusepy._libfuse
    lib.fuse_buf_copy.restype = ctypes.c_ssize_t
    lib.fuse_buf_copy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    lib.fuse_buf_size.restype = ctypes.c_size_t
    lib.fuse_buf_size.argtypes = [ctypes.c_void_p]
    return lib


_lib = _buffer_lib()


def reply_from_fd(bufpp: Any, fd: int, offset: int, size: int) -> None:
    """Point libfuse's reply vector (``*bufpp``) at ``size`` bytes of ``fd`` from ``offset``;
    libfuse reads (or splices) them after the handler returns and frees the vector."""
    addr = _libc.malloc(ctypes.sizeof(FuseBufVec))
    if not addr:
        raise MemoryError("malloc of a fuse_bufvec failed")
    vec = FuseBufVec.from_address(addr)
    vec.count, vec.idx, vec.off = 1, 0, 0
    buf = vec.buf[0]
    buf.size, buf.flags, buf.mem = size, FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK, None
    buf.fd, buf.pos = fd, offset
    bufpp[0] = ctypes.cast(addr, type(bufpp[0]))


def size_of(src: Any) -> int:
    """The bytes a write request carries (libfuse's vector ``src``)."""
    return int(_lib.fuse_buf_size(ctypes.cast(src, ctypes.c_void_p).value))


def copy_to_fd(src: Any, fd: int, offset: int) -> int:
    """Copy a write request's data (libfuse's vector ``src``) into ``fd`` at ``offset``;
    the bytes written (an ``OSError`` on failure)."""
    src_addr = ctypes.cast(src, ctypes.c_void_p).value
    size = _lib.fuse_buf_size(src_addr)
    dst = FuseBufVec(1, 0, 0)
    dst.buf[0].size, dst.buf[0].flags = size, FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY
    dst.buf[0].fd, dst.buf[0].pos = fd, offset
    n = _lib.fuse_buf_copy(ctypes.addressof(dst), src_addr, 0)
    if n < 0:
        raise OSError(-n, os.strerror(-n))
    return int(n)


def fill_stat(st: Any, s: os.stat_result) -> None:
    """Set every field of mfusepy's ``c_stat`` that libfuse passes on, as a getattr reply
    would, without mfusepy's per-field dict loop (~2x faster)."""
    st.st_mode, st.st_ino, st.st_nlink = s.st_mode, s.st_ino, s.st_nlink
    st.st_uid, st.st_gid, st.st_rdev = s.st_uid, s.st_gid, s.st_rdev
    st.st_size, st.st_blocks, st.st_blksize = s.st_size, s.st_blocks, s.st_blksize
    st.st_atimespec.tv_sec, st.st_atimespec.tv_nsec = divmod(s.st_atime_ns, 1_000_000_000)
    st.st_mtimespec.tv_sec, st.st_mtimespec.tv_nsec = divmod(s.st_mtime_ns, 1_000_000_000)
    st.st_ctimespec.tv_sec, st.st_ctimespec.tv_nsec = divmod(s.st_ctime_ns, 1_000_000_000)


# ---- cache notifications (iobench lab flush) ---------------------------------------------


def notify_lib() -> Any:
    """libfuse3 with the argument types of the calls the flush uses (mfusepy leaves them out)."""
    lib = mfusepy._libfuse
    lib.fuse_get_session.restype = ctypes.c_void_p
    lib.fuse_get_session.argtypes = [ctypes.c_void_p]
    lib.fuse_lowlevel_notify_inval_entry.restype = ctypes.c_int
    lib.fuse_lowlevel_notify_inval_entry.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint64,
        ctypes.c_char_p,
        ctypes.c_size_t,
    ]
    lib.fuse_lowlevel_notify_inval_inode.restype = ctypes.c_int
    lib.fuse_lowlevel_notify_inval_inode.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint64,
        ctypes.c_int64,
        ctypes.c_int64,
    ]
    return lib


def current_session() -> int | None:
    """The libfuse session of the filesystem whose callback is running (call from ``init``)."""
    try:
        lib = notify_lib()
        fuse_ptr = mfusepy._libfuse.fuse_get_context().contents.fuse
        return lib.fuse_get_session(fuse_ptr) if fuse_ptr else None
    except (AttributeError, ValueError, OSError):
        return None


# ---- mfusepy's FUSE with the lab's changes ----------------------------------------------


class LabFUSE(mfusepy.FUSE):
    """mfusepy's FUSE with ``renameat2`` flags passed on (mfusepy drops them), a create
    without mfusepy's per-call ``inspect.signature``, READDIRPLUS answered with attributes
    (mfusepy sends only names and types; see :mod:`iobench.lab.fs`), and read replies
    spliced from the backing file (``FUSE_CAP_SPLICE_WRITE``; the filesystem answers
    ``read_buf`` and ``write_buf`` through :func:`reply_from_fd` and :func:`copy_to_fd`)."""

    def create(self, path: bytes, mode: int, fip: Any) -> int:
        fi = fip.contents
        fi.fh = self.operations.create(path.decode(self.encoding, self.errors), mode, fi.flags)
        return 0

    def init_fuse_3(self, conn: Any, config: Any) -> None:
        if conn:
            info = conn.contents
            if self.operations.readdir_plus:
                # READDIRPLUS for every part of a listing, not only its first
                info.want &= ~FUSE_CAP_READDIRPLUS_AUTO
            if info.capable & FUSE_CAP_SPLICE_WRITE:
                info.want |= FUSE_CAP_SPLICE_WRITE
        super().init_fuse_3(conn, config)

    def readdir_fuse_3(
        self, path: bytes | None, buf: Any, filler: Any, offset: int, fip: Any, flags: int
    ) -> int:
        """List from ``offset`` on, each entry with its position, until the kernel's buffer is
        full; for READDIRPLUS with full attributes (see :mod:`iobench.lab.fs`)."""
        ops = self.operations
        decoded = "" if path is None else path.decode(self.encoding, self.errors)
        entries = ops.listing(decoded, fip.contents.fh, offset)
        plus = bool(flags & _FUSE_READDIR_PLUS) and ops.readdir_plus
        st = mfusepy.c_stat()
        for index in range(offset, len(entries)):
            entry = entries[index]
            fill = 0
            full = None
            if isinstance(entry, str):  # "." and "..": no attributes, as mfusepy sends them
                name = entry
            else:
                name = entry.name
                if plus:
                    with contextlib.suppress(OSError):  # gone since the listing: type only
                        full = os.lstat(entry.path)  # now, not cached in the DirEntry
            if full is not None:
                fill_stat(st, full)
                fill = _FUSE_FILL_DIR_PLUS
            else:
                ctypes.memset(ctypes.byref(st), 0, ctypes.sizeof(st))
                if not isinstance(entry, str):
                    st.st_mode = ops.entry_type(entry)
                    st.st_ino = entry.inode()
            if filler(buf, name.encode(self.encoding, self.errors), st, index + 1, fill):
                break  # the reply is full; the kernel asks again from this entry's offset
        return 0

    def rename_fuse_3(self, old: bytes, new: bytes, flags: int) -> int:
        return self.operations.rename(
            old.decode(self.encoding, self.errors), new.decode(self.encoding, self.errors), flags
        )
