"""Find out which NVIDIA GPUs this machine has (so idle time can be priced), which of them
other processes already use, and whether they can talk peer to peer.

Two sources, tried in order: NVML through nvidia-ml-py (``import pynvml``), which is exact
and fast when the package is installed, then ``nvidia-smi --query-gpu=...`` (ships with
the driver, so it is present on nearly every GPU pod). No GPU, no driver, a hung tool or
garbage output all give ``None``: detection is a hint for the cost model, never a reason
to fail a run.

Busy GPUs and peer-to-peer support (for ``iobench doctor``) come from ``nvidia-smi`` alone:
``--query-gpu`` / ``--query-compute-apps`` CSV and the ``topo -p2p r`` matrix (rows
`` GPU0\tX\tOK\tCNS...``; anything but ``OK`` between two GPUs means no P2P read).

On EC2 the instance type (``p5.48xlarge``) is read from DMI as well, because AWS bills
whole instances, and the instance price is the honest one there.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from iobench.rundir.meta import GpuInfo

NVIDIA_SMI_QUERY = (
    "--query-gpu=name,driver_version,memory.total",
    "--format=csv,noheader,nounits",
)
_DMI = Path("/sys/devices/virtual/dmi/id")


def detect_gpus(timeout_s: float = 10.0) -> GpuInfo | None:
    """Detect NVIDIA GPUs via NVML, else nvidia-smi; ``None`` when there are none."""
    info = _from_nvml() or _from_nvidia_smi(timeout_s)
    if info is None:
        return None
    instance = ec2_instance_type()
    if instance:
        info = GpuInfo(info.name, info.count, info.driver, info.memory_mib, info.source, instance)
    return info


def ec2_instance_type(dmi_dir: Path = _DMI) -> str | None:
    """The EC2 instance type from DMI (``Amazon EC2`` vendor), else ``None``."""
    try:
        vendor = (dmi_dir / "sys_vendor").read_text().strip()
        product = (dmi_dir / "product_name").read_text().strip()
    except OSError:
        return None
    if vendor != "Amazon EC2" or "." not in product:
        return None
    return product


def _summarise(names: list[str], driver: str | None, mem: list[int]) -> GpuInfo | None:
    """Several GPUs become one GpuInfo: the most common model and the total count."""
    names = [n.strip() for n in names if n and n.strip()]
    if not names:
        return None
    name, _ = Counter(names).most_common(1)[0]
    return GpuInfo(
        name=name,
        count=len(names),
        driver=driver or None,
        memory_mib=max(mem) if mem else None,
    )


def _from_nvml() -> GpuInfo | None:
    """NVML via nvidia-ml-py; any import or NVML error means "try nvidia-smi instead"."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except Exception:  # ImportError, or a broken install
        return None
    try:
        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        names: list[str] = []
        mem: list[int] = []
        for i in range(int(pynvml.nvmlDeviceGetCount())):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            names.append(_text(pynvml.nvmlDeviceGetName(handle)))
            try:
                mem.append(int(pynvml.nvmlDeviceGetMemoryInfo(handle).total) // (1024 * 1024))
            except Exception:
                pass
        info = _summarise(names, driver, mem)
    except Exception:
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    if info is None:
        return None
    return GpuInfo(info.name, info.count, info.driver, info.memory_mib, "nvml")


def _from_nvidia_smi(timeout_s: float) -> GpuInfo | None:
    """Parse ``nvidia-smi --query-gpu`` CSV; absent, failing or hung tool gives None."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        proc = subprocess.run(
            [exe, *NVIDIA_SMI_QUERY],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    return parse_nvidia_smi(proc.stdout)


def parse_nvidia_smi(text: str) -> GpuInfo | None:
    """Parse ``name, driver_version, memory.total`` lines (with or without ``MiB`` units)."""
    names: list[str] = []
    mem: list[int] = []
    driver: str | None = None
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 2 or not parts[0] or parts[0].lower() == "name":
            continue
        names.append(parts[0])
        driver = driver or parts[1] or None
        if len(parts) >= 3:
            digits = parts[2].split()[0] if parts[2].split() else ""
            if digits.isdigit():
                mem.append(int(digits))
    info = _summarise(names, driver, mem)
    return info


def _text(value: object) -> str:
    """Old nvidia-ml-py returns bytes, new returns str."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


# --------------------------------------------------------------------------- doctor's questions

GPU_STATE_QUERY = (
    "--query-gpu=index,uuid,name,memory.used,memory.total,utilization.gpu",
    "--format=csv,noheader,nounits",
)
APPS_QUERY = (
    "--query-compute-apps=gpu_uuid,pid,process_name,used_memory",
    "--format=csv,noheader,nounits",
)
P2P_QUERY = ("topo", "-p2p", "r")


@dataclass(frozen=True)
class GpuState:
    """One GPU as nvidia-smi lists it now."""

    index: int
    uuid: str
    name: str
    memory_used_mib: int | None
    memory_total_mib: int | None
    utilization_pct: int | None


@dataclass(frozen=True)
class GpuProcess:
    """A compute process holding memory on a GPU (pid as the driver sees it: in a container
    it may belong to another pid namespace)."""

    gpu_index: int | None
    pid: int | None
    name: str
    used_mib: int | None


def _int(text: str) -> int | None:
    digits = text.strip().split()[0] if text.strip() else ""
    return int(digits) if digits.isdigit() else None


def run_smi(args: tuple[str, ...], timeout_s: float = 10.0) -> str | None:
    """``nvidia-smi`` output, or None when absent, failing or hung."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        proc = subprocess.run(
            [exe, *args], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def parse_gpu_states(text: str) -> list[GpuState]:
    """Rows of :data:`GPU_STATE_QUERY`; malformed rows are skipped."""
    out = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 6 or _int(parts[0]) is None:
            continue
        out.append(
            GpuState(
                _int(parts[0]) or 0,
                parts[1],
                parts[2],
                _int(parts[3]),
                _int(parts[4]),
                _int(parts[5]),
            )
        )
    return out


def parse_compute_apps(text: str, states: list[GpuState]) -> list[GpuProcess]:
    """Rows of :data:`APPS_QUERY`, GPU uuids turned into indexes."""
    index = {s.uuid: s.index for s in states}
    out = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4 or not parts[0].startswith("GPU-"):
            continue
        out.append(GpuProcess(index.get(parts[0]), _int(parts[1]), parts[2], _int(parts[3])))
    return out


def parse_p2p(text: str) -> dict[tuple[int, int], str]:
    """``{(i, j): status}`` for i != j from ``nvidia-smi topo -p2p r`` (OK, CNS, GNS, TNS, NS, U...)."""
    ansi = re.compile(r"\x1b\[[0-9;]*m")
    header: list[int] = []
    out: dict[tuple[int, int], str] = {}
    for raw in text.splitlines():
        cells = ansi.sub("", raw).split()
        if not cells or cells[0] == "Legend:":
            if header and out:
                break
            continue
        if all(re.fullmatch(r"GPU\d+", c) for c in cells):
            header = [int(c[3:]) for c in cells]
        elif header and re.fullmatch(r"GPU\d+", cells[0]):
            row = int(cells[0][3:])
            for col, status in zip(header, cells[1:], strict=False):
                if col != row:
                    out[(row, col)] = status
    return out


def gpu_states(timeout_s: float = 10.0) -> list[GpuState] | None:
    """Every GPU now; None when nvidia-smi is absent or fails."""
    text = run_smi(GPU_STATE_QUERY, timeout_s)
    return None if text is None else parse_gpu_states(text)


def compute_apps(states: list[GpuState], timeout_s: float = 10.0) -> list[GpuProcess]:
    """Processes using the GPUs now (empty when none, or unknown)."""
    text = run_smi(APPS_QUERY, timeout_s)
    return [] if text is None else parse_compute_apps(text, states)


def p2p_read(timeout_s: float = 10.0) -> dict[tuple[int, int], str] | None:
    """The P2P read matrix; None when it cannot be had."""
    text = run_smi(P2P_QUERY, timeout_s)
    return None if text is None else parse_p2p(text)
