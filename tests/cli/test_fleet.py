"""``iobench fleet``: the fleet model's table, its answer at the sizes asked and what it
rests on; bad input in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.lab import FUSE_REASON

from iobench.__main__ import main
from iobench.lab.testing import slow_volume


def test_a_preset_s_fleet_at_256_workers(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["fleet", "--preset", "efs-bursting", "--configs", "naive,venv-on-tmp,fan-out",
            "--workers", "1,8,256"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("fleet model: fleet on efs-bursting (35,000 IOPS")
    assert lines[2].split() == ["workers", "1", "8", "256"]
    answer = next(
        ln for ln in lines if ln.startswith("at 256 workers on efs-bursting, naive takes")
    )
    assert "venv-on-tmp" in answer and "fan-out" in answer and "(fastest: " in answer
    assert "assumptions:" in lines
    assert any("2.7 ms a write" in ln for ln in lines)  # the preset's latencies, said
    assert any("fan-out's 255 waiters" in ln for ln in lines)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ([], "give --target DIR"),
        (["--preset", "nope"], "unknown --preset 'nope'"),
        (["--preset", "efs-bursting", "--workers", "0"], "worker counts from 1"),
        (["--preset", "efs-bursting", "--configs", "nope"], "nope"),
        (["--preset", "nfs-lan", "--burst-mb-per-s", "5000"], "go together"),
        (["--preset", "efs-bursting", "--burst-mb-per-s", "5"], "above the baseline"),
        (["--preset", "nfs-lan", "--size-gib", "5"], "efs-bursting's"),
    ],
)
def test_bad_input_is_one_line_before_anything_runs(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["fleet", *argv]) == 2
    first, *rest = capsys.readouterr().err.strip().splitlines()
    assert says in first, first
    assert not rest, rest  # one line, no usage after it


@pytest.mark.lab
@pytest.mark.skipif(FUSE_REASON is not None, reason=FUSE_REASON or "")
def test_a_lab_volume_s_probe_and_its_own_caps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with slow_volume(tmp_path, latency_ms=1.0, iops=2000) as vol:
        assert main(["fleet", "--target", str(vol), "--configs", "naive", "--workers", "1,64"]) == 0
        assert list(vol.iterdir()) == []  # the probe's folder is gone
    out = capsys.readouterr().out
    assert "(2,000 IOPS)" in out.splitlines()[0]
    assert f"caps: the lab volume's own ({vol})" in out
    naive = next(ln for ln in out.splitlines() if ln.startswith("naive"))
    assert naive.endswith("iops")  # 64 installs through 2,000 operations a second


def test_the_fast_part_from_a_run_s_one_worker_trials(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--fast-from: the all-local config's measured phases stand for F: venv-on-tmp alone is
    their sum (nothing of it on the volume)."""
    import statistics

    from helpers.runs import ConfigSpec, make_run_dir

    from iobench.rundir.folder import RunDir
    from iobench.rundir.records import PHASES

    phases = {"venv": 0.5, "download": 2.0, "install": 1.0, "compile": 0.5, "import": 0.2}
    run = make_run_dir(tmp_path, configs=(ConfigSpec("venv-on-tmp", venv="tmp", tmpdir="tmp",
                       cache="tmp", phases=phases, profile="cpu"),), repeats=3)  # fmt: skip
    rows = RunDir.open(run).trials(latest_only=True)
    expect = sum(statistics.median(getattr(r, f"{p}_s") for r in rows) for p in PHASES)
    argv = ["fleet", "--preset", "efs-bursting", "--configs", "venv-on-tmp", "--workers", "1",
            "--fast-from", str(run)]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    row = next(ln for ln in out.splitlines() if ln.startswith("venv-on-tmp"))
    assert float(row.split()[1]) == pytest.approx(expect, abs=0.06)
    assert f"the fast part: {run}'s one-worker trials, median" in out
    assert main([*argv[:-2], "--fast-from", str(tmp_path)]) == 1  # not a run folder: as report
    assert "is not an iobench run directory" in capsys.readouterr().err
