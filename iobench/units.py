"""The one formatter for each unit the outputs show: seconds, bytes, shares, MB/s, speed, run keys.

Pure Python, so the end-of-run console table, the text and HTML reports and the charts
print the same figure the same way. "How much faster" has one convention everywhere
(docs/verdicts.md): the ratio of median times, baseline ÷ config, written as
``1.33× faster than naive`` or, below 1, inverted as ``1.25× slower than naive``.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable
from typing import Any

from rich.filesize import decimal

DASH = "—"


def _num(x: object) -> float:
    try:
        v = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan
    return v


def fmt_num(x: object, spec: str) -> str:
    """``format(x, spec)`` (``",.0f"``, ``".0%"``), or a dash when unknown."""
    v = _num(x)
    return format(v, spec) if math.isfinite(v) else DASH


def fmt_s(x: object) -> str:
    """Seconds: ``0.04 s``, ``3.2 s``, ``1,234 s``; a dash when unknown."""
    v = _num(x)
    if not math.isfinite(v):
        return DASH
    if abs(v) < 1:
        return f"{v:.2f} s"
    return f"{v:.1f} s" if abs(v) < 100 else f"{v:,.0f} s"


def fmt_s_range(lo: object, hi: object) -> str:
    """``2.0–3.1 s``: a spread in seconds (one unit at the end)."""
    a, b = _num(lo), _num(hi)
    if not (math.isfinite(a) and math.isfinite(b)):
        return DASH
    top = max(abs(a), abs(b))
    if top >= 100:
        return f"{a:,.0f}–{b:,.0f} s"
    digits = 2 if top < 1 else 1
    return f"{a:.{digits}f}–{b:.{digits}f} s"


def fmt_bytes(x: object) -> str:
    """Bytes in decimal units (``35.0 kB``, ``16.4 MB``), as rich and pip print them."""
    v = _num(x)
    if not math.isfinite(v):
        return DASH
    return ("-" if v < 0 else "") + decimal(int(round(abs(v))))


def fmt_share(x: object) -> str:
    """A share (0–1) as a percentage: ``84%``; not zero but rounding to it, ``<1%``."""
    v = _num(x)
    if not math.isfinite(v):
        return DASH
    return "<1%" if 0 < v < 0.005 else f"{100 * v:.0f}%"


def fmt_mbps(x: object) -> str:
    """A rate in MB/s (decimal megabytes): ``12 MB/s``, ``3.4 MB/s``."""
    v = _num(x)
    if not math.isfinite(v):
        return DASH
    return f"{v:.0f} MB/s" if abs(v) >= 10 else f"{v:.1f} MB/s"


#: a lab volume that delivered less than this share of what its options allow limited the
#: figure itself (iobench.lab.delivered computes both rates)
LAB_SHORTFALL = 0.9


def lab_gave(delivered: object, allowed: object, preset: str = "") -> str | None:
    """``the lab gave 812 of the preset's 1,573 MB/s`` where an emulated volume delivered
    less than :data:`LAB_SHORTFALL` of what its options allow; None where it did not (or
    either rate is unknown)."""
    d, a = _num(delivered), _num(allowed)
    if not (math.isfinite(d) and math.isfinite(a) and a > 0) or d >= LAB_SHORTFALL * a:
        return None
    whose = "the preset's" if preset else "the volume's"
    return f"the lab gave {d:,.0f} of {whose} {a:,.0f} MB/s"


def fmt_times(r: object) -> str:
    """A ratio as a multiplier: ``1.33×``, ``14×``."""
    v = _num(r)
    if not math.isfinite(v) or v <= 0:
        return DASH
    return f"{v:.0f}×" if v >= 10 else f"{v:.2f}×"


def fmt_speed(
    speedup: object, baseline: str | None = None, words: tuple[str, str] = ("faster", "slower")
) -> str:
    """``1.33× faster`` / ``1.25× slower`` (+ `` than NAME``) from baseline ÷ config time
    (``words``: a measure's own, ``cheaper``/``dearer``)."""
    v = _num(speedup)
    if not math.isfinite(v) or v <= 0:
        return DASH
    than = f" than {baseline}" if baseline else ""
    if round(v, 2) == 1.0:
        return f"same as {baseline}" if baseline else "1.00× (same)"
    word = words[0] if v > 1 else words[1]
    return f"{fmt_times(v if v > 1 else 1 / v)} {word}{than}"


def fmt_vs(
    speedup: object,
    beyond: object,
    baseline: str | None = None,
    words: tuple[str, str] = ("faster", "slower"),
) -> str:
    """``1.60× slower (within noise)``: :func:`fmt_speed` and the tie rule's answer for the
    pair, ``beyond noise``, ``within noise`` or ``too few trials`` (None or NaN: a side with
    fewer than two); a dash where there is no ratio."""
    text = fmt_speed(speedup, baseline, words)
    if text == DASH:
        return text
    return f"{text} ({noise_word(noise_known(beyond)) or 'too few trials'})"


def noise_known(value: object) -> bool | None:
    """A beyond-noise cell back to True/False/None: None, NaN and pandas' NA (a table may
    hold the cell as any of them) are "not tested"."""
    if value is None:
        return None
    try:
        return None if value != value else bool(value)  # NaN is not equal to itself
    except TypeError:  # pandas' NA is neither true nor false
        return None


def noise_word(known: bool | None) -> str:
    """The word for a pair's test against the baseline or the reference run ("" untested)."""
    return {True: "beyond noise", False: "within noise", None: ""}[known]


def fmt_median(row: Any, column: str = "median_time_to_ready_s") -> str:
    """A summary row's median, or "> b" when its trials were all given up at bounds b
    (``--give-up-after``): the table and the chart say it the same way."""
    if not row["n_ok"] and row.get("n_censored"):
        return f"> {fmt_s(row['given_up_after_s'])}"
    return fmt_s(row[column])


def run_key(i: int) -> str:
    """A, B, ... Z, AA, AB ...: short names for runs in table headers and legends."""
    key = ""
    i += 1
    while i > 0:
        i, rem = divmod(i - 1, 26)
        key = chr(65 + rem) + key
    return key


#: what must never reach a terminal from a string iobench read back (a received run
#: folder's label, a scenario name): control characters, which move the cursor, rewrite
#: lines, set the window title (ESC, CSI, OSC), and the marks that reverse text's direction
_UNPRINTABLE = {
    *range(0x00, 0x20),
    0x7F,
    *range(0x80, 0xA0),
    0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A),
}  # fmt: skip


def printable(text: object) -> str:
    """``text`` with every control character written as its escape (``\\x1b``), so that a
    string read from a file shows as what it is instead of acting on the terminal (line
    breaks too: print lines one by one)."""
    return "".join(_escaped(c) if ord(c) in _UNPRINTABLE else c for c in str(text))


def _escaped(c: str) -> str:
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"did you mean 'naive'?"`` for a near miss among ``choices`` (names that start
    with ``word``, any case, else the closest by difflib's ratio, a name judged by itself or
    by its first word: ``H1000`` is nearest ``H100 SXM``'s ``H100``, not ``H200``), or ``""``.
    One definition for every "unknown name" error: options, configs, scenarios, GPUs."""
    names = list(choices)
    low = word.lower()
    close = [n for n in names if n.lower().startswith(low)] if low else []
    if not close and low:
        scored = []
        for n in names:
            keys = {n.lower(), *n.lower().split()[:1]}
            scored.append((max(difflib.SequenceMatcher(None, low, k).ratio() for k in keys), n))
        best = max((s for s, _ in scored), default=0.0)
        close = [n for s, n in scored if s >= max(best, 0.6)]
    if not close:
        return ""
    return "did you mean " + " or ".join(repr(n) for n in close[:2]) + "?"
