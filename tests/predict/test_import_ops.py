"""tools/import_ops.py: a fresh trace of a shipped scenario's ready check reads back as the
table the model uses, close to the one shipped in opmix.toml."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iobench.predict import model

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "import_ops.py"

pytestmark = [
    pytest.mark.skipif(not TOOL.is_file(), reason="the sdist carries no tools/ (a clone's test)"),
    pytest.mark.skipif(shutil.which("strace") is None, reason="no strace (nox -s lab-deps)"),
]


@pytest.mark.venv
def test_a_fresh_trace_of_smoke_s_ready_check_is_the_shipped_table(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(TOOL), "smoke", "--tmpfs", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    fresh = tomllib.loads(out.stdout)["pip"]["imports"]["smoke"]["venv"]
    shipped = model.load_opmix("pip")["imports"]["smoke"]["venv"]
    # another interpreter's start-up (3.11.2 against 3.11.7) stats a few paths more or less
    for key in ("stat", "stat_miss", "open_read"):
        assert fresh[key] == pytest.approx(shipped[key], rel=0.25), (key, fresh, shipped)
    assert fresh["bytes_read"] == pytest.approx(shipped["bytes_read"], rel=0.5)
    assert [r for r, _ in fresh["stat_curve"]] == [r for r, _ in shipped["stat_curve"]]
    assert not list(tmp_path.iterdir())  # its venv and trace are gone
