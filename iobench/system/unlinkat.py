"""The deleting walk: everything below an open folder, by descriptors (``unlinkat``,
``O_NOFOLLOW``), never past its filesystem or its mount (a bind mount of the same filesystem
keeps the device: its mount id tells it). Only ``iobench.system.scratch.remove`` calls it,
after it has checked that the tree lies inside a scratch folder of iobench's own."""

from __future__ import annotations

import os
import stat

from iobench.errors import SafetyError


def mount_id(fd: int) -> int | None:
    """The id of the mount the open file ``fd`` lies on (``/proc/self/fdinfo``), or None."""
    try:
        with open(f"/proc/self/fdinfo/{fd}", "rb") as fh:
            for line in fh:
                if line.startswith(b"mnt_id:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def delete_below(dfd: int, where: str, on: tuple[int, int | None], failures: list[str]) -> None:
    """Empty the folder open as ``dfd`` (its path ``where``, for messages), by descriptors
    (a folder renamed or swapped for a link meanwhile is not followed), staying on the
    filesystem and the mount ``on`` (device, mount id) as it goes."""
    dev, mnt = on
    with os.scandir(dfd) as it:
        names = [e.name for e in it]
    for name in names:
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(st.st_mode):
            if st.st_dev != dev:
                raise SafetyError(
                    f"refusing to delete {where}/{name}: another filesystem is mounted there"
                )
            fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dfd)
            try:
                # mounted between the stat and the open, or a bind mount of the same disk
                if os.fstat(fd).st_dev != dev or (mnt is not None and mount_id(fd) != mnt):
                    raise SafetyError(
                        f"refusing to delete {where}/{name}: another filesystem is mounted there"
                    )
                delete_below(fd, f"{where}/{name}", on, failures)
            finally:
                os.close(fd)
            _unlink_at(dfd, name, where, failures, folder=True)
        else:
            _unlink_at(dfd, name, where, failures, folder=False)


def _unlink_at(dfd: int, name: str, where: str, failures: list[str], folder: bool) -> None:
    """Remove one entry; a read-only folder (chmod by an installer) is made writable once."""
    for attempt in (1, 2):
        try:
            if folder:
                os.rmdir(name, dir_fd=dfd)
            else:
                os.unlink(name, dir_fd=dfd)
            return
        except FileNotFoundError:
            return
        except PermissionError as exc:
            if attempt == 2:
                failures.append(f"{where}/{name}: {exc.strerror}")
                return
            try:
                os.fchmod(dfd, 0o700)
            except OSError:
                failures.append(f"{where}/{name}: {exc.strerror}")
                return
        except OSError as exc:
            failures.append(f"{where}/{name}: {exc.strerror}")
            return


#: what iobench itself mounts inside its scratch folders: a packed venv's squashfs image


__all__ = ["delete_below", "mount_id"]
