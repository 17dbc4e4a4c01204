"""`iobench doctor` and `iobench probe` as a user runs them (doctor's target: 60 s on a pod).

Each round starts the installed console script in a fresh interpreter against two local
folders, offline (no index traffic) and with nvidia-smi wherever PATH finds it. On a
network volume the probes take up to their time limits; on local folders the figure is
the floor: interpreter start, the checks, the CPU calibration and the predictions
(about 10 s on the shared 2-core VM; `probe` with its defaults about 12-15 s a folder).
Run with `nox -s bench`; the median is the figure to quote.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

IOBENCH = str(Path(sys.executable).parent / "iobench")
ROUNDS = int(os.environ.get("IOBENCH_BENCH_ROUNDS_DOCTOR", "2"))


def _doctor(target: Path, tmp: Path) -> None:
    argv = [
        IOBENCH,
        "doctor",
        "--target",
        str(target),
        "--tmp",
        str(tmp),
        "--offline",
        "--format",
        "json",
    ]
    r = subprocess.run(argv, stdout=subprocess.DEVNULL, check=False)
    assert r.returncode in (0, 3, 4), r.returncode  # a verdict, not an error


def _probe(folder: Path) -> None:
    subprocess.run(
        [IOBENCH, "probe", str(folder), "--format", "json"], check=True, stdout=subprocess.DEVNULL
    )


def test_doctor(benchmark, tmp_path: Path) -> None:  # noqa: ANN001 - pytest-benchmark's fixture
    benchmark.group = "doctor"
    (tmp_path / "t").mkdir()
    (tmp_path / "m").mkdir()
    benchmark.pedantic(_doctor, args=(tmp_path / "t", tmp_path / "m"), rounds=ROUNDS, iterations=1)


def test_probe_defaults(benchmark, tmp_path: Path) -> None:  # noqa: ANN001 - pytest-benchmark's fixture
    benchmark.group = "doctor"
    benchmark.pedantic(_probe, args=(tmp_path,), rounds=ROUNDS, iterations=1)
