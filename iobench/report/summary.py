"""One row per config: medians with spread, speed-up, GPU idle cost and the bottleneck.

Statistics use successful (``ok``) trials only; failed, stalled and interrupted trials are
counted, never averaged in. Medians and percentiles are iobench.stats' (linear
interpolation, Hyndman & Fan type 7); the shown spread is min–max under ten trials and
p10–p90 from there on (report/verdict.py), and whether a difference is beyond noise is
decided once, by report/verdict.py with iobench.stats' tie rule (docs/verdicts.md).

A run with start-up strategies (docs/strategies.md) measured two events per trial: there the
table also holds each config's median first start (install plus the strategy's persist step)
and restart, the fastest is the fastest first start, and ``monthly_cost_usd`` is the month of
iobench.cost.month (first start plus N - 1 restarts, plus storage) that the recommendation
ranks by (report/lifecycle_report.py builds that section once, here).

The baseline of ``speedup_vs_baseline`` (median baseline ÷ median config: above 1 is
faster) is the config named ``naive`` (the advice-free default); a run without one uses its
first config and says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from iobench.cost.idle import (
    CostOptions,
    PriceChoice,
    pricing,
)
from iobench.cost.kinds import measure
from iobench.cost.measure import Measure, Pricing
from iobench.report.configs import TIME, ConfigTimes, RowView, configs_from_rows
from iobench.report.diagnose import (
    SampleFigures,
)
from iobench.report.figures import (
    CONFIG_COLUMNS,
    DATASET_FIGURES,
    collect_sample_figures,
    config_row,
    median_trial_id,
)
from iobench.report.lifecycle_report import LifecycleSection, build_section
from iobench.report.load import PHASES, Run
from iobench.report.placement import shared_storage_lines
from iobench.report.verdict import Verdict, decide, row_marks

BASELINE_NAME = "naive"
SUMMARY_COLUMNS = [
    "config",
    *CONFIG_COLUMNS,
    "n_ok",
    "n_failed",
    "n_stalled",
    "n_censored",
    "given_up_after_s",
    "median_time_to_ready_s",
    "p10_time_to_ready_s",
    "p90_time_to_ready_s",
    "min_time_to_ready_s",
    "max_time_to_ready_s",
    "median_first_start_s",
    "median_restart_s",
    *[f"median_{p}_s" for p in PHASES],
    *[f"median_{c}" for c in DATASET_FIGURES],
    "iowait_mean_pct",
    "iowait_p95_pct",
    "offcpu_frac",
    "dstate_max",
    "fswait_frac",
    "stalls",
    "stall_longest_s",
    "write_mb",
    "write_calls",
    "files_installed",
    "target_mb",
    "speedup_vs_baseline",
    "vs_baseline",
    "beyond_noise_vs_baseline",
    "saving_vs_baseline_s",
    "gpu_idle_cost_usd",
    "storage_cost_usd",
    "cost_per_start_usd",
    "monthly_cost_usd",
    "bottleneck",
    "why",
]


@dataclass
class Summary:
    """The summary table and the few facts around it that every output format shows."""

    table: pd.DataFrame
    baseline: str | None
    fastest: str | None  # the fastest measured, named as such where it is shown
    cheapest: str | None
    price: PriceChoice | None
    options: CostOptions
    notes: list[str] = field(default_factory=list)
    median_trials: dict[str, str] = field(default_factory=dict)
    verdict: Verdict = field(default_factory=lambda: Verdict("none", ""))
    configs: list[ConfigTimes] = field(default_factory=list)
    same_storage: list[str] = field(default_factory=list)  # sentences, said first everywhere
    lifecycle: LifecycleSection = field(default_factory=LifecycleSection)  # empty: no restarts
    #: the run's question, answered: each trial's figure the verdict judges (its kind's)
    measure: Measure = field(default_factory=lambda: TIME)

    @property
    def winner(self) -> str | None:
        """The verdict's winner (``Verdict.winner``): None unless it advises or keeps."""
        return self.verdict.winner

    @property
    def has_restarts(self) -> bool:
        """The run measured a restart per trial (a scenario with start-up strategies)."""
        return bool(self.lifecycle.rows)

    @property
    def ranked_by(self) -> str:
        """The column the fastest is chosen by: the first start in a strategy run."""
        return "median_first_start_s" if self.has_restarts else "median_time_to_ready_s"

    def row(self, config: str) -> pd.Series:
        """One config's summary row (by name)."""
        return self.table.set_index("config").loc[config]

    def trials_per_config(self) -> str:
        """``3 trials per config`` (or ``2–3 ...``), counted from trials.csv, not the plan."""
        counts = (self.table["n_ok"] + self.table["n_failed"] + self.table["n_censored"]).astype(
            int
        )
        lo, hi = int(counts.min()), int(counts.max())
        if lo == hi:
            return f"{lo} trial per config" if lo == 1 else f"{lo} trials per config"
        return f"{lo}–{hi} trials per config"


# --- pure statistics ---------------------------------------------------------------------------


def choose_baseline(table: pd.DataFrame) -> tuple[str | None, str | None]:
    """The config named ``naive`` if it has ok trials (or trials given up, which bound it
    from below), else the first with any; plus a note."""
    usable = table[(table["n_ok"] > 0) | (table["n_censored"] > 0)]
    if usable.empty:
        return None, None
    if BASELINE_NAME in set(usable["config"]):
        return BASELINE_NAME, None
    first = str(usable["config"].iloc[0])
    if BASELINE_NAME in set(table["config"]):
        return (
            first,
            f"config '{BASELINE_NAME}' has no successful trial; speed-ups are relative to '{first}'",
        )
    return (
        first,
        f"no config named '{BASELINE_NAME}'; speed-ups are relative to the first config, '{first}'",
    )


def measure_of(run: Run, options: CostOptions) -> tuple[Measure, Pricing, list[str]]:
    """The run's measure (its kind's question at its prices), the pricing, and the notes
    saying where the prices came from."""
    priced, notes = pricing(options, run.gpu)
    views = [RowView(r) for r in run.records]
    return measure(run.info.kind, views, priced), priced, notes


def summarize(
    run: Run,
    price: PriceChoice | None,
    options: CostOptions,
    samples: dict[str, tuple[SampleFigures, int, int]] | None = None,
    judged: Measure | None = None,
) -> Summary:
    """Build the summary table of one run (configs in scenario order); ``judged``: the run's
    measure (its kind's question: ``measure_of``), time-to-ready when not given."""
    judged = judged or TIME
    if samples is None:
        samples = collect_sample_figures(run)
    rows = []
    medians: dict[str, str] = {}
    for config in run.config_order():
        trials = run.trials[run.trials["config"] == config]
        rows.append(config_row(config, trials, price, options, samples.get(config)))
        tid = median_trial_id(trials)
        if tid is not None:
            medians[config] = tid
    table = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    baseline, note = choose_baseline(table)
    notes = [note] if note else []
    notes += _synthetic_note(run, price)
    configs = configs_from_rows(run.records, judged)
    _mark_against_baseline(table, configs, baseline)
    lifecycle = build_section(
        run.trials,
        price.usd_per_hour if price is not None else None,
        options.starts_per_month,
        options.storage,
        options.entered,
    )
    by = "median_first_start_s" if lifecycle.rows else "median_time_to_ready_s"
    if baseline is not None:
        base = float(table.loc[table["config"] == baseline, by].iloc[0])
        table["saving_vs_baseline_s"] = base - table[by]
    ranked = sorted((c for c in configs if c.n), key=lambda c: c.median)
    fastest = ranked[0].name if ranked else None
    cheapest = _cheapest(table, lifecycle)
    # the verdict's same-filesystem rule reads each role's device, mount point and fstype
    roles = run.roles
    verdict = decide(configs, baseline, roles)
    return Summary(
        table,
        baseline,
        fastest,
        cheapest,
        price,
        options,
        notes,
        medians,
        verdict,
        configs,
        shared_storage_lines(roles),
        lifecycle,
        judged,
    )


def _synthetic_note(run: Run, price: PriceChoice | None) -> list[str]:
    """Dollars priced on synthetic wheels are said to be the stand-in's, not the user's stack."""
    source = run.info.index.source if run.info.index is not None else ""
    if price is None or not source.startswith("synthetic profile"):
        return []
    return [
        f"the dollar figures are for the {run.info.scenario_name or 'synthetic'} scenario's "
        f"synthetic wheels ({source}), not your packages: run --scenario torch (or "
        "--package REQ) to price your own stack"
    ]


def _mark_against_baseline(
    table: pd.DataFrame, configs: list[ConfigTimes], baseline: str | None
) -> None:
    """Each row's speed-up over the baseline, its words, and whether beyond noise."""
    marks = row_marks(configs, baseline)
    table["speedup_vs_baseline"] = [marks.get(c, (math.nan,))[0] for c in table["config"]]
    table["vs_baseline"] = [marks.get(c, (0, ""))[1] for c in table["config"]]
    table["beyond_noise_vs_baseline"] = [
        marks[c][2] if c in marks else None for c in table["config"]
    ]


def _cheapest(table: pd.DataFrame, lifecycle: LifecycleSection) -> str | None:
    """The cheapest config: per start, or in a priced strategy run over the month (whose
    ``monthly_cost_usd`` then becomes iobench.cost.month's, the figure the advice ranks by)."""
    if lifecycle.rows and lifecycle.priced and lifecycle.ranking is not None:
        months = lifecycle.monthly_usd()
        table["monthly_cost_usd"] = [months.get(c, math.nan) for c in table["config"]]
        return lifecycle.best_measured()
    usable = table[table["n_ok"] > 0]
    costs = usable[np.isfinite(usable["cost_per_start_usd"].to_numpy(dtype=float))]
    return str(costs.loc[costs["cost_per_start_usd"].idxmin(), "config"]) if len(costs) else None
