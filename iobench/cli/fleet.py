"""``iobench fleet``: a fleet's time-to-ready at N workers, predicted before renting them
(docs/fleet.md, "Before renting: the fleet model").

From one probe of the volume (``--target``: its per-operation costs, as this client sees
them) or a preset's published latencies (``--preset``), the volume's shared caps (the
preset's, the lab volume's own, or given), and the scenario's operation mix
(:mod:`iobench.predict.fleet`). Nothing is installed and nothing is run but the probe; the
answer says what it rests on. Handlers return an exit code and leave errors to ``main``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, NamedTuple

from iobench.cli.common import positive_float
from iobench.errors import UsageError

DEFAULT_WORKERS = "1,2,4,8,64,256,1024"
#: the strategies whose fleet time is all of a worker's start (the others keep something)
_FIRST = ("reinstall", "fan-out")
#: the most workers the model is asked about (the bound is linear beyond any real fleet)
MAX_WORKERS = 100_000
#: what decides a time, as the table shows it: (word, what it means)
_BOUND = {"iops": ("iops", "the volume's operations cap"), "bandwidth": ("bw", "its throughput"),
          "cpu": ("cpu", "the CPUs the workers share")}  # fmt: skip


def _workers(text: str) -> list[int]:
    try:
        sizes = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: worker counts such as 1,8,256") from None
    if not sizes or sizes[0] < 1 or sizes[-1] > MAX_WORKERS:
        raise argparse.ArgumentTypeError(f"{text!r}: worker counts from 1 to {MAX_WORKERS:,}")
    return sizes


def register(sub: Any) -> None:
    p = sub.add_parser(
        "fleet",
        help="predict a fleet's time-to-ready at N workers from one probe and the volume's caps",
        description="What N workers starting at once on one volume take, per config: each "
        "phase as long as one worker alone takes, or as the volume's shared operations cap, "
        "throughput (burst credits first) or shared CPUs need for N workers' demand, "
        "whichever is longer; fan-out as one install plus N-1 restores. Nothing is run but "
        "the probe (docs/fleet.md).",
    )
    p.add_argument("--scenario", default="fleet", help="an install scenario (default fleet)")
    p.add_argument("--configs", metavar="A,B", help="only these configs (default: all)")
    p.add_argument("--workers", type=_workers, default=_workers(DEFAULT_WORKERS),
                   metavar="N,N,...", help=f"fleet sizes (default {DEFAULT_WORKERS})")  # fmt: skip
    where = p.add_argument_group("the volume: a probe of it, a preset, or both")
    where.add_argument("--target", type=Path, metavar="DIR",
                       help="probe this folder on the volume, as one client (about 10 s)")  # fmt: skip
    where.add_argument("--tmp", type=Path, metavar="DIR",
                       help="probe this local folder too (default: local disk as fast as tmpfs)")  # fmt: skip
    where.add_argument("--preset", metavar="NAME",
                       help="a volume's published latencies and caps (iobench lab presets); "
                       "with --target, its caps only")  # fmt: skip
    where.add_argument("--size-gib", type=positive_float, metavar="G",
                       help="efs-bursting: the stored size (default 500)")  # fmt: skip
    where.add_argument("--credits-gib", type=float, metavar="C",
                       help="efs-bursting: the credit balance at the start")  # fmt: skip
    where.add_argument("--throughput-mib-s", type=positive_float, metavar="T",
                       help="efs-provisioned: the rate paid for")  # fmt: skip
    caps = p.add_argument_group("the volume's shared caps (override the preset's or the lab's)")
    caps.add_argument("--iops", type=positive_float, metavar="N")
    caps.add_argument("--mb-per-s", type=positive_float, metavar="M", help="baseline MB/s")
    caps.add_argument("--burst-mb-per-s", type=positive_float, metavar="B")
    caps.add_argument("--burst-credits-mb", type=float, metavar="C")
    p.add_argument("--cpus", type=positive_float, metavar="N",
                   help="the workers share N CPUs (emulated hosts on one machine; default: "
                   "each worker has its own, as pods do)")  # fmt: skip
    p.add_argument("--fast-from", type=Path, metavar="RUN_DIR",
                   help="the fast part (CPU, local disk) from this run's one-worker trials of "
                   "a config with every role on tmp, not the recorded one scaled by a CPU "
                   "sample (a busy machine's CPU sample says little)")  # fmt: skip
    p.add_argument("--pack-method", default="auto", metavar="M",
                   help="fan-out's archive: auto (default), squashfs, tar+zstd, tar")  # fmt: skip
    p.set_defaults(func=handle_fleet)


class Volume(NamedTuple):
    """What the model is given: the volume's costs, its caps, and where each came from."""

    name: str
    target: Any  # model.Costs
    tmp: Any  # model.Costs
    caps: Any  # fleet.Caps
    cpu_s: float | None
    said: list[str]
    fast_s: dict[str, dict[str, float]] | None = None  # per cache state, measured


def handle_fleet(args: argparse.Namespace) -> int:
    from iobench.scenario.load import load_scenario

    if args.target is None and args.preset is None:
        raise UsageError("give --target DIR (a probe of the volume), --preset NAME, or both")
    scenario = load_scenario(args.scenario)
    if args.configs:
        scenario = scenario.select([c.strip() for c in args.configs.split(",") if c.strip()])
    if not scenario.installs or not getattr(scenario, "wheels", None):
        raise UsageError(f"--scenario {scenario.name}: the model predicts installs of a "
                         "wheel profile (such as fleet, smoke, torch-like)")  # fmt: skip
    volume = _volume(args)
    if args.fast_from is not None:
        volume = volume._replace(fast_s=fast_from(args.fast_from, scenario))
        volume.said.append(f"the fast part: {args.fast_from}'s one-worker trials, median")
    for line in fleet_lines(scenario, volume, args.workers, _pack_method(args.pack_method),
                            args.cpus):  # fmt: skip
        print(line)
    return 0


def _volume(args: argparse.Namespace) -> Volume:
    from iobench.lab.presets import PRESETS, preset_options
    from iobench.predict import fleet, model

    opmix = model.load_opmix("pip")
    said: list[str] = []
    options = None
    if args.preset:
        options = preset_options(args.preset, args.size_gib, args.credits_gib,
                                 args.throughput_mib_s)  # fmt: skip
        said.append(f"{args.preset}: {PRESETS[args.preset].source}")
    elif any(v is not None for v in (args.size_gib, args.credits_gib, args.throughput_mib_s)):
        raise UsageError("--size-gib, --credits-gib and --throughput-mib-s go with --preset")
    cpu_s = None
    tmp = model.fast_costs(opmix)
    if args.target is not None:
        costs, tmp_costs, cpu_s, lab = _probe(args.target, args.tmp)
        target, tmp = costs, tmp_costs or tmp
        said.append(f"per-operation costs: one probe of {args.target} from this client")
        if options is None and lab is not None:
            options = lab
            said.append(f"caps: the lab volume's own ({args.target})")
        name = args.preset or str(args.target)
    else:
        assert options is not None
        read_ms = options.data_latency_ms
        write_ms = options.write_latency_ms if options.write_latency_ms is not None else read_ms
        target = fleet.preset_costs(options.latency_ms, read_ms, write_ms,
                                    options.client_mb_per_s, opmix)  # fmt: skip
        said.append(f"per-operation costs: {args.preset}'s latencies ({options.latency_ms:g} ms "
                    f"a metadata request, {read_ms:g} ms a read, {write_ms:g} ms a write) times "
                    "each operation's requests (counted on the lab: iobench/predict/fleet.toml)")  # fmt: skip
        name = args.preset
    caps = _caps(options, args)
    if args.tmp is None:
        said.append("local disk as fast as tmpfs")
    return Volume(name, target, tmp, caps, cpu_s, said)


def _caps(options: Any, args: argparse.Namespace) -> Any:
    from dataclasses import replace

    from iobench.predict.fleet import Caps

    caps = Caps()
    if options is not None:
        caps = Caps(options.iops, options.mb_per_s, options.burst_mb_per_s,
                    options.burst_credits_mb, options.metered, options.client_mb_per_s)  # fmt: skip
    given = {
        k: getattr(args, k) for k in ("iops", "mb_per_s", "burst_mb_per_s", "burst_credits_mb")
    }
    caps = replace(caps, **{k: v for k, v in given.items() if v is not None})
    if (caps.burst_mb_per_s is None) != (caps.burst_credits_mb is None) or (
        caps.burst_mb_per_s is not None and not caps.mb_per_s
    ):
        raise UsageError("--burst-mb-per-s and --burst-credits-mb go together, with --mb-per-s")
    if caps.burst_mb_per_s is not None and caps.burst_mb_per_s <= (caps.mb_per_s or 0):
        raise UsageError(f"--burst-mb-per-s {caps.burst_mb_per_s:g}: above the baseline "
                         f"({caps.mb_per_s:g} MB/s)")  # fmt: skip
    return caps


def _probe(target: Path, tmp: Path | None) -> tuple[Any, Any, float | None, Any]:
    """(target's costs, tmp's or None, this machine's CPU sample, the lab volume's options
    when ``target`` is one, as mounted here)."""
    import shutil
    import tempfile

    from iobench.lab import manage
    from iobench.lab.options import VolumeOptions
    from iobench.predict import model
    from iobench.predict.probe import probe_roles
    from iobench.system import procfs

    roles = {"target": target, **({"tmp": tmp} if tmp is not None else {})}
    made: dict[str, str | os.PathLike[str]] = {}
    try:
        for role, folder in roles.items():
            if not folder.is_dir():
                raise UsageError(f"--{role} {folder}: not a folder")
            made[role] = tempfile.mkdtemp(prefix=".iobench-fleet-", dir=folder)
        doc = probe_roles(made, 1.0, locks=False, cpu_runs=3, write_mb=64.0)
    finally:
        for path in made.values():
            shutil.rmtree(path, ignore_errors=True)  # made by mkdtemp above: ours alone
    folders = model.folders_of(doc)
    mount = procfs.mount_of(target)
    lab = None
    if mount is not None and mount.fstype == manage.FUSE_TYPE:
        for s in manage.status():
            if s.mountpoint == mount.mountpoint and s.options:
                lab = VolumeOptions.from_dict(s.options)
    return folders["target"], folders.get("tmp"), float(doc.get("cpu_s") or 0) or None, lab


def fast_from(run: Path, scenario: Any) -> dict[str, dict[str, float]]:
    """Per cache state, the median phase times of ``run``'s ok one-worker trials of a config
    of ``scenario`` with every role on tmp (its storage part is the fast folder's)."""
    import statistics

    from iobench.rundir.folder import RunDir
    from iobench.rundir.records import PHASES

    local = {c.name: c for c in scenario.configs
             if c.roles() <= {"tmp"} and c.installer == "pip" and c.compile == "on"}  # fmt: skip
    rows = [r for r in RunDir.open(run).trials(latest_only=True)
            if r.status == "ok" and r.config in local and (r.fleet_size or 1) == 1]  # fmt: skip
    out: dict[str, dict[str, float]] = {}
    for row in rows:
        state = "warm" if local[row.config].cache_state == "warm" else "cold"
        if state in out:
            continue
        same = [r for r in rows if r.config == row.config]
        phases = {p: [getattr(r, f"{p}_s") for r in same] for p in PHASES}
        if all(v is not None for vs in phases.values() for v in vs):
            out[state] = {p: statistics.median(vs) for p, vs in phases.items()}
    if not out:
        raise UsageError(f"--fast-from {run}: no ok one-worker trial of a config with every "
                         f"role on tmp ({', '.join(local) or 'the scenario has none'})")  # fmt: skip
    return out


def _pack_method(asked: str) -> str:
    from iobench.trial.strategies import StrategyError, choose_method

    if asked not in ("auto", "squashfs", "tar+zstd", "tar"):
        raise UsageError(f"--pack-method {asked}: auto, squashfs, tar+zstd or tar")
    if asked != "auto":
        return asked
    try:
        return choose_method("auto")
    except StrategyError:
        return "tar"


def predictions(scenario: Any, volume: Volume, sizes: list[int], pack_method: str,
                cpus: float | None) -> tuple[dict[str, list[Any]], dict[str, str]]:  # fmt: skip
    """Each predictable config's fleet times, and why the others are not predicted."""
    from iobench.predict import fleet, model
    from iobench.wheels.profile import load_profile

    profile = load_profile(scenario.wheels)
    folders = {"target": volume.target, "tmp": volume.tmp}
    out, skipped = {}, {}
    for cfg in scenario.configs:
        why = model.unpredictable(cfg, scenario) or (
            None if cfg.roles() <= set(folders) else "a role other than target and tmp"
        )
        if why:
            skipped[cfg.name] = why
            continue
        size = model.size_of(cfg, scenario, profile)
        fast = (volume.fast_s or {}).get("warm" if cfg.cache_state == "warm" else "cold")
        if cfg.strategy == "fan-out":
            out[cfg.name] = fleet.fleet_fan_out(cfg, folders, size, volume.caps, sizes,
                                                pack_method, cpus, volume.cpu_s, fast)  # fmt: skip
        else:
            out[cfg.name] = fleet.fleet_install(cfg, folders, size, volume.caps, sizes, cpus,
                                                volume.cpu_s, fast)  # fmt: skip
    return out, skipped


def fleet_lines(scenario: Any, volume: Volume, sizes: list[int], pack_method: str,
                cpus: float | None) -> list[str]:  # fmt: skip
    """The table, the answer at the largest fleet, and what it rests on (returned)."""
    from iobench.predict import fleet

    found, skipped = predictions(scenario, volume, sizes, pack_method, cpus)
    if not found:
        raise UsageError(f"no config of {scenario.name} can be predicted: "
                         + "; ".join(f"{c}: {w}" for c, w in skipped.items()))  # fmt: skip
    width = max(len(c) for c in [*found, "workers"]) + 2
    table = {c: [fmt_s(t.seconds) + (f" {_BOUND[t.bound][0]}" if t.bound in _BOUND else "")
                 for t in times]
             for c, times in found.items()}  # fmt: skip
    col = max(len(cell) for cells in table.values() for cell in cells) + 2
    lines = [f"fleet model: {scenario.name} on {volume.name} ({volume.caps.describe()})", "",
             f"{'workers':<{width}}" + "".join(f"{n:>{col},}" for n in sizes)]  # fmt: skip
    lines += [f"{c:<{width}}" + "".join(f"{cell:>{col}}" for cell in cells)
              for c, cells in table.items()]  # fmt: skip
    lines.append("a word after a time: what decides it (" + "; ".join(
        f"{w}: {v}" for w, v in _BOUND.values()) + "); none: each worker's own time")  # fmt: skip
    lines.append("")
    for n in [m for m in sizes if m >= 64] or [max(sizes)]:
        at = {c: next(t for t in times if t.workers == n) for c, times in found.items()}
        best = min(at, key=lambda c: at[c].seconds)
        first, *rest = at.items()
        said = ", ".join([f"{first[0]} takes {_duration(first[1].seconds)}",
                          *(f"{c} {_duration(t.seconds)}" for c, t in rest)])  # fmt: skip
        lines.append(f"at {n:,} workers on {volume.name}, {said} (fastest: {best})")
    n = max(sizes)
    lines += ["", "assumptions:", *(f"  - {a}" for a in _assumptions(volume, found, n, cpus))]
    if any(c.cache_state == "shared" for c in scenario.configs if c.name in found):
        lines.append("  - a shared cache's workers: each counted with a cold cache of its own")
    kept = [c.name for c in scenario.configs if c.name in found and c.strategy not in _FIRST]
    if kept:
        lines.append(f"  - {', '.join(kept)}: the first start (every worker's restart at once "
                     "is not predicted)")  # fmt: skip
    lines += [f"  - not predicted: {c} ({w})" for c, w in skipped.items()]
    if "fan-out" in found and n > 1 and volume.caps.iops:
        polls = fleet.polls_per_s(n)
        lines.append(f"  - fan-out's {n - 1:,} waiters look for the archive every "
                     f"{fleet.POLL_S * 1000:.0f} ms: {polls:,.0f} stats a second, "
                     f"{polls / volume.caps.iops:.0%} of the volume's IOPS, while rank 0 builds")  # fmt: skip
    return lines


def _assumptions(
    volume: Volume, found: dict[str, list[Any]], n: int, cpus: float | None
) -> list[str]:
    cpu = (f"the workers share {cpus:g} CPUs" if cpus else
           "each worker has CPUs of its own")  # fmt: skip
    fast = ("the fast part (CPU, local disk) as measured" if volume.fast_s else
            "the fast part (CPU, local disk) scaled to this machine's CPU sample"
            if volume.cpu_s else "the fast part (CPU, local disk) as recorded on the machine "
            "that traced the profile")  # fmt: skip
    return [
        "every worker starts at the same moment and keeps in step with the others, phase by "
        "phase (a staggered start, as a scale-up's, is faster)",
        *volume.said,
        f"{fast}; {cpu}",
        "each worker installs from its own package index (no shared index or network cap)",
    ]


def _duration(seconds: float) -> str:
    if seconds < 100:
        return fmt_s(seconds)
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s:02d} s" if m < 60 else f"{m // 60} h {m % 60:02d} min"


def fmt_s(seconds: float) -> str:
    """iobench.units.fmt_s, imported when a fleet is predicted (not for --help)."""
    from iobench.units import fmt_s as fmt

    return fmt(seconds)
