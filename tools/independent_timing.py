"""Check iobench's time-to-ready against an independent timing of the same steps.

Runs one `iobench run` trial of the smoke scenario's `venv-on-tmp` config and, in ABBA
order, the same steps as a plain shell script (virtualenv, pip install from the same
loopback index with the same flags, compileall over what was installed, the ready check)
timed from outside with perf_counter. Prints each pair and the median ratio.

    python tools/independent_timing.py [--dir /dev/shm] [--pairs 8]

Use a steady filesystem (tmpfs): on a VM disk whose speed drifts, drift dominates.
"""

from __future__ import annotations

import argparse
import csv
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from iobench.trial import installers
from iobench.trial.index import LocalIndex
from iobench.trial.installers import IndexSpec
from iobench.wheels.cache import cached_wheels
from iobench.wheels.profile import load_profile


def script(root: Path, url: str, env: dict[str, str]) -> str:
    """The trial's steps as a shell script, from iobench's own command lines (they cannot drift)."""
    venv = root / "venv"
    pip = installers.Pip().command(
        venv, ["smoke-core"], IndexSpec(url, local=True), root / "cache", root / "pip.log", env
    )
    site = (
        "$(ls -d "
        + shlex.quote(str(venv))
        + "/lib/python*/site-packages/smoke_* | grep -v dist-info)"
    )
    return (
        "\n".join(
            [
                "set -e",
                shlex.join(installers.venv_command(venv)),
                shlex.join(pip.argv),
                shlex.join(installers.compile_command(venv, [], parallel=False)) + " " + site,
                shlex.join(
                    [str(venv / "bin" / "python"), "-c", "import smoke_core; smoke_core.check()"]
                ),
            ]
        )
        + "\n"
    )


def ours(base: Path) -> float:
    res = Path(tempfile.mkdtemp(dir=base))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "iobench",
            "run",
            "--configs",
            "venv-on-tmp",
            "--repeats",
            "1",
            "--target",
            str(base),
            "--tmp",
            str(base),
            "--results",
            str(res),
            "--no-report",
            "--quiet",
        ],
        check=True,
        capture_output=True,
    )
    trials = next(res.glob("*/trials.csv"))
    ttr = float(next(csv.DictReader(open(trials)))["time_to_ready_s"])
    shutil.rmtree(res)
    return ttr


def outside(base: Path, index: LocalIndex) -> float:
    root = Path(tempfile.mkdtemp(dir=base))
    (root / "tmp").mkdir()
    (root / "cache").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, TMPDIR=str(root / "tmp"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # iobench's trials write bytecode, as pods do
    cwd = Path(tempfile.mkdtemp())
    t = time.perf_counter()
    with tempfile.TemporaryFile() as out:  # like a trial's phases: output to a local file
        subprocess.run(
            ["bash", "-c", script(root, index.url, env)],
            check=True,
            env=env,
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    took = time.perf_counter() - t
    shutil.rmtree(root)
    os.rmdir(cwd)
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path("/dev/shm"))
    ap.add_argument("--pairs", type=int, default=8)
    args = ap.parse_args()
    a, b = [], []
    with LocalIndex(cached_wheels(load_profile("smoke"))) as index:
        for i in range(args.pairs):
            if i % 2 == 0:
                a.append(ours(args.dir))
                b.append(outside(args.dir, index))
            else:
                b.append(outside(args.dir, index))
                a.append(ours(args.dir))
            print(
                f"pair {i}: iobench {a[-1]:.3f} s, outside {b[-1]:.3f} s, ratio {a[-1] / b[-1]:.3f}",
                flush=True,
            )
    print(
        f"median iobench {statistics.median(a):.3f} s, outside {statistics.median(b):.3f} s; "
        f"median pair ratio {statistics.median(x / y for x, y in zip(a, b)):.3f}"
    )


if __name__ == "__main__":
    main()
