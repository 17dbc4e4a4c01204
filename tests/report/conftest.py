"""Fixtures of the report tests: a synthetic run directory and one real `iobench run`."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import runs as rf

H100_META = {
    "name": "NVIDIA H100 80GB HBM3",
    "count": 2,
    "driver": "570.86.15",
    "source": "nvidia-smi",
}


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return rf.make_run_dir(tmp_path / "results", gpu=H100_META)


@pytest.fixture(scope="session")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real `iobench run` of the tiny scenario (2 configs x 2 repeats), shared by the
    report tests (each builds its report anew; ~20 s a run on 2 cores)."""
    main = pytest.importorskip("iobench.__main__").main
    TINY = Path(__file__).parents[1] / "data" / "tiny.toml"

    base = tmp_path_factory.mktemp("real")
    (base / "target").mkdir()
    (base / "tmp").mkdir()
    rc = main([
        "run", "--scenario", str(TINY), "--no-report", "--quiet", "--configs", "naive,nocache",
        "--repeats", "2", "--target", str(base / "target"), "--tmp", str(base / "tmp"),
        "--results", str(base / "results"),
    ])  # fmt: skip
    assert rc == 0
    (run,) = [d for d in (base / "results").iterdir() if d.is_dir()]
    return run
