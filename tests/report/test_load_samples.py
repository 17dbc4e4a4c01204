"""load.py: sample files read in batches give what reading each file alone gives."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import runs as rf

from iobench.report import load
from iobench.report.diagnose import SAMPLE_COLUMNS_USED, sample_figures
from iobench.report.load import load_run, read_sample_batches, read_sample_file


def _alone(run: Path, trial_id: str, columns: tuple[str, ...] | None) -> tuple[dict, str]:
    df, problem = read_sample_file(run / "samples" / f"{trial_id}.csv", trial_id, columns)
    return ({} if df is None else {c: df[c].to_numpy() for c in df.columns}), problem


def _same(run: Path, columns: tuple[str, ...] | None) -> int:
    """Batched and file-by-file reading agree on every trial; returns how many had data."""
    ids = sorted(p.stem for p in (run / "samples").iterdir()) + ["no-such-trial"]
    got = list(read_sample_batches(run, ids, columns))
    assert [g[0] for g in got] == ids
    for trial_id, data, problem in got:
        want, want_problem = _alone(run, trial_id, columns)
        assert problem == want_problem, trial_id
        assert sorted(data or {}) == sorted(want), trial_id
        for c, values in want.items():
            assert data is not None
            assert data[c].dtype == (object if c == "phase" else np.float64), (trial_id, c)
            if c == "phase":
                assert list(data[c]) == [str(v) for v in values], trial_id
            else:
                np.testing.assert_array_equal(data[c], values.astype(float), err_msg=trial_id)
    return sum(1 for _, data, _ in got if data is not None)


def _rewrite(path: Path, edit: Callable[[bytes], bytes]) -> None:
    path.write_bytes(edit(path.read_bytes()))


def _set_cell(path: Path, row: int, column: str, value: str) -> None:
    lines = path.read_text().split("\n")
    header = lines[0].rstrip("\r").split(",")
    cells = lines[row].split(",")
    cells[header.index(column)] = value
    lines[row] = ",".join(cells)
    path.write_text("\n".join(lines))


@pytest.fixture
def odd_run(tmp_path: Path) -> Path:
    """A run whose sample files include every kind the batch must hand back to read_csv."""
    run = rf.make_run_dir(tmp_path, repeats=3)
    s = run / "samples"
    assert b"\r\n" in (s / "naive-r1.csv").read_bytes()  # the csv module's line ends
    _rewrite(s / "naive-r1.csv", lambda b: b.replace(b"\r\n", b"\n").rstrip(b"\n"))
    _rewrite(s / "naive-r2.csv", lambda b: b.replace(b"\r\n", b"\r\n\r\n", 5))
    _rewrite(s / "naive-r3.csv", lambda b: b.replace(b"\r\n", b"\r\n \r\n", 3))  # skipped
    _set_cell(s / "tmp-cache-advice-r1.csv", 40, "tree_write_bytes", "x")  # text in numbers
    _set_cell(s / "tmp-cache-advice-r2.csv", 40, "tree_write_bytes", "inf")
    _set_cell(s / "tmp-cache-advice-r2.csv", 41, "tree_dstate", "-inf")
    _set_cell(s / "tmp-cache-advice-r2.csv", 42, "phase", "")
    _rewrite(s / "tmp-cache-advice-r3.csv", lambda b: b.split(b"\r\n")[0] + b"\r\n")
    (s / "venv-local-r1.csv").unlink()
    (s / "venv-local-r2.csv").write_bytes(b"\x00\xff garbage \x00\n\x01")
    df = pd.read_csv(s / "venv-local-r3.csv").drop(columns=["tree_fswait", "phase"])
    df.to_csv(s / "venv-local-r3.csv", index=False)  # another header
    _rewrite(s / "uv-local-r1.csv", lambda b: b.replace(b",install,", b',"install",'))
    _rewrite(s / "uv-local-r2.csv", lambda b: b.replace(b"0\r\n", b"0\r", 3))  # 3 rows more
    _rewrite(s / "uv-local-r3.csv", lambda b: b.replace(b"0\r\n", b"0,7\r\n"))  # an index?
    return run


@pytest.mark.parametrize("batch_bytes", [1, 300, load.BATCH_BYTES])
@pytest.mark.parametrize("columns", [SAMPLE_COLUMNS_USED, None, ("phase", "tree_dstate")])
def test_batches_read_odd_files_as_read_csv_alone_does(
    odd_run: Path,
    monkeypatch: pytest.MonkeyPatch,
    batch_bytes: int,
    columns: tuple[str, ...] | None,
) -> None:
    monkeypatch.setattr(load, "BATCH_BYTES", batch_bytes)
    with_t = columns is None or "t" in columns  # without it, no file is usable
    assert _same(odd_run, columns) == (12 - 3 if with_t else 0)  # missing, garbage, header only


def test_a_skipped_line_and_a_split_one_never_cancel_out(tmp_path: Path) -> None:
    """read_csv skips a blank line and ends a row at a lone carriage return: in one batch,
    one file's three skipped lines and another's three extra rows would keep the count."""
    run = rf.make_run_dir(tmp_path, repeats=1)
    s = run / "samples"
    _rewrite(s / "naive-r1.csv", lambda b: b.replace(b"0\r\n", b"0\r\n \r\n", 3))
    _rewrite(s / "uv-local-r1.csv", lambda b: b.replace(b"0\r\n", b"0\r", 3))
    assert _same(run, None) == 4


def test_clean_files_share_one_read_csv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = rf.make_run_dir(tmp_path, repeats=3)
    calls: list[object] = []
    real = pd.read_csv

    def counted(*args: object, **kwargs: object) -> pd.DataFrame:
        calls.append(args[0])
        return real(*args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(pd, "read_csv", counted)
    ids = sorted(p.stem for p in (run / "samples").iterdir())
    assert all(data is not None for _, data, _ in read_sample_batches(run, ids))
    assert len(calls) == 1 and len(ids) == 12


@pytest.mark.parametrize("min_trials", [load.PARALLEL_MIN_TRIALS, 2])  # here, then forked
def test_map_sample_groups_is_map_samples_per_group(
    odd_run: Path, monkeypatch: pytest.MonkeyPatch, min_trials: int
) -> None:
    monkeypatch.setattr(load, "PARALLEL_MIN_TRIALS", min_trials)
    run = load_run(odd_run)
    ok = run.trials[run.trials["status"] == "ok"]
    groups = {str(c): list(g["trial_id"]) for c, g in ok.groupby("config", sort=False)}
    together = run.map_sample_groups(groups, SAMPLE_COLUMNS_USED, sample_figures)
    alone = load_run(odd_run)
    for config, ids in groups.items():
        each = alone.map_samples(ids, SAMPLE_COLUMNS_USED, sample_figures)
        assert repr(together[config]) == repr(each), config
    assert run.warnings == alone.warnings and len(run.warnings) == 3
    assert [len(v) for v in together.values()] == [3, 2, 1, 3]


def test_the_scans_median_and_percentile_are_numpys() -> None:
    """The per-trial figures take their medians and p95 without numpy's per-call machinery
    (series._median, _percentile): the same values, NaN and infinities included."""
    from iobench.report.series import _median, _percentile

    rng = np.random.default_rng(7)
    for n in [*range(1, 12), 66, 67, 1000, 1001]:
        for k in range(60):
            x = rng.normal(size=n) * 10.0 ** rng.integers(-4, 9)
            if k % 3 == 0:
                x = np.round(np.abs(x), 1)
            if k % 5 == 0:
                x[rng.integers(n)] = [np.nan, np.inf, -np.inf][k % 3]
            with np.errstate(invalid="ignore"):  # inf - inf, in both
                want = [np.median(x), *(np.percentile(x, q) for q in (95, 10, 0, 100))]
                got = [_median(x), *(_percentile(x, q) for q in (95, 10, 0, 100))]
            np.testing.assert_array_equal(got, want, err_msg=f"{n} {k}")
