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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from iobench.cost.idle import (
    CostOptions,
    PriceChoice,
    idle_cost_usd,
    monthly_usd,
    pricing,
    storage_cost_usd,
)
from iobench.cost.kinds import measure
from iobench.cost.measure import Measure, Pricing
from iobench.report.configs import TIME, ConfigTimes, RowView, configs_from_rows
from iobench.report.diagnose import (
    SAMPLE_COLUMNS_USED,
    ConfigFigures,
    SampleFigures,
    classify,
    combine_sample_figures,
    sample_figures,
)
from iobench.report.lifecycle_report import LifecycleSection, build_section
from iobench.report.load import PHASES, Run
from iobench.report.placement import shared_storage_lines
from iobench.report.verdict import Verdict, decide, row_marks
from iobench.rundir import kinds
from iobench.stats import median as _median
from iobench.stats import percentile as _percentile

BASELINE_NAME = "naive"
TARGET_ROLE = "target"

#: what a config is (the most common value over its trials): every kind's places and choices
CONFIG_COLUMNS = tuple(
    dict.fromkeys(
        [c for p in kinds.all_places() for c in (p.role, p.fstype)]
        + [c.column for c in kinds.all_choices()]
        + ["strategy"]
    )
)

#: figures a kind's section reads from the summary, a median column each (NaN in other runs)
DATASET_FIGURES = ("au", "read_mb_per_s", "io_wait_s", "epochs_s", "stage_s")

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


def median(values: object) -> float:
    """Median of the finite values; NaN when there are none (iobench.stats.median)."""
    return _median(_finite(values))


def percentile(values: object, q: float) -> float:
    """q-th percentile (0-100), linear interpolation; NaN when there are no values."""
    return _percentile(_finite(values), q)


def speedup(baseline_s: float, config_s: float) -> float:
    """How many times faster than the baseline (>1 is faster); NaN when undefined."""
    if not (_ok(baseline_s) and _ok(config_s)) or config_s <= 0:
        return math.nan
    return baseline_s / config_s


def _finite(values: object) -> np.ndarray:
    series = values if isinstance(values, pd.Series) else pd.Series(values, dtype="object")
    arr = pd.to_numeric(series, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    return arr[np.isfinite(arr)]


def _ok(x: float | None) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def _mode(series: pd.Series) -> str:
    vals = series.dropna().astype(str)
    return str(vals.mode().iloc[0]) if len(vals) else ""


#: what target_bytes reads of a trial
_TARGET_COLUMNS = (
    "venv_role",
    "venv_bytes",
    "cache_role",
    "cache_bytes",
    "tmpdir_role",
    "tmpdir_peak_bytes",
)


def target_bytes(trial: Mapping[str, object]) -> float:
    """Bytes one trial put on the ``target`` role's filesystem (NaN when unknown).

    The venv, cache and TMPDIR figures are growth of *the filesystem that holds each*
    (statvfs), so roles sharing the target measure the same filesystem: the largest of
    them is the target's growth, and adding them up would count it twice.
    """
    values = []
    for role_col, bytes_col in (
        ("venv_role", "venv_bytes"),
        ("cache_role", "cache_bytes"),
        ("tmpdir_role", "tmpdir_peak_bytes"),
    ):
        if str(trial.get(role_col)) == TARGET_ROLE:
            try:
                value = float(trial.get(bytes_col))  # type: ignore[arg-type]
            except (TypeError, ValueError):
                continue
            if math.isfinite(value):
                values.append(max(value, 0.0))
    if values:
        return max(values)
    return 0.0 if _lives_off_target(trial) else math.nan


def _lives_off_target(trial: Mapping[str, object]) -> bool:
    return all(str(trial.get(c)) != TARGET_ROLE for c in ("venv_role", "cache_role", "tmpdir_role"))


def median_trial_id(trials: pd.DataFrame) -> str | None:
    """The config's median trial: the ok trial at the lower median (an odd count's middle one;
    of an even count, the faster of the middle two, earliest on ties)."""
    ok = trials[trials["status"] == "ok"]
    ok = ok[np.isfinite(ok["time_to_ready_s"].to_numpy(dtype=float))]
    if ok.empty:
        return None
    order = ok.sort_values("time_to_ready_s", kind="stable")
    return str(order["trial_id"].iloc[(len(order) - 1) // 2])


def config_row(
    config: str,
    trials: pd.DataFrame,
    price: PriceChoice | None,
    options: CostOptions,
    samples: tuple[SampleFigures, int, int] | None = None,
) -> dict[str, object]:
    """Summary figures of one config from its trials (all statuses) and sample figures."""
    ok = trials[trials["status"] == "ok"]
    row: dict[str, object] = {"config": config}
    for col in CONFIG_COLUMNS:
        row[col] = _mode(trials[col]) if col in trials.columns else ""
    row["n_ok"] = int(len(ok))
    censored = trials[trials["status"] == "censored"]
    row["n_failed"] = int((~trials["status"].isin(["ok", "censored"])).sum())
    row["n_stalled"] = int((trials["status"] == "stalled").sum())
    row["n_censored"] = int(len(censored))  # given up (--give-up-after): slower than a bound
    bounds = censored["censored_after_s"] if "censored_after_s" in censored.columns else []
    row["given_up_after_s"] = (
        float(pd.Series(bounds, dtype=float).median()) if len(censored) else math.nan
    )
    fig = _trial_figures(ok, trials)
    fig.update(_cost_figures(fig, price, options))
    row.update(fig)
    diagnosis = classify(_config_figures(fig, ok, samples))
    row["bottleneck"] = diagnosis.bottleneck
    row["why"] = diagnosis.why
    if not len(ok):
        errors = trials["error"].dropna().astype(str)
        first = errors.iloc[0] if len(errors) else "no error recorded"
        row["why"] = f"all {len(trials)} trial(s) did not finish ok; first error: {first}"
    return row


def _trial_figures(ok: pd.DataFrame, trials: pd.DataFrame) -> dict[str, float]:
    """Medians and spreads of the ok trials' times and counters; stalls over all trials."""
    fig: dict[str, float] = {}
    ttr = ok["time_to_ready_s"]
    fig["median_time_to_ready_s"] = median(ttr)
    fig["p10_time_to_ready_s"] = percentile(ttr, 10)
    fig["p90_time_to_ready_s"] = percentile(ttr, 90)
    fig["min_time_to_ready_s"] = percentile(ttr, 0)
    fig["max_time_to_ready_s"] = percentile(ttr, 100)
    for col in ("first_start_s", "restart_s", *DATASET_FIGURES):  # empty in other runs
        fig[f"median_{col}"] = median(ok[col]) if col in ok.columns else math.nan
    for p in PHASES:
        fig[f"median_{p}_s"] = median(ok[f"{p}_s"])
    fig["iowait_mean_pct"] = median(ok["iowait_mean_pct"])
    fig["iowait_p95_pct"] = median(ok["iowait_p95_pct"])
    fig["offcpu_frac"] = median(ok["offcpu_frac"])
    dmax = _finite(ok["dstate_max"])
    fig["dstate_max"] = float(dmax.max()) if len(dmax) else math.nan
    fig["fswait_frac"] = median(ok["fswait_frac"])  # NaN for runs written before the column
    stalls = _finite(trials["stalls"])
    fig["stalls"] = float(stalls.sum()) if len(stalls) else 0.0
    longest = _finite(trials["stall_longest_s"])
    fig["stall_longest_s"] = float(longest.max()) if len(longest) else math.nan
    fig["write_mb"] = median(ok["write_bytes"]) / 1e6
    fig["write_calls"] = median(ok["write_calls"])
    fig["files_installed"] = median(ok["files_installed"])
    on_target = [
        target_bytes(r)
        for r in ok[[c for c in _TARGET_COLUMNS if c in ok.columns]].to_dict("records")
    ]
    fig["target_mb"] = median(on_target) / 1e6
    return fig


def _cost_figures(
    fig: dict[str, float], price: PriceChoice | None, options: CostOptions
) -> dict[str, float]:
    """GPU idle and storage cost of one start at the median (a strategy run's first start,
    persist step included), their sum, and a month of starts."""
    first = fig.get("median_first_start_s", math.nan)
    med = first if _ok(first) else fig["median_time_to_ready_s"]
    gpu = idle_cost_usd(med, price.usd_per_hour) if price is not None and _ok(med) else math.nan
    store = (
        storage_cost_usd(fig["target_mb"] * 1e6, options.storage_usd_per_gb)
        if options.storage_usd_per_gb is not None and _ok(fig["target_mb"])
        else math.nan
    )
    parts = [x for x in (gpu, store) if _ok(x)]
    per_start = float(sum(parts)) if parts else math.nan
    monthly = monthly_usd(per_start, options.starts_per_month) if _ok(per_start) else math.nan
    return {
        "gpu_idle_cost_usd": gpu,
        "storage_cost_usd": store,
        "cost_per_start_usd": per_start,
        "monthly_cost_usd": monthly,
    }


def _config_figures(
    fig: dict[str, float], ok: pd.DataFrame, samples: tuple[SampleFigures, int, int] | None
) -> ConfigFigures:
    """What the bottleneck rules read: the row's figures and the combined sample figures."""
    sfig, n_drop, n_sampled = samples if samples is not None else (SampleFigures(), 0, 0)
    return ConfigFigures(
        time_to_ready_s=fig["median_time_to_ready_s"],
        download_s=fig["median_download_s"],
        install_s=fig["median_install_s"],
        import_s=fig["median_import_s"],
        cpu_s=median(ok["cpu_s"]),
        offcpu_frac=fig["offcpu_frac"],
        write_bytes=median(ok["write_bytes"]),
        write_calls=fig["write_calls"],
        files_installed=fig["files_installed"],
        dstate_max=fig["dstate_max"],
        fswait_frac=fig["fswait_frac"],
        iowait_p95_pct=fig["iowait_p95_pct"],
        stalls=fig["stalls"],
        stall_longest_s=fig["stall_longest_s"],
        phases=tuple((p, fig[f"median_{p}_s"]) for p in PHASES),
        samples=sfig,
        drop_trials=n_drop,
        sampled_trials=n_sampled,
    )


#: trials per config whose samples the diagnosis reads at most: its figures are medians over
#: trials, which a few dozen settle (a run of 250 repeats would read 2 million sample rows to
#: move a median by noise); spread evenly over the rounds, and said so
DIAGNOSED_PER_CONFIG = 32


def diagnosed(trial_ids: Sequence[str], most: int = DIAGNOSED_PER_CONFIG) -> list[str]:
    """At most ``most`` of a config's trials, evenly spread over the order they ran in."""
    ids = list(trial_ids)
    if len(ids) <= most:
        return ids
    return [ids[round(i * (len(ids) - 1) / (most - 1))] for i in range(most)]


def collect_sample_figures(run: Run) -> dict[str, tuple[SampleFigures, int, int]]:
    """Per config: combined sample figures, trials showing a drop, trials with samples.

    Reads the samples of at most ``DIAGNOSED_PER_CONFIG`` ok trials a config (evenly over
    the run), a few megabytes at a time (memory stays flat)."""
    out: dict[str, tuple[SampleFigures, int, int]] = {}
    ok = run.trials[run.trials["status"] == "ok"]
    groups = {str(c): diagnosed(g["trial_id"]) for c, g in ok.groupby("config", sort=False)}
    for config, figs in run.map_sample_groups(groups, SAMPLE_COLUMNS_USED, sample_figures).items():
        combined, n_drop = combine_sample_figures(figs)
        out[config] = (combined, n_drop, len(figs))
    return out


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
