"""Regenerate a section of ``iobench/predict/opmix.toml``: the operation counts of an
install traced with strace, and the fast times of an all-tmpfs run (docs/prediction.md).

    python tools/opmix.py TRACE --fast PROFILE=TRIALS_CSV:CPU_S ... --tmpfs DIR

A developer's tool, not part of the installed package: it parses its own command line.
"""

from __future__ import annotations

import argparse

from iobench.predict.model import Size
from iobench.predict.opmix import OPS, count_trace, fast_times, opmix_toml
from iobench.predict.probe import probe
from iobench.wheels.profile import load_profile


def _fast_arg(text: str) -> tuple[str, str, float | None]:
    """``PROFILE=TRIALS_CSV[:CPU_S]``."""
    profile, _, rest = text.partition("=")
    path, sep, cpu = rest.rpartition(":")
    if not sep:
        return profile, rest, None
    return profile, path, float(cpu)


def main(argv: list[str] | None = None) -> int:
    """``python tools/opmix.py TRACE --fast PROFILE=TRIALS_CSV:CPU_S ... --tmpfs DIR``:
    print the TOML section.

    TRACE: ``strace`` (:data:`STRACE_ARGS`) of ``iobench run --configs naive,warm-cache-on-target
    --repeats 1`` with target and tmp on tmpfs; each TRIALS_CSV: an untraced run of a
    scenario of that wheel profile, every role on tmpfs, for its fast times; CPU_S:
    :func:`iobench.predict.probe.cpu_seconds` measured around that run.
    """
    ap = argparse.ArgumentParser(prog="python tools/opmix.py")
    ap.add_argument("trace")
    ap.add_argument(
        "--fast", action="append", default=[], type=_fast_arg, metavar="PROFILE=TRIALS_CSV[:CPU_S]"
    )
    ap.add_argument("--tmpfs", default="/dev/shm")
    ap.add_argument("--installer", default="pip")
    ap.add_argument("--profile", default="smoke")
    ap.add_argument("--cold", default="naive-r1")
    ap.add_argument("--warm", default="warm-cache-on-target-r1")
    a = ap.parse_args(argv)
    with open(a.trace, encoding="utf-8", errors="replace") as fh:
        counts = count_trace(fh)
    prof = load_profile(a.profile)
    # twice, the first thrown away: on the 2-core VM the first probe after a quiet moment
    # measured every operation 1.3-1.6x slower than the next (as the CPU job does), and
    # these costs stand for a tmpfs under a running install
    for _ in range(2):
        fast = probe(
            a.tmpfs, files=5000, write_mb=256.0, seconds=0.3, write_seconds=1.2, bucket_s=0.15
        )
    costs = {op: v for op in OPS if (v := fast.ms(op)) is not None}
    costs |= {
        "write_mbps": fast.write.mean_mbps if fast.write else 0.0,
        "read_mbps": fast.read_mbps or 0.0,
    }
    meta = {
        "profile": prof.name,
        "files": prof.file_count,
        "bytes": prof.total_bytes,
        "dists": len(prof.dists),
        "opened": Size.of(prof).opened,  # the files its ready check opens
        "measured": "strace -f of one trial per cache state, all roles on tmpfs (python tools/opmix.py)",
    }
    times = {name: fast_times(path) for name, path, _ in a.fast}
    cpu = {name: c for name, _, c in a.fast if c is not None}
    print(
        opmix_toml(a.installer, counts, {"cold": a.cold, "warm": a.warm}, meta, times, costs, cpu)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
