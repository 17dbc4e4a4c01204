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

from iobench import __version__, redact
from iobench.report.formats import (
    fastest_first,
    fmt_usd,
    placement,
    spread_name,
    spread_text,
)
from iobench.report.load import PHASES
from iobench.report.method import method_html
from iobench.report.recommend import Recommendation
from iobench.report.summary import Summary
from iobench.rundir.meta import RunMeta
from iobench.units import fmt_bytes, fmt_s, fmt_share, fmt_vs, noise_word, run_key

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
.answer.neutral { background: #f3f3f3; border-left-color: #888; }
.warn { background: #fff6e5; border-left: 6px solid #E69F00; padding: 8px 14px; margin: 12px 0; }
.cols { display: flex; gap: 18px; flex-wrap: wrap; }
.cols > div { flex: 1 1 420px; min-width: 0; }
pre { background: #f3f3f3; border: 1px solid #ddd; border-radius: 4px; padding: 10px 12px;
      overflow-x: auto; font: 13px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
table { border-collapse: collapse; width: 100%; font-size: 13px; margin: 8px 0; }
th, td { border-bottom: 1px solid #e3e3e3; padding: 5px 7px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; font-weight: 600; }
td.num { text-align: right; white-space: nowrap; }
td.name { white-space: nowrap; }
td .line { display: block; white-space: nowrap; }
.tw { overflow-x: auto; }
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


def insert_section(page: str, block: str, at: str = "") -> str:
    """``block`` added to ``page`` at the mark ``at`` when the page has it, else as its last
    section: inside ``<main>``, before the footer (before, sections added later landed after
    the footer, outside the page's column)."""
    for mark in (at, "<footer>", "</main>", "</body>"):
        if mark and mark in page:
            return page.replace(mark, block + mark, 1)
    return page + block


def esc(value: Any) -> str:
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
    return f'<img src="{data_uri(Path(path))}" alt="{esc(alt)}">'


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
            f'<td class="num">{c}</td>'
            if i in num
            else (f'<td class="name">{c}</td>' if i == 0 else f"<td>{c}</td>")
            for i, c in enumerate(row)
        )
        body.append(f"<tr{cls}>{cells}</tr>")
    # a narrow window scrolls the table sideways; its names and placements never break
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    return f'<div class="tw">{table}</div>'


def _lines(text: str) -> str:
    """``a, b, c`` as one unbroken line per part (a placement: one role a line)."""
    return "".join(f'<span class="line">{esc(part)}</span>' for part in text.split(", "))


def page(title: str, body: str, rebuild: str = "iobench report RUN_DIR") -> str:
    """A whole HTML document with the inline stylesheet (no external resources)."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{esc(title)}</title>'
        f"<style>{CSS}</style></head><body><main>{body}"
        f"<footer>Made by iobench {esc(__version__)} from the run directory alone; "
        f"rebuild any time with <code>{esc(rebuild)}</code>.</footer></main></body></html>\n"
    )


#: a placing kind's summary table: (its role's header, role column, filesystem column, the
#: copy's header, copy column, the words for no copy, what its time is the sum of)
_PLACED_TABLE = {
    "dataset": ("data on", "data_role", "data_fstype", "copied to", "stage_role",
                "— (read in place)", "copy + epochs"),
    "checkpoint": ("saved to", "save_role", "save_fstype", "copied to (background)", "copy_role",
                   "— (none)", "save + restore"),
}  # fmt: skip


def data_table_html(summary: Summary, kind: str = "dataset") -> str:
    """A dataset or checkpoint run's summary table: where the thing lay, where it was copied,
    the time (a dataset's copy plus epochs, a checkpoint's save plus restore); the kind's own
    figures are in its section."""
    where, role_col, fs_col, copied, copy_col, no_copy, what = _PLACED_TABLE[kind]
    t = fastest_first(summary)
    sname = spread_name(summary)
    headers = ["config", where, copied, "ok", f"median ({what})", sname,
               f"vs {esc(summary.baseline or 'baseline')}", "noise"]  # fmt: skip
    rows, classes = [], []
    for _, r in t.iterrows():
        known = r["beyond_noise_vs_baseline"]
        known = None if known is None or known is pd.NA or known != known else bool(known)
        star = " ★" if r["config"] == summary.winner else ""
        copy = str(r.get(copy_col) or "off")
        rows.append([
            esc(r["config"]) + star,
            esc(f"{r.get(role_col) or '?'} ({r.get(fs_col) or '?'})"),
            esc(no_copy if copy in ("off", "nan") else copy),
            f"{r['n_ok']}/{r['n_ok'] + r['n_failed'] + r['n_censored']}",
            esc(fmt_s(r["median_time_to_ready_s"])),
            esc(spread_text(r, sname)),
            esc(r["vs_baseline"] or "—"),
            esc(noise_word(known) or "—"),
        ])  # fmt: skip
        classes.append(
            "winner" if r["config"] == summary.winner else ("failed" if r["n_ok"] == 0 else "")
        )
    return table_html(headers, rows, {3, 4, 5}, classes)


def summary_table_html(summary: Summary) -> str:
    """The summary table, fastest first, winner highlighted."""
    t = fastest_first(summary)
    sname = spread_name(summary)
    headers = [
        "config",
        "where things lived",
        "installer",
        "ok",
        "median",
        sname,
        *PHASES,
        f"vs {esc(summary.baseline or 'baseline')}",
        "noise",
        "$ / start",
        "$ / month",
    ]
    rows, classes = [], []
    for _, r in t.iterrows():
        spread = spread_text(r, sname)
        known = r["beyond_noise_vs_baseline"]
        known = None if known is None or known is pd.NA or known != known else bool(known)
        star = " ★" if r["config"] == summary.winner else ""
        installer = f"{r['installer']}, cache {r['cache_state']}, compile {r['compile']}"
        rows.append(
            [
                esc(r["config"]) + star,
                _lines(placement(r)),
                _lines(installer),
                f"{r['n_ok']}/{r['n_ok'] + r['n_failed'] + r['n_censored']}",
                esc(fmt_s(r["median_time_to_ready_s"])),
                esc(spread),
                *[esc(fmt_s(r[f"median_{p}_s"])) for p in PHASES],
                esc(r["vs_baseline"] or "—"),
                esc(noise_word(known) or "—"),
                esc(fmt_usd(r["cost_per_start_usd"])),
                esc(fmt_usd(r["monthly_cost_usd"])),
            ]
        )
        classes.append(
            "winner" if r["config"] == summary.winner else ("failed" if r["n_ok"] == 0 else "")
        )
    num = set(range(3, len(headers))) - {len(headers) - 3}
    return table_html(headers, rows, num, classes)


def diagnosis_html(summary: Summary) -> str:
    """Bottleneck and the figures behind it, per config (off CPU and filesystem wait as
    columns: the two shares that tell a slow volume from a busy CPU at a glance)."""
    rows = [
        [
            esc(r["config"]),
            f"<b>{esc(r['bottleneck'])}</b>",
            esc(fmt_share(r.get("offcpu_frac"))),
            esc(fmt_share(r.get("fswait_frac"))),
            esc(r["why"]),
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


def roles_html(meta: RunMeta) -> str:
    """The places under test with their filesystem facts."""
    rows = []
    for name, r in meta.roles.items():
        rows.append(
            [
                f"<b>{esc(name)}</b>",
                f"<code>{esc(r.path)}</code>",
                esc(r.fstype),
                esc(r.device),
                esc(r.mountpoint),
                esc(r.mount_options),
                esc(fmt_bytes(r.free_bytes)) + " of " + esc(fmt_bytes(r.total_bytes)),
            ]
        )
    return table_html(
        ["role", "path", "filesystem", "device", "mount point", "options", "free"], rows
    )


def host_html(meta: RunMeta) -> str:
    """Host, GPU, versions and index: enough to tell two pods apart."""
    host, gpu = meta.host, meta.gpu_info
    items = [
        ("host", host.hostname),
        ("platform", host.platform),
        ("CPU", f"{host.cpu_count or '?'} x {host.cpu_model or '?'}"),
        ("memory", fmt_bytes(host.memory_bytes)),
        (
            "GPU",
            f"{gpu.count} x {gpu.name} (driver {gpu.driver or '?'})" if gpu else "none detected",
        ),
        ("versions", versions_text(meta.versions)),
        ("package index", index_text(meta)),
        ("sampling", f"{meta.sample_hz if meta.sample_hz is not None else '?'} Hz"),
    ]
    rows = "".join(f"<tr><td><b>{esc(k)}</b></td><td>{esc(v)}</td></tr>" for k, v in items)
    return f"<table><tbody>{rows}</tbody></table>"


def index_text(meta: RunMeta) -> str:
    """Where the trials installed from: ``remote https://pypi.org``, ``local http://127.0.0.1:…``,
    or the real index the packages were downloaded from once, with its rate (the cap)."""
    index = meta.index
    if index is None:
        return "?"
    text = f"{index.kind} {redact.url_host(index.url)}".strip()
    if index.downloaded_from:
        got, took = index.download_bytes, index.download_s
        rate = got * 8 / 1e6 / took if got is not None and took else None
        text += (
            f", serving {fmt_bytes(got)} downloaded once from "
            f"{redact.url_host(index.downloaded_from)}"
            + (f" at {rate:,.2f} Mbit/s" if rate is not None else "")
            + (f", capped at {index.mbps:,.2f} Mbit/s" if index.mbps else "")
        )
    return text


def versions_text(versions: dict[str, Any]) -> str:
    """``python 3.11.7, ..., venvs: python 3.11.7, virtualenv 21.15.11, pip 26.3``."""
    flat = [f"{k} {v}" for k, v in versions.items() if v and not isinstance(v, dict)]
    nested = [
        f"{k}s: " + ", ".join(f"{a} {b}" for a, b in v.items() if b)
        for k, v in versions.items()
        if isinstance(v, dict) and v
    ]
    return "; ".join([", ".join(flat), *nested]) if nested else ", ".join(flat)


def roles_line(meta: RunMeta) -> str:
    """``target = /workspace (nfs4) · tmp = /tmp (overlay)``: the words the tables use."""
    bits = [
        f"<b>{esc(n)}</b> = <code>{esc(r.path)}</code> ({esc(r.fstype)})"
        for n, r in meta.roles.items()
    ]
    return "Roles: " + " · ".join(bits) if bits else ""


def same_storage_html(summary: Summary) -> str:
    """The same-storage warnings, said before anything else."""
    return "".join(f'<div class="warn"><b>{esc(x)}</b></div>' for x in summary.same_storage)


def answer_html(summary: Summary, rec: Recommendation | None) -> str:
    """The answer box: the verdict, what it saves when it earned advice, what changed."""
    v = summary.verdict
    if v.kind == "none":
        return (
            '<div class="warn">No configuration finished successfully; nothing to recommend.</div>'
        )
    first = "First start: " if summary.has_restarts else ""  # the advice is by the month
    parts = [f'<p class="big">{esc(first + v.headline)}</p>']
    label = summary.price.label if summary.price else None
    if rec is not None:
        parts.append(f"<p>{esc(rec.saving_line(label, summary.options.starts_per_month))}</p>")
        if rec.changes:
            parts.append(
                f"<p>Compared with {esc(rec.baseline)}: {esc('; '.join(rec.changes))}.</p>"
            )
    if v.moot:
        parts.append(f'<p class="small">Moves within one filesystem (no effect expected): '
                     f"{esc('; '.join(v.moot))}.</p>")  # fmt: skip
    parts += [f'<p class="small">{esc(n)}</p>' for n in v.notes]
    if summary.price is None:
        parts.append(
            '<p class="small">No GPU price known: pass <code>--gpu NAME</code> or '
            "<code>--gpu-price USD</code> to <code>iobench report</code> to see dollars.</p>"
        )
    t = summary.table.set_index("config")
    if summary.fastest and summary.fastest in t.index:
        w = t.loc[summary.fastest]
        how = (
            ""
            if str(w.get("venv_role") or "") in ("", "nan")  # a dataset or checkpoint config
            else f"; {w['installer']}, cache {w['cache_state']}, bytecode compile {w['compile']}"
            f". Its bottleneck: {w['bottleneck']}"
        )
        parts.append(
            f'<p class="small">Fastest measured, {esc(summary.fastest)}: '
            f"{esc(placement(w) + how)}.</p>"
        )
    cls = "answer" if v.advise or v.kind == "keep" else "answer neutral"
    return f'<div class="{cls}">{"".join(parts)}</div>'


def recommendation_html(rec: Recommendation | None) -> str:
    """Start-script and Dockerfile lines side by side."""
    if rec is None:
        return ""
    notes = "".join(f"<li>{esc(n)}</li>" for n in rec.notes)
    return (
        "<h2>What to set</h2>"
        f"<p>Derived from <b>{esc(rec.config)}</b>, {esc(rec.why)}, "
        "and the folders its roles had on this machine. The script runs with <code>bash</code> "
        "on a stock Debian 12 or Ubuntu 24.04 python3 (it makes the venv with "
        "<code>python3 -m venv</code> where the trials' way is missing), and stops at the "
        "first error.</p>"
        "<h3>Start script (bash)</h3><pre>"
        + esc("\n".join(rec.shell))
        + "</pre><h3>Dockerfile</h3><pre>"
        + esc("\n".join(rec.dockerfile))
        + "</pre>"
        + (f'<ul class="small">{notes}</ul>' if notes else "")
    )


def render_report(
    summary: Summary,
    meta: RunMeta,
    rec: Recommendation | None,
    charts: dict[str, Path | None],
    timelines: dict[str, Path],
    warnings: list[str],
) -> str:
    """The whole report page as a string."""
    title = f"iobench: {meta.scenario_name} on {meta.hostname or '?'}"
    body = [f"<h1>{esc(title)}</h1>", *_head_html(summary, meta)]
    body.append(answer_html(summary, rec))
    body.append(recommendation_html(rec))
    body += (
        _data_evidence_html(summary, meta.kind)
        if meta.kind in _PLACED_TABLE
        else _evidence_html(summary, charts, timelines)
    )
    body.append("<h2>The machine</h2>")
    body.append("<h3>Roles (the places under test)</h3>")
    body.append(roles_html(meta))
    body.append("<h3>Host</h3>")
    body.append(host_html(meta))
    body.append(method_html(summary, meta.kind))
    notes = [*summary.notes, *warnings]
    if notes:
        body.append(
            '<h2>Notes</h2><ul class="small">'
            + "".join(f"<li>{esc(x)}</li>" for x in notes)
            + "</ul>"
        )
    return page(title, "\n".join(body))


def _head_html(summary: Summary, meta: RunMeta) -> list[str]:
    """The line under the title (run, status, trials, times, roles) and what to read first."""
    n = int(summary.table[["n_ok", "n_failed", "n_censored"]].to_numpy().sum())
    sub = (
        f"Run <code>{esc(meta.run_id)}</code> · {esc(meta.status)} · {n} trials "
        f"({esc(summary.trials_per_config())}) · {esc(meta.started_at)} → {esc(meta.ended_at)}"
        + (f" · label {esc(meta.label)}" if meta.label else "")
    )
    out = [f'<p class="sub">{sub}<br>{roles_line(meta)}</p>', same_storage_html(summary)]
    if meta.status != "complete":
        out.append(
            f'<div class="warn">This run is {esc(meta.status)}: figures cover the trials '
            "finished so far.</div>"
        )
    return out


#: where a dataset run's section goes (after its table, before the machine)
DATASET_MARK = "<!-- iobench: training-data section -->"
#: where a checkpoint run's section goes (the same place)
CHECKPOINT_MARK = "<!-- iobench: checkpoint section -->"
#: each placing kind's evidence: (the table's title, what follows below it, its section's mark)
_EVIDENCE = {
    "dataset": ("Time per config: the copy plus the epochs", "The accelerator's utilisation, "
                "the read rates and what the waiting costs are in the training-data section "
                "below.", DATASET_MARK),
    "checkpoint": ("Time per config: one save plus one restore", "The write and read rates, "
                   "the fsync's share, the background copy and how often to save are in the "
                   "checkpoint section below.", CHECKPOINT_MARK),
}  # fmt: skip


def _data_evidence_html(summary: Summary, kind: str = "dataset") -> list[str]:
    """A dataset or checkpoint run's table (its own figures follow in its section)."""
    title, below, mark = _EVIDENCE[kind]
    return [
        f"<h2>{esc(title)}</h2>",
        '<p class="caption">Medians over each config\'s successful trials; ★ marks the '
        f"verdict's winner (none when it names none). {esc(below)}</p>",
        data_table_html(summary, kind),
        mark,
    ]


def _evidence_html(
    summary: Summary, charts: dict[str, Path | None], timelines: dict[str, Path]
) -> list[str]:
    """The charts, the table and the diagnosis."""
    body = ["<h2>Time-to-ready per config</h2>"]
    body.append(img(charts.get("time_to_ready"), "time-to-ready per config"))
    body.append(
        '<p class="caption">Bar length: median time-to-ready, split in proportion to the median '
        f"time of each phase. Whiskers: {spread_name(summary)} over trials. Dots: individual "
        "trials. ★ marks the verdict's winner (none when it names none); the label after each bar says how much faster or "
        "slower than the baseline it is, and whether beyond noise. The table gives the same "
        "medians.</p>"
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
            '<p class="caption">One trial per config: its median trial (of an even number, the '
            "faster of the middle two). Shaded bands are the phases; hatched stretches are "
            "stalls the run recorded (or, for runs without stalls.csv, write gaps); a step down "
            "is a throughput drop (e.g. burst credits running out).</p>"
        )
        for config, path in timelines.items():
            body.append(f"<h3>{esc(config)}</h3>{img(path, f'timeline of {config}')}")
    return body


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
        f"<h1>{esc(title)}</h1>",
        f'<p class="sub">Each run against <b>{esc(run_labels[0])}</b> (A): how much faster '
        "or slower its median time-to-ready is, as the ratio of medians (A ÷ run).</p>",
    ]
    if summary_lines:
        body.append(
            '<div class="answer">' + "".join(f"<p>{esc(x)}</p>" for x in summary_lines) + "</div>"
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
    headers += [f"{k} vs {keys[0]}" for k in keys[1:]]
    headers += [f"{k} $/month" for k in keys]
    headers += [f"{k} bottleneck" for k in keys]
    rows = []
    for _, r in table.iterrows():
        row = [esc(r["config"])]
        row += [esc(fmt_s(r.get(f"{lab}: median_s", math.nan))) for lab in run_labels]
        row += [esc(fmt_vs(1 / r.get(f"{lab}: ratio", math.nan), r.get(f"{lab}: noise")))
                for lab in run_labels[1:]]  # fmt: skip
        row += [esc(fmt_usd(r.get(f"{lab}: monthly_usd", math.nan))) for lab in run_labels]
        for lab in run_labels:
            hit = (
                None
                if long is None
                else long[(long["run_label"] == lab) & (long["config"] == r["config"])]
            )
            row.append(esc(hit["bottleneck"].iloc[0]) if hit is not None and len(hit) else "—")
        rows.append(row)
    n_num = 1 + len(run_labels) + (len(run_labels) - 1) + len(run_labels)
    body.append(table_html(headers, rows, set(range(1, n_num))))
    if notes:
        body.append(
            '<h2>Notes</h2><ul class="small">'
            + "".join(f"<li>{esc(x)}</li>" for x in notes)
            + "</ul>"
        )
    return page(title, "\n".join(body), "iobench compare RUN_DIR RUN_DIR...")
