"""The report's start-up strategy section: first start and restart side by side, the monthly
cost at the user's starts a month, and the break-even; the cheapest's start script is the
main recommendation's (report/recommend.py reads this section).

Read only from trials.csv (the lifecycle columns of :mod:`iobench.rundir.records`); the prices come
from the report's cost options. Without a GPU price the ranking is by idle time (the same
order a price would give when storage is free) and says so. Only commands a trial ran are
printed: the persist and restore lines recorded in the rows.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from iobench import files
from iobench.cost.month import LifeFigures, monthly, recommend, summary_lines
from iobench.cost.month import Recommendation as LifeRanking
from iobench.cost.prices import Prices, find_storage_preset
from iobench.stats import median

# the trade-off of each strategy (iobench.trial.strategies' words; report/ imports no measuring module)
TRADE_OFFS = {
    "reinstall": (
        "the whole venv: every start installs again",
        "nothing: the next start installs the new list",
    ),
    "persistent-venv": (
        "nothing on the volume; the caches go cold, so every import reads the volume",
        "install into the venv on the volume (pip runs at volume speed)",
    ),
    "packed-venv": (
        "the venv on tmp: each restart restores it from the archive",
        "install on tmp, then pack again (the archive is one file: rewrite it whole)",
    ),
    "copied-venv": (
        "the venv on tmp: each restart copies the tree back file by file",
        "install on tmp, then copy the tree out again",
    ),
    "packed-cache": (
        "the venv and the cache on tmp: each restart restores the cache from the archive, "
        "then installs from it on local disk",
        "install from the restored cache (only new packages download), then pack it again",
    ),
    "layered-venv": (
        "nothing on the volume; the image's packages are local, the caches go cold",
        "install the new packages into the venv on the volume; a change in the image's part "
        "needs a new image",
    ),
    "prewarm": (
        "nothing on the volume; the caches go cold, and each restart first reads the recorded "
        "import set in parallel",
        "install into the venv on the volume, then record the import set again",
    ),
    "fan-out": (
        "the venv on tmp: each restart restores the one archive, every worker at once",
        "one worker installs on tmp and packs again; the others wait for it and restore",
    ),
}


@dataclass
class LifecycleSection:
    """What the report shows about strategies (empty ``rows`` when the run measured none)."""

    rows: list[dict[str, Any]] = field(default_factory=list)  # a config each: first/restart medians
    lines: list[str] = field(default_factory=list)  # the console and HTML text
    figures: list[LifeFigures] = field(default_factory=list)
    prices: Prices | None = None
    starts: float = 30.0
    best: str | None = None
    ranking: LifeRanking | None = None  # every config's month at ``starts``, cheapest first
    priced: bool = False  # a GPU price was known (else the ranking is by idle time)

    def best_measured(self) -> str | None:
        """The cheapest strategy this run measured (an entered one may rank above it)."""
        if self.ranking is None:
            return None
        entered = {f.strategy for f in self.figures if f.entered}
        return next((c.strategy for c in self.ranking.ranking if c.strategy not in entered), None)

    def row(self, config: str) -> dict[str, Any] | None:
        """One config's medians (None when it measured no restart)."""
        return next((r for r in self.rows if r["config"] == config), None)

    def monthly_usd(self) -> dict[str, float]:
        """Each config's monthly total at ``starts`` (the one cost function, iobench.cost.month)."""
        prices = self.prices or Prices(1.0)
        return {f.strategy: monthly(f, self.starts, prices).total_usd for f in self.figures}


def _median(frame: pd.DataFrame, col: str) -> float:
    values = [
        float(v) for v in frame.get(col, pd.Series(dtype=float)) if v is not None and not pd.isna(v)
    ]
    return median(values) if values else math.nan


def _text(frame: pd.DataFrame, col: str) -> str:
    values = [str(v) for v in frame.get(col, pd.Series(dtype=object)) if isinstance(v, str) and v]
    return max(set(values), key=values.count) if values else ""


def config_rows(trials: pd.DataFrame) -> list[dict[str, Any]]:
    """A row per config that measured a restart: medians of its successful trials."""
    if "restart_s" not in trials or trials["restart_s"].isna().all():
        return []
    ok = trials[(trials["status"] == "ok") & trials["restart_s"].notna()]
    out = []
    for config, t in ok.groupby("config", sort=False):
        out.append(
            {
                "config": str(config),
                "strategy": _text(t, "strategy") or str(config),
                "n": len(t),
                "first_s": _median(t, "first_start_s"),
                "restart_s": _median(t, "restart_s"),
                "stored_bytes": _median(t, "stored_bytes"),
                "target_read": _median(t, "restart_target_read_bytes"),
                "cold_method": _text(t, "cold_method"),
                "warm_left": _text(t, "cold_warm_left"),
                "cache_mode": _text(t, "cache_mode"),
                "persist_method": _text(t, "persist_method"),
                "persist_command": _text(t, "persist_command"),
                "restore_command": _text(t, "restore_command"),
            }
        )
    return out


def prices_for(price_usd_per_hour: float | None, storage: str | None) -> tuple[Prices, list[str]]:
    """The prices to rank by, and lines saying where they came from."""
    notes = []
    if price_usd_per_hour is None:
        notes.append(
            "No GPU price (--gpu or --gpu-price): ranked by GPU idle time, shown as if $1/hour."
        )
        price_usd_per_hour = 1.0
    if storage is None:
        notes.append(
            "Storage not priced (--storage PRESET, e.g. runpod, efs, gp3): what each strategy keeps costs $0 here."
        )
        return Prices(price_usd_per_hour), notes
    preset = find_storage_preset(storage)
    notes.append(
        f"Storage: {preset.name} at ${preset.usd_per_gb_month:g}/GB-month ({preset.provider}, {preset.date})."
    )
    return preset.prices(price_usd_per_hour), notes


def entered_row(f: LifeFigures) -> dict[str, Any]:
    """A table row for an entered strategy: its figures, nothing measured."""
    return {"config": f.strategy, "strategy": f.strategy, "n": 0, "first_s": f.first_s,
            "restart_s": f.restart_s, "stored_bytes": f.stored_bytes, "target_read": math.nan,
            "cold_method": "not measured", "warm_left": "", "cache_mode": "entered",
            "persist_method": "", "persist_command": "", "restore_command": "",
            "entered": True}  # fmt: skip


def side_by_side(rows: list[dict[str, Any]]) -> list[str]:
    """The console table: first start and restart of each config, with the cold method."""
    out = [
        f"{'config':<18} {'first start':>11} {'restart':>9} {'kept on target':>15}  restart read from target / cold"
    ]
    for r in rows:
        read = "—" if math.isnan(r["target_read"]) else f"{r['target_read'] / 1e6:,.1f} MB"
        kept = "—" if math.isnan(r["stored_bytes"]) else f"{r['stored_bytes'] / 1e6:,.1f} MB"
        out.append(
            f"{r['config']:<18} {r['first_s']:>9.2f} s {r['restart_s']:>7.2f} s {kept:>15}  "
            f"{read} / {r['cache_mode']} ({r['cold_method']})"
            + (f"; warm still: {r['warm_left']}" if r.get("warm_left") else "")
        )
    return out


def build_section(
    trials: pd.DataFrame,
    price_usd_per_hour: float | None,
    starts: float,
    storage: str | None,
    entered: Sequence[LifeFigures] = (),
) -> LifecycleSection:
    """Everything the report says about strategies, from the trials' rows, with the user's
    own figures (``--strategy-figure``) ranked beside them, marked entered."""
    rows = config_rows(trials)
    if not rows:
        return LifecycleSection()
    rows += [entered_row(f) for f in entered]
    prices, notes = prices_for(price_usd_per_hour, storage)
    figures = [
        LifeFigures(
            r["config"],
            r["first_s"],
            r["restart_s"],
            0.0 if math.isnan(r["stored_bytes"]) else r["stored_bytes"],
            0.0 if math.isnan(r["target_read"]) else r["target_read"],  # billed where reads are
        )
        for r in rows
        if not r.get("entered")
    ] + list(entered)
    rec = recommend(figures, starts, prices)
    lines = [
        "Start-up strategies: first start and restart (medians)",
        *side_by_side(rows),
        "",
        *summary_lines(rec, figures),
        *notes,
    ]
    return LifecycleSection(
        rows, lines, figures, prices, starts, rec.best.strategy, rec, price_usd_per_hour is not None
    )


CSV_COLUMNS = (
    "config",
    "strategy",
    "n",
    "first_start_s",
    "restart_s",
    "stored_bytes",
    "restart_target_read_bytes",
    "cache_mode",
    "cold_method",
    "monthly_usd",
    "starts",
)


def write_csv(section: LifecycleSection, path: Path) -> Path:
    """lifecycle.csv: a line per config, first start and restart side by side, and its month."""
    prices = section.prices or Prices(1.0)
    f = io.StringIO(newline="")
    w = csv.writer(f)
    w.writerow(CSV_COLUMNS)
    for r, fig in zip(section.rows, section.figures):
        month = monthly(fig, section.starts, prices).total_usd
        w.writerow(
            [
                r["config"],
                r["strategy"],
                r["n"],
                f"{r['first_s']:.4f}",
                f"{r['restart_s']:.4f}",
                "" if math.isnan(r["stored_bytes"]) else int(r["stored_bytes"]),
                "" if math.isnan(r["target_read"]) else int(r["target_read"]),
                r["cache_mode"],
                r["cold_method"],
                f"{month:.6f}",
                f"{section.starts:g}",
            ]
        )
    files.write(path, f.getvalue())  # one atomic write (iobench.files)
    return path


__all__ = ["LifecycleSection", "build_section", "write_csv"]
