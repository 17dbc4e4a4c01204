"""The start-up strategies' section (a run whose configs name a strategy: docs/strategies.md):
each config's first start beside its restart, what it keeps, lifecycle.csv, and the month's
cost against starts a month (lifecycle.png). The figures are ``report/lifecycle_report.py``'s,
the same the verdict's month of starts is priced with."""

from __future__ import annotations

import math

from iobench.report.lifecycle_chart import plot_lifecycle
from iobench.report.lifecycle_report import write_csv
from iobench.report.page import fragment
from iobench.report.part import Context, Part

TEMPLATE = """\
{% from "macros.html.j2" import table, img %}
<h2>Start-up strategies</h2>
{{ table(["config", "first start (s)", "restart (s)", "kept (MB)", "restart read from target (MB)", "cold"], rows, num=(1, 2, 3, 4)) }}
{% if words %}<p>{% for w in words %}{{ w }}{% if not loop.last %}<br>{% endif %}{% endfor %}</p>{% endif %}
{{ img(chart, "monthly cost against starts per month") }}
"""


def _mb(value: float) -> str:
    return "—" if math.isnan(value) else f"{value / 1e6:,.1f}"


def build(ctx: Context) -> Part | None:
    section = ctx.summary.lifecycle  # the summary built it once
    if not section.rows:
        return None
    paths = {"lifecycle_csv": write_csv(section, ctx.out / "lifecycle.csv")}
    chart = None
    if ctx.charts and section.prices is not None and len(section.figures) > 1:
        drawn = plot_lifecycle(
            section.figures, section.prices, ctx.out / "lifecycle.png", starts=section.starts,
            title=f"Monthly cost by start-up strategy — {ctx.run.scenario_name}", priced=section.priced,
        )  # fmt: skip
        chart = paths["lifecycle_png"] = drawn.path
    rows = [[r["config"], f"{r['first_s']:.2f}", f"{r['restart_s']:.2f}", _mb(r["stored_bytes"]),
             _mb(r["target_read"]), f"{r['cache_mode']} ({r['cold_method']})"] for r in section.rows]  # fmt: skip
    words = section.lines[len(section.rows) + 2 :]
    return Part("lifecycle", lines=section.lines, paths=paths,
                html=fragment(TEMPLATE, rows=rows, words=words, chart=chart))  # fmt: skip


__all__ = ["build"]
