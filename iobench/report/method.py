"""The report's "How to read this": every figure's definition and formula, so each can be
redone by hand; the thresholds are read from the code that applies them (diagnose, stats),
so the page cannot drift from the rule.
"""

from __future__ import annotations

from html import escape as esc

from iobench.report import diagnose as rules
from iobench.report.formats import INSTALL_KINDS
from iobench.report.summary import Summary
from iobench.report.verdict import SPREAD_MINMAX_BELOW
from iobench.rundir.records import STALL_WORDS
from iobench.stats import CONFIDENCE, MIN_EFFECT, MIN_TRIALS

#: what a trial's time is, per kind of work
_FIRST = {
    "install": "<li><b>time-to-ready</b>: from the start of venv creation until the ready check "
    "(e.g. <code>import torch</code>) succeeds in the new venv.</li>",
    "dataset": "<li><b>time</b> of a dataset trial: the copy of the data to its stage role "
    "(when the config copies it) plus the loader's listing and epochs "
    "(docs/dataset.md).</li>",
    "checkpoint": "<li><b>time</b> of a checkpoint trial: what the GPU waits for — one "
    "save to the config's save role (every file and folder fsynced) plus one cold restore "
    "from where a restarted pod finds it; a background copy is not in it "
    "(docs/checkpoint.md).</li>",
}


def method_html(summary: Summary, kind: str = "install") -> str:
    """Definitions and formulas, so every figure can be redone by hand (a dataset or checkpoint
    run's own figures are defined in its section and docs/dataset.md, docs/checkpoint.md)."""
    opt = summary.options
    storage = (
        f" plus {opt.storage_usd_per_gb:g} USD per GB written on the <i>target</i> role"
        if opt.storage_usd_per_gb is not None
        else ""
    )
    price = summary.price
    src = ""
    if price is not None and price.source.startswith("http"):
        src = f' (source: <a href="{esc(price.source)}">{esc(price.source)}</a>)'
    first = _FIRST.get(kind, _FIRST["install"])
    install_rules = (
        ""
        if kind not in INSTALL_KINDS
        else bottleneck_rules_html()
        + "<li>A <b>throughput drop</b> (e.g. burst credits running out) is a lasting fall of "
        f"the install phase's write rate to under {rules.DROP_RATIO:.0%} of its earlier mean "
        "(from at least "
        f"{rules.MIN_DROP_MBPS:g} MB/s), found with one least-squares change point; the "
        "timeline marks it and draws both means. A <b>stall</b> is what the run recorded "
        f"(stalls.csv: {STALL_WORDS} for <code>--stall-after</code> seconds); a "
        f"<b>write gap</b> is a stretch of {rules.WRITE_GAP_MIN_S:g} s or more without installer "
        "writes, drawn on timelines of runs that recorded no stalls.</li>"
    )
    return (
        '<h2>How to read this</h2><ul class="small">'
        + first
        + "<li>Figures are medians over each config's successful trials; the spread is min–max "
        f"under {SPREAD_MINMAX_BELOW} trials (every trial inside it), else the 10th–90th "
        "percentile (linear interpolation). Failed or stalled trials are counted, never "
        "averaged in.</li>"
        "<li><b>How much faster</b> is the ratio of median times, baseline ÷ config: "
        "<i>1.33× faster</i>; below 1 it is inverted and reads <i>1.25× slower</i>.</li>"
        "<li><b>Beyond noise</b>: the fastest config counts as faster than another when the "
        f"{CONFIDENCE:.0%} confidence interval of their time ratio (Student's t-test on the "
        "logarithms of the trial times, variance pooled, the level split over the comparisons "
        "made) excludes 1 "
        f"and the ratio of medians is at least {1 + MIN_EFFECT:.2f}; under {MIN_TRIALS} "
        "successful trials per config nothing is ranked. Otherwise: no difference beyond "
        "noise, and no start script (docs/verdicts.md).</li>"
        f"<li><b>GPU idle cost</b> per cold start = median time-to-ready / 3600 × pod price per hour{storage}; "
        f"per month = per start × {opt.starts_per_month:g} starts. "
        + (f"Price: {esc(price.label)}{src}." if price else "No price was given.")
        + "</li>"
        + install_rules
        + "</ul>"
    )


def bottleneck_rules_html() -> str:
    """The bottleneck rules, rendered from diagnose's thresholds (so the page cannot drift)."""

    def pct(x: float) -> str:
        return f"{x:.0%}"

    return (
        "<li><b>Bottleneck</b> rules, first match wins: CPU bound (installer on CPU ≥ "
        f"{pct(rules.CPU_SHARE)} of wall time); waiting on a filesystem (a thread in a "
        f"filesystem wait in ≥ {pct(rules.FSWAIT_SHARE)} of samples, or in D state in ≥ "
        f"{pct(rules.DSTATE_SHARE)}): bandwidth bound (install-phase write rate flat near its "
        f"peak, median ≥ {pct(rules.PLATEAU)} of its 95th percentile, in writes of ≥ "
        f"{rules.BIG_WRITE // 1024} KiB) or latency/metadata bound (many small writes, low "
        f"MB/s); CPU bound (the machine's CPUs ≥ {pct(rules.MACHINE_BUSY)} busy: a loopback "
        "index's CPU is this machine's); network bound (download ≥ "
        f"{pct(rules.NETWORK_SHARE)} of the time with bytes on a network interface) or "
        "download bound (the same without: a loopback index, paced by its cap); off CPU ≥ "
        f"{pct(rules.WAIT_OFFCPU)} of the time: the storage rules above; "
        "else mixed. <b>fs wait</b> is the share of samples in which an installer thread slept "
        "in a filesystem or block-layer wait (its kernel wait channel); FUSE and NFS waits show "
        "there but not as CPU iowait or D state, so iowait is shown but never decides alone.</li>"
    )


__all__ = ["bottleneck_rules_html", "method_html"]
