"""charts.py: axis choices with literal numbers."""

from __future__ import annotations

import numpy as np
import pytest

from iobench.report.charts import _fit_texts, _rate_top, _rate_width


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
