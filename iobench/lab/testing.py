"""Use an emulated slow volume inside a test, and always take it down again.

    from iobench.lab.testing import slow_volume

    with slow_volume(tmp_path, latency_ms=1) as mnt:
        ...  # mnt is the mounted Path

A pytest fixture is one line on top of it (``with slow_volume(tmp_path, ...) as mnt: yield
mnt``); skip with ``iobench.lab.manage.lab_unavailable_reason()`` where the lab cannot run.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from iobench.errors import LabError
from iobench.lab import manage
from iobench.lab.options import VolumeOptions


@contextlib.contextmanager
def slow_volume(
    mountpoint_parent: str | os.PathLike[str],
    name: str = "slow",
    kind: str = "fuse",
    backing: str | os.PathLike[str] | None = None,
    **options: Any,
) -> Iterator[Path]:
    """Mount a slow volume at ``mountpoint_parent/name`` for the ``with`` block.

    ``options`` are :class:`~iobench.lab.options.VolumeOptions` fields (``latency_ms``,
    ``mb_per_s``, ``cache_s``, ...).
    Teardown runs even when the block raises; a teardown failure is raised only when the
    block itself succeeded, so it never hides the test's own error.
    """
    mountpoint = Path(mountpoint_parent) / name
    manage.up(mountpoint, kind, VolumeOptions(**options), backing=backing)
    ok = False
    try:
        yield mountpoint
        ok = True
    finally:
        try:
            manage.down(mountpoint)
        except LabError:
            if ok:
                raise
