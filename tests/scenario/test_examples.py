"""The example scenarios of the top-level ``scenarios/`` folder (docs/scenarios.md): each says
when to use it, and each, its ``# EDIT`` lines pointed at folders of the test's, passes
``iobench run --scenario FILE --dry-run``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "scenarios"
FILES = sorted(EXAMPLES.glob("*.toml"))


def test_the_examples_are_there_and_say_when_to_use_them() -> None:
    names = {f.stem for f in FILES}
    assert {"torch-cuda", "requirements", "my-dataset", "checkpoint-torch", "efs",
            "hf-weights"} <= names  # fmt: skip
    for f in FILES:
        assert f.read_text().startswith("# Use this "), f.name
    assert "download.pytorch.org/whl/cu" in (EXAMPLES / "torch-cuda.toml").read_text()


@pytest.mark.run
@pytest.mark.parametrize("example", FILES, ids=lambda f: f.stem)
def test_each_example_passes_a_dry_run_once_edited(example: Path, tmp_path: Path) -> None:
    target, data = tmp_path / "volume", tmp_path / "data"
    target.mkdir()
    data.mkdir()
    edited = []
    for line in example.read_text().splitlines():
        if "# EDIT" in line and "=" in line:  # the user's own folder or interpreter
            key = line.split("=", 1)[0].strip()
            line = f'{key} = "{sys.executable if key == "python" else data}"'
        edited.append(line)
    text = "\n".join(edited) + "\n"
    if "EDIT" in text:  # an EDIT comment on the line above the value
        text = re.sub(r'(# EDIT[^\n]*\n)source = "[^"]*"', rf'\1source = "{data}"', text)
    scenario = tmp_path / example.name
    scenario.write_text(text)
    argv = [sys.executable, "-m", "iobench", "run", "--scenario", str(scenario), "--dry-run",
            "--target", str(target), "--results", str(tmp_path / "results")]  # fmt: skip
    if example.stem == "requirements":
        argv += ["-r", str(EXAMPLES / "requirements.txt")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-1500:]
    assert example.stem.replace("requirements", "my-requirements") in done.stdout + done.stderr
