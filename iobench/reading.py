"""Reading files back: a run folder (received, or edited), a manifest, a loader's record are
untrusted input, and so is what sits at their names.

Why: ``open()`` of a FIFO waits for a writer, for good (a FIFO planted as
``samples/<trial>.csv`` of a received run folder held ``iobench report`` forever), a
device never ends, and a link leads wherever its owner points it (a link to a file of
root's would be read into a report). So a file is opened with ``O_NOFOLLOW|O_NONBLOCK`` and
read only when ``fstat`` of that very descriptor says it is a regular file, up to a size.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

#: what a file read back may hold at most unless the caller says (a trials.csv of 2,000
#: trials is about 1 MB; a trial's samples at 100 Hz for a day, 200 MB)
MAX_BYTES = 512 << 20


def read_bytes(path: Path | str, limit: int = MAX_BYTES) -> bytes:
    """The bytes of the regular file ``path``: OSError (naming it) for a link (ELOOP), a
    FIFO, a device or a folder (EINVAL: "not a regular file"), or one over ``limit``
    (EFBIG)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if st.st_size > limit:
            raise OSError(errno.EFBIG, f"larger than {limit >> 20} MiB", str(path))
        # the size fstat gave, and one byte more to see a file that grew since: read(limit)
        # allocated the whole limit first, 512 MiB for every sample file of a report
        data = fh.read(st.st_size + 1)
        if len(data) > st.st_size:
            data += fh.read(limit + 1 - len(data))
        if len(data) > limit:
            raise OSError(errno.EFBIG, f"larger than {limit >> 20} MiB", str(path))
        return data


def read_text(path: Path | str, limit: int = MAX_BYTES, errors: str = "strict") -> str:
    """``read_bytes`` as UTF-8 text (UnicodeDecodeError as ``bytes.decode`` raises it)."""
    return read_bytes(path, limit).decode("utf-8", errors)


def is_regular(path: Path | str) -> bool:
    """Whether ``path`` itself (not a link's target) is a regular file."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


__all__ = ["MAX_BYTES", "is_regular", "read_bytes", "read_text"]
