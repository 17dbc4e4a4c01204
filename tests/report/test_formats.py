"""formats.py: the table, Markdown and JSON renderings of a summary."""

from __future__ import annotations

import json
from pathlib import Path

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
