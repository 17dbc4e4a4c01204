"""report.html and compare.html: the pages' values, handed to their templates
(``templates/report.html.j2``, ``templates/compare.html.j2``; ``iobench.report.page``).

The report reads top-down the way a newcomer asks: what wins and what to set (the answer first),
then each section's evidence (its kind's, then its features'), then the machine and the method.
Every value a template prints is escaped; a section's fragment is markup it rendered itself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from iobench import redact
from iobench.report.configs import SPREAD_MINMAX_BELOW
from iobench.report.formats import fmt_usd
from iobench.report.page import render
from iobench.report.part import Part
from iobench.report.summary import Summary
from iobench.rundir.meta import RunMeta
from iobench.stats import CONFIDENCE, MIN_EFFECT, MIN_TRIALS
from iobench.units import fmt_bytes, fmt_s, fmt_vs, run_key


def role_rows(meta: RunMeta) -> list[list[object]]:
    """The places under test with their filesystem facts."""
    return [[name, r.path, r.fstype, r.device, r.mountpoint, r.mount_options,
             f"{fmt_bytes(r.free_bytes)} of {fmt_bytes(r.total_bytes)}"]
            for name, r in meta.roles.items()]  # fmt: skip


def host_items(meta: RunMeta) -> list[tuple[str, str]]:
    """Host, GPU, versions and index: enough to tell two pods apart."""
    host, gpu = meta.host, meta.gpu_info
    return [
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


def method_values(summary: Summary) -> dict[str, Any]:
    """What "How to read this" says of the verdict, from the code that applies it."""
    m = summary.measure
    return {"spread_below": SPREAD_MINMAX_BELOW, "measure": m.name, "better": m.better,
            "worse": m.worse, "confidence": f"{CONFIDENCE:.0%}", "min_ratio": f"{1 + MIN_EFFECT:.2f}",
            "min_trials": MIN_TRIALS}  # fmt: skip


def report_page(summary: Summary, meta: RunMeta, parts: Sequence[Part], warnings: list[str]) -> str:
    """The whole report page."""
    n = int(summary.table[["n_ok", "n_failed", "n_censored"]].to_numpy().sum())
    return render(
        "report.html.j2", title=f"iobench: {meta.scenario_name} on {meta.hostname or '?'}",
        rebuild="iobench report RUN_DIR", meta=meta, n_trials=n, per_config=summary.trials_per_config(),
        roles=list(meta.roles.items()), same_storage=summary.same_storage, verdict=summary.verdict,
        parts=parts, priced=summary.price is not None, role_rows=role_rows(meta), host=host_items(meta),
        m=method_values(summary), notes=[*summary.notes, *warnings],
    )  # fmt: skip


def compare_page(
    title: str,
    runs_rows: list[list[object]],
    table: pd.DataFrame,
    run_labels: list[str],
    chart: Path | None,
    notes: list[str],
    summary_lines: list[str] | None = None,
    long: pd.DataFrame | None = None,
    measure: str = "time-to-ready",
    words: tuple[str, str] = ("faster", "slower"),
) -> str:
    """The compare page: which runs, the merged table with ratios, and the chart."""
    keys = [run_key(i) for i in range(len(run_labels))]
    extra = [
        c for c in ("au", "month_usd") if any(f"{lab}: {c}" in table.columns for lab in run_labels)
    ]
    headers = ["config", *[f"{k} median" for k in keys], *[f"{k} vs {keys[0]}" for k in keys[1:]]]
    headers += [f"{k} AU" for k in keys] if "au" in extra else []
    headers += [f"{k} $/month" for k in keys]
    headers += [f"{k} bottleneck" for k in keys]
    rows = []
    for _, r in table.iterrows():
        row: list[object] = [r["config"]]
        row += [
            r.get(f"{lab}: median_text") or fmt_s(r.get(f"{lab}: median_s", math.nan))
            for lab in run_labels
        ]
        row += [fmt_vs(1 / r.get(f"{lab}: ratio", math.nan), r.get(f"{lab}: noise"), None, words)
                for lab in run_labels[1:]]  # fmt: skip
        if "au" in extra:
            row += [_num(r.get(f"{lab}: au"), ".2f") for lab in run_labels]
        row += [fmt_usd(r.get(f"{lab}: monthly_usd", math.nan)) for lab in run_labels]
        for lab in run_labels:
            hit = (
                None
                if long is None
                else long[(long["run_label"] == lab) & (long["config"] == r["config"])]
            )
            row.append(hit["bottleneck"].iloc[0] if hit is not None and len(hit) else "—")
        rows.append(row)
    n_num = len(headers) - len(run_labels)
    return render(
        "compare.html.j2", title=title, rebuild="iobench compare RUN_DIR RUN_DIR...",
        first=run_labels[0], measure=measure, summary_lines=summary_lines or [], runs_rows=runs_rows,
        chart=chart, headers=headers, rows=rows, num=tuple(range(1, n_num)), notes=notes,
    )  # fmt: skip


def _num(value: object, spec: str) -> str:
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "—"
    return format(x, spec) if math.isfinite(x) else "—"


__all__ = ["compare_page", "host_items", "index_text", "report_page", "role_rows", "versions_text"]
