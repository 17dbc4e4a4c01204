"""What the run knew before and gave up on: predicted against measured time-to-ready, and
censored trials drawn as "> X s".

A run that probed its roles records each trial's ``predicted_s`` (docs/prediction.md); one
run with ``--give-up-after`` records trials it ended as ``censored`` with their lower bound
``censored_after_s`` (docs/early-stop.md). This section shows both: per config the
prediction, the measured median (``> b s`` when half or more of its trials were given up)
and the prediction's error; and it says so when the fastest config named elsewhere in the
report had censored trials, whose median from its finished trials alone is then too low.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

from iobench.report.page import fragment
from iobench.report.part import Context, Part
from iobench.stats import censored_median, median
from iobench.units import fmt_s


@dataclass(frozen=True)
class ConfigForesight:
    """One config: its prediction, its measured median (or lower bound), and the counts."""

    config: str
    predicted_s: float
    measured_s: float
    censored_median: bool
    n_ok: int
    n_censored: int

    @property
    def measured_text(self) -> str:
        return f"> {fmt_s(self.measured_s)}" if self.censored_median else fmt_s(self.measured_s)

    @property
    def error_pct(self) -> float:
        """(predicted - measured) / measured, %; NaN without both or when the median is only a
        lower bound (the text then gives the error's upper bound)."""
        if self.censored_median or not (self.measured_s > 0) or math.isnan(self.predicted_s):
            return math.nan
        return 100.0 * (self.predicted_s - self.measured_s) / self.measured_s

    @property
    def error_text(self) -> str:
        e = self.error_pct
        if math.isnan(e):
            if self.censored_median and self.predicted_s > 0 and self.measured_s > 0:
                # the median exceeds the bound, so the error is below the bound's
                return f"< {100.0 * (self.predicted_s - self.measured_s) / self.measured_s:+.1f} %"
            return "—"
        return f"{e:+.1f} %"


@dataclass
class Foresight:
    """The section: a row per config, and the sentences to say (console and HTML)."""

    rows: list[ConfigForesight] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def shown(self) -> bool:
        return any(not math.isnan(r.predicted_s) or r.n_censored for r in self.rows)

    def lines(self) -> list[str]:
        """Console lines (none when nothing was predicted or given up)."""
        if not self.shown:
            return []
        cells = [["config", "predicted", "measured", "error", "ok", "censored"]]
        for r in self.rows:
            cells.append([r.config, fmt_s(r.predicted_s), r.measured_text, r.error_text,
                          str(r.n_ok), str(r.n_censored)])  # fmt: skip
        widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
        out = ["", "Predicted vs measured time-to-ready (medians; docs/prediction.md):"]
        for row in cells:
            out.append("  " + "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip())  # fmt: skip
        return out + [f"note: {n}" for n in self.notes]


def _column(trials: pd.DataFrame, name: str) -> pd.Series:
    return trials[name] if name in trials.columns else pd.Series([math.nan] * len(trials))


def build(
    trials: pd.DataFrame, winner: str | None, predicted: Mapping[str, float] | None = None
) -> Foresight:
    """The section from a run's trials (latest rows) and the config the report calls fastest.

    ``predicted``: meta.json's ``predicted_s``, the one figure per config said before the
    first trial; without it (runs before the key) the median of the rows' ``predicted_s``."""
    out = Foresight()
    if trials.empty:
        return out
    df = trials.assign(
        _pred=_column(trials, "predicted_s").to_numpy(dtype=float),
        _bound=_column(trials, "censored_after_s").to_numpy(dtype=float),
    )
    for config, g in df.groupby("config", sort=False):
        ok = g[g["status"] == "ok"]
        cen = g[(g["status"] == "censored") & g["_bound"].notna()]
        values = [*ok["time_to_ready_s"].astype(float), *cen["_bound"].astype(float)]
        flags = [False] * len(ok) + [True] * len(cen)
        m, is_bound = censored_median(values, flags)
        said = (predicted or {}).get(str(config))
        pred = float(said) if said is not None else median(g["_pred"])
        out.rows.append(ConfigForesight(str(config), pred, m, is_bound, len(ok), len(cen)))
    for r in out.rows:
        if r.config == winner and r.n_censored:
            out.notes.append(
                f"{r.config}, named fastest, had {r.n_censored} of {r.n_ok + r.n_censored} trials "
                f"given up: its median over finished trials only understates it (with the "
                f"bounds: {r.measured_text})"
            )
    return out


TEMPLATE = """\
{% from "macros.html.j2" import table %}
<h2>Predicted and given up</h2>
<p class="caption">Predicted: median of the trials' predictions, each from the probe of the roles at the start of the run (probe.json) and the CPU speed at the trial's start (docs/prediction.md); empty for configs the model cannot predict. Measured: median time-to-ready; &gt; X: half or more of the config's trials were ended by --give-up-after at X s or later (docs/early-stop.md).</p>
{{ table(["config", "predicted", "measured median", "error", "ok", "censored"], rows) }}
{% for n in notes %}<div class="warn">{{ n }}</div>{% endfor %}
"""


def build_part(ctx: Context) -> Part | None:
    """Predicted against measured, and the configs given up (none when neither happened)."""
    section = build(ctx.run.trials, ctx.summary.fastest, ctx.meta.predicted_s)
    if not section.shown:
        return None
    rows = [[r.config, fmt_s(r.predicted_s), r.measured_text, r.error_text, r.n_ok, r.n_censored]
            for r in section.rows]  # fmt: skip
    return Part("foresight", lines=section.lines(),
                html=fragment(TEMPLATE, rows=rows, notes=section.notes))  # fmt: skip


__all__ = ["ConfigForesight", "Foresight", "build", "build_part"]
