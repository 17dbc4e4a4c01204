"""Regenerate the ``[pip.imports.*]`` tables of ``iobench/predict/opmix.toml``: the operations
and bytes of each shipped scenario's ready check, traced in a venv of its own wheels on tmpfs
(docs/prediction.md, "The ready check of a large profile").

    python tools/import_ops.py SCENARIO... [--tmpfs DIR]

The install's operation mix is traced on smoke and scaled to other profiles by installed
files; a ready check is not an install: torch's imports 729 modules and stats thousands of
paths where none exist, many more per installed file than smoke's. A developer's tool, not
part of the installed package: it parses its own command line, and it needs strace.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from iobench.predict.opmix import STRACE_ARGS, count_trace, counts_table
from iobench.scenario.load import load_scenario
from iobench.wheels.cache import cached_wheels
from iobench.wheels.profile import load_profile


def trace_ready(scenario: str, tmpfs: Path) -> str:
    """The TOML table of the venv role of one scenario's ready check."""
    sc = load_scenario(scenario)
    if not sc.wheels:
        raise SystemExit(f"{scenario}: not a synthetic scenario (no wheel profile)")
    profile = load_profile(sc.wheels)
    wheels = cached_wheels(profile)
    with tempfile.TemporaryDirectory(dir=tmpfs) as tmp:
        # the path count_trace attributes to a trial's venv role
        venv = Path(tmp) / ".iobench-scratch" / "imports" / f"{profile.name}-r1" / "venv"
        venv.parent.mkdir(parents=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "-q", "--isolated", "install"]
        subprocess.run([*pip, "--no-index", "--find-links", str(wheels), *sc.packages],
                       check=True)  # fmt: skip
        log = Path(tmp) / "trace.log"
        ready = [str(venv / "bin" / "python"), "-c", sc.ready]
        subprocess.run(["strace", *STRACE_ARGS, "-o", str(log), *ready], check=True)
        with open(log, encoding="utf-8", errors="replace") as fh:
            counts = count_trace(fh)
    c = counts[(f"{profile.name}-r1", "import", "venv")]
    return "\n".join(counts_table(f"pip.imports.{profile.name}.venv", c))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python tools/import_ops.py")
    ap.add_argument("scenarios", nargs="+", metavar="SCENARIO")
    ap.add_argument("--tmpfs", type=Path, default=Path("/dev/shm"))
    a = ap.parse_args(argv)
    if shutil.which("strace") is None:
        raise SystemExit("strace is not installed (apt-get install strace)")
    print("# The ready check of each profile's shipped scenario, traced on tmpfs (python\n"
          "# tools/import_ops.py): the model's import phase for that profile, not smoke's scaled.\n")  # fmt: skip
    for name in a.scenarios:
        print(trace_ready(name, a.tmpfs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
