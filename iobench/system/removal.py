"""Removing scratch on volumes that may hang: wait while the removal progresses, never for good.

Why: a removal on a hung volume (a stopped FUSE daemon, an sshfs server gone) blocks in
the kernel and never returns; a removal on a slow but healthy network volume may take
minutes for a big venv. A fixed timeout would fail one or the other.

Method: the removal runs in a child process (``iobench.system.child.call``); the caller
waits as long as the child's scheduler counters advance — they move with every system call
that completes — and gives up after ``quiet_s`` seconds in which they stood still (one call
that never returns). A volume that gave up once is "hung": nothing more is attempted under
it (a second attempt would only block another child), and the caller says where the
leftovers are. A child left blocked in the kernel holds only itself: iobench exits.

Cost: on a network volume every unlink waits for a round trip, so removing a venv of
12,000 files one by one takes as long as creating it. A tree is therefore removed as
subtrees in parallel (``WORKERS`` threads, each through ``iobench.system.scratch.remove`` with its
checks), and a trial's folders are first *renamed* into the run's trash folder (one call on
the same filesystem) so the runner can choose when to pay for the unlinks: the runner
empties the trash between trials, never while a timed trial runs. On this machine's own
memory and disks (``LOCAL_FSTYPES``) neither applies — an unlink waits for no server and
the volume cannot go away — so their trees are removed by one thread, in this process.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from iobench.errors import IOBenchError, SafetyError
from iobench.system import child, procfs
from iobench.system.scratch import mount_inside, remove

#: seconds without a single system call of the removal after which its volume counts as hung
QUIET_S = 20.0
_POLL_S = child.POLL_S
#: removals at once: enough to overlap a network volume's round trips, few enough for 2 cores
WORKERS = 8
#: a tree is split into at least this many subtrees (when it has them) for the workers
_UNITS = 64
#: the run's trash folder inside each role's run folder: what waits for its removal
TRASH = ".trash"
#: below this many CPUs nothing is removed while a trial runs, on any volume: on 2 cores a
#: torch venv removed from the lab volume beside venv-on-tmp's trial made it 15.4 -> 20.4 s
BACKGROUND_MIN_CPUS = 4
#: filesystems on this machine's memory or disks: their unlinks wait for no round trip, so
#: threads only contend for Python's lock (a smoke venv on tmpfs: 0.13 s with 8, 0.03 s with
#: one), and they do not hang the way a network or FUSE volume does, so their removals and
#: renames run here, without a watched child process (a fork of the runner costs 10-40 ms
#: on 2 cores, four of them a trial: most of the default run's cleanup)
LOCAL_FSTYPES = ("tmpfs", "ramfs", "ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "overlay")
#: of those, the ones in memory: one thread removes fastest there (see above)
MEMORY_FSTYPES = ("tmpfs", "ramfs")
#: removals at once on a local disk: the kernel's part waits on inode-table blocks, which
#: threads overlap (12,000 files of 4 KB on this VM's ext4: 1.24-1.51 s with one thread,
#: 0.53-0.71 s with four, on 2 cores)
DISK_WORKERS = 4
#: disk filesystems, where a removal leaves the kernel work that slows the next trial's creates
#: on the same filesystem: ext4 without a journal skips every inode freed in the last 1 to 5
#: minutes when it allocates one, reading each one's table block (the default run's naive
#: went 1.6 -> 3.3 s a trial across its rounds, its system time 13 -> 33 % of 2 cores, 18 %
#: of all samples in that scan); xfs and btrfs finish removals in threads of their own. Their
#: trash waits for the run's end while the volume has room (``ROOM_TRIALS``).
WAIT_FSTYPES = ("ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs")
#: trash waits only while the volume keeps room for this many of its largest trials so far
#: (and ``ROOM_MIN_BYTES``): one torch trial is 1.5-3 GB, and a full target fails the next
ROOM_TRIALS = 3
ROOM_MIN_BYTES = 1 << 30


def bounded(fn: Callable[[], object], quiet_s: float = QUIET_S, what: str = "") -> str:
    """Run ``fn`` in a child process while it makes system calls (:func:`child.call`); ''
    when it finished, else why not (its OSError or IOBenchError, or that it hung)."""
    try:
        child.call(fn, quiet_s, what=what)
    except (OSError, IOBenchError) as exc:
        return str(exc)
    return ""


def _subtrees(path: Path, want: int = _UNITS) -> list[Path]:
    """Folders under ``path`` to remove in parallel: split breadth-first until there are
    ``want`` of them (what lies between them goes with ``path`` itself, last)."""
    if path.is_symlink() or not path.is_dir():
        return []
    frontier: list[Path] = [path]
    units: list[Path] = []
    while frontier and len(frontier) + len(units) < want:
        folder = frontier.pop(0)
        try:
            subs = [Path(e.path) for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)]
        except OSError:
            subs = []
        if folder is not path and not subs:
            units.append(folder)
        frontier.extend(subs)
    return units + [f for f in frontier if f is not path]


def _each_in_daemon_threads(fn: Callable[[Path], None], items: list[Path], workers: int) -> None:
    """``fn(item)`` for every item, ``workers`` daemon threads at a time; the first error
    is raised once all threads are done.

    Not ``concurrent.futures``: its worker threads are joined at interpreter exit, so one
    thread blocked for good in an unlink on a hung volume kept the process from exiting
    (seen: a SIGSTOPped FUSE daemon held it until the daemon was continued). These run in
    the removal's child process, which ends with ``_exit`` and joins nothing."""
    queue = iter(items)
    lock = threading.Lock()
    errors: list[BaseException] = []

    def work() -> None:
        while not errors:
            with lock:
                item = next(queue, None)
            if item is None:
                return
            try:
                fn(item)
            except BaseException as exc:  # re-raised in the caller's thread below
                errors.append(exc)

    threads = [
        threading.Thread(target=work, name="iobench-remove-part", daemon=True)
        for _ in range(workers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def remove_tree(path: Path, workers: int = WORKERS) -> None:
    """``iobench.system.scratch.remove(path)``, its subtrees first, ``workers`` at a time (in
    the child process of :func:`bounded`: the threads are the child's)."""
    mount = mount_inside(path)  # before any piece goes: a piece's own check is too late,
    if mount:  # it would look from inside a bind mount of the same filesystem
        raise SafetyError(f"refusing to delete {path}: {mount} is mounted there (unmount it first)")
    units = _subtrees(path) if workers > 1 else []
    if units:
        _each_in_daemon_threads(remove, units, min(workers, len(units)))
    remove(path)


def is_local(path: Path) -> bool:
    """True when ``path`` lies on this machine's memory or disks (``LOCAL_FSTYPES``): no
    round trips to overlap, nothing to hang, so no watched child is needed there."""
    return local_workers(path) > 0


def local_workers(path: Path) -> int:
    """How many threads remove on ``path``'s filesystem in this process: 1 in memory,
    ``DISK_WORKERS`` on a local disk, 0 elsewhere (a network or FUSE volume: a watched child)."""
    mount = procfs.mount_of(path)
    if mount is None or mount.fstype not in LOCAL_FSTYPES:
        return 0
    return 1 if mount.fstype in MEMORY_FSTYPES else DISK_WORKERS


def _here(fn: Callable[[], object]) -> str:
    """``fn()`` in this process (a local filesystem): '' when done, else why not."""
    try:
        fn()
    except (OSError, IOBenchError) as exc:
        return str(exc)
    return ""


class Remover:
    """Remove scratch paths, remembering the folders whose volume hung."""

    def __init__(self, quiet_s: float = QUIET_S, workers: int = WORKERS) -> None:
        self.quiet_s = quiet_s
        self.workers = workers
        self.hung: list[Path] = []  # role scratch folders that stopped answering
        self.left: list[Path] = []  # what could not be removed
        self.trash: dict[Path, Path] = {}  # what waits in a trash folder -> its scratch folder
        self._threads: dict[Path, int] = {}  # scratch folder -> threads here (know); 0: a child
        self.lock = threading.Lock()  # guards ``trash`` (the Reaper's thread reads it)
        self._names = itertools.count(1)

    def is_hung(self, path: Path) -> bool:
        return any(procfs.is_within(str(path), str(h)) for h in self.hung)

    def remove(self, path: Path, volume: Path) -> str:
        """Remove ``path`` (inside the scratch folder ``volume``); '' when done, else why not."""
        if self.is_hung(path):
            self.left.append(path)
            return f"{volume} does not answer"
        if self._is_local(volume):
            threads = self._threads[volume]
            return self._failed(path, volume, _here(lambda: remove_tree(path, threads)))

        def work() -> None:
            # the filesystem lookup resolves the path: on a hung volume that blocks too, so
            # it runs under the same watch (before, the caller's thread hung in it for good)
            remove_tree(path, self.workers)

        error = bounded(work, self.quiet_s, f"removing {path}")
        return self._failed(path, volume, error)

    def know(self, volumes: Iterable[Path]) -> None:
        """Look up which scratch folders lie on local filesystems, while they answer (a run's
        start): looked up later, in this process, a hung volume would hold the lookup."""
        for volume in volumes:
            self._threads[volume] = local_workers(volume)

    def _is_local(self, volume: Path) -> bool:
        """True when ``volume`` is known (``know``) to lie on a local filesystem; an unknown
        one is treated as a volume that may hang."""
        return self._threads.get(volume, 0) > 0

    def defer(self, path: Path, trash: Path, volume: Path) -> str:
        """Move ``path`` into the folder ``trash`` (same filesystem: one rename) to be removed
        by ``empty``; '' when moved (or nothing was there), else why not."""
        if self.is_hung(path):
            self.left.append(path)
            return f"{volume} does not answer"

        dest = trash / f"{next(self._names)}-{path.name}"

        def move() -> tuple[str, str]:
            # a rename would carry a mount inside into the trash: such a tree stays, and is
            # said (looked up under the watch: resolving the path blocks on a hung volume)
            if not os.path.lexists(path):
                return "gone", ""
            if mount := mount_inside(path):
                return "mounted", mount
            trash.mkdir(exist_ok=True)
            os.rename(path, dest)
            return "moved", str(dest)

        try:
            if self._is_local(volume):
                how, where = move()
            else:
                how, where = child.call(move, self.quiet_s, what=f"moving {path} to the trash")
        except (OSError, IOBenchError) as exc:
            how, where, error = "", "", str(exc)
        else:
            error = ""
        if how == "mounted":
            self.left.append(path)
            return f"{where} is mounted inside; left in place (unmount it, then `iobench clean`)"
        if how in ("moved", "gone"):
            if how == "moved":
                with self.lock:
                    self.trash[dest] = volume
            return ""
        if "hung volume" in error:
            return self._failed(path, volume, error)
        return self.remove(path, volume)  # cannot rename (a read-only parent?): remove it now

    def empty(self, volumes: Iterable[Path] | None = None) -> list[str]:
        """Remove what the trash folders hold (only on ``volumes`` if given); the problems."""
        errors = []
        with self.lock:
            waiting = list(self.trash.items())
        for item, volume in waiting:
            if volumes is not None and volume not in volumes:
                continue
            if error := self.remove(item, volume):
                errors.append(f"{item}: {error}")
            with self.lock:
                self.trash.pop(item, None)
        return errors

    def _failed(self, path: Path, volume: Path, error: str) -> str:
        if error:
            self.left.append(path)
            if "hung volume" in error:
                self.hung.append(volume)
        return error

    def run(self, fn: Callable[[], object], volume: Path) -> str:
        """Run another clean-up step on ``volume`` (freeing a lock) under the same rule."""
        if self.is_hung(volume):
            return f"{volume} does not answer"
        return bounded(fn, self.quiet_s, f"cleaning up in {volume}")


def free_bytes(path: Path) -> int:
    """The bytes an unprivileged writer may still use on ``path``'s filesystem."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


class Reaper:
    """Empties the trash in a background thread, only on volumes that no trial is using, and
    only on a machine with ``BACKGROUND_MIN_CPUS`` or more (else all of it between trials).
    On a disk filesystem (``WAIT_FSTYPES``) the trash waits for the run's end instead, while
    the volume keeps room for ``ROOM_TRIALS`` of its largest trials: removed between trials
    there, it slowed the trials after them.

    The runner calls ``hold(volumes)`` before a trial and ``release()`` after it; ``drain()``
    stops the thread and empties what is left. ``hold`` stops the background removal on the
    trial's volumes, then empties *their* trash itself, before the trial starts: trash on a
    volume never outlives the next trial there, so a run whose trials all use one volume
    needs room for one trial's folders, not all of them (deferred to the run's end, the
    trash of earlier torch trials filled an 8 GB target and the later ones failed: ENOSPC).
    Only the trash on the volumes the trial does not use is removed while it runs."""

    def __init__(
        self, remover: Remover, devices: dict[Path, int], background: bool | None = None
    ) -> None:
        self.remover = remover
        self.devices = devices  # scratch folder -> its filesystem (st_dev, taken at the start)
        # removing beside a timed trial takes CPU from it (a lab volume's daemon, the unlink
        # threads): only where there are cores to spare
        cpus = os.cpu_count() or 1
        self.background = cpus >= BACKGROUND_MIN_CPUS if background is None else background
        self.busy: set[int] = set()
        self.cond = threading.Condition()
        self.current: int | None = None  # the filesystem being removed on now
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.waits: set[int] = set()  # disk filesystems: trash waits while there is room
        self.largest: dict[int, int] = {}  # filesystem -> its largest trial so far, bytes
        self.free_at_start: dict[Path, int] = {}  # held scratch folder -> free bytes at hold

    def watch(self, volumes: Iterable[Path]) -> None:
        """The run's scratch folders, once made: their filesystems, and which are local."""
        self.devices = {v: os.stat(v).st_dev for v in volumes}
        self.remover.know(self.devices)
        for volume, dev in self.devices.items():
            mount = procfs.mount_of(volume)
            if mount is not None and mount.fstype in WAIT_FSTYPES:
                self.waits.add(dev)

    def may_wait(self, volume: Path) -> bool:
        """Whether ``volume``'s trash may wait for the run's end: a disk filesystem with room
        for ``ROOM_TRIALS`` of its largest trials so far."""
        dev = self.devices.get(volume, -1)
        if dev not in self.waits:
            return False
        room = max(ROOM_MIN_BYTES, ROOM_TRIALS * self.largest.get(dev, 0))
        return free_bytes(volume) >= room

    def hold(self, volumes: Iterable[Path]) -> list[str]:
        """No background removal on these scratch folders' filesystems until ``release``;
        their trash is emptied here first. Returns what could not be removed."""
        with self.cond:
            if not self.background:  # everything waits for this moment: between trials
                volumes = list(self.devices)
            self.busy = {self.devices.get(v, -1) for v in volumes}
            if self.current in self.busy:
                self.stop.set()
            while self.current is not None and self.current in self.busy:
                self.cond.wait(_POLL_S)
            held = [v for v, dev in self.devices.items() if dev in self.busy]
        now = [v for v in held if not self.may_wait(v)]
        errors = self.remover.empty(now) if now else []
        self.free_at_start = {v: free_bytes(v) for v in held if self.devices[v] in self.waits}
        return errors

    def release(self) -> None:
        """No trial runs: remove on any volume, in the background (a disk's trash waits)."""
        for volume, before in self.free_at_start.items():  # what the trial took there
            dev = self.devices[volume]
            used = before - free_bytes(volume)
            self.largest[dev] = max(self.largest.get(dev, 0), used)
        self.free_at_start = {}
        with self.cond:
            self.busy = set()
            if not self.background:
                return
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self.work, name="iobench-reaper", daemon=True)
                self.thread.start()

    def close(self) -> None:
        """Stop the thread: a removal under way is ended (its child killed; what it removed
        stays removed, the rest stays in the trash for ``drain``)."""
        with self.cond:
            self.busy = set(self.devices.values())
            self.stop.set()
            while self.current is not None:
                self.cond.wait(_POLL_S)
        if self.thread is not None:
            self.thread.join()

    def drain(self) -> list[str]:
        """Stop the thread and empty the rest of the trash here."""
        self.close()
        return self.remover.empty()

    def _next(self) -> tuple[Path, Path] | None:
        with self.remover.lock:
            for item, volume in self.remover.trash.items():
                dev = self.devices.get(volume, -1)
                if dev not in self.busy and dev not in self.waits:
                    return item, volume
        return None

    def work(self) -> None:
        """The thread's body: remove trash items on volumes not held, until none is left."""
        while True:
            with self.cond:
                job = self._next()
                if job is None:
                    self.current = None
                    self.cond.notify_all()
                    return
                item, volume = job
                self.current, self.stop = self.devices.get(volume, -1), threading.Event()
            finished, error = self._reap(item, volume, self.stop)
            with self.cond:
                if finished or error:
                    with self.remover.lock:
                        self.remover.trash.pop(item, None)
                    self.remover._failed(item, volume, error)
                self.current = None
                self.cond.notify_all()

    def _reap(self, item: Path, volume: Path, stop: threading.Event) -> tuple[bool, str]:
        """Remove one trash item unless ``stop`` comes first: (finished, error)."""
        if self.remover.is_hung(volume):
            return False, f"{volume} does not answer"
        workers = self.remover.workers
        try:
            child.call(
                lambda: remove_tree(item, workers), self.remover.quiet_s, stop, f"removing {item}"
            )
        except child.Stopped:
            return False, ""
        except (OSError, IOBenchError) as exc:
            return False, str(exc)
        return True, ""


__all__ = [
    "BACKGROUND_MIN_CPUS",
    "QUIET_S",
    "ROOM_MIN_BYTES",
    "ROOM_TRIALS",
    "TRASH",
    "WAIT_FSTYPES",
    "WORKERS",
    "Reaper",
    "Remover",
    "bounded",
    "free_bytes",
    "remove_tree",
]
