"""Each kind answers its own question, told end to end on the lab (issue 36's stories): a
training set on a Bursting volume whose credits run out, the same on an Elastic one that bills
its reads, what `iobench report` rebuilds of them and what `iobench compare` says of the two.
Small sets, so that the volume and the accelerator set the figures in seconds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.files import only_run_dir
from helpers.lab import needs_fuse, volume_factory

from iobench.__main__ import main

volume = pytest.fixture(volume_factory)

#: 12 MB in 24 files, batches of 4: 6 batches an epoch, 20 ms of compute each (0.12 s)
SCENARIO = """[scenario]
name = "story"
kind = "dataset"
repeats = 3

[workload]
files = 24
file_mb = 0.5
batch = 4
workers = 2
compute_ms = 20

[configs.from-volume]
data = "target"

[configs.copy-to-tmp]
data = "target"
stage = "tmp"
"""


def _words(text: str) -> str:
    """The console wraps to the terminal's width: its words, one space apart."""
    return " ".join(text.split())


def _run(tmp_path: Path, target: Path, storage: str, label: str) -> tuple[Path, list[str]]:
    path = tmp_path / "story.toml"
    path.write_text(SCENARIO)
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    results = tmp_path / f"results-{label}"
    argv = ["run", "--scenario", str(path), "--target", str(target), "--tmp", str(tmp),
            "--results", str(results), "--gpu", "H100", "--storage", storage, "--label", label,
            "--no-probe"]  # fmt: skip
    return results, argv


@needs_fuse
@pytest.mark.slow
def test_bursting_and_elastic_each_say_what_a_month_of_training_costs(
    tmp_path: Path, volume, capsys: pytest.CaptureFixture[str]
) -> None:
    bursting = volume("bursting", latency_ms=0.2, data_latency_ms=0.2, mb_per_s=3,
                      burst_mb_per_s=30, burst_credits_mb=4)  # fmt: skip
    results, argv = _run(tmp_path, bursting, "efs-bursting", "bursting")
    assert main(argv) == 0
    out = _words(capsys.readouterr().out)
    burst_dir = only_run_dir(results)
    # the headline advises the cheaper placement, in dollars, and says when the credits ran out
    assert "copy-to-tmp is" in out and "cheaper than from-volume" in out and "/month" in out, out
    assert "ran out of burst credits" in out or "no burst credits left" in out, out
    assert "EFS Provisioned at" in out and "EFS Elastic" in out, out  # the remedies, priced
    said = json.loads((burst_dir / "summary.json").read_text())
    assert said["winner"] == "copy-to-tmp" and said["measure"]["unit"] == "$"
    headline = _words(said["verdict"]["headline"])

    elastic = volume("elastic", latency_ms=0.2, data_latency_ms=0.2)
    results, argv = _run(tmp_path, elastic, "efs-elastic", "elastic")
    assert main(argv) == 0
    out = _words(capsys.readouterr().out)
    elastic_dir = only_run_dir(results)
    # every config keeps the accelerator busy; reading in place is billed every epoch's reads
    assert "copy-to-tmp is" in out and "cheaper than from-volume" in out, out
    assert "of read charges ($0.03/GB)" in out, out

    # a report rebuilt later says the same dollars: the run kept its prices (meta.json)
    assert json.loads((burst_dir / "meta.json").read_text())["pricing"]["gpu"] == "H100"
    assert main(["report", str(burst_dir)]) == 0
    again = _words(capsys.readouterr().out)
    assert headline in again and "$" in again
    rebuilt = json.loads((burst_dir / "summary.json").read_text())
    assert rebuilt["verdict"]["headline"] == headline and rebuilt["winner"] == "copy-to-tmp"
    html = (burst_dir / "report.html").read_text()
    assert "copy-to-tmp is" in html and "/month" in html and "★" in html

    # compare speaks the kind's figure: AU and dollars a month, not time-to-ready
    assert main(["compare", str(burst_dir), str(elastic_dir), "--out", str(tmp_path / "cmp")]) == 0
    table = _words(capsys.readouterr().out)
    assert "a month of training" in table and "AU" in table and "/month" in table, table
    assert "time-to-ready" not in table
