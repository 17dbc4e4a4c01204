"""One iobench run per target at a time: a lock file in the target's scratch folder.

Why: two runs on the same volume would spoil each other's figures, and the second one's
user should learn who holds the volume instead of getting strange numbers.

Method: ``<target>/.iobench-scratch/lock.json`` holds JSON (owner, pid, host, run id,
created, expires, a random token). It is created the NFS-safe way: the full JSON is written
to a private temporary file, which is then hard-linked to ``lock.json`` (``link`` is atomic
and fails if the name exists, also on NFSv2/3 where ``O_EXCL`` was not; a lost NFS reply is
resolved by the temporary file's link count). Where hard links are not supported (some
FUSE file systems) it falls back to ``O_CREAT|O_EXCL``. ``fcntl.flock`` was rejected: the
volumes iobench measures are network and FUSE mounts shared between pods, where flock is
often local to one kernel or unsupported, so it would not exclude a run on another host.

A crashed run never blocks forever: a lock is stale when its expiry has passed (a holder
refreshes it from a heartbeat thread every ``ttl_s / 4``), or when it names this host and
its pid is gone (or is a different process now: the pid's start time is kept too). A stale
lock is taken over under a short-lived ``lock.json.takeover`` guard that re-checks the
file (content, inode, modification time) before unlinking, so two waiters cannot both take
over. Release removes the file only when it still carries this holder's token.

A refresh never rewrites the file: it opens ``lock.json``, reads its own token through that
descriptor and moves the modification time of *that inode* to the new expiry (the file says
``"refreshed_by": "mtime"``; its expiry is the later of its ``expires`` and its mtime).
Why: a check-then-replace of the file cannot be made atomic, and a holder frozen between
the two (a paused VM, SIGSTOP, a stalled disk: CI caught one) would, once continued, put
its lock back over the run that took over its expired one. Touching the inode it checked
can only touch its own file, by then unlinked, and the holder then sees that the name
points elsewhere and learns it lost. Where a filesystem does not keep a modification time
set so (an error, or a different time read back), the refresh falls back to writing a new
file over the name after the token check, with the old, small window.

The heartbeat writes from its own thread, never on the runner's main thread: a write to a
stalled volume can block for minutes, and the main thread must keep ticking the watchdog.
Each refresh, and the removal at release, does its file I/O in a child process
(``iobench.system.child``) when ``quiet_s`` is set: a thread blocked in the kernel on a FUSE
volume whose server stopped cannot be ended and would keep iobench from exiting. A refresh
that hangs stops the heartbeat (the lock then expires on its own).
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from iobench.errors import IOBenchError, LockHeldError, LockLostError
from iobench.system import child, procfs
from iobench.system.lockfile import (
    _GRACE_S,
    _MTIME_SLACK_NS,
    _NO_LINKS,
    _NO_TIMES,
    LOCK_NAME,
    TAKEOVER_NAME,
    TMP_PREFIX,
    LockInfo,
    _from_fd,
    _read,
    _user,
    _when,
    read_lock,
)

T = TypeVar("T")


class TargetLock:
    """Exclusive lock on one target's scratch folder; a context manager.

    ``wait_s``: how long a second run waits for the holder before raising
    ``LockHeldError``. ``heartbeat``: refresh the expiry from a daemon thread while held.
    """

    def __init__(
        self,
        scratch_root: Path,
        run_id: str,
        ttl_s: float = 120.0,
        wait_s: float = 0.0,
        *,
        poll_s: float = 0.5,
        heartbeat: bool = True,
        quiet_s: float | None = None,
    ) -> None:
        if ttl_s <= 0:
            raise ValueError("ttl_s must be > 0")
        self.root = Path(scratch_root)
        self.path = self.root / LOCK_NAME
        self.run_id = run_id
        self.ttl_s = float(ttl_s)
        self.wait_s = max(0.0, float(wait_s))
        self.poll_s = poll_s
        self.heartbeat = heartbeat
        self.quiet_s = quiet_s  # run the file I/O of refresh and release in a child, so bounded
        self.hung: str | None = None  # why the heartbeat stopped: its volume did not answer
        self.token = secrets.token_hex(8)
        self.held = False
        self.took_over: str | None = None  # what was taken over and why, for a warning
        self.lost: str | None = None  # set by the heartbeat if someone took our lock
        self.info: LockInfo | None = None
        self._written = 0.0
        self._by_mtime = True  # False once this filesystem did not keep a modification time
        self._io = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ acquire
    def _content(self) -> LockInfo:
        now = time.time()
        pid = os.getpid()
        created = self.info.created if self.info is not None else now
        return LockInfo(
            owner=_user(),
            pid=pid,
            host=socket.gethostname(),
            run_id=self.run_id,
            created=created,
            expires=now + self.ttl_s,
            ttl_s=self.ttl_s,
            token=self.token,
            pid_started=procfs.start_time(pid),
            pid_ns=procfs.pid_namespace(),
            refreshed_by="mtime",
        )

    def _write_private(self, info: LockInfo, suffix: str) -> Path:
        tmp = self.root / f"{TMP_PREFIX}{self.token}.{suffix}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, info.to_json())
            os.fsync(fd)
        finally:
            os.close(fd)
        return tmp

    def _try_create(self) -> bool:
        """Create lock.json atomically with our full content; False if it exists."""
        info = self._content()
        tmp = self._write_private(info, "new")
        try:
            try:
                os.link(tmp, self.path)
                ok = True
            except FileExistsError:
                ok = os.stat(tmp).st_nlink == 2  # NFS: the link was made but its reply lost
            except OSError as exc:
                if exc.errno not in _NO_LINKS:
                    ok = os.stat(tmp).st_nlink == 2
                    if not ok:
                        raise
                else:
                    ok = self._try_create_excl(info)
        finally:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        if ok:
            self.info = info
            self._written = time.monotonic()
        return ok

    def _try_create_excl(self, info: LockInfo) -> bool:
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        try:
            os.write(fd, info.to_json())
        finally:
            os.close(fd)
        return True

    def _inspect(self) -> tuple[LockInfo | None, bytes, os.stat_result] | None:
        return _read(self.path)

    def _take_over(self, raw: bytes, st: os.stat_result, why: str) -> bool:
        """Remove a stale lock, unless it changed since we judged it (under a guard file)."""
        guard = self.root / TAKEOVER_NAME
        try:
            fd = os.open(guard, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            try:  # another waiter is taking over; clear its guard only if it died doing so
                if time.time() - os.stat(guard).st_mtime > _GRACE_S:
                    os.unlink(guard)
            except OSError:
                pass
            return False
        os.close(fd)
        try:
            now = self._inspect()
            if (
                now is None
                or now[1] != raw
                or (now[2].st_dev, now[2].st_ino, now[2].st_mtime_ns)
                != (st.st_dev, st.st_ino, st.st_mtime_ns)
            ):
                return False  # released, replaced or refreshed since we looked: judge again
            os.unlink(self.path)
            self.took_over = why
            return True
        finally:
            os.unlink(guard)

    def acquire(self) -> TargetLock:
        """Take the lock, waiting up to ``wait_s``; take over a stale one; else LockHeldError."""
        try:
            self._acquire()
        except OSError as exc:
            raise IOBenchError(
                f"cannot create the lock file {self.path}: {exc.strerror or exc}"
            ) from None
        if self.heartbeat:
            self._start_heartbeat()
        return self

    def _acquire(self) -> None:
        deadline = time.monotonic() + self.wait_s
        while True:
            if self._try_create():
                self.held = True
                return
            seen = self._inspect()
            if seen is None:
                continue  # released between our two steps: try again at once
            info, raw, st = seen
            if info is not None:
                why = info.stale_reason()
                if why:
                    why = f"lock of run {info.run_id} (pid {info.pid} on {info.host}): {why}"
            elif time.time() - st.st_mtime > _GRACE_S:
                why = (
                    f"corrupt lock file: {LockInfo.parse(raw)} (last written {_when(st.st_mtime)})"
                )
            else:
                why = None  # being written right now (O_EXCL fallback), or foreign: wait
            if why and self._take_over(raw, st, why):
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                raise LockHeldError(self._held_message(info, raw), info)
            time.sleep(min(self.poll_s, left))

    def _held_message(self, info: LockInfo | None, raw: bytes = b"") -> str:
        target = self.root.parent
        waited = f" (waited {self.wait_s:g} s)" if self.wait_s else ""
        who = (
            info.describe()
            if info is not None
            else f"a corrupt lock file {self.path} ({LockInfo.parse(raw)})"
        )
        return (
            f"target {target} is in use by another iobench run{waited}: {who}; "
            f"wait for it to finish, or remove {self.path} if you are sure it is not running"
        )

    # ------------------------------------------------------------------ hold
    def refresh(self, force: bool = False) -> bool:
        """Extend the expiry; cheap to call often (writes at most every ttl/4 unless forced).

        Returns whether it wrote. Raises LockLostError if the file is no longer ours, and
        ``child.Hung`` when its volume stopped answering (``quiet_s``).
        """
        if not self.held:
            return False
        if not force and time.monotonic() - self._written < self.ttl_s / 4:
            return False
        with self._io:
            holder, kept, info = None, None, self.info
            if self._by_mtime:
                expires = time.time() + self.ttl_s
                holder, kept = self._in_child(lambda: self._touch(expires), "refreshing the lock")
                self._by_mtime = holder is not None or kept is not None
            if not self._by_mtime:  # rewrite the file: its content, made here (a child's
                info = self._content()  # getpid() would name the child)
                holder = self._in_child(lambda: self._rewrite(info), "refreshing the lock")
        if holder is not None:
            self.held = False
            self.lost = f"the lock on {self.root.parent} was taken over; now held by {holder}"
            raise LockLostError(self.lost)
        self.info = replace(info, expires=kept) if kept is not None and info else info
        self._written = time.monotonic()
        return True

    def _in_child(self, step: Callable[[], T], what: str) -> T:
        """``step()`` in a child process under the quiet rule, or here without ``quiet_s``."""
        if self.quiet_s is None:
            return step()
        return child.call(step, self.quiet_s, what=f"{what} in {self.root}")

    def _touch(self, expires: float) -> tuple[str | None, float | None]:
        """Move our lock file's modification time to ``expires``, through a descriptor whose
        inode carries our token. Returns (who holds the name now, None) when it is not ours;
        (None, the expiry read back) when the time moved; (None, None) where this filesystem
        does not keep a time set so."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return "nobody", None
        try:
            info, _, st = _from_fd(fd)
            if info is None or info.token != self.token:
                return (info.describe() if info is not None else "nobody"), None
            ns = int(expires * 1e9)
            try:
                os.utime(fd, ns=(ns, ns))
            except OSError as exc:
                if exc.errno in _NO_TIMES:
                    return None, None
                raise
            kept = os.fstat(fd)
            if abs(kept.st_mtime_ns - ns) > _MTIME_SLACK_NS:
                return None, None
            try:  # frozen between the check and the touch, we touched a file taken over
                now = os.stat(self.path)
            except FileNotFoundError:
                return "nobody", None
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                seen = self._inspect()
                return (seen[0].describe() if seen and seen[0] else "nobody"), None
            return None, max(info.expires, kept.st_mtime)
        finally:
            os.close(fd)

    def _rewrite(self, info: LockInfo) -> str | None:
        """Replace the file by ``info`` if it is still ours; else who holds it now."""
        seen = self._inspect()
        if seen is None or seen[0] is None or seen[0].token != self.token:
            return seen[0].describe() if seen is not None and seen[0] is not None else "nobody"
        tmp = self._write_private(info, "refresh")
        try:
            os.replace(tmp, self.path)
        except OSError:
            os.unlink(tmp)
            raise
        return None

    def _start_heartbeat(self) -> None:
        self._stop.clear()
        period = self.ttl_s / 4

        def beat() -> None:
            while not self._stop.wait(period):
                try:
                    self.refresh(force=True)
                except LockLostError:
                    return
                except child.Hung as exc:  # nothing more is written to a volume that hung
                    self.hung = str(exc)
                    return
                except (OSError, IOBenchError):  # a full or failing volume: try again later
                    continue

        self._thread = threading.Thread(target=beat, name="iobench-lock-heartbeat", daemon=True)
        self._thread.start()

    def stop_heartbeat(self) -> None:
        """No more refreshes; the lock is on its way out (``remove_file`` frees it)."""
        self._stop.set()
        if self._thread is not None:  # a refresh under way ends within quiet_s
            self._thread.join(timeout=(self.quiet_s or 0.0) + 2.0)
            self._thread = None
        self.held = False

    def remove_file(self) -> None:
        """Remove the lock file if it still carries this holder's token (file I/O only: what
        ``Remover.run`` runs in a child on a volume that may hang; no lock of this object is
        taken in it: a child forked while the heartbeat held one would wait for good)."""
        seen = self._inspect()
        if seen is not None and seen[0] is not None and seen[0].token == self.token:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass

    def release(self) -> None:
        """Stop the heartbeat and remove the lock file, only if it is still ours."""
        held = self.held
        self.stop_heartbeat()
        if held:
            with self._io:
                self._in_child(self.remove_file, "freeing the lock")

    def __enter__(self) -> TargetLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


__all__ = ["LOCK_NAME", "TAKEOVER_NAME", "TMP_PREFIX", "LockHeldError", "LockInfo", "LockLostError",
           "TargetLock", "read_lock"]  # fmt: skip
