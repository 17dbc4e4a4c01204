"""Every number from the command line is finite and in range, or one line and exit 2.

(Scenario files, profiles, meta.json and lock files have their own tests next to their
readers; this file holds the command-line side of the same class.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from iobench.__main__ import main


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--repeats", "1e8"],
        ["run", "--repeats", "100000"],
        ["run", "--sample-hz", "0.0001"],
        ["run", "--sample-hz", "inf"],
        ["run", "--stall-after", "nan"],
        ["run", "--stall-timeout", "1e300"],
        ["run", "--trial-timeout", "-1"],
        ["run", "--lock-wait", "inf"],
        ["run", "--hung-after", "0.5"],
        ["run", "--order-seed", "-1"],
        ["run", "--order-seed", "1e3"],
        ["probe", "{tmp}", "--seconds", "inf"],
        ["probe", "{tmp}", "--write-seconds", "0"],
        ["probe", "{tmp}", "--write-mb", "nan"],
        ["probe", "{tmp}", "--write-mb", "-1"],
        # issue 35 (low): accepted silently, or mounted a volume whose every create failed
        # with "Invalid argument" (a wait too long for the clock)
        ["lab", "up", "{tmp}/m", "--preset", "efs-bursting", "--size-gib", "nan"],
        ["lab", "up", "{tmp}/m", "--preset", "efs-bursting", "--size-gib", "-1"],
        ["lab", "up", "{tmp}/m", "--preset", "efs-bursting", "--size-gib", "0"],
        ["lab", "up", "{tmp}/m", "--preset", "efs-bursting", "--credits-gib", "1e308"],
        ["lab", "up", "{tmp}/m", "--preset", "efs-provisioned", "--throughput-mib-s", "1e-300"],
        ["lab", "up", "{tmp}/m", "--iops", "1e-300"],
        ["lab", "up", "{tmp}/m", "--mb-per-s", "1e-300"],
    ],
)
def test_bad_numbers_are_one_line_and_exit_2(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    results = tmp_path / "results"
    assert main([*argv, "--results", str(results)] if argv[0] == "run" else argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("iobench: error: ") and "Traceback" not in err
    assert not results.exists()  # refused before anything was created
    if argv[0] == "lab":  # the flag it refused, in one line; nothing mounted or made
        assert len(err.splitlines()) == 1 and argv[-2] in err, err
        assert not (tmp_path / "m").exists()
