"""Reports built from run directories only: summary, diagnosis, charts, HTML, comparisons.

Nothing here measures or imports the runner or the sampler; everything is rebuilt from
meta.json, trials.csv and samples/ (see results/README.md).
"""

from __future__ import annotations

from iobench.report.build import ReportResult, build_report
from iobench.report.compare import CompareResult, build_compare

__all__ = ["CompareResult", "ReportResult", "build_compare", "build_report"]
