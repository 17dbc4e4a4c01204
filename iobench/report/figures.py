"""One config's figures from its trials: medians with spread of its times and counters, what
its start costs, the bytes it put on the target, its median trial, and the evidence its
bottleneck is named from (the samples of a bounded number of its trials)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from iobench.cost.idle import CostOptions, PriceChoice, idle_cost_usd, monthly_usd, storage_cost_usd
from iobench.report.diagnose import (
    SAMPLE_COLUMNS_USED,
    ConfigFigures,
    SampleFigures,
    classify,
    combine_sample_figures,
    sample_figures,
)
from iobench.report.load import PHASES, Run
from iobench.rundir import kinds
from iobench.stats import median as _median
from iobench.stats import percentile as _percentile

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


__all__ = ["CONFIG_COLUMNS", "DATASET_FIGURES", "DIAGNOSED_PER_CONFIG", "TARGET_ROLE",
           "collect_sample_figures", "config_row", "diagnosed", "median", "median_trial_id",
           "percentile", "speedup", "target_bytes"]  # fmt: skip
