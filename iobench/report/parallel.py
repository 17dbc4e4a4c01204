"""Independent pieces of a report in forked worker processes, when the machine has the cores.

Reading 2,000 sample files and drawing ten charts are CPU-bound and independent of each
other; a fork of the report's process starts in milliseconds with pandas and matplotlib
already imported. A process that runs other threads is never forked (a lock one of them
holds would stay locked in the child): then, and for a single piece, the work runs here.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")
#: worker processes at most
MAX_WORKERS = 8


def workers_for(pieces: int, per_worker: int = 1) -> int:
    """How many processes ``pieces`` pieces get (1: run here)."""
    if threading.active_count() > 1 or "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return max(1, min(pieces // max(1, per_worker), os.cpu_count() or 1, MAX_WORKERS))


def fork_map(fn: Callable[[T], R], items: Sequence[T], workers: int | None = None) -> list[R]:
    """``[fn(x) for x in items]``, in order, over ``workers`` forked processes (``fn`` a
    module-level function; its arguments and results are pickled)."""
    n = workers_for(len(items)) if workers is None else workers
    if n < 2 or len(items) < 2:
        return [fn(x) for x in items]
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(min(n, len(items)), mp_context=context) as pool:
        return list(pool.map(fn, items))


__all__ = ["MAX_WORKERS", "fork_map", "workers_for"]
