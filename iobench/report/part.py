"""What a report's section is handed (``Context``) and what it gives back (``Part``): the seam
between ``build_report`` and each kind's and feature's section (``iobench.report.sections``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from iobench.cost.measure import Pricing
from iobench.report.load import Run
from iobench.report.summary import Summary
from iobench.rundir.meta import RunMeta

if TYPE_CHECKING:
    from iobench.report.recommend import Recommendation


@dataclass
class Context:
    """What every section reads: the run, the summary, where files go, whether to draw."""

    run: Run
    summary: Summary
    out: Path
    charts: bool = True
    pricing: Pricing = field(default_factory=Pricing)

    @property
    def meta(self) -> RunMeta:
        return self.run.info

    @property
    def price_usd_h(self) -> float | None:
        return self.summary.price.usd_per_hour if self.summary.price is not None else None


@dataclass
class Part:
    """What one section adds to a report."""

    name: str  # the section's id in the page (``install``, ``dataset``, ``fleet``)
    lines: list[str] = field(default_factory=list)  # the console, before the table
    answer: list[str] = field(default_factory=list)  # the console, after the verdict
    answer_html: Markup = field(default_factory=Markup)  # the page's answer box, after the verdict
    advice_html: Markup = field(default_factory=Markup)  # "what to set"
    html: Markup = field(default_factory=Markup)  # the evidence: tables, charts, words
    about: Markup = field(default_factory=Markup)  # "how to read this": its figures' definitions
    paths: dict[str, Path] = field(default_factory=dict)
    script: Recommendation | None = None  # the start script, where the kind's advice is one
    data: dict[str, Any] = field(default_factory=dict)  # summary.json's entry for this section


Build = Callable[[Context], "Part | None"]


def slug(name: str) -> str:
    """A config name made safe for a file name (a chart's)."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name).strip("_") or "config"


__all__ = ["Build", "Context", "Part", "slug"]
