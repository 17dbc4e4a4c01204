"""report.html: one self-contained page (charts inlined as data URIs, no network needed).

Reads top-down the way a newcomer asks: what wins and what to set (the answer first),
then the evidence (charts, table, diagnosis), then the machine and the method.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from iobench import __version__
from iobench.report.formats import fmt_s, fmt_usd, fmt_x, placement
from iobench.report.load import PHASES
from iobench.report.recommend import Recommendation
from iobench.report.summary import Summary

CSS = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1a1a1a;
       margin: 0; background: #fafafa; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 32px 48px; background: white; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 20px; margin: 36px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 16px; margin: 20px 0 6px; }
.sub { color: #555; margin: 0 0 16px; }
.answer { background: #eef7f2; border-left: 6px solid #009E73; padding: 14px 18px; margin: 16px 0; }
.answer p { margin: 4px 0; }
.answer .big { font-size: 18px; font-weight: 600; }
.warn { background: #fff6e5; border-left: 6px solid #E69F00; padding: 8px 14px; margin: 12px 0; }
.cols { display: flex; gap: 18px; flex-wrap: wrap; }
.cols > div { flex: 1 1 420px; min-width: 0; }
pre { background: #f3f3f3; border: 1px solid #ddd; border-radius: 4px; padding: 10px 12px;
      overflow-x: auto; font: 13px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
table { border-collapse: collapse; width: 100%; font-size: 13px; margin: 8px 0; }
th, td { border-bottom: 1px solid #e3e3e3; padding: 5px 7px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; font-weight: 600; }
td.num { text-align: right; white-space: nowrap; }
th.num { text-align: right; }
tr.winner td { background: #eef7f2; font-weight: 600; }
tr.failed td { color: #888; }
img { max-width: 100%; height: auto; display: block; margin: 8px 0 4px; }
.caption { color: #555; font-size: 13px; margin: 0 0 16px; }
.small { font-size: 13px; color: #555; }
code { font: 13px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: #f3f3f3;
       padding: 0 3px; border-radius: 3px; }
footer { margin-top: 40px; color: #777; font-size: 12px; }
"""


def e(value: Any) -> str:
    """HTML-escape anything (None becomes an em dash)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return html.escape(str(value))


def data_uri(path: Path) -> str:
    """A PNG as a data URI, so the page needs no other file."""
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def img(path: Path | None, alt: str) -> str:
    """An inline <img>, or nothing when the chart was not made."""
    if path is None or not Path(path).is_file():
        return ""
    return f'<img src="{data_uri(Path(path))}" alt="{e(alt)}">'


def table_html(
    headers: list[str],
    rows: Iterable[list[str]],
    num: set[int] | None = None,
    row_classes: Iterable[str] | None = None,
) -> str:
    """A simple table; cells are already-escaped HTML."""
    num = num or set()
    head = "".join(
        f'<th class="num">{h}</th>' if i in num else f"<th>{h}</th>" for i, h in enumerate(headers)
    )
    body = []
    classes = list(row_classes) if row_classes is not None else None
    for k, row in enumerate(rows):
        cls = f' class="{classes[k]}"' if classes and classes[k] else ""
        cells = "".join(
            f'<td class="num">{c}</td>' if i in num else f"<td>{c}</td>" for i, c in enumerate(row)
        )
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def page(title: str, body: str, rebuild: str = "iobench report RUN_DIR") -> str:
    """A whole HTML document with the inline stylesheet (no external resources)."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{e(title)}</title>'
        f"<style>{CSS}</style></head><body><main>{body}"
        f"<footer>Made by iobench {e(__version__)} from the run directory alone; "
        f"rebuild any time with <code>{e(rebuild)}</code>.</footer></main></body></html>\n"
    )


def _bytes(n: Any) -> str:
    try:
        x = float(n)
    except (TypeError, ValueError):
        return "—"
    if not math.isfinite(x):
        return "—"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(x) < 1000 or unit == "TB":
            return f"{x:.0f} {unit}" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1000
    return f"{x:.1f} TB"


def summary_table_html(summary: Summary) -> str:
    """The summary table, fastest first, winner highlighted."""
    t = summary.table.copy()
    t["_k"] = t["median_time_to_ready_s"].fillna(math.inf)
    t = t.sort_values("_k", kind="stable")
    headers = [
        "config",
        "where things lived",
        "installer",
        "ok",
        "median",
        "p10–p90",
        *PHASES,
        f"speed-up vs {e(summary.baseline or 'baseline')}",
        "$ / start",
        "$ / month",
    ]
    rows, classes = [], []
    for _, r in t.iterrows():
        spread = (
            f"{r['p10_time_to_ready_s']:.1f}–{r['p90_time_to_ready_s']:.1f} s"
            if math.isfinite(r["p10_time_to_ready_s"])
            else "—"
        )
        star = " ★" if r["config"] == summary.winner else ""
        installer = f"{r['installer']}, cache {r['cache_state']}, compile {r['compile']}"
        rows.append(
            [
                e(r["config"]) + star,
                e(placement(r)),
                e(installer),
                f"{r['n_ok']}/{r['n_ok'] + r['n_failed']}",
                e(fmt_s(r["median_time_to_ready_s"])),
                e(spread),
                *[e(fmt_s(r[f"median_{p}_s"])) for p in PHASES],
                e(fmt_x(r["speedup_vs_naive"])),
                e(fmt_usd(r["cost_per_start_usd"])),
                e(fmt_usd(r["monthly_cost_usd"], 2)),
            ]
        )
        classes.append(
            "winner" if r["config"] == summary.winner else ("failed" if r["n_ok"] == 0 else "")
        )
    num = set(range(3, len(headers)))
    return table_html(headers, rows, num, classes)


def _share(x: Any) -> str:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return "—"
    return f"{100 * v:.0f}%" if math.isfinite(v) else "—"


def diagnosis_html(summary: Summary) -> str:
    """Bottleneck and the figures behind it, per config (off CPU and filesystem wait as
    columns: the two shares that tell a slow volume from a busy CPU at a glance)."""
    rows = [
        [
            e(r["config"]),
            f"<b>{e(r['bottleneck'])}</b>",
            e(_share(r.get("offcpu_frac"))),
            e(_share(r.get("fswait_frac"))),
            e(r["why"]),
        ]
        for _, r in summary.table.iterrows()
    ]
    headers = [
        "config",
        "bottleneck",
        "off CPU",
        '<span title="share of samples with an installer thread in a filesystem or '
        'block-layer wait (kernel wait channel)">fs wait</span>',
        "why (median figures)",
    ]
    return table_html(headers, rows, num={2, 3})


def roles_html(meta: dict[str, Any]) -> str:
    """The places under test with their filesystem facts."""
    roles = meta.get("roles") or {}
    rows = []
    for name, r in roles.items():
        r = r if isinstance(r, dict) else {}
        rows.append(
            [
                f"<b>{e(name)}</b>",
                f"<code>{e(r.get('path'))}</code>",
                e(r.get("fstype")),
                e(r.get("device")),
                e(r.get("mountpoint")),
                e(r.get("mount_options")),
                e(_bytes(r.get("free_bytes"))) + " of " + e(_bytes(r.get("total_bytes"))),
            ]
        )
    return table_html(
        ["role", "path", "filesystem", "device", "mount point", "options", "free"], rows
    )


def host_html(meta: dict[str, Any]) -> str:
    """Host, GPU, versions and index: enough to tell two pods apart."""
    host = meta.get("host") or {}
    versions = meta.get("versions") or {}
    gpu = meta.get("gpu") or {}
    index = meta.get("index") or {}
    items = [
        ("host", host.get("hostname")),
        ("platform", host.get("platform")),
        ("CPU", f"{host.get('cpu_count', '?')} x {host.get('cpu_model', '?')}"),
        ("memory", _bytes(host.get("memory_bytes"))),
        (
            "GPU",
            f"{gpu.get('count', 1)} x {gpu.get('name')} (driver {gpu.get('driver') or '?'})"
            if gpu
            else "none detected",
        ),
        ("versions", ", ".join(f"{k} {v}" for k, v in versions.items() if v)),
        ("package index", f"{index.get('kind', '?')} {index.get('url') or ''}".strip()),
        ("sampling", f"{meta.get('sample_hz', '?')} Hz"),
    ]
    rows = "".join(f"<tr><td><b>{e(k)}</b></td><td>{e(v)}</td></tr>" for k, v in items)
    return f"<table><tbody>{rows}</tbody></table>"


def roles_line(meta: dict[str, Any]) -> str:
    """``target = /workspace (nfs4) · tmp = /tmp (overlay)``: the words the tables use."""
    roles = meta.get("roles") or {}
    bits = [
        f"<b>{e(n)}</b> = <code>{e((r or {}).get('path'))}</code> ({e((r or {}).get('fstype'))})"
        for n, r in roles.items()
        if isinstance(r, dict)
    ]
    return "Roles: " + " · ".join(bits) if bits else ""


def answer_html(summary: Summary, rec: Recommendation | None) -> str:
    """The answer box: winner, saving, caution when within noise, what changed."""
    if rec is None:
        return (
            '<div class="warn">No configuration finished successfully; nothing to recommend.</div>'
        )
    label = summary.price.label if summary.price else None
    parts = [f'<p class="big">{e(rec.headline(label, summary.options.starts_per_month))}</p>']
    if summary.within_noise:
        parts.append(
            "<p><b>Caution: within the noise.</b> The fastest config's and the baseline's p10–p90 "
            "ranges overlap, so this saving may not be real; run more repeats "
            "(<code>iobench run --repeats N</code>) before changing anything.</p>"
        )
    if summary.price is None:
        parts.append(
            '<p class="small">No GPU price known: pass <code>--gpu NAME</code> or '
            "<code>--gpu-price USD</code> to <code>iobench report</code> to see dollars.</p>"
        )
    t = summary.table.set_index("config")
    if summary.winner and summary.winner in t.index:
        w = t.loc[summary.winner]
        if rec.changes:
            parts.append(
                f"<p>Compared with {e(rec.baseline)}: " + e("; ".join(rec.changes)) + ".</p>"
            )
        parts.append(
            f'<p class="small">Where it lived: {e(placement(w))}; {e(w["installer"])}, cache '
            f"{e(w['cache_state'])}, bytecode compile {e(w['compile'])}. "
            f"Its bottleneck: {e(w['bottleneck'])}.</p>"
        )
        others = summary.table[
            (summary.table["n_ok"] > 0) & (summary.table["config"] != summary.winner)
        ]
        close = others[others["p10_time_to_ready_s"] <= w["p90_time_to_ready_s"]]
        if len(close):
            parts.append(
                '<p class="small">Within the winner\'s spread (p10–p90 overlap): '
                + e(", ".join(close["config"]))
                + "; treat those as ties.</p>"
            )
    return f'<div class="answer">{"".join(parts)}</div>'


def recommendation_html(rec: Recommendation | None) -> str:
    """Start-script and Dockerfile lines side by side."""
    if rec is None:
        return ""
    notes = "".join(f"<li>{e(n)}</li>" for n in rec.notes)
    return (
        "<h2>What to set</h2>"
        f"<p>Derived from the fastest measured config, <b>{e(rec.config)}</b>, and the paths its roles "
        "had on this machine.</p>"
        '<div class="cols"><div><h3>Start script (bash)</h3><pre>'
        + e("\n".join(rec.shell))
        + "</pre></div><div><h3>Dockerfile</h3><pre>"
        + e("\n".join(rec.dockerfile))
        + "</pre></div></div>"
        + (f'<ul class="small">{notes}</ul>' if notes else "")
    )


def method_html(summary: Summary) -> str:
    """Definitions and formulas, so every figure can be redone by hand."""
    opt = summary.options
    storage = (
        f" plus {opt.storage_usd_per_gb:g} USD per GB written on the <i>target</i> role"
        if opt.storage_usd_per_gb is not None
        else ""
    )
    price = summary.price
    src = ""
    if price is not None and price.source.startswith("http"):
        src = f' (source: <a href="{e(price.source)}">{e(price.source)}</a>)'
    return (
        '<h2>How to read this</h2><ul class="small">'
        "<li><b>time-to-ready</b>: from the start of venv creation until the ready check "
        "(e.g. <code>import torch</code>) succeeds in the new venv.</li>"
        "<li>Figures are medians over each config's successful trials; spread is the 10th–90th "
        "percentile (linear interpolation). Failed or stalled trials are counted, never averaged in.</li>"
        f"<li><b>GPU idle cost</b> per cold start = median time-to-ready / 3600 × pod price per hour{storage}; "
        f"per month = per start × {opt.starts_per_month:g} starts. "
        + (f"Price: {e(price.label)}{src}." if price else "No price was given.")
        + "</li>"
        "<li><b>Bottleneck</b> rules, first match wins: CPU bound (installer on CPU ≥ 75 % of wall "
        "time); network bound (download ≥ 40 % of the time); when waiting on storage (a thread in a "
        "filesystem wait in ≥ 30 % of samples, or off CPU ≥ 50 % of the time, or in D state in "
        "≥ 20 % of samples): bandwidth bound (write rate flat near its peak, large writes) or "
        "latency/metadata bound (many small writes, low MB/s); else mixed. <b>fs wait</b> is the "
        "share of samples in which an installer thread slept in a filesystem or block-layer "
        "wait (its kernel wait channel); FUSE and NFS waits show there but not as CPU iowait or "
        "D state, so iowait is shown but never decides alone.</li>"
        "<li>A <b>throughput drop</b> (e.g. burst credits running out) is a lasting fall of the "
        "install phase's write rate to under half its earlier mean, found with one least-squares "
        "change point; the timeline marks it and draws both means.</li></ul>"
    )


def render_report(
    summary: Summary,
    meta: dict[str, Any],
    rec: Recommendation | None,
    charts: dict[str, Path],
    timelines: dict[str, Path],
    warnings: list[str],
) -> str:
    """The whole report page as a string."""
    host = (meta.get("host") or {}).get("hostname", "?")
    scenario = meta.get("scenario") or {}
    n = int(summary.table["n_ok"].sum() + summary.table["n_failed"].sum())
    title = f"iobench: {scenario.get('name', '?')} on {host}"
    sub = (
        f"Run <code>{e(meta.get('run_id'))}</code> · {e(meta.get('status'))} · {n} trials "
        f"({e(summary.trials_per_config())}) · {e(meta.get('started_at'))} → "
        f"{e(meta.get('ended_at'))}"
        + (f" · label {e(meta.get('label'))}" if meta.get("label") else "")
    )
    body = [f"<h1>{e(title)}</h1>", f'<p class="sub">{sub}<br>{roles_line(meta)}</p>']
    if meta.get("status") not in (None, "complete"):
        body.append(
            f'<div class="warn">This run is {e(meta.get("status"))}: figures cover the trials '
            "finished so far.</div>"
        )
    body.append(answer_html(summary, rec))
    body.append(recommendation_html(rec))
    body.append("<h2>Time-to-ready per config</h2>")
    body.append(img(charts.get("time_to_ready"), "time-to-ready per config"))
    body.append(
        '<p class="caption">Bar length: median time-to-ready, split in proportion to the median '
        "time of each phase. Whiskers: p10–p90 over trials. Dots: individual trials. ★ marks "
        "the fastest. The table gives the same medians.</p>"
    )
    body.append(summary_table_html(summary))
    body.append("<h2>Why: the bottleneck of each config</h2>")
    body.append(diagnosis_html(summary))
    if charts.get("cost") is not None:
        body.append("<h2>What the waiting costs</h2>")
        body.append(img(charts.get("cost"), "cost per config"))
    if timelines:
        body.append("<h2>Timelines</h2>")
        body.append(
            '<p class="caption">One trial per config (its median one). Shaded bands are the '
            "phases; a flat write line inside install is a stall, a step down is a throughput "
            "drop (e.g. burst credits running out).</p>"
        )
        for config, path in timelines.items():
            body.append(f"<h3>{e(config)}</h3>{img(path, f'timeline of {config}')}")
    body.append("<h2>The machine</h2>")
    body.append("<h3>Roles (the places under test)</h3>")
    body.append(roles_html(meta))
    body.append("<h3>Host</h3>")
    body.append(host_html(meta))
    body.append(method_html(summary))
    notes = [*summary.notes, *warnings]
    if notes:
        body.append(
            '<h2>Notes</h2><ul class="small">'
            + "".join(f"<li>{e(x)}</li>" for x in notes)
            + "</ul>"
        )
    return page(title, "\n".join(body))


def run_key(i: int) -> str:
    """A, B, C ... Z, AA: short names for runs in table headers."""
    return chr(65 + i) if i < 26 else f"R{i + 1}"


def render_compare(
    title: str,
    runs_rows: list[list[str]],
    table: pd.DataFrame,
    run_labels: list[str],
    chart: Path | None,
    notes: list[str],
    summary_lines: list[str] | None = None,
    long: pd.DataFrame | None = None,
) -> str:
    """The compare page: which runs, the merged table with ratios, and the chart."""
    body = [
        f"<h1>{e(title)}</h1>",
        f'<p class="sub">Ratios are median time-to-ready relative to <b>{e(run_labels[0])}</b> '
        "(below 1 = faster than it).</p>",
    ]
    if summary_lines:
        body.append(
            '<div class="answer">' + "".join(f"<p>{e(x)}</p>" for x in summary_lines) + "</div>"
        )
    body.append("<h2>Runs</h2>")
    body.append(
        table_html(
            ["", "label", "run", "host", "target filesystem", "GPU", "trials", "fastest"], runs_rows
        )
    )
    body.append("<h2>Time-to-ready per config and run</h2>")
    body.append(img(chart, "comparison chart"))
    keys = [run_key(i) for i in range(len(run_labels))]
    headers = ["config"]
    headers += [f"{k} median" for k in keys]
    headers += [f"{k} / {keys[0]}" for k in keys[1:]]
    headers += [f"{k} $/month" for k in keys]
    headers += [f"{k} bottleneck" for k in keys]
    rows = []
    for _, r in table.iterrows():
        row = [e(r["config"])]
        row += [e(fmt_s(r.get(f"{lab}: median_s", math.nan))) for lab in run_labels]
        row += [e(fmt_x(r.get(f"{lab}: ratio", math.nan))) for lab in run_labels[1:]]
        row += [e(fmt_usd(r.get(f"{lab}: monthly_usd", math.nan), 2)) for lab in run_labels]
        for lab in run_labels:
            hit = (
                None
                if long is None
                else long[(long["run_label"] == lab) & (long["config"] == r["config"])]
            )
            row.append(e(hit["bottleneck"].iloc[0]) if hit is not None and len(hit) else "—")
        rows.append(row)
    n_num = 1 + len(run_labels) + (len(run_labels) - 1) + len(run_labels)
    body.append(table_html(headers, rows, set(range(1, n_num))))
    if notes:
        body.append(
            '<h2>Notes</h2><ul class="small">'
            + "".join(f"<li>{e(x)}</li>" for x in notes)
            + "</ul>"
        )
    return page(title, "\n".join(body), "iobench compare RUN_DIR RUN_DIR...")
