"""iobench.trial.steps: a trial always ends with a row (never an exception), and says what it does not know."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from iobench.rundir.kinds.install import Row as InstallRow
from iobench.scenario.kinds.install import InstallConfig as Config
from iobench.system.scratch import Scratch
from iobench.trial import installers
from iobench.trial.context import TrialContext, TrialSpec
from iobench.trial.installers import IndexSpec, Pip, Uv
from iobench.trial.kinds import run_trial
from iobench.trial.kinds.install import Install, label_download
from iobench.trial.outcome import Stop, check
from iobench.trial.process import PhaseResult
from iobench.trial.progress import PlainProgress
from iobench.trial.sampler import SamplerResult
from iobench.trial.steps import Trial, set_derived_fields


def _ctx(tmp_path: Path, python: str | None = None) -> TrialContext:
    roles = {"target": tmp_path / "target", "tmp": tmp_path / "tmp"}
    for p in (*roles.values(), tmp_path / "logs", tmp_path / "cwd"):
        p.mkdir()
    return TrialContext(
        run_id="run1",
        packages=["nothing-to-see"],
        ready="pass",
        roles=roles,
        scratch={r: Scratch(p, "run1").ensure().claim() for r, p in roles.items()},
        logs=tmp_path / "logs",
        cwd=tmp_path / "cwd",
        index_spec=IndexSpec(None, local=True),
        index=None,
        progress=PlainProgress(stream=io.StringIO()),
        sample_hz=10,
        stall_after=30,
        stall_timeout=None,
        trial_timeout_s=120,
        python=python,
    )


CFG = Config("naive", "target", "tmp", "off", compile="off")


@pytest.mark.venv
def test_a_failing_venv_creator_gives_a_failed_row(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, python=str(tmp_path / "no-such-python"))
    result = run_trial(ctx, TrialSpec(CFG, repeat=2, round=2, position=1))
    row = result.row
    assert row.status == "failed" and row.error.startswith("venv creation failed (exit ")
    assert row.trial_id == "naive-r2" and row.repeat == 2 and row.position == 1
    assert row.time_to_ready_s is None and row.venv_s is None  # unknown, never zero
    assert result.series is not None and row.cpu_s > 0  # the failed phase's tree still counts
    assert (tmp_path / "logs" / "naive-r2.venv.out").is_file()  # a failed phase keeps its output


def test_ctrl_c_in_a_step_is_an_interrupted_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(self: Install, trial: Trial) -> Stop | None:
        raise KeyboardInterrupt

    monkeypatch.setattr(Install, "create_venv", interrupted)
    row = run_trial(_ctx(tmp_path), TrialSpec(CFG, repeat=1)).row
    assert row.status == "interrupted" and "interrupted by the user" in row.error


def test_a_full_disk_while_making_folders_is_a_failed_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(self: Scratch, trial_id: str) -> Path:
        raise OSError(28, "No space left on device", str(self.run_root / trial_id))

    monkeypatch.setattr(Scratch, "trial_dir", full)
    result = run_trial(_ctx(tmp_path), TrialSpec(CFG, repeat=1))
    assert result.row.status == "failed" and result.row.error.startswith("ENOSPC: No space left")
    assert result.series is None  # nothing was measured


def _phase(**kw: object) -> PhaseResult:
    return PhaseResult(
        **{"phase": "install", "start_wall": 0.0, "start": 0.0, "end": 1.0, "returncode": 0, **kw}
    )


def test_check_names_why_a_phase_ended() -> None:
    assert check(_phase(), "pip") is None
    assert check(_phase(returncode=1, output="a\nb\nERROR: no such package\n"), "pip") == Stop(
        "failed", "pip failed (exit 1): a | b | ERROR: no such package"
    )
    assert check(_phase(returncode=None, stopped="stalled", error="no progress"), "pip") == Stop(
        "stalled", "install: no progress"
    )
    assert check(_phase(returncode=-9, stopped="timeout", error="past the limit"), "pip") == Stop(
        "failed", "pip: past the limit"
    )
    assert check(_phase(returncode=None, error="cannot start x: No such file"), "pip") == Stop(
        "failed", "pip: cannot start x: No such file"
    )


def test_phase_split_unknown_is_none_never_zero(tmp_path: Path) -> None:
    """A pip log that could not be written (a full disk) must not record install 0.00."""
    assert Pip().split(tmp_path / "missing.log", 100.0, 110.0, "") == (None, None)
    assert Uv().split(tmp_path / "x", 100.0, 110.0, "Resolved 2 packages in 3ms\n") == (None, None)
    log = tmp_path / "pip.log"
    log.write_text("2026-01-01T00:00:04,500 Installing collected packages: a\n")
    start = 1767225600.0  # 2026-01-01T00:00:00 UTC
    assert Pip().split(log, start, start + 10, "") == (pytest.approx(4.5), pytest.approx(5.5))
    assert Uv().split(log, 100.0, 110.0, "Installed 2 packages in 250ms\n") == (
        pytest.approx(9.75),
        0.25,
    )


def test_derived_fields_from_literal_samples() -> None:
    rows = [
        {
            "t": 0.1,
            "phase": "install",
            "iowait_pct": 10.0,
            "procs_blocked": 1,
            "tree_dstate": 0,
            "tree_fswait": 0,
            "tree_rss_bytes": 100,
        },
        {
            "t": 0.2,
            "phase": "install",
            "iowait_pct": 30.0,
            "procs_blocked": 3,
            "tree_dstate": 2,
            "tree_fswait": 1,
            "tree_rss_bytes": 300,
        },
    ]
    result = SamplerResult(rows=rows, stalls=[], self_cpu_s=0.01234, ticks=2, fs_peak={})
    row = InstallRow(
        run_id="r",
        trial_id="a-r1",
        config="a",
        repeat=1,
        status="ok",
        time_to_ready_s=4.0,
        cpu_s=1.0,
    )
    set_derived_fields(row, result)
    assert (row.offcpu_frac, row.iowait_mean_pct, row.iowait_p95_pct) == (
        0.75, 20.0, pytest.approx(29.0))  # fmt: skip
    assert (row.blocked_max, row.dstate_max, row.fswait_frac, row.rss_max_bytes) == (3, 2, 0.5, 300)
    assert row.sampler_cpu_s == 0.0123
    label_download(result, 0.15)
    assert [r["phase"] for r in rows] == ["download", "install"]
    label_download(result, None)  # an unknown split relabels nothing
    assert [r["phase"] for r in rows] == ["download", "install"]


def test_venv_contents_reads_what_a_venv_is_made_of(tmp_path: Path) -> None:
    venv = tmp_path / "v"
    (venv / "lib" / "python3.12" / "site-packages" / "pip-24.0.dist-info").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(
        "home = /usr\nversion_info = 3.12.1.final.0\nvirtualenv = 20.25.0\n"
    )
    assert installers.venv_contents(venv) == {
        "python": "3.12.1.final.0",
        "virtualenv": "20.25.0",
        "pip": "24.0",
    }
