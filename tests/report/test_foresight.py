"""The report's "Predicted and given up" section: prediction error per config, censored
medians drawn as "> X s", and a note when the named winner had given-up trials."""

from __future__ import annotations

import math

import pandas as pd

from iobench.report.page import fragment
from iobench.report.sections.foresight import TEMPLATE, build


def _trials(rows: list[tuple[str, str, float, float, float]]) -> pd.DataFrame:
    return pd.DataFrame(
        rows, columns=["config", "status", "time_to_ready_s", "predicted_s", "censored_after_s"]
    )


def test_error_is_against_the_measured_median_and_censored_medians_are_bounds() -> None:
    nan = math.nan
    df = _trials([
        ("fast", "ok", 10.0, 11.0, nan), ("fast", "ok", 12.0, 11.0, nan),
        ("slow", "censored", nan, 50.0, 33.0), ("slow", "censored", nan, 50.0, 30.0),
        ("slow", "ok", 80.0, 50.0, nan),
        ("uv", "ok", 5.0, nan, nan), ("uv", "failed", nan, nan, nan),
    ])  # fmt: skip
    s = build(df, winner="fast")
    by = {r.config: r for r in s.rows}
    assert by["fast"].measured_s == 11.0 and by["fast"].error_text == "+0.0 %"
    assert by["slow"].censored_median and by["slow"].measured_text == "> 33.0 s"
    assert math.isnan(by["slow"].error_pct)  # a median "> 33 s": the error is below +51.5 %
    assert by["slow"].error_text == "< +51.5 %"
    assert by["slow"].n_censored == 2 and by["slow"].n_ok == 1
    assert by["uv"].error_text == "—" and math.isnan(by["uv"].predicted_s)
    lines = s.lines()
    assert any(line.lstrip().startswith("slow") and "> 33.0 s" in line for line in lines)
    assert s.notes == []  # the winner had no censored trial
    rows = [[r.config, r.measured_text] for r in s.rows]
    assert "&gt; 33.0 s" in fragment(TEMPLATE, rows=rows, notes=["<b>"])  # escaped, as all text
    assert "&lt;b&gt;" in fragment(TEMPLATE, rows=rows, notes=["<b>"])


def test_a_winner_with_given_up_trials_is_said() -> None:
    nan = math.nan
    df = _trials([
        ("w", "ok", 10.0, 12.0, nan), ("w", "censored", nan, 12.0, 30.0),
        ("naive", "ok", 40.0, 35.0, nan), ("naive", "ok", 42.0, 35.0, nan),
    ])  # fmt: skip
    s = build(df, winner="w")
    assert len(s.notes) == 1 and "w, named fastest, had 1 of 2 trials given up" in s.notes[0]
    assert any(line.startswith("note: w, named fastest") for line in s.lines())


def test_nothing_shown_without_predictions_or_censored_trials() -> None:
    nan = math.nan
    s = build(_trials([("a", "ok", 1.0, nan, nan)]), winner="a")
    assert s.lines() == [] and not s.shown


def test_one_prediction_per_config_the_one_said_before_the_first_trial() -> None:
    """Issue 21: a run printed 1.8 s before its trials and 1.6 s after (the table took the
    median of the per-trial re-predictions); meta.json's predicted_s is the figure now."""
    df = _trials([("a", "ok", 2.0, 1.6, math.nan), ("a", "ok", 2.2, 1.5, math.nan)])
    assert build(df, None).rows[0].predicted_s == 1.55  # a run from before the key
    assert build(df, None, {"a": 1.8}).rows[0].predicted_s == 1.8
