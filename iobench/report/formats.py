"""Text outputs of a summary: a console table, Markdown for an issue or wiki, and JSON.

Every function returns lines or a string and prints nothing (pyperf's habit), so the CLI
decides where text goes and tests compare strings. ``summary.json`` is the machine-readable
export: plain JSON with NaN written as ``null``; its ``format_version`` changes when a key
changes meaning.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from iobench.cost.prices import format_usd
from iobench.report.configs import SPREAD_MINMAX_BELOW, spread
from iobench.report.part import Part
from iobench.report.recommend import Recommendation
from iobench.report.summary import Summary
from iobench.rundir import kinds
from iobench.rundir.meta import (
    OVERHEAD_CAUSES,
    OVERHEAD_LABELS,
    RunMeta,
    overhead_figure,
    overhead_ratio,
)
from iobench.units import fmt_median, fmt_s, fmt_s_range, lab_gave, noise_known, noise_word

SUMMARY_FORMAT = "iobench-summary"
#: 1: first version (configs = summary.csv rows; cost; recommendation).
#: 2: ``verdict`` and ``same_storage`` added; ``recommendation`` is null unless the verdict is
#:    ``advice``; config columns ``speedup_vs_naive``/``saving_vs_naive_s`` renamed
#:    ``speedup_vs_baseline``/``saving_vs_baseline_s``; ``vs_baseline``,
#:    ``beyond_noise_vs_baseline``, ``min_time_to_ready_s`` and ``max_time_to_ready_s`` added.
#: 3: ``winner`` (top level and in ``verdict``) is the verdict's: null unless it advises or
#:    keeps; ``verdict.fastest_measured`` added; comparisons gain ``rule`` ("paired" by round
#:    or "pooled") and ``pairs``, and ``interval`` is the one that decided.
SUMMARY_FORMAT_VERSION = 3


def clean(value: Any) -> Any:
    """JSON-safe: NaN/inf -> None, numpy scalars -> Python, containers recursively."""
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if value is pd.NA or value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def fmt_usd(x: float) -> str:
    """Dollars (see cost.format_usd)."""
    return format_usd(x)


def spread_name(summary: Summary) -> str:
    """``min–max`` or ``p10–p90``: what the spread columns show (see verdict.spread)."""
    most = int(summary.table["n_ok"].max()) if len(summary.table) else 0
    return "min–max" if most < SPREAD_MINMAX_BELOW else "p10–p90"


def spread_text(row: pd.Series | dict[str, Any], name: str) -> str:
    """One config's spread in seconds (a dash under two successful trials)."""
    if int(row["n_ok"]) < 2:
        return "—"
    if name == "min–max":
        return fmt_s_range(row["min_time_to_ready_s"], row["max_time_to_ready_s"])
    return fmt_s_range(row["p10_time_to_ready_s"], row["p90_time_to_ready_s"])


def verdict_dict(summary: Summary) -> dict[str, Any]:
    """The verdict as JSON: its kind, sentence, and the comparisons behind it."""
    v = summary.verdict

    def comp(c: Any) -> dict[str, Any] | None:
        if c is None:
            return None
        return {"fast": c.fast, "slow": c.slow, "time_ratio": c.ratio, "interval": [c.low, c.high],
                "n": [c.n_fast, c.n_slow], "beyond_noise": c.distinguishable,
                "why_not": c.reason or None, "rule": c.rule, "pairs": c.pairs}  # fmt: skip

    return {
        "kind": v.kind,
        "headline": v.headline,
        "winner": v.winner,
        "fastest_measured": v.fastest,
        "advised": v.advised,
        "baseline": v.baseline,
        "runner_up": v.runner_up,
        "vs_baseline": comp(v.vs_baseline),
        "vs_runner_up": comp(v.vs_runner_up),
        "changes": list(v.changes),
        "moot_moves": list(v.moot),
        "notes": list(v.notes),
    }


def _known_text(value: object) -> str:
    text = str(value if value is not None and value is not pd.NA else "")
    return "" if text in ("nan", "<NA>") else text


def placement(row: pd.Series | dict[str, Any]) -> str:
    """``venv target (nfs4), TMPDIR tmp (overlay), cache off`` — where a config put things, by
    its kind's places (``iobench.rundir.kinds``): ``data target (nfs4), data copied to tmp
    (tmpfs)``, ``checkpoint tmp (tmpfs), checkpoint copied to target (nfs4)``."""
    parts = []
    for place in kinds.all_places():
        role = _known_text(row.get(place.role))
        if not role or (place.off and role == "off"):
            continue
        fs = _known_text(row.get(place.fstype))
        parts.append(
            f"{place.what}{' to' if place.off else ''} {role}"
            + (f" ({fs})" if fs and role != "off" else "")
        )
    return ", ".join(parts)


def _install_like(summary: Summary) -> bool:
    """The table shows start times and their cost (a measure of time, or a month of starts)."""
    return summary.measure.timed or summary.has_restarts


def fastest_first(summary: Summary) -> pd.DataFrame:
    """Best first by the run's measure (time-to-ready, a month, GPU time lost); configs
    without a successful trial last."""
    t = summary.table.copy()
    best = {c.name: c.median for c in summary.configs if c.n}
    t["_key"] = [best.get(c, math.inf) for c in t["config"]]
    return t.sort_values(["_key"], kind="stable").drop(columns="_key")


def summary_dict(
    summary: Summary,
    meta: RunMeta,
    rec: Recommendation | None,
    warnings: list[str],
    parts: Sequence[Part] = (),
) -> dict[str, Any]:
    """The content of summary.json."""
    price = summary.price
    return clean(
        {
            "format": SUMMARY_FORMAT,
            "format_version": SUMMARY_FORMAT_VERSION,
            "run_id": meta.run_id,
            "label": meta.label,
            "scenario": meta.scenario.get("name"),
            "status": meta.status,
            "started_at": meta.started_at,
            "ended_at": meta.ended_at,
            "host": meta.to_json()["host"],
            "gpu": meta.gpu,
            "baseline": summary.baseline,
            "winner": summary.winner,
            "cheapest": summary.cheapest,
            "same_storage": summary.same_storage,
            "verdict": verdict_dict(summary),
            "measure": {"name": summary.measure.name, "unit": summary.measure.unit},
            "advice": [line for part in parts for line in part.answer],
            "cost": {
                "price_label": price.label if price else None,
                "usd_per_hour": price.usd_per_hour if price else None,
                "gpus": price.gpus if price else None,
                "source": price.source if price else None,
                "starts_per_month": summary.options.starts_per_month,
                "storage_usd_per_gb": summary.options.storage_usd_per_gb,
            },
            "recommendation": None
            if rec is None
            else {
                "config": rec.config,
                "baseline": rec.baseline,
                "shell": rec.shell,
                "dockerfile": rec.dockerfile,
                "notes": rec.notes,
                "saving_s": rec.saving_s,
                "saving_pct": rec.saving_pct,
                "saving_usd_per_start": rec.saving_usd_per_start,
                "saving_usd_per_month": rec.saving_usd_per_month,
            },
            "configs": summary.table.to_dict("records"),
            "notes": summary.notes,
            "warnings": warnings,
        }
    )


def json_text(data: dict[str, Any]) -> str:
    """Strict JSON (NaN refused: clean() must have turned it into null)."""
    return json.dumps(data, indent=2, allow_nan=False)


def _cost_line(summary: Summary) -> str | None:
    if summary.price is None:
        return None
    return (
        f"Price: {price_basis(summary)}; {summary.options.starts_per_month:g} cold starts a month."
    )


def price_basis(summary: Summary) -> str:
    """The GPU price label, plus the storage price when one was given."""
    label = summary.price.label if summary.price else "no GPU price"
    if summary.options.storage_usd_per_gb is not None:
        label += f"; storage ${summary.options.storage_usd_per_gb:g}/GB written on the target"
    return label


def table_lines(summary: Summary, meta: RunMeta, parts: Sequence[Part] = ()) -> list[str]:
    """An aligned plain-text table plus the answer, for a terminal or a log."""
    host, scenario = meta.hostname or "?", meta.scenario_name
    n_trials = int(summary.table[["n_ok", "n_failed", "n_censored"]].to_numpy().sum())
    lines = [
        f"iobench report: {scenario} on {host} (run {meta.run_id or '?'}, "
        f"{n_trials} trials, {meta.status})",
        *summary.same_storage,
        "",
    ]
    name = spread_name(summary)
    life = summary.has_restarts  # first start and restart beside the month they are judged by
    timed = summary.measure.timed
    header = ["config", "ok", "median" if timed else summary.measure.name, name,
              f"vs {summary.baseline or 'baseline'}", "", "$/start", "$/month", "bottleneck"]  # fmt: skip
    rows = [header]
    configs = {c.name: c for c in summary.configs}
    for _, r in fastest_first(summary).iterrows():
        star = " *" if r["config"] == summary.winner else ""
        c = configs.get(r["config"])
        lo, hi, _ = spread(c.times if c is not None else ())
        rows.append([
            f"{r['config']}{star}",
            f"{r['n_ok']}/{r['n_ok'] + r['n_failed'] + r['n_censored']}",
            fmt_median(r) if timed or c is None or not c.n else c.fmt(c.median),
            spread_text(r, name) if timed else (c.measure.spread_text(lo, hi) if c and c.n > 1 else "—"),
            str(r["vs_baseline"] or "—"),
            noise_word(noise_known(r["beyond_noise_vs_baseline"])),
            fmt_usd(r["cost_per_start_usd"]),
            fmt_usd(r["monthly_cost_usd"]),
            str(r["bottleneck"]),
        ])  # fmt: skip
    right = {1, 2, 3, 6, 7}
    if life:  # a strategy's two events beside the month they are judged by
        t = summary.table.set_index("config")
        for row in rows:
            name_ = row[0].rstrip(" *")
            first = "first start" if row is header else fmt_s(t.loc[name_, "median_first_start_s"])
            restart = "restart" if row is header else fmt_s(t.loc[name_, "median_restart_s"])
            row[2:2] = [first, restart]
        right = {1, 2, 3, 4, 5, 8, 9}
    if not _install_like(summary):  # its own figures follow in its section (AU, rates, $)
        rows = [row[:6] for row in rows]
        header = rows[0]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        cells = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    lines.append("")
    lines.extend(answer_lines(summary, parts))
    return lines


def answer_lines(
    summary: Summary, parts: Sequence[Part] = (), verdict: bool = True, notes: bool = True
) -> list[str]:
    """The verdict, then what each section advises after it (the saving and the start script;
    the remedies priced; how often to save), the price it used, and the notes.

    ``iobench run`` prints its own table with the same-storage lines and the verdict first
    (report/verdict.console_lines), so it asks for neither here.
    """
    lines: list[str] = [summary.verdict.headline] if verdict else []
    lines += [line for part in parts for line in part.answer]
    if _install_like(summary) and (cost := _cost_line(summary)):
        lines.append(cost)
    if notes:
        lines += note_lines(summary)
    return lines


def lab_notes(trials: pd.DataFrame) -> list[str]:
    """Per config and direction where an iobench lab volume delivered less than its options
    allow (medians of the ok trials' ``lab_*`` columns, judged by ``units.lab_gave``): the
    run's figures there were set by the lab, not by the volume it emulates."""
    if "lab_volume" not in trials or trials["lab_volume"].isna().all():
        return []
    out = []
    ok = trials[trials["status"] == "ok"]
    for config, group in ok.groupby("config", sort=False):
        preset = next((str(p) for p in group["lab_preset"].dropna() if str(p)), "")
        for d in ("read", "write"):
            said = lab_gave(
                group[f"lab_{d}_mb_s"].median(), group[f"lab_{d}_allowed_mb_s"].median(), preset
            )
            if said:
                out.append(
                    f"{config}: {said} to its {d}s (median of {len(group)} "
                    f"trial{'' if len(group) == 1 else 's'}), so its "
                    f"{d} figures are the lab's, not the {'preset' if preset else 'volume'}'s"
                )
    return out


def note_lines(summary: Summary) -> list[str]:
    """The summary's notes, one ``note:`` line each."""
    return [f"note: {note}" for note in summary.notes]


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|")


def markdown_lines(summary: Summary, meta: RunMeta, parts: Sequence[Part] = ()) -> list[str]:
    """A Markdown section (table, answer, code blocks) to paste into an issue or a wiki."""
    host, scenario = meta.hostname or "?", meta.scenario_name
    lines = [
        f"### iobench: {scenario} on {host}",
        "",
        *[f"> **{x}**" for x in summary.same_storage],
        *([""] if summary.same_storage else []),
        f"Run `{meta.run_id or '?'}` ({meta.status}). Medians over successful "
        f"trials; {spread_name(summary)} spread.",
        "",
        "| config | placement | ok | median time-to-ready | spread | vs "
        f"{summary.baseline or 'baseline'} | noise | $/start | $/month | bottleneck |",
        "|---|---|---:|---:|---:|---:|---|---:|---:|---|",
    ]
    sname = spread_name(summary)
    for _, r in fastest_first(summary).iterrows():
        name = f"**{r['config']}**" if r["config"] == summary.winner else str(r["config"])
        spread = spread_text(r, sname)
        lines.append(
            "| "
            + " | ".join(
                _md_escape(c)
                for c in (
                    name,
                    placement(r),
                    f"{r['n_ok']}/{r['n_ok'] + r['n_failed'] + r['n_censored']}",
                    fmt_s(r["median_time_to_ready_s"]),
                    spread,
                    str(r["vs_baseline"] or "—"),
                    noise_word(noise_known(r["beyond_noise_vs_baseline"])) or "—",
                    fmt_usd(r["cost_per_start_usd"]),
                    fmt_usd(r["monthly_cost_usd"]),
                    r["bottleneck"],
                )
            )
            + " |"
        )
    lines.append("")
    lines += [f"**{summary.verdict.headline}**", ""]
    rec = next((p.script for p in parts if p.script), None)
    for part in parts:
        lines += [
            line for line in part.answer if not line.startswith(("Set (start script", "    "))
        ]
    lines.append("")
    if rec is not None:
        lines += ["Start script:", "", "```sh", *rec.shell, "```", ""]
        lines += ["Dockerfile:", "", "```dockerfile", *rec.dockerfile, "```", ""]
    cost = _cost_line(summary) if _install_like(summary) else None
    if cost:
        lines += [cost, ""]
    lines += [f"- {n}" for n in summary.notes]
    return lines


def overhead_line(account: Mapping[str, Any] | None) -> str | None:
    """ "iobench overhead: 12% of the run — priming 7%, cleanup 4%, …" (None: not recorded,
    as in runs made before iobench kept it)."""
    r = overhead_ratio(account)
    if r is None or account is None:
        return None
    wall = float(account["wall_s"])
    raw = account.get("parts_s")
    parts = raw if isinstance(raw, Mapping) else {}
    shares = [(c, overhead_figure(parts.get(c))) for c in OVERHEAD_CAUSES]
    named = sorted(((c, s) for c, s in shares if s), key=lambda cs: -cs[1])
    spent = max(0.0, wall - float(account["trials_s"]))
    text = ", ".join(
        f"{OVERHEAD_LABELS[c]} {100 * s / wall:.0f}%" for c, s in named if s / wall >= 0.005
    )
    line = (
        f"iobench overhead: {100 * spent / wall:.0f}% of the run ({spent:.1f} s of {wall:.1f} s; "
        f"wall / trials {r:.2f})" + (f" — {text}" if text else "")
    )
    extra = [
        f"{what} {v:.1f} s"
        for what, key in (("before the run", "before_start_s"), ("report", "report_s"))
        if (v := overhead_figure(account.get(key))) is not None
    ]
    return line + (f"; outside it: {', '.join(extra)}" if extra else "")
