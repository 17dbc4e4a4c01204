"""`iobench doctor`: in under a minute, what on this machine will make a Python ML install
slow or fail, what to export instead, and how long each layout would take.

Checks, each bounded in time: where TMPDIR, the pip/uv/Hugging Face/torch caches, HOME,
the active venv, the base interpreter and the current folder live (filesystem type from
/proc/self/mountinfo; network and FUSE volumes flagged); /dev/shm's size; free space and
inodes; the package index's reachability and download rate; GPUs already in use and, on
multi-GPU hosts, peer-to-peer support; short probes of the target and tmp folders
(:mod:`iobench.predict.probe`) and from them the predicted time-to-ready of the torch-like and
diffusers-like profiles per config (:mod:`iobench.predict.model`).

Every finding has a level; the worst one is the verdict and sets the exit status
(:data:`EXIT_STATUS`), so a start script can gate on ``iobench doctor``. Measuring only:
the report is a dataclass with a versioned JSON form; formatting lives in the CLI module.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from iobench import shell
from iobench.predict import traps
from iobench.predict.finding import EXIT_STATUS, LEVELS, Finding
from iobench.predict.model import Costs, folders_of
from iobench.predict.netcheck import index_check, index_url
from iobench.predict.outlook import create_moved, predict_all, prediction_findings
from iobench.predict.probe import probe_roles
from iobench.predict.probe_findings import probe_findings as _probe_findings
from iobench.system import gpu
from iobench.system.procfs import mount_of

#: version of :meth:`DoctorReport.to_dict`; bump on any change of keys or meaning
SCHEMA_VERSION = (
    4  # 2: loop_mount; 3: probes_again, predictions_again; 4: to_measure, findings[].measure
)
#: filesystem types whose every metadata operation is a round trip over a network
NETWORK_FS = (
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "smbfs",
    "ceph",
    "glusterfs",
    "lustre",
    "gpfs",
    "beegfs",
    "9p",
    "afs",
    "davfs",
    "ncpfs",
    "orangefs",
    "quobyte",
    "weka",
    "juicefs",
)
MEMORY_FS = ("tmpfs", "ramfs")
#: the folders where a slow volume makes installs slow, with their fix
SCRATCH_VARS = ("TMPDIR", "PIP_CACHE_DIR", "UV_CACHE_DIR")
LOW_FREE_BYTES = 5 * 10**9
LOW_FREE_INODES = 200_000
SHM_MIN_BYTES = 2 * 2**30


@dataclass(frozen=True)
class Location:
    """Where one of the interesting folders lives."""

    name: str
    path: str
    exists: bool
    mountpoint: str
    fstype: str
    source: str
    kind: str  # local | memory | overlay | network | fuse | unknown
    free_bytes: int | None = None
    free_inodes: int | None = None


@dataclass
class DoctorReport:
    """Everything ``iobench doctor`` found; ``findings`` decide the verdict."""

    target: str
    tmp: str
    locations: list[Location] = field(default_factory=list)
    shm: dict[str, Any] | None = None
    loop_mount: dict[str, Any] = field(default_factory=dict)
    index: dict[str, Any] = field(default_factory=dict)
    gpus: dict[str, Any] = field(default_factory=dict)
    probes: dict[str, Any] = field(default_factory=dict)
    predictions: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: the second look at the end of the check (small-file probes only) and its predictions
    probes_again: dict[str, Any] = field(default_factory=dict)
    predictions_again: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def verdict(self) -> str:
        return max((f.level for f in self.findings), key=LEVELS.index, default="ok")

    @property
    def exit_status(self) -> int:
        return EXIT_STATUS[self.verdict]

    def probes_hung(self) -> bool:
        """Whether a probe of the first look hung (a second look would hang too)."""
        return any(p.get("hung") for p in self.probes.get("paths", []))

    def fix_script(self) -> list[str]:
        """The export lines of every finding, once each, in order."""
        seen: list[str] = []
        for f in self.findings:
            seen += [line for line in f.fix if line not in seen]
        return seen

    def measure_block(self) -> list[str]:
        """The runs that would measure what the findings predict, once each, in order."""
        seen: list[str] = []
        for f in self.findings:
            seen += [line for line in f.measure if line not in seen]
        return seen

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "iobench-doctor",
            "schema_version": SCHEMA_VERSION,
            "verdict": self.verdict,
            "exit_status": self.exit_status,
            "target": self.target,
            "tmp": self.tmp,
            "elapsed_s": round(self.elapsed_s, 2),
            "findings": [asdict(f) | {"fix": list(f.fix)} for f in self.findings],
            "fix_script": self.fix_script(),
            "to_measure": self.measure_block(),
            "locations": [asdict(loc) for loc in self.locations],
            "shm": self.shm,
            "loop_mount": self.loop_mount,
            "index": self.index,
            "gpus": self.gpus,
            "probes": self.probes,
            "predictions": self.predictions,
            "probes_again": self.probes_again,
            "predictions_again": self.predictions_again,
        }


# --------------------------------------------------------------------------- locations


def kind_of(fstype: str) -> str:
    """local, memory, overlay, network or fuse, from a mountinfo filesystem type."""
    if fstype.startswith("fuse") or fstype == "virtiofs":
        return "fuse"
    if fstype in NETWORK_FS or fstype.startswith("nfs"):
        return "network"
    if fstype in MEMORY_FS:
        return "memory"
    if fstype == "overlay":
        return "overlay"
    return "local" if fstype else "unknown"


def _existing(path: Path) -> Path:
    """``path``, or its nearest existing ancestor (where it would be created)."""
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def locate(name: str, path: str | os.PathLike[str]) -> Location:
    """The mount and free space of ``path`` (of its nearest existing ancestor when absent)."""

    p = Path(path).expanduser()
    real = _existing(p)
    m = mount_of(real)
    free = inodes = None
    try:
        st = os.statvfs(real)
        free, inodes = st.f_bavail * st.f_frsize, (st.f_favail if st.f_files else None)
    except OSError:
        pass
    fstype = m.fstype if m else ""
    return Location(
        name,
        str(p),
        p.exists(),
        m.mountpoint if m else "",
        fstype,
        m.source if m else "",
        kind_of(fstype),
        free,
        inodes,
    )


def interesting_paths(env: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """(name, path) of every folder an install or a model download writes to or reads from."""
    env = dict(os.environ if env is None else env)
    home = env.get("HOME") or str(Path.home())
    xdg = env.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
    out = [
        ("TMPDIR", env.get("TMPDIR") or tempfile.gettempdir()),
        ("PIP_CACHE_DIR", env.get("PIP_CACHE_DIR") or os.path.join(xdg, "pip")),
        ("UV_CACHE_DIR", env.get("UV_CACHE_DIR") or os.path.join(xdg, "uv")),
        ("XDG_CACHE_HOME", xdg),
        ("HF_HOME", env.get("HF_HOME") or os.path.join(xdg, "huggingface")),
        ("TORCH_HOME", env.get("TORCH_HOME") or os.path.join(xdg, "torch")),
        ("HOME", home),
    ]
    venv = env.get("VIRTUAL_ENV") or (sys.prefix if sys.prefix != sys.base_prefix else "")
    if venv:
        out.append(("venv", venv))
    out.append(("base interpreter", os.path.realpath(sys.base_prefix)))
    out.append(("current folder", os.getcwd()))
    return out


def location_findings(locs: list[Location], tmp: str) -> list[Finding]:
    """Slow volumes under the folders that matter, with the exports that move them."""
    out: list[Finding] = []
    for loc in locs:
        slow = loc.kind in ("network", "fuse")
        where = f"{loc.path} is on {loc.fstype} ({loc.kind}, {loc.mountpoint})"
        if not slow:
            continue
        if loc.name in SCRATCH_VARS:
            sub = {"TMPDIR": "tmp", "PIP_CACHE_DIR": "pip-cache", "UV_CACHE_DIR": "uv-cache"}[
                loc.name
            ]
            mine = shell.per_user(tmp)  # the user's own folder in a shared one (iobench.shell)
            dest = os.path.join(mine, sub)
            out.append(
                Finding(
                    "warn",
                    loc.name,
                    f"{loc.name}: {where}; every file an install unpacks "
                    "there pays network round trips",
                    (
                        *shell.PRIVATE_DIR,
                        shell.private_dir(mine),
                        shell.private_dir(dest),
                        f"export {loc.name}={shell.quote(dest)}",
                    ),  # fmt: skip
                )
            )
        elif loc.name in ("venv", "base interpreter"):
            out.append(
                Finding(
                    "warn",
                    loc.name,
                    f"{loc.name}: {where}; every import and every installed "
                    f"file pays round trips (create the venv on local disk, e.g. under {tmp})",
                )
            )
        else:
            out.append(
                Finding(
                    "info",
                    loc.name,
                    f"{loc.name}: {where} (persistent, but slow for many small files)",
                )
            )
    return out


def space_findings(locs: list[Location]) -> list[Finding]:
    """Little free space or few free inodes, once per mount."""
    out: list[Finding] = []
    seen: set[str] = set()
    for loc in locs:
        if loc.mountpoint in seen or loc.free_bytes is None:
            continue
        seen.add(loc.mountpoint)
        if loc.free_bytes < LOW_FREE_BYTES:
            level = "bad" if loc.free_bytes < LOW_FREE_BYTES / 5 else "warn"
            out.append(
                Finding(
                    level,
                    "space",
                    f"{loc.mountpoint} ({loc.name}): only "
                    f"{loc.free_bytes / 1e9:.1f} GB free (torch with CUDA needs ~8 GB)",
                )
            )
        if loc.free_inodes is not None and loc.free_inodes < LOW_FREE_INODES:
            out.append(
                Finding(
                    "warn",
                    "inodes",
                    f"{loc.mountpoint} ({loc.name}): only {loc.free_inodes:,} "
                    "free inodes (a torch + diffusers venv is ~60,000 files)",
                )
            )
    return out


def shm_check(path: str = "/dev/shm") -> tuple[dict[str, Any] | None, list[Finding]]:
    """/dev/shm's size: Docker's default 64 MB breaks DataLoader workers and a TMPDIR there."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None, [Finding("info", "shm", f"{path} does not exist")]
    total = st.f_blocks * st.f_frsize
    info = {"path": path, "total_bytes": total, "free_bytes": st.f_bavail * st.f_frsize}
    if total < SHM_MIN_BYTES:
        return info, [
            Finding(
                "warn",
                "shm",
                f"{path} is only {total / 2**20:.0f} MiB: too small "
                "for TMPDIR and for PyTorch DataLoader workers (docker run --shm-size=8g)",
                (
                    "# start the container with more shared memory: docker run --shm-size=8g "
                    "(compose: shm_size: 8gb);",
                    "# until then keep TMPDIR and venvs off /dev/shm",
                ),
            )
        ]
    return info, [Finding("ok", "shm", f"{path}: {total / 2**30:.1f} GiB")]


# --------------------------------------------------------------------------- GPUs


def gpu_check(timeout_s: float = 10.0) -> tuple[dict[str, Any], list[Finding]]:
    """GPUs other processes already use, and peer-to-peer support between GPUs."""

    states = gpu.gpu_states(timeout_s)
    if states is None:
        return {"available": False}, [
            Finding("info", "gpu", "no NVIDIA GPU found (nvidia-smi absent or failing)")
        ]
    apps = gpu.compute_apps(states, timeout_s)
    info: dict[str, Any] = {
        "available": True,
        "gpus": [asdict(s) for s in states],
        "processes": [asdict(a) for a in apps],
    }
    out: list[Finding] = []
    busy = {a.gpu_index for a in apps}
    free = [str(s.index) for s in states if s.index not in busy]
    for s in states:
        mine = [a for a in apps if a.gpu_index == s.index]
        if mine:
            who = ", ".join(f"pid {a.pid} {a.name} ({a.used_mib} MiB)" for a in mine)
            fix = (
                (f"export CUDA_VISIBLE_DEVICES={','.join(free)}  # the GPUs no process uses",)
                if free
                else (f"# every GPU is in use; end what you do not need: kill {mine[0].pid}",)
            )
            out.append(
                Finding("warn", "gpu", f"GPU {s.index} ({s.name}) is already in use: {who}", fix)
            )
    if len(states) > 1:
        p2p = gpu.p2p_read(timeout_s)
        info["p2p_read"] = (
            None if p2p is None else {f"{i}-{j}": v for (i, j), v in sorted(p2p.items())}
        )
        missing = sorted((i, j, v) for (i, j), v in (p2p or {}).items() if v != "OK" and i < j)
        if p2p is None:
            out.append(Finding("info", "p2p", "could not read nvidia-smi topo -p2p r"))
        elif missing:
            pairs = ", ".join(f"GPU{i}-GPU{j} {v}" for i, j, v in missing[:6]) + (
                " ..." if len(missing) > 6 else ""
            )
            out.append(
                Finding(
                    "warn",
                    "p2p",
                    f"no peer-to-peer reads between {len(missing)} GPU pair(s) ({pairs}): "
                    "NCCL can hang or crawl trying; disable it",
                    ("export NCCL_P2P_DISABLE=1",),
                )
            )
        else:
            out.append(Finding("ok", "p2p", f"peer-to-peer reads between all {len(states)} GPUs"))
    if not out:
        out.append(Finding("ok", "gpu", f"{len(states)} GPU(s), none in use"))
    return info, out


# --------------------------------------------------------------------------- probes and predictions


def _lock_fallout(report: DoctorReport, target: str, tmp: str) -> list[Finding]:
    """traps.lock_fallout with the target's probed locks and its mount."""
    doc = report.probes
    by_path = {p["path"]: p for p in doc.get("paths", [])}
    probed = by_path.get(doc.get("roles", {}).get("target"))
    mount = next((loc.mountpoint for loc in report.locations if loc.name == "target"), "")
    if not probed:
        return []
    return traps.lock_fallout(report.locations, probed.get("locks", {}), mount, tmp)


def _target_rates(report: DoctorReport) -> Costs | None:
    """The target's probed costs, when the active venv lives on the target's filesystem."""
    by = {loc.name: loc for loc in report.locations}
    venv, target = by.get("venv"), by.get("target")
    if venv is None or target is None or venv.mountpoint != target.mountpoint:
        return None
    return folders_of(report.probes).get("target")


def run_doctor(
    target: str | os.PathLike[str],
    tmp: str | os.PathLike[str],
    seconds: float = 0.4,
    index: str | None = None,
    offline: bool = False,
    timeout_s: float = 10.0,
    shm: str = "/dev/shm",
) -> DoctorReport:
    """Every check, in an order that measures storage before anything else loads the machine
    (``shm``: the shared-memory folder to check; tests give a small tmpfs)."""

    t0 = time.perf_counter()
    report = DoctorReport(str(target), str(tmp))
    report.locations = [locate(n, p) for n, p in interesting_paths()]
    report.locations += [locate("target", target), locate("tmp", tmp)]
    report.findings += location_findings(report.locations, str(tmp))
    report.findings += space_findings(report.locations)
    report.shm, found = shm_check(shm)
    report.findings += found
    report.findings += traps.shm_for_venv(report.shm, report.locations)
    report.findings += traps.cache_apart(report.locations, str(tmp))
    report.findings += traps.bytecode_missing(report.locations)
    report.loop_mount, found = traps.loop_mount()
    report.findings += found
    report.probes = probe_roles({"target": target, "tmp": tmp}, seconds)
    report.findings += _probe_findings(report.probes, str(target), str(tmp))
    report.findings += _lock_fallout(report, str(target), str(tmp))
    report.findings += traps.packed_would_start_faster(report.locations, _target_rates(report))
    report.predictions = predict_all(report.probes)
    report.index, found = index_check(index_url(index), timeout_s, offline)
    report.findings += found
    report.gpus, found = gpu_check(timeout_s)
    report.findings += found
    # a second look at the folders' small-file costs (no write, no locks): a warning from the
    # predictions needs both looks past the bar, so one slow moment does not flip the exit
    if not report.probes_hung():
        # the first look's CPU figure: what moves between the looks is then the storage's; half
        # as long a step as the first: it only compares the create cost (doctor 11.4 -> 9.2 s on
        # the lab at 1 ms, load 0.6)
        report.probes_again = probe_roles(
            {"target": target, "tmp": tmp}, seconds / 2, locks=False, write_mb=0, cpu_runs=0
        )
        for k in ("cpu_s", "cpu_others"):
            report.probes_again[k] = report.probes.get(k)
        report.predictions_again = predict_all(report.probes_again)
        report.findings += create_moved(report.probes, report.probes_again, str(target))
    report.findings += prediction_findings(report.predictions, report.predictions_again)
    report.elapsed_s = time.perf_counter() - t0
    return report
