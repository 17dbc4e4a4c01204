"""Cost model, price presets and GPU detection, with hand-made numbers and a fake nvidia-smi."""

from __future__ import annotations

import argparse
import math
import os
import re
import stat
import sys
import types
from pathlib import Path

import pytest

from iobench.cli.cost import add_cost_arguments, cost_options_from_args
from iobench.cost import prices
from iobench.cost.idle import (
    CostOptions,
    idle_cost_usd,
    monthly_usd,
    resolve_price,
    storage_cost_usd,
)
from iobench.cost.prices import find_preset, format_usd, load_presets, match_detected
from iobench.errors import IOBenchError, UsageError
from iobench.rundir.meta import GpuInfo
from iobench.system import gpu
from iobench.system.gpu import detect_gpus, ec2_instance_type, parse_nvidia_smi

# --- the price table ---------------------------------------------------------------------------


def test_presets_cover_the_issue_and_every_row_is_sourced_and_dated() -> None:
    names = {p.name for p in load_presets()}
    for required in (
        "RTX 4090",
        "A100 PCIe 80GB",
        "H100 SXM",
        "H200",
        "g5.12xlarge",
        "p4d.24xlarge",
        "p5.48xlarge",
    ):
        assert required in names
    for p in load_presets():
        assert p.usd_per_hour > 0 and p.gpus >= 1, p
        assert p.kind in ("gpu", "instance"), p
        assert p.source.startswith("https://"), p
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", p.date), p
        assert p.provider
    p5 = find_preset("p5.48xlarge")
    assert p5.kind == "instance" and p5.gpus == 8
    assert p5.usd_per_gpu_hour == pytest.approx(p5.usd_per_hour / 8)


@pytest.mark.parametrize(
    ("typed", "name"),
    [
        ("H100", "H100 SXM"),
        ("h100 pcie", "H100 PCIe"),
        ("RTX4090", "RTX 4090"),
        ("rtx 4090", "RTX 4090"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("a100", "A100 PCIe 80GB"),
        ("A100 SXM", "A100 SXM 80GB"),
        ("h200", "H200"),
        ("P5.48XLARGE", "p5.48xlarge"),
        ("p4d", "p4d.24xlarge"),
    ],
)
def test_find_preset_is_case_insensitive_and_takes_aliases(typed: str, name: str) -> None:
    assert find_preset(typed).name == name


def test_unknown_gpu_lists_the_known_names() -> None:
    with pytest.raises(UsageError) as err:
        find_preset("Voodoo5")
    msg = str(err.value)
    assert "unknown --gpu 'Voodoo5'" in msg
    for name in ("RTX 4090", "H100 SXM", "H200", "p5.48xlarge"):
        assert name in msg
    assert "\n" not in msg


def test_ambiguous_alias_names_the_candidates() -> None:
    with pytest.raises(UsageError, match="ambiguous.*g5.xlarge.*g5.12xlarge"):
        find_preset("a10g")


# --- options and validation --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"gpu_price": -1.0}, "--gpu-price must not be negative"),
        ({"storage_usd_per_gb": -0.1}, "--storage-usd-per-gb must not be negative"),
        ({"starts_per_month": -5.0}, "--starts-per-month must not be negative"),
        ({"gpus": 0}, "--gpus must be a whole number of at least 1"),
        ({"gpu": "nope"}, "unknown --gpu 'nope'"),
        ({"gpu_price": math.nan}, "--gpu-price must be a number"),
    ],
)
def test_cost_options_refuse_bad_values(kwargs: dict, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        CostOptions(**kwargs)


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_cost_arguments(parser)
    return parser.parse_args(argv)


def test_cost_arguments_parse_and_validate() -> None:
    opts = cost_options_from_args(
        _parse(
            [
                "--gpu",
                "h100",
                "--gpus",
                "4",
                "--starts-per-month",
                "120",
                "--storage-usd-per-gb",
                "0.07",
            ]
        )
    )
    assert opts == CostOptions(gpu="h100", gpus=4, starts_per_month=120.0, storage_usd_per_gb=0.07)
    assert cost_options_from_args(_parse([])).starts_per_month == prices.DEFAULT_STARTS_PER_MONTH
    with pytest.raises(UsageError, match="--gpu-price must not be negative"):
        cost_options_from_args(_parse(["--gpu-price", "-1"]))
    with pytest.raises(UsageError, match="--gpu-price wants a price"):
        cost_options_from_args(_parse(["--gpu-price", "abc"]))
    with pytest.raises(UsageError, match="--gpus wants a whole number"):
        cost_options_from_args(_parse(["--gpus", "1.5"]))


# --- the model -------------------------------------------------------------------------------


def test_cost_model_with_literal_numbers() -> None:
    assert idle_cost_usd(3600, 2.0) == pytest.approx(2.0)
    assert idle_cost_usd(90, 2.69 * 8) == pytest.approx(90 / 3600 * 21.52)
    assert storage_cost_usd(2e9, 0.1) == pytest.approx(0.2)
    assert storage_cost_usd(-5, 0.1) == 0.0
    assert monthly_usd(0.25, 30) == pytest.approx(7.5)


@pytest.mark.parametrize(
    ("x", "text"),
    [
        (12.345, "$12.35"),
        (0.5632, "$0.563"),
        (0.000056, "$0.000056"),
        (0.0017, "$0.0017"),
        (0, "$0"),
        (math.nan, "—"),
    ],
)
def test_format_usd(x: float, text: str) -> None:
    assert format_usd(x) == text


def test_resolve_price_order_and_notes() -> None:
    h100 = GpuInfo("NVIDIA H100 80GB HBM3", 2, "570.86", source="nvidia-smi")
    # an explicit price wins, per GPU-hour, times the detected count
    choice, notes = resolve_price(CostOptions(gpu_price=3.0), h100)
    assert choice is not None and choice.usd_per_hour == pytest.approx(6.0) and choice.gpus == 2
    assert notes == []
    # a preset by name, times --gpus
    choice, _ = resolve_price(CostOptions(gpu="H200", gpus=4), None)
    assert choice is not None and choice.usd_per_hour == pytest.approx(
        4 * find_preset("H200").usd_per_hour
    )
    # a whole instance bills whole; --gpus does not change it, and a note says so
    choice, notes = resolve_price(CostOptions(gpu="p5.48xlarge", gpus=2), None)
    assert choice is not None and choice.usd_per_hour == find_preset("p5.48xlarge").usd_per_hour
    assert any("billed as a whole instance" in n for n in notes)
    # nothing given: the detected GPU's preset, and a note that says so
    choice, notes = resolve_price(CostOptions(), h100)
    assert choice is not None and choice.preset is not None and choice.preset.name == "H100 SXM"
    assert choice.usd_per_hour == pytest.approx(2 * find_preset("H100 SXM").usd_per_hour)
    assert "detected 2x NVIDIA H100 80GB HBM3" in notes[0] and "using preset H100 SXM" in notes[0]
    # a GPU without a preset, and no GPU at all: no price, and the next step
    choice, notes = resolve_price(CostOptions(), GpuInfo("NVIDIA Tesla T4", 1))
    assert choice is None and "no price preset" in notes[0]
    choice, notes = resolve_price(CostOptions(), None)
    assert choice is None and "--gpu NAME" in notes[0]


@pytest.mark.parametrize(
    ("info", "name", "how"),
    [
        (GpuInfo("NVIDIA H100 80GB HBM3", 8), "H100 SXM", "exact"),
        (GpuInfo("NVIDIA GeForce RTX 4090", 1), "RTX 4090", "exact"),
        (GpuInfo("NVIDIA A100-SXM4-80GB", 1), "A100 SXM 80GB", "exact"),
        (GpuInfo("NVIDIA A10G", 4), "g5.12xlarge", "exact"),
        (GpuInfo("NVIDIA A10G", 1), "g5.xlarge", "exact"),
        (
            GpuInfo("NVIDIA H100 80GB HBM3", 8, instance_type="p5.48xlarge"),
            "p5.48xlarge",
            "instance",
        ),
        (GpuInfo("NVIDIA H100 PCIe", 1), "H100 PCIe", "exact"),
        (GpuInfo("NVIDIA H100 NVL", 1), "H100 SXM", "closest"),
    ],
)
def test_match_detected(info: GpuInfo, name: str, how: str) -> None:
    preset, matched = match_detected(info)
    assert preset is not None and preset.name == name and matched == how


# --- GPU detection ---------------------------------------------------------------------------


def test_parse_nvidia_smi_with_and_without_units() -> None:
    text = "NVIDIA H100 80GB HBM3, 570.86.15, 81559 MiB\nNVIDIA H100 80GB HBM3, 570.86.15, 81559\n"
    info = parse_nvidia_smi(text)
    assert info == GpuInfo("NVIDIA H100 80GB HBM3", 2, "570.86.15", 81559, "nvidia-smi")
    assert parse_nvidia_smi("") is None
    assert parse_nvidia_smi("garbage") is None


def _fake_tool(bin_dir: Path, body: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / "nvidia-smi"
    tool.write_text("#!/bin/sh\n" + body)
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `import pynvml` fail, whatever is installed."""
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setattr(gpu, "ec2_instance_type", lambda: None)


def test_detect_with_a_fake_nvidia_smi(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_nvml: None
) -> None:
    _fake_tool(
        tmp_path / "bin",
        'case "$*" in *--query-gpu=name,driver_version,memory.total*) '
        'printf "NVIDIA GeForce RTX 4090, 565.57.01, 24564 MiB\\n";; *) exit 3;; esac\n',
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    info = detect_gpus()
    assert info == GpuInfo("NVIDIA GeForce RTX 4090", 1, "565.57.01", 24564, "nvidia-smi")
    meta = info.to_meta()
    assert meta == {
        "name": "NVIDIA GeForce RTX 4090",
        "count": 1,
        "driver": "565.57.01",
        "source": "nvidia-smi",
        "memory_mib": 24564,
    }
    assert GpuInfo.from_meta(meta) == info


def test_detect_gives_none_when_the_tool_fails_or_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_nvml: None
) -> None:
    _fake_tool(tmp_path / "bin", 'echo "NVIDIA-SMI has failed" >&2; exit 9\n')
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert detect_gpus() is None
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert detect_gpus() is None


def test_detect_prefers_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("pynvml")
    fake.nvmlInit = lambda: None  # type: ignore[attr-defined]
    fake.nvmlShutdown = lambda: None  # type: ignore[attr-defined]
    fake.nvmlSystemGetDriverVersion = lambda: b"570.86.15"  # type: ignore[attr-defined]
    fake.nvmlDeviceGetCount = lambda: 8  # type: ignore[attr-defined]
    fake.nvmlDeviceGetHandleByIndex = lambda i: i  # type: ignore[attr-defined]
    fake.nvmlDeviceGetName = lambda h: "NVIDIA H200"  # type: ignore[attr-defined]
    fake.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=143771 * 1024 * 1024)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(gpu, "ec2_instance_type", lambda: "p5en.48xlarge")
    info = detect_gpus()
    assert info == GpuInfo("NVIDIA H200", 8, "570.86.15", 143771, "nvml", "p5en.48xlarge")


def test_ec2_instance_type_from_dmi(tmp_path: Path) -> None:
    (tmp_path / "sys_vendor").write_text("Amazon EC2\n")
    (tmp_path / "product_name").write_text("p4d.24xlarge\n")
    assert ec2_instance_type(tmp_path) == "p4d.24xlarge"
    (tmp_path / "sys_vendor").write_text("QEMU\n")
    assert ec2_instance_type(tmp_path) is None
    assert ec2_instance_type(tmp_path / "missing") is None


def test_gpu_from_meta_tolerates_partial_data() -> None:
    assert GpuInfo.from_meta(None) is None
    assert GpuInfo.from_meta({"name": ""}) is None
    assert GpuInfo.from_meta({"name": "NVIDIA H100 PCIe", "count": "x"}) == GpuInfo(
        "NVIDIA H100 PCIe", 1, source="meta"
    )


def test_errors_are_iobench_errors() -> None:
    assert issubclass(UsageError, IOBenchError)
