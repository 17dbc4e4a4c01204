"""The target's lock file (``lock.json`` in the target's scratch): what it says (who holds the
target, until when), reading it through a descriptor, and when a lock is stale. Read back, it is
untrusted: every field is checked, and one that does not parse is "unreadable", never trusted.
The lock itself, taking it and keeping it, is ``iobench.system.lock``."""

from __future__ import annotations

import errno
import getpass
import json
import math
import os
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from iobench.system import procfs

LOCK_NAME = "lock.json"
TAKEOVER_NAME = LOCK_NAME + ".takeover"  # the guard while a stale lock is taken over
TMP_PREFIX = ".lock-"  # private files a lock is written through
_GRACE_S = 10.0  # an unreadable lock (or a takeover guard) older than this is abandoned
_MAX_TTL_S = 7 * 86400.0
_YEAR_9999 = 253402300799.0
_NO_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK, errno.EXDEV}
_NO_TIMES = {errno.EPERM, errno.EACCES, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EROFS}
_MTIME_SLACK_NS = 2_000_000_000  # a time read back this far from the one set was not kept


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # a uid without a passwd entry (common in containers)
        return str(os.getuid())


def _number(value: object, lo: float, hi: float) -> float | None:
    """``value`` as a finite float in [lo, hi], else None (numbers read from lock files)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        x = float(value)
    except OverflowError:
        return None
    return x if math.isfinite(x) and lo <= x <= hi else None


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(ts))


@dataclass(frozen=True)
class LockInfo:
    """The content of a lock file."""

    owner: str
    pid: int
    host: str
    run_id: str
    created: float
    expires: float
    ttl_s: float
    token: str
    pid_started: float | None = None
    pid_ns: str | None = None
    refreshed_by: str = "content"  # "mtime": refreshes move the file's modification time

    @classmethod
    def from_json(cls, raw: bytes) -> LockInfo | None:
        """Parse a lock file; None when it is not a complete, sane iobench lock."""
        info = cls.parse(raw)
        return info if isinstance(info, LockInfo) else None

    @classmethod
    def parse(cls, raw: bytes) -> LockInfo | str:
        """Parse a lock file (untrusted input); the lock, or why it is corrupt.

        Every number must be finite and in range: a pid in 1..PID_MAX, times after the
        epoch and before year 10000, a ttl of at most a week.
        """
        try:
            d = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            return f"not JSON ({exc})"
        if not isinstance(d, dict):
            return "not a JSON object"
        missing = [
            k
            for k in ("owner", "pid", "host", "run_id", "created", "expires", "ttl_s", "token")
            if k not in d
        ]
        if missing:
            return f"missing {', '.join(missing)}"
        pid = procfs.valid_pid(d["pid"])
        if pid is None:
            return f"pid {str(d['pid'])[:40]} is not a process id (1..{procfs.PID_MAX})"
        created = _number(d["created"], 0.0, _YEAR_9999)
        expires = _number(d["expires"], 0.0, _YEAR_9999)
        started = _number(d.get("pid_started"), 0.0, _YEAR_9999)
        ttl = _number(d["ttl_s"], 1e-3, _MAX_TTL_S)
        for key, value in (("created", created), ("expires", expires)):
            if value is None:
                return f"{key} {str(d[key])[:40]} is not a time"
        if d.get("pid_started") is not None and started is None:
            return f"pid_started {str(d['pid_started'])[:40]} is not a time"
        if ttl is None:
            return (
                f"ttl_s {str(d['ttl_s'])[:40]} is not a number of seconds in 0.001..{_MAX_TTL_S:g}"
            )
        ns = d.get("pid_ns")
        return cls(
            owner=str(d["owner"]),
            pid=pid,
            host=str(d["host"]),
            run_id=str(d["run_id"]),
            created=created or 0.0,
            expires=expires or 0.0,
            ttl_s=ttl,
            token=str(d["token"]),
            pid_started=started,
            pid_ns=ns if isinstance(ns, str) else None,
            refreshed_by="mtime" if d.get("refreshed_by") == "mtime" else "content",
        )

    def to_json(self) -> bytes:
        d = asdict(self)
        d["created_at"] = _when(self.created)
        return (json.dumps(d, indent=1, allow_nan=False) + "\n").encode()

    def stale_reason(self, now: float | None = None) -> str | None:
        """Why this lock may be taken over, or None while its holder counts as alive."""
        now = time.time() if now is None else now
        why = procfs.ProcessStamp(self.pid, self.pid_started, self.host, self.pid_ns).gone_reason()
        if why:
            return why
        if now > self.expires:
            return f"it expired {now - self.expires:.0f} s ago (not refreshed)"
        return None

    def describe(self, now: float | None = None) -> str:
        """Who holds it, for error messages: user, pid, host, run id, since when."""
        now = time.time() if now is None else now
        return (
            f"user {self.owner}, pid {self.pid} on host {self.host}, run {self.run_id}, "
            f"since {_when(self.created)} (refreshed until {_when(self.expires)}, "
            f"{max(0.0, self.expires - now):.0f} s from now)"
        )


def _read_fd(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _effective(info: LockInfo | None, st: os.stat_result) -> LockInfo | None:
    """``info`` with the expiry its holder's last refresh set (see the module's docstring)."""
    if info is None or info.refreshed_by != "mtime" or st.st_mtime <= info.expires:
        return info
    return replace(info, expires=st.st_mtime)


def _from_fd(fd: int) -> tuple[LockInfo | None, bytes, os.stat_result]:
    """The lock (with its effective expiry), the bytes and the status of an open lock file:
    all of one inode."""
    st = os.fstat(fd)
    raw = _read_fd(fd)
    return _effective(LockInfo.from_json(raw), st), raw, st


def _read(path: Path) -> tuple[LockInfo | None, bytes, os.stat_result] | None:
    """:func:`_from_fd` of the lock file at ``path``; None when there is no file."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        return _from_fd(fd)
    finally:
        os.close(fd)


def read_lock(scratch_root: Path) -> LockInfo | None:
    """The lock of a scratch folder, or None if there is none or it is unreadable."""
    try:
        seen = _read(scratch_root / LOCK_NAME)
    except OSError:
        return None
    return seen[0] if seen is not None else None


__all__ = ["LOCK_NAME", "TAKEOVER_NAME", "TMP_PREFIX", "LockInfo", "read_lock"]
