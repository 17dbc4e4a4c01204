"""gpu.py's doctor questions: busy GPUs and the P2P matrix, parsed from the real tool's
formats and read through a fake ``nvidia-smi`` on PATH."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from iobench.system import gpu
from tests.helpers import fake_nvidia_smi as fake

# `nvidia-smi topo -p2p r` on an 8x H100 node (P2P everywhere) and a 2x L4 host (none)
H100_P2P = (
    "        GPU0    GPU1    GPU2    GPU3    GPU4    GPU5    GPU6    GPU7\n"
    + "".join(
        f" GPU{i}   " + "       ".join("X" if i == j else "OK" for j in range(8)) + "\n"
        for i in range(8)
    )
    + fake.LEGEND
)
L4_P2P = "        GPU0    GPU1\n GPU0   X       CNS\n GPU1   CNS     X\n"
# on a terminal the header row is underlined with ANSI escapes
ANSI_P2P = (
    "\t\x1b[4mGPU0\tGPU1\tGPU2\x1b[0m\n GPU0\tX\tOK\tTNS\n GPU1\tOK\tX\tNS\n GPU2\tTNS\tNS\tX\n"
    + fake.LEGEND
)


def test_p2p_matrices_in_the_real_formats() -> None:
    h100 = gpu.parse_p2p(H100_P2P)
    assert len(h100) == 8 * 7 and set(h100.values()) == {"OK"}
    assert gpu.parse_p2p(L4_P2P) == {(0, 1): "CNS", (1, 0): "CNS"}
    assert gpu.parse_p2p(ANSI_P2P) == {
        (0, 1): "OK",
        (0, 2): "TNS",
        (1, 0): "OK",
        (1, 2): "NS",
        (2, 0): "TNS",
        (2, 1): "NS",
    }
    assert gpu.parse_p2p("        GPU0\nGPU0    X\n" + fake.LEGEND) == {}
    assert gpu.parse_p2p("") == {}


def test_states_and_processes_in_the_csv_formats() -> None:
    states = gpu.parse_gpu_states(
        "0, GPU-aaa, NVIDIA H100 80GB HBM3, 40963, 81559, 97\n"
        "1, GPU-bbb, NVIDIA H100 80GB HBM3, 0, 81559, 0\n"
        "garbage line\n"
        "2, GPU-ccc, NVIDIA H100 80GB HBM3, [N/A], [N/A], [N/A]\n"
    )
    assert [(s.index, s.uuid, s.memory_used_mib, s.utilization_pct) for s in states] == [
        (0, "GPU-aaa", 40963, 97),
        (1, "GPU-bbb", 0, 0),
        (2, "GPU-ccc", None, None),
    ]
    apps = gpu.parse_compute_apps(
        "GPU-aaa, 4242, /usr/bin/python3, 40960\nGPU-zzz, 7, ollama, [N/A]\n", states
    )
    assert apps == [
        gpu.GpuProcess(0, 4242, "/usr/bin/python3", 40960),
        gpu.GpuProcess(None, 7, "ollama", None),
    ]
    assert gpu.parse_compute_apps("", states) == []


def test_a_fake_nvidia_smi_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = fake.machine(4, p2p_ok=False, busy={2: [(31337, "python", 20480)]})
    fake.install(tmp_path / "bin", spec)
    monkeypatch.setenv("PATH", fake.on_path(tmp_path / "bin"))
    states = gpu.gpu_states()
    assert states is not None and [s.index for s in states] == [0, 1, 2, 3]
    assert states[2].memory_used_mib == 20480 and states[2].utilization_pct == 97
    assert gpu.compute_apps(states) == [gpu.GpuProcess(2, 31337, "python", 20480)]
    p2p = gpu.p2p_read()
    assert p2p is not None and len(p2p) == 12 and set(p2p.values()) == {"CNS"}
    # the GPU detection the cost model uses reads the same fake
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setattr(gpu, "ec2_instance_type", lambda: None)
    info = gpu.detect_gpus()
    assert info == gpu.GpuInfo(fake.H100, 4, "550.54.15", 81559, "nvidia-smi")


def test_no_or_failing_tool_means_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi at all
    assert gpu.gpu_states() is None and gpu.p2p_read() is None
    bad = tmp_path / "nvidia-smi"
    bad.write_text(
        "#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the driver'\nexit 9\n"
    )
    bad.chmod(0o755)
    assert gpu.gpu_states() is None and gpu.compute_apps([]) == [] and gpu.p2p_read() is None
