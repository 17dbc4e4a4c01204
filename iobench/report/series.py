"""The per-trial figures of a trial's samples, which the diagnosis and the charts read: the
install phase's write rate, its plateau, a throughput drop, the waits, how busy the machine was.

Throughput drops (e.g. an EFS volume running out of burst credits) are found with a
single change point on the install phase's write rates: the split that minimises the
summed squared error of two constant segments (least-squares binary segmentation with one
split; Killick & Eckley, "changepoint", JSS 2014, describe the family). A drop is reported
when the later segment's mean is below half the earlier one's (``DROP_RATIO``) and the
earlier one moved at least ``MIN_DROP_MBPS``. Rates are taken over 1-second windows, finer
for installs shorter than 30 s (``DROP_WINDOWS`` windows per install, never under two
sampler ticks), so a 10-second install still has the three windows per segment a change
point needs. Write gaps (``WRITE_GAP_MIN_S`` or more without installer writes) are left out —
they would pull the split to themselves — but shorter gaps stay in:
a throttled writer often moves a chunk, waits, moves the next, and leaving its empty
windows out would make the throttled rate look as high as the chunk's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import pandas as pd

DROP_RATIO = 0.5
MIN_DROP_MBPS = 1.0  # ignore "drops" between rates too small to matter
WRITE_GAP_MIN_S = 5.0  # no installer writes this long: a write gap (not a recorded stall)
DROP_WINDOWS = 30  # installs shorter than 30 s get finer windows for drop detection


#: one trial's samples: a frame, or its columns as arrays (``load.SampleColumns``, what the
#: bulk pass hands over: a frame per trial cost more than the figures themselves)
SampleData: TypeAlias = pd.DataFrame | Mapping[str, np.ndarray]

#: the sample columns the rules read (the bulk pass parses only these)
SAMPLE_COLUMNS_USED = (
    "t",
    "phase",
    "tree_write_bytes",
    "net_recv_bps",
    "tree_dstate",
    "tree_fswait",
    "cpu_user_pct",
    "cpu_system_pct",
)


@dataclass(frozen=True)
class SampleFigures:
    """What one trial's time series says (NaN where the samples cannot say it)."""

    install_write_mbps: float = math.nan  # mean app-level write rate during install
    write_plateau: float = math.nan  # median / p95 of 1-second write rates in install
    net_recv_mbps: float = math.nan  # median system receive rate during download
    dstate_share: float = math.nan  # share of ticks with an installer thread in D state
    fswait_share: float = math.nan  # share of ticks with an installer thread in a fs wait
    drop_before_mbps: float = math.nan
    drop_after_mbps: float = math.nan
    drop_at_s: float = math.nan  # seconds since trial start; NaN = no drop
    machine_busy: float = math.nan  # median share of the machine's CPU time in use (all cores)


@dataclass(frozen=True)
class Drop:
    """A lasting fall in the install phase's write rate (see the module docstring)."""

    at_s: float  # seconds since trial start
    before_mbps: float
    after_mbps: float
    start_s: float  # the install phase's first and last sample: where the segments lie
    end_s: float


# --- per-trial figures from samples ---------------------------------------------------------


def _median(x: np.ndarray) -> float:
    """``np.median`` of a non-empty 1-D float array (the same value; NaN when any is NaN)
    without its generic machinery, ~40 µs a call: a 2,000-trial report takes ~12,000."""
    n = len(x)
    h = n // 2
    part = np.partition(x, [h - 1, h, n - 1] if n % 2 == 0 else [h, n - 1])
    if math.isnan(part[-1]):
        return math.nan
    return float(part[h]) if n % 2 else float((part[h - 1] + part[h]) / 2)


def _percentile(x: np.ndarray, q: float) -> float:
    """``np.percentile(x, q)`` (its default linear method) of a non-empty 1-D float array,
    the same value without the generic machinery, as ``_median``."""
    n = len(x)
    at = (n - 1) * (q / 100)
    lo = min(int(math.floor(at)), n - 1)
    hi = min(lo + 1, n - 1)
    part = np.partition(x, sorted({0, lo, hi, n - 1}))
    if math.isnan(part[-1]):
        return math.nan
    a, b, gamma = part[lo], part[hi], at - lo
    diff = b - a
    return float(b - diff * (1 - gamma)) if gamma >= 0.5 else float(a + diff * gamma)


def _diff(x: np.ndarray) -> np.ndarray:
    """``np.diff`` of a 1-D array without its checks."""
    return x[1:] - x[:-1]


def window_rates(
    t: np.ndarray, cum: np.ndarray, window_s: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Rates of a cumulative counter over ~``window_s`` windows: (window start t, rate/s)."""
    if len(t) < 2:
        return np.array([]), np.array([])
    dt = _median(_diff(t))
    step = max(1, int(round(window_s / dt))) if dt > 0 else 1
    tt, cc = t[::step], cum[::step]
    if len(tt) < 2:
        tt, cc = t[[0, -1]], cum[[0, -1]]
    span = _diff(tt)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(span > 0, _diff(cc) / span, np.nan)
    keep = np.isfinite(rate)
    return tt[:-1][keep], np.clip(rate[keep], 0, None)


def change_point(values: np.ndarray, min_seg: int = 3) -> tuple[int, float, float] | None:
    """Best single split of ``values`` into two constant segments (least squares).

    Returns (index of the first value after the split, mean before, mean after), or None
    when there are too few values for two segments of ``min_seg``.
    """
    n = len(values)
    if n < 2 * min_seg:
        return None
    x = np.asarray(values, dtype=float)
    c1 = np.concatenate(([0.0], np.cumsum(x)))
    c2 = np.concatenate(([0.0], np.cumsum(x * x)))
    ks = np.arange(min_seg, n - min_seg + 1)
    left_n, right_n = ks, n - ks
    left_sse = c2[ks] - c1[ks] ** 2 / left_n
    right_sse = (c2[n] - c2[ks]) - (c1[n] - c1[ks]) ** 2 / right_n
    k = int(ks[np.argmin(left_sse + right_sse)])
    return k, float(x[:k].mean()), float(x[k:].mean())


def _floats(data: SampleData, name: str) -> np.ndarray | None:
    """One sample column as floats, or None when the samples lack it."""
    return np.asarray(data[name], dtype=np.float64) if name in data else None


def _phases(data: SampleData) -> np.ndarray:
    """The ``phase`` column, compared with phase names only ("" everywhere when the samples
    lack it); str objects stay objects (as fast to compare as fixed-width text, without the
    conversion)."""
    if "phase" not in data:
        return np.full(len(np.asarray(data["t"])), "")
    phase = np.asarray(data["phase"])
    return phase if phase.dtype == object else phase.astype(str)


def _install_series(df: SampleData) -> tuple[np.ndarray, np.ndarray]:
    """(t, cumulative installer write bytes) of the install phase (all rows if none)."""
    w = _floats(df, "tree_write_bytes")
    if w is None:
        return np.array([]), np.array([])
    t = np.asarray(df["t"], dtype=np.float64)
    install = _phases(df) == "install"
    if np.count_nonzero(install) < 2:
        install = np.ones(len(t), dtype=bool)
    ti, wi = t[install], w[install]
    ok = np.isfinite(wi) & np.isfinite(ti)
    return ti[ok], wi[ok]


def install_write_rates(df: SampleData, window_s: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Installer write rates (MB/s) during install over ``window_s`` windows: (start s, MB/s)."""
    starts, rates = window_rates(*_install_series(df), window_s)
    return starts, rates / 1e6


def drop_window_s(t: np.ndarray) -> float:
    """1 s, or span / ``DROP_WINDOWS`` for a shorter install, never under two ticks."""
    if len(t) < 2:
        return 1.0
    tick = _median(_diff(t))
    span = float(t[-1] - t[0])
    return float(min(1.0, max(span / DROP_WINDOWS, 2 * tick)))


def install_drop(df: SampleData) -> Drop | None:
    """The install phase's throughput drop, if any (what diagnosis and timeline both use)."""
    return _drop_of(*_install_series(df))


def _drop_of(
    ti: np.ndarray, wi: np.ndarray, second_rates: tuple[np.ndarray, np.ndarray] | None = None
) -> Drop | None:
    """The drop in an install series; ``second_rates`` are its 1-second window rates when
    already computed (the drop's windows are those for any install of 30 s or more)."""
    if len(ti) < 2:
        return None
    window = drop_window_s(ti)
    if second_rates is not None and window == 1.0:
        starts, rates = second_rates
    else:
        starts, rates = window_rates(ti, wi, window)
    found = find_drop(starts, rates / 1e6)
    if found is None:
        return None
    at, before, after = found
    return Drop(at, before, after, float(ti[0]), float(ti[-1]))


def find_drop(
    starts: np.ndarray, rates_mb: np.ndarray, gap_s: float = WRITE_GAP_MIN_S
) -> tuple[float, float, float] | None:
    """(time, MB/s before, MB/s after) of a lasting fall in write rate, or None.

    Windows inside a write gap (``gap_s`` or more without writes) are left out: they would
    otherwise pull the change point to themselves instead of the lasting drop. Shorter gaps
    count as the zero they are.
    """
    keep = np.ones(len(rates_mb), dtype=bool)
    for a, b in find_write_gaps(starts, rates_mb, gap_s):
        keep &= ~((starts >= a) & (starts < b))
    cp = change_point(rates_mb[keep])
    if cp is None:
        return None
    k, before, after = cp
    if before >= MIN_DROP_MBPS and after < DROP_RATIO * before:
        return float(starts[keep][k]), before, after
    return None


def find_write_gaps(
    starts: np.ndarray, rates_mb: np.ndarray, min_s: float = WRITE_GAP_MIN_S
) -> list[tuple[float, float]]:
    """Write gaps: stretches of at least ``min_s`` seconds in which the installer wrote nothing.

    Not stalls: a stall is what the sampler recorded (no read *or* write progress for
    ``--stall-after`` seconds, stalls.csv); a write gap is the report's estimate from samples,
    drawn on timelines of runs that recorded no stalls.
    """
    out: list[tuple[float, float]] = []
    if len(starts) < 2:
        return out
    step = _median(_diff(starts))
    i = 0
    while i < len(rates_mb):
        if rates_mb[i] <= 0:
            j = i
            while j + 1 < len(rates_mb) and rates_mb[j + 1] <= 0:
                j += 1
            a, b = float(starts[i]), float(starts[j]) + step
            if b - a >= min_s:
                out.append((a, b))
            i = j + 1
        else:
            i += 1
    return out


def sample_figures(df: SampleData) -> SampleFigures:
    """Reduce one trial's samples to the few figures the rules use (each column read once)."""
    phase = _phases(df)
    out: dict[str, float] = {}
    ti, wi = _install_series(df)
    if len(ti) >= 2 and ti[-1] > ti[0]:
        out["install_write_mbps"] = (wi[-1] - wi[0]) / (ti[-1] - ti[0]) / 1e6
        second_rates = window_rates(ti, wi, 1.0)
        rates_mb = second_rates[1] / 1e6
        if len(rates_mb):
            p95 = _percentile(rates_mb, 95)
            if p95 > 0:
                out["write_plateau"] = _median(rates_mb) / p95
        drop = _drop_of(ti, wi, second_rates)
        if drop is not None:
            out["drop_at_s"] = drop.at_s
            out["drop_before_mbps"] = drop.before_mbps
            out["drop_after_mbps"] = drop.after_mbps
    recv = _floats(df, "net_recv_bps")
    dl = phase == "download"
    if recv is not None and dl.any():
        recv = recv[dl]
        recv = recv[np.isfinite(recv)]
        if len(recv):
            out["net_recv_mbps"] = _median(recv) / 1e6
    user, system = _floats(df, "cpu_user_pct"), _floats(df, "cpu_system_pct")
    if user is not None and system is not None:
        busy = (user + system) / 100.0
        busy = busy[np.isfinite(busy)]
        if len(busy):
            out["machine_busy"] = _median(busy)
    for column, figure in (("tree_dstate", "dstate_share"), ("tree_fswait", "fswait_share")):
        d = _floats(df, column)
        if d is not None:
            d = d[np.isfinite(d)]
            if len(d):
                out[figure] = float((d > 0).mean())
    return SampleFigures(**out)


def combine_sample_figures(figs: list[SampleFigures]) -> tuple[SampleFigures, int]:
    """Medians over trials; a drop is kept when at least half of the trials show one."""
    if not figs:
        return SampleFigures(), 0

    def med(name: str, subset: list[SampleFigures]) -> float:
        vals = [getattr(f, name) for f in subset if not math.isnan(getattr(f, name))]
        return float(np.median(vals)) if vals else math.nan

    drops = [f for f in figs if not math.isnan(f.drop_at_s)]
    keep_drop = len(drops) * 2 >= len(figs)
    combined = SampleFigures(
        install_write_mbps=med("install_write_mbps", figs),
        write_plateau=med("write_plateau", figs),
        net_recv_mbps=med("net_recv_mbps", figs),
        dstate_share=med("dstate_share", figs),
        fswait_share=med("fswait_share", figs),
        machine_busy=med("machine_busy", figs),
        drop_before_mbps=med("drop_before_mbps", drops) if keep_drop else math.nan,
        drop_after_mbps=med("drop_after_mbps", drops) if keep_drop else math.nan,
        drop_at_s=med("drop_at_s", drops) if keep_drop else math.nan,
    )
    return combined, len(drops)


__all__ = ["DROP_RATIO", "DROP_WINDOWS", "MIN_DROP_MBPS", "SAMPLE_COLUMNS_USED", "WRITE_GAP_MIN_S", "Drop",
           "SampleData", "SampleFigures", "change_point", "combine_sample_figures", "drop_window_s",
           "find_drop", "find_write_gaps", "install_drop", "install_write_rates", "sample_figures",
           "window_rates"]  # fmt: skip
