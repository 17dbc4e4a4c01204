"""``iobench lab flush MOUNT``: make a lab volume cold, as after a pod restart, without remounting.

The client half of the daemon's control FIFO (:mod:`iobench.lab.fs`, "Flush"): write
``flush TOKEN`` to ``<state dir>/control`` and wait for ``control.reply.json`` to carry the
token. The daemon then has told the kernel to forget every cached name and attribute of the
mount; file data is re-read at every open anyway (no ``kernel_cache``). The backing folder's
own page cache (a disk ``--backing``: the emulated server's cache) is left alone; the
default tmpfs backing is the storage itself.
"""

from __future__ import annotations

import errno
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

from iobench.errors import LabError
from iobench.lab.state import REPLY_NAME, find, mount_path


def flush(mountpoint: str | os.PathLike[str], timeout_s: float = 10.0) -> dict[str, Any]:
    """Ask the daemon of the lab volume at ``mountpoint`` to drop the kernel's caches of it;
    return its reply (``method``, ``root_names``, ``dropped``, ``seconds``)."""
    mp = mount_path(mountpoint)
    lab = find(mp)
    if lab is None:
        raise LabError(f"no iobench lab volume at {mp} (see `iobench lab status`)")
    if lab.kind != "fuse":
        raise LabError(
            f"{mp} is a --kind {lab.kind} volume; only --kind fuse can be flushed "
            "(use /proc/sys/vm/drop_caches; sshfs keeps its own 20 s directory cache)"
        )
    control = Path(lab.state_dir) / "control"
    if not control.is_fifo():
        raise LabError(
            f"the daemon of {mp} has no flush control (mounted by an older iobench); remount it"
        )
    token = uuid.uuid4().hex
    _send(control, f"flush {token}\n", timeout_s)
    return _await_reply(control.with_name(REPLY_NAME), token, mp, timeout_s)


def _send(control: Path, line: str, timeout_s: float) -> None:
    """Write one request; the daemon reopens the FIFO after each one, so retry briefly."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fd = os.open(control, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:
            if e.errno != errno.ENXIO or time.monotonic() > deadline:
                raise LabError(
                    f"cannot reach the lab daemon through {control}: {e.strerror}"
                ) from None
            time.sleep(0.01)  # no reader yet: the daemon is between two requests
            continue
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
        return


def _await_reply(reply: Path, token: str, mp: str, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            data = json.loads(reply.read_text())
        except (OSError, ValueError):
            data = {}
        if data.get("token") == token:
            if not data.get("ok"):
                raise LabError(f"the lab daemon of {mp} could not flush: {data.get('error')}")
            return data
        time.sleep(0.01)
    raise LabError(f"the lab daemon of {mp} did not answer the flush within {timeout_s:g} s")
