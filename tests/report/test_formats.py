"""formats.py: the table, Markdown and JSON renderings of a summary."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from iobench.cost.idle import CostOptions
from iobench.report import build_report


def test_formats(run_dir: Path) -> None:
    result = build_report(run_dir, CostOptions(gpu="H100"), charts=False)
    md = "\n".join(result.format("markdown"))
    assert md.startswith("### iobench: torch on pod-a")
    assert "| **uv-local** |" in md and "```sh" in md and "```dockerfile" in md
    table = result.format("table")
    assert table[0].startswith("iobench report: torch on pod-a")
    assert any(line.startswith("uv-local *") for line in table)
    assert json.loads("\n".join(result.format("json")))["winner"] == "uv-local"
    assert any(line.startswith("Report: ") for line in result.console_lines)


def test_lab_notes_name_the_config_and_direction_the_lab_held() -> None:
    """Issue 39: where the lab volume delivered under 90 % of what its options allow (the
    medians of the ok trials), the report says so, per config and direction."""
    from iobench.report.formats import lab_notes

    nan = float("nan")
    trials = pd.DataFrame({
        "config": ["naive", "naive", "naive", "venv-on-tmp"],
        "status": ["ok", "ok", "failed", "ok"],
        "lab_volume": ["/mnt/efs"] * 4,
        "lab_preset": ["efs-elastic"] * 4,
        "lab_read_mb_s": [800.0, 820.0, 1.0, nan],
        "lab_read_allowed_mb_s": [1573.0, 1573.0, 1573.0, nan],
        "lab_write_mb_s": [300.0, 305.0, 1.0, 40.0],
        "lab_write_allowed_mb_s": [311.0, 311.0, 311.0, 41.0],
    })  # fmt: skip
    assert lab_notes(trials) == [
        "naive: the lab gave 810 of the preset's 1,573 MB/s to its reads (median of 2 trials), "
        "so its read figures are the lab's, not the preset's"
    ]
    off_the_lab = trials.assign(lab_volume=pd.NA, lab_read_mb_s=nan, lab_write_mb_s=nan)
    assert lab_notes(off_the_lab) == [] and lab_notes(trials.drop(columns="lab_volume")) == []
