"""Text outputs of a summary: a console table, Markdown for an issue or wiki, and JSON.

Every function returns lines or a string and prints nothing (pyperf's habit), so the CLI
decides where text goes and tests compare strings. ``summary.json`` is the machine-readable
export: plain JSON with NaN written as ``null``; its ``format_version`` changes when a key
changes meaning.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from iobench.cost.prices import format_usd
from iobench.report.recommend import Recommendation
from iobench.report.summary import Summary
from iobench.report.verdict import SPREAD_MINMAX_BELOW, spread
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


#: the workload kinds whose advice is a start script that makes a venv (recommend.py); the
#: others (``dataset``, ``checkpoint``) place data, and their figures follow in their sections
INSTALL_KINDS = ("install", "standin")
#: a placed thing's columns: (word, its role, its filesystem, its copy's role, the copy's
#: filesystem, the copy's word, the count column and its word)
_PLACED = (
    ("data", "data_role", "data_fstype", "stage_role", "stage_fstype", "copied to",
     "workers", "loader worker"),
    ("checkpoint on", "save_role", "save_fstype", "copy_role", "copy_fstype", "copied to",
     "shards", "shard"),
)  # fmt: skip


def _known_text(value: object) -> str:
    text = str(value or "")
    return "" if text == "nan" else text


def placement(row: pd.Series | dict[str, Any]) -> str:
    """``venv target (nfs4), tmp tmp (overlay), cache off`` — where things lived; a dataset
    config's ``data target (nfs4), copied to tmp (tmpfs), 2 loader workers``; a checkpoint
    config's ``checkpoint on tmp (tmpfs), copied to target (nfs4), 1 shard``."""
    for word, role_col, fs_col, copy_col, copy_fs_col, copied, count_col, count_word in _PLACED:
        role = _known_text(row.get(role_col))
        if not role:
            continue
        fs = _known_text(row.get(fs_col))
        text = f"{word} {role}" + (f" ({fs})" if fs else "")
        copy = _known_text(row.get(copy_col)) or "off"
        if copy != "off":
            cfs = _known_text(row.get(copy_fs_col))
            text += f", {copied} {copy}" + (f" ({cfs})" if cfs else "")
        count = row.get(count_col)
        if count is not None and count == count:  # not NaN
            text += f", {int(count)} {count_word}{'' if int(count) == 1 else 's'}"
        return text
    parts = []
    for what, role_col, fs_col in (
        ("venv", "venv_role", "venv_fstype"),
        ("tmp", "tmpdir_role", "tmpdir_fstype"),
        ("cache", "cache_role", "cache_fstype"),
    ):
        role = str(row.get(role_col) or "?")
        fs = str(row.get(fs_col) or "")
        parts.append(f"{what} {role}" + (f" ({fs})" if fs and role != "off" else ""))
    return ", ".join(parts)


def fastest_first(summary: Summary) -> pd.DataFrame:
    """Fastest first (a strategy run: by first start); configs without a successful trial last."""
    t = summary.table.copy()
    t["_key"] = t[summary.ranked_by].fillna(math.inf)
    return t.sort_values(["_key"], kind="stable").drop(columns="_key")


def summary_dict(
    summary: Summary,
    meta: RunMeta,
    rec: Recommendation | None,
    warnings: list[str],
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


def table_lines(summary: Summary, meta: RunMeta, rec: Recommendation | None) -> list[str]:
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
    life = summary.has_restarts  # first start and restart side by side, ranked by first start
    header = ["config", "ok", "first start" if life else "median", name,
              f"vs {summary.baseline or 'baseline'}", "", "$/start", "$/month", "bottleneck"]  # fmt: skip
    rows = [header]
    times = {c.name: c.times for c in summary.configs}
    for _, r in fastest_first(summary).iterrows():
        star = " *" if r["config"] == summary.winner else ""
        first = spread(times.get(r["config"], ()))
        rows.append(
            [
                f"{r['config']}{star}",
                f"{r['n_ok']}/{r['n_ok'] + r['n_failed'] + r['n_censored']}",
                fmt_median(r, summary.ranked_by),
                fmt_s_range(first[0], first[1]) if life and r["n_ok"] > 1 else spread_text(r, name),
                str(r["vs_baseline"] or "—"),
                noise_word(noise_known(r["beyond_noise_vs_baseline"])),
                fmt_usd(r["cost_per_start_usd"]),
                fmt_usd(r["monthly_cost_usd"]),
                str(r["bottleneck"]),
            ]
        )
    right = {1, 2, 3, 6, 7}
    if life:  # the restart beside the first start
        restart = {
            c: fmt_s(v) for c, v in zip(summary.table["config"], summary.table["median_restart_s"])
        }
        for row in rows:
            row.insert(3, "restart" if row is header else restart.get(row[0].rstrip(" *"), "—"))
        right = {1, 2, 3, 4, 7, 8}
    if meta.kind not in INSTALL_KINDS:  # its own figures follow in its section (AU, rates, $)
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
    lines.extend(answer_lines(summary, rec, same_storage=False))
    return lines


def answer_lines(
    summary: Summary,
    rec: Recommendation | None,
    same_storage: bool = True,
    verdict: bool = True,
    notes: bool = True,
) -> list[str]:
    """Same-storage warnings, the verdict, then (if earned) the saving and the start script.

    ``iobench run`` prints its own table with the same-storage lines and the verdict first
    (report/verdict.console_lines), so it asks for neither here.
    """
    lines: list[str] = list(summary.same_storage) if same_storage else []
    if verdict:  # a strategy run's verdict compares first starts; the advice is by the month
        lines.append(("First start: " if summary.has_restarts else "") + summary.verdict.headline)
    if rec is not None:
        label = summary.price.label if summary.price else None
        lines.append(rec.saving_line(label, summary.options.starts_per_month))
        if rec.changes:
            lines.append(f"Compared with {rec.baseline}: " + "; ".join(rec.changes) + ".")
        if (
            summary.cheapest
            and summary.cheapest != summary.winner
            and summary.options.storage_usd_per_gb is not None
        ):
            lines.append(f"Cheapest per start with metered storage: {summary.cheapest}.")
        lines.append("Set (start script, bash):")
        lines.extend(f"    {line}" for line in rec.shell)
    cost = _cost_line(summary)
    if cost:
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


def markdown_lines(summary: Summary, meta: RunMeta, rec: Recommendation | None) -> list[str]:
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
    if rec is not None:
        label = summary.price.label if summary.price else None
        lines += [rec.saving_line(label, summary.options.starts_per_month), ""]
        if rec.changes:
            lines += [f"Compared with {rec.baseline}: " + "; ".join(rec.changes) + ".", ""]
        lines += ["Start script:", "", "```sh", *rec.shell, "```", ""]
        lines += ["Dockerfile:", "", "```dockerfile", *rec.dockerfile, "```", ""]
    cost = _cost_line(summary)
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
