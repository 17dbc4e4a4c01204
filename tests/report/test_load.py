"""load.py: reading run directories (the resumed-row rule)."""

from __future__ import annotations

import math

import pandas as pd

from iobench.report.load import drop_superseded


def test_drop_superseded_with_literal_rows() -> None:
    trials = pd.DataFrame({
        "trial_id": ["a-r1", "b-r1", "a-r1", "c-r1", "d-r1", "d-r1", "d-r1"],
        "status": ["interrupted", "ok", "ok", "interrupted", "interrupted", "interrupted", "failed"],
        "time_to_ready_s": [math.nan, 2.0, 3.0, math.nan, math.nan, math.nan, math.nan],
    })  # fmt: skip
    kept, resumed = drop_superseded(trials)
    assert list(zip(kept["trial_id"], kept["status"], strict=True)) == [
        ("b-r1", "ok"), ("a-r1", "ok"), ("c-r1", "interrupted"), ("d-r1", "failed"),
    ]  # fmt: skip
    assert resumed == ["a-r1", "d-r1"]
    same, none = drop_superseded(trials.drop_duplicates("trial_id"))
    assert len(same) == 4 and none == []
