"""What --fleet checks before anything starts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import standin

from iobench.__main__ import main


def test_fleet_without_mpi4py_names_the_install_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # import mpi4py: ImportError
    path = standin.scenario(tmp_path, configs=standin.NAIVE)
    rc = main(["run", "--fleet", *standin.argv(tmp_path, path)[1:]])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert err[0].startswith("iobench: error: --fleet")
    assert "apt-get install openmpi-bin libopenmpi-dev" in err[0] and "iobench[fleet]" in err[0]
    assert not (tmp_path / "results").exists()  # nothing started
