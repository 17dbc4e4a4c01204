"""Start-up cost: `iobench --help` and `iobench run --help` as a user types them (target 0.05 s: issue 38).

Each round starts the installed console script in a fresh interpreter, so the figure holds
the interpreter's own start, the imports of the command line, and building the parser.
Bytecode is written on the first (untimed warm-up) call, as an installed package has it.
Run with `nox -s bench`; the median is the figure to quote.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

IOBENCH = str(Path(sys.executable).parent / "iobench")
ROUNDS = int(os.environ.get("IOBENCH_BENCH_ROUNDS_CLI", "20"))
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _start(argv: list[str]) -> None:
    subprocess.run([IOBENCH, *argv], check=True, stdout=subprocess.DEVNULL, env=ENV)


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"]], ids=["help", "run-help"])
def test_startup(benchmark, argv: list[str]) -> None:
    benchmark.group = "start-up"
    _start(argv)  # warm-up: writes bytecode, fills the page cache
    benchmark.pedantic(_start, args=(argv,), rounds=ROUNDS, iterations=1)
