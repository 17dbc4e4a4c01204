"""charts.py: axis choices with literal numbers."""

from __future__ import annotations

import numpy as np
import pytest

from iobench.report.charts import _fit_texts
from iobench.report.load import PHASES
from iobench.report.timeline_chart import _rate_top, _rate_width


def test_timeline_axis_clips_one_off_peaks_but_not_plateaus() -> None:
    steady = np.array([3.0] * 50 + [50.0])  # one spike: clipped at 1.2 x p95
    assert _rate_top(steady) == pytest.approx(3.6)
    assert _rate_top(steady, floor=1.5 * 4.0) == pytest.approx(7.2)  # a drop's level stays in
    assert _rate_top(np.array([3.0] * 40 + [50.0] * 11)) is None  # a plateau is not a peak
    assert _rate_top(np.array([1.0, 80.0])) is None  # too few points to judge
    t = np.arange(0, 30, 0.1)
    assert _rate_width(t, 0.2) == 0.5 and _rate_width(np.arange(0, 600, 0.1), 5) == 5
    assert _rate_width(np.arange(0, 1.8, 0.1), 0.2) == 0.2  # a 1.8-s trial keeps its bins


def test_labels_right_of_the_bars_fit_inside_the_axes() -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 3))
    ax = fig.add_subplot()
    ax.set_xlim(0, 10)
    label = ax.text(9.0, 0, "  8.3 s  1.09x slower, within noise", va="center", fontsize=9)
    _fit_texts(ax, [label])
    renderer = FigureCanvasAgg(fig).get_renderer()
    assert label.get_window_extent(renderer).x1 <= ax.get_window_extent(renderer).x1
    assert ax.get_xlim()[1] > 10  # it had to widen: the label ran past 10 before


def test_configs_given_up_are_drawn_slowest_with_their_bounds(tmp_path) -> None:
    """A config whose every trial was given up (--give-up-after) has no median, only a bound:
    the chart still draws it (a hatched bar to the bound), below the finished ones; a config
    with some trials given up keeps its place by its median."""
    import math

    import pandas as pd

    from iobench.report.charts import drawn_rows, time_to_ready_chart

    nan = math.nan
    table = pd.DataFrame(
        {
            "config": ["naive", "tmp-fix", "venv-on-tmp", "broken"],
            "n_ok": [0, 1, 2, 0],
            "n_censored": [2, 1, 0, 0],
            "given_up_after_s": [40.0, 30.0, nan, nan],
            "median_time_to_ready_s": [nan, 20.0, 5.0, nan],
            "min_time_to_ready_s": [nan, 20.0, 4.0, nan],
            "max_time_to_ready_s": [nan, 20.0, 6.0, nan],
            "p10_time_to_ready_s": [nan, 20.0, 4.2, nan],
            "p90_time_to_ready_s": [nan, 20.0, 5.8, nan],
            "speedup_vs_baseline": [nan, 2.0, 8.0, nan],
            "vs_baseline": ["baseline", "> 2.00x", "> 8.00x", ""],
        }
    )
    assert list(drawn_rows(table)["config"]) == ["naive", "tmp-fix", "venv-on-tmp"]
    trials = pd.DataFrame(
        {
            "config": ["naive", "naive", "tmp-fix", "tmp-fix", "venv-on-tmp", "venv-on-tmp"],
            "status": ["censored", "censored", "ok", "censored", "ok", "ok"],
            "time_to_ready_s": [nan, nan, 20.0, nan, 4.0, 6.0],
            "censored_after_s": [38.0, 42.0, nan, 30.0, nan, nan],
            **{f"{p}_s": [nan, nan, 4.0, nan, 1.0, 1.2] for p in PHASES},
        }
    )
    png = time_to_ready_chart(table, trials, {}, "naive", "venv-on-tmp", "t", tmp_path / "t.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_phase_no_sample_saw_still_gets_its_band_and_the_axis_reaches_ready() -> None:
    """Issue 21: short trials' timelines dropped the compile and import bands (no 10 Hz
    sample fell in a 0.05 s import) and ended at the last sample, before time-to-ready."""
    from iobench.report.timeline_chart import _complete_spans

    spans = [
        ("venv", 0.0, 0.5),
        ("download", 0.5, 1.8),
        ("install", 1.8, 2.2),
        ("compile", 2.2, 2.5),
    ]
    out = _complete_spans(spans, {"venv": 0.5, "import": 0.05, "compile": 0.3})
    assert out[-1][0] == "import" and out[-1][1] == 2.5 and abs(out[-1][2] - 2.55) < 1e-9
    out = _complete_spans(spans[:3], {"compile": 0.3, "import": 0.05})
    assert [n for n, _, _ in out][-2:] == ["compile", "import"] and out[-1][1] == out[-2][2]


def test_control_characters_of_a_received_label_never_reach_the_terminal(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Before: a run label holding ESC, BEL, CR or BS went into a chart's text; the font has
    no glyph for them and matplotlib's warning printed each one raw to the terminal."""
    import warnings

    import pandas as pd

    from iobench.report.charts import compare_chart, tex_escape

    label = "x\u001b]0;pwned\u0007\u001b[2J\r\bZ"
    assert tex_escape(f"{label} $5\nnext") == "x\\x1b]0;pwned\\x07\\x1b[2J\\x0d\\x08Z \\$5\nnext"
    merged = pd.DataFrame({"config": ["a"], "run_label": [label], "n_ok": [3],
                           "median": [2.0], "low": [1.5], "high": [2.5], "ratio_vs_ref": [1.0]})  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a missing glyph would be a UserWarning
        compare_chart(merged, [label], f"compare {label}", tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 0
