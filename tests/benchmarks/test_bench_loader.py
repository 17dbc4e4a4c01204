"""The dataset loader's own ceiling: what it reads from a RAM filesystem with no compute.

Run with `nox -s bench`. 256 shards of 1 MB on /dev/shm (a tmpfs), read by the loader script
(iobench/trial/kinds/dataset_loader.py) as a trial runs it, with 0, 2 and 4 workers. The figure to compare
is MB/s = 256 MB / the median time: it must lie far above every rate a lab preset or a real
volume is asked for (EFS Elastic's per-client ceiling is 1,500 MiB/s, 1,573 MB/s), so that
the loader is never the limit it reports (docs/dataset.md states the figures).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from iobench.scenario.kinds.dataset import Settings as DataSettings
from iobench.trial.kinds import dataset

SHM = Path("/dev/shm")


@pytest.fixture(scope="module")
def shards():
    if not SHM.is_dir():
        pytest.skip("no /dev/shm")
    root = Path(tempfile.mkdtemp(prefix="iobench-bench-", dir=SHM))
    try:
        (root / "data").mkdir()
        dataset.generate(root / "data", DataSettings(files=256, file_mb=1.0, format="binary"))
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("workers", [0, 2, 4])
def test_loader_reads_a_tmpfs(benchmark, shards: Path, workers: int) -> None:
    settings = shards / f"settings-{workers}.json"
    out = shards / f"out-{workers}.json"
    params = DataSettings(workers=workers, compute_ms=0.0, loader="plain")
    settings.write_text(json.dumps(dataset.loader_settings(params, shards / "data")))
    argv = [sys.executable, "-I", str(dataset.LOADER), str(settings), str(out)]
    benchmark.group = "loader on tmpfs (256 MB)"
    benchmark.pedantic(subprocess.run, args=(argv,), kwargs={"check": True}, rounds=5)
    record = json.loads(out.read_text())
    assert sum(b[3] for b in record["batches"]) == 256 * 10**6
