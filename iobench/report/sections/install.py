"""The ``install`` kind's section: the time-to-ready chart and table, the bottleneck of each
config, the timelines of the median trials, what waiting costs, and — when the verdict earns
one — the start script (``iobench.report.recommend``): where the venv, TMPDIR and the cache go,
priced per start and per month."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
from markupsafe import Markup

from iobench.report import charts, diagnose, timeline_chart
from iobench.report.formats import (
    fastest_first,
    fmt_usd,
    placement,
    price_basis,
    spread_name,
    spread_text,
)
from iobench.report.page import fragment
from iobench.report.parallel import fork_map
from iobench.report.part import Context, Part, slug
from iobench.report.recommend import Recommendation, recommend
from iobench.rundir.kinds import install as rows
from iobench.rundir.records import PHASES, STALL_WORDS
from iobench.units import fmt_s, fmt_share, noise_known, noise_word

NAME = rows.NAME

#: the charts this section draws, by the name its jobs carry (a worker process draws each)
CHARTS: dict[str, Callable[..., Path | None]] = {
    "time_to_ready_chart": charts.time_to_ready_chart,
    "timeline_chart": timeline_chart.timeline_chart,
    "cost_chart": charts.cost_chart,
}


def _draw(job: tuple[str, tuple, dict]) -> Path | None:
    """One chart: ``(chart function name, args, kwargs)`` (picklable for a worker process)."""
    name, args, kwargs = job
    return CHARTS[name](*args, **kwargs)


def draw(ctx: Context) -> tuple[dict[str, Path], dict[str, Path]]:
    """time_to_ready.png, cost.png and one timeline-<config>.png per config (median trial),
    drawn side by side in worker processes when there are cores (``report.parallel``):
    (the files by key, the timelines by config)."""
    s, run, out = ctx.summary, ctx.run, ctx.out
    host, reps = run.hostname or "?", f", {s.trials_per_config()}"
    jobs: dict[str, tuple[str, tuple, dict]] = {}
    slim = run.trials[[c for c in charts.TIME_TO_READY_COLUMNS if c in run.trials.columns]]
    jobs["time_to_ready_png"] = ("time_to_ready_chart", (
        s.table, slim, s.median_trials, s.baseline, s.winner,
        f"Time-to-ready per config — {run.scenario_name} on {host}{reps}", out / "time_to_ready.png",
    ), {})  # fmt: skip
    stale = out / "cost.png"
    if s.price is None and stale.is_file():
        stale.unlink()  # made by an earlier report with a price; this one has none
    if s.price is not None:
        title = f"What waiting costs — {price_basis(s)}"
        jobs["cost_png"] = (
            "cost_chart",
            (s.table, title, s.options.starts_per_month, out / "cost.png"),
            {},
        )
    table = s.table.set_index("config")
    trials = run.trials.set_index("trial_id")
    for config, trial_id in s.median_trials.items():
        samples = run.read_samples(trial_id)
        if samples is None:
            continue
        row, trial = table.loc[config], trials.loc[trial_id]
        ttr = float(trial["time_to_ready_s"])
        sub = (f"{placement(row)} · {row['installer']} · time-to-ready {fmt_s(ttr)} "
               f"(config median {fmt_s(row['median_time_to_ready_s'])} over {int(row['n_ok'])} "
               f"trials) · {row['bottleneck']}")  # fmt: skip
        args = (samples, config, trial_id, sub, out / f"timeline-{slug(config)}.png",
                run.trial_stalls(trial_id))  # fmt: skip
        phases = {p: float(trial[f"{p}_s"]) for p in PHASES if f"{p}_s" in trial.index}
        jobs[f"timeline:{config}"] = ("timeline_chart", args, {"phases": phases, "ready_s": ttr})
    drawn = fork_map(_draw, list(jobs.values()))
    paths = {k: p for k, p in zip(jobs, drawn, strict=True) if p is not None}
    timelines = {
        k.removeprefix("timeline:"): p for k, p in paths.items() if k.startswith("timeline:")
    }
    return {k: p for k, p in paths.items() if not k.startswith("timeline:")}, timelines


def _known(value: object) -> bool | None:
    return noise_known(value if value is not pd.NA else None)


def table_rows(ctx: Context) -> tuple[list[list[object]], list[str]]:
    """The summary table's cells (fastest first) and each row's class."""
    s = ctx.summary
    sname = spread_name(s)
    cells, classes = [], []
    for _, r in fastest_first(s).iterrows():
        star = " ★" if r["config"] == s.winner else ""
        installer = f"{r['installer']}, cache {r['cache_state']}, compile {r['compile']}"
        cells.append([
            f"{r['config']}{star}", placement(r), installer,
            f"{r['n_ok']}/{r['n_ok'] + r['n_failed'] + r['n_censored']}",
            fmt_s(r["median_time_to_ready_s"]), spread_text(r, sname),
            *[fmt_s(r[f"median_{p}_s"]) for p in PHASES],
            r["vs_baseline"] or "—", noise_word(_known(r["beyond_noise_vs_baseline"])) or "—",
            fmt_usd(r["cost_per_start_usd"]), fmt_usd(r["monthly_cost_usd"]),
        ])  # fmt: skip
        classes.append(
            "winner" if r["config"] == s.winner else ("failed" if r["n_ok"] == 0 else "")
        )
    return cells, classes


#: the diagnosis's filesystem-wait column, with what it counts on hover
FS_WAIT = Markup(
    '<span title="share of samples with an installer thread in a filesystem or block-layer wait '
    '(kernel wait channel)">fs wait</span>'
)

EVIDENCE = """\
{% from "macros.html.j2" import table, lines, img %}
<h2>Time-to-ready per config</h2>
{{ img(charts.get("time_to_ready_png"), "time-to-ready per config") }}
<p class="caption">Bar length: median time-to-ready, split in proportion to the median time of each phase. Whiskers: {{ spread }} over trials. Dots: individual trials. ★ marks the verdict's winner (none when it names none); the label after each bar says how much faster or slower than the baseline it is, and whether beyond noise. The table gives the same medians.</p>
<div class="tw"><table><thead><tr>
{%- for h in headers %}<th{% if loop.index0 >= 3 and loop.index0 != headers | length - 3 %} class="num"{% endif %}>{{ h }}</th>{% endfor -%}
</tr></thead><tbody>
{%- for row in rows %}<tr{% if classes[loop.index0] %} class="{{ classes[loop.index0] }}"{% endif %}><td class="name">{{ row[0] }}</td><td>{{ lines(row[1]) }}</td><td>{{ lines(row[2]) }}</td>
{%- for c in row[3:] %}<td{% if loop.index0 != row | length - 6 %} class="num"{% endif %}>{{ c }}</td>{% endfor -%}
</tr>{% endfor -%}
</tbody></table></div>
<h2>Why: the bottleneck of each config</h2>
{{ table(["config", "bottleneck", "off CPU", fs_wait, "why (median figures)"], diagnosis, num=(2, 3)) }}
{% if charts.get("cost_png") %}<h2>What the waiting costs</h2>{{ img(charts.get("cost_png"), "cost per config") }}{% endif %}
{% if timelines %}<h2>Timelines</h2>
<p class="caption">One trial per config: its median trial (of an even number, the faster of the middle two). Shaded bands are the phases; hatched stretches are stalls the run recorded (or, for runs without stalls.csv, write gaps); a step down is a throughput drop (e.g. burst credits running out).</p>
{% for config, path in timelines.items() %}<h3>{{ config }}</h3>{{ img(path, "timeline of " ~ config) }}{% endfor %}
{% endif %}
"""

ADVICE = """\
<h2>What to set</h2>
<p>Derived from <b>{{ rec.config }}</b>, {{ rec.why }}, and the folders its roles had on this machine. The script runs with <code>bash</code> on a stock Debian 12 or Ubuntu 24.04 python3 (it makes the venv with <code>python3 -m venv</code> where the trials' way is missing), and stops at the first error.</p>
<h3>Start script (bash)</h3><pre>{{ rec.shell | join("\\n") }}</pre>
<h3>Dockerfile</h3><pre>{{ rec.dockerfile | join("\\n") }}</pre>
{% if rec.notes %}<ul class="small">{% for n in rec.notes %}<li>{{ n }}</li>{% endfor %}</ul>{% endif %}
"""

ANSWER = """\
{% for line in lines %}<p>{{ line }}</p>{% endfor %}
{% if fastest %}<p class="small">Fastest measured, {{ fastest }}: {{ how }}.</p>{% endif %}
"""

ABOUT = """\
<li><b>time-to-ready</b>: from the start of venv creation until the ready check (e.g. <code>import torch</code>) succeeds in the new venv.</li>
<li><b>GPU idle cost</b> per cold start = median time-to-ready / 3600 × pod price per hour{% if storage is not none %} plus {{ storage }} USD per GB written on the <i>target</i> role{% endif %}; per month = per start × {{ starts }} starts. {% if price %}Price: {{ price.label }}{% if price.source.startswith("http") %} (source: <a href="{{ price.source }}">{{ price.source }}</a>){% endif %}.{% else %}No price was given.{% endif %}</li>
<li><b>Bottleneck</b> rules, first match wins: CPU bound (installer on CPU ≥ {{ r.cpu }} of wall time); waiting on a filesystem (a thread in a filesystem wait in ≥ {{ r.fswait }} of samples, or in D state in ≥ {{ r.dstate }}): bandwidth bound (install-phase write rate flat near its peak, median ≥ {{ r.plateau }} of its 95th percentile, in writes of ≥ {{ r.big_kib }} KiB) or latency/metadata bound (many small writes, low MB/s); CPU bound (the machine's CPUs ≥ {{ r.busy }} busy: a loopback index's CPU is this machine's); network bound (download ≥ {{ r.network }} of the time with bytes on a network interface) or download bound (the same without: a loopback index, paced by its cap); off CPU ≥ {{ r.offcpu }} of the time: the storage rules above; else mixed. <b>fs wait</b> is the share of samples in which an installer thread slept in a filesystem or block-layer wait (its kernel wait channel); FUSE and NFS waits show there but not as CPU iowait or D state, so iowait is shown but never decides alone.</li>
<li>A <b>throughput drop</b> (e.g. burst credits running out) is a lasting fall of the install phase's write rate to under {{ r.drop }} of its earlier mean (from at least {{ r.drop_from }} MB/s), found with one least-squares change point; the timeline marks it and draws both means. A <b>stall</b> is what the run recorded (stalls.csv: {{ stall_words }} for <code>--stall-after</code> seconds); a <b>write gap</b> is a stretch of {{ r.gap }} s or more without installer writes, drawn on timelines of runs that recorded no stalls.</li>
"""


def _rules() -> dict[str, str]:
    """The bottleneck rules' thresholds, read from the code that applies them."""
    d = diagnose
    return {
        "cpu": f"{d.CPU_SHARE:.0%}", "fswait": f"{d.FSWAIT_SHARE:.0%}", "dstate": f"{d.DSTATE_SHARE:.0%}",
        "plateau": f"{d.PLATEAU:.0%}", "big_kib": str(d.BIG_WRITE // 1024), "busy": f"{d.MACHINE_BUSY:.0%}",
        "network": f"{d.NETWORK_SHARE:.0%}", "offcpu": f"{d.WAIT_OFFCPU:.0%}", "drop": f"{d.DROP_RATIO:.0%}",
        "drop_from": f"{d.MIN_DROP_MBPS:g}", "gap": f"{d.WRITE_GAP_MIN_S:g}",
    }  # fmt: skip


def answer_lines(ctx: Context, rec: Recommendation | None) -> list[str]:
    """After the verdict: what the advice saves, what it changes, the start script."""
    s = ctx.summary
    lines: list[str] = []
    if rec is not None:
        lines.append(
            rec.saving_line(s.price.label if s.price else None, s.options.starts_per_month)
        )
        if rec.changes:
            lines.append(f"Compared with {rec.baseline}: " + "; ".join(rec.changes) + ".")
        if s.cheapest and s.cheapest != s.winner and s.options.storage_usd_per_gb is not None:
            lines.append(f"Cheapest per start with metered storage: {s.cheapest}.")
    return lines


def build(ctx: Context) -> Part:
    s = ctx.summary
    rec = recommend(s, ctx.meta)
    paths, timelines = draw(ctx) if ctx.charts else ({}, {})
    cells, classes = table_rows(ctx)
    headers = ["config", "where things lived", "installer", "ok", "median", spread_name(s), *PHASES,
               f"vs {s.baseline or 'baseline'}", "noise", "$ / start", "$ / month"]  # fmt: skip
    diagnosis = [[r["config"], Markup("<b>{}</b>").format(r["bottleneck"]), fmt_share(r.get("offcpu_frac")),
                  fmt_share(r.get("fswait_frac")), r["why"]] for _, r in s.table.iterrows()]  # fmt: skip
    fastest, how = s.fastest, ""
    t = s.table.set_index("config")
    if fastest in t.index:
        w = t.loc[fastest]
        how = (f"{placement(w)}; {w['installer']}, cache {w['cache_state']}, bytecode compile "
               f"{w['compile']}. Its bottleneck: {w['bottleneck']}")  # fmt: skip
    answer = answer_lines(ctx, rec)
    return Part(
        NAME,
        answer=[*answer, *(["Set (start script, bash):", *(f"    {x}" for x in rec.shell)] if rec else [])],
        answer_html=fragment(ANSWER, lines=answer, fastest=fastest if how else None, how=how),
        advice_html=fragment(ADVICE, rec=rec) if rec is not None else Markup(),
        html=fragment(EVIDENCE, charts=paths, spread=spread_name(s), headers=headers, rows=cells,
                      classes=classes, diagnosis=diagnosis, timelines=timelines, fs_wait=FS_WAIT),
        about=fragment(ABOUT, storage=s.options.storage_usd_per_gb, starts=f"{s.options.starts_per_month:g}",
                       price=s.price, r=_rules(), stall_words=STALL_WORDS),
        paths={**paths, **{f"timeline:{c}": p for c, p in timelines.items()}},
        script=rec,
    )  # fmt: skip


__all__ = ["CHARTS", "NAME", "build", "draw"]
