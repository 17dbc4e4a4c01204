"""Reports built from run directories only: summary, diagnosis, charts, HTML, comparisons.

Nothing here measures or imports the runner or the sampler; everything is rebuilt from
meta.json, trials.csv and samples/ (see results/README.md).

The package is lazy (PEP 562): ``import iobench.report`` (and ``iobench.cli.report``, which
registers ``report`` and ``compare``) costs nothing; pandas and matplotlib are imported the
first time ``build_report`` or ``build_compare`` is looked up, so ``iobench --help`` and
``iobench run`` do not pay for them until they report.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from iobench.report.build import ReportResult, build_report
    from iobench.report.compare import CompareResult, build_compare

__all__ = [
    "CompareResult",
    "ReportResult",
    "build_compare",
    "build_report",
    "import_report_libraries",
]

_LAZY = {
    "ReportResult": "iobench.report.build",
    "build_report": "iobench.report.build",
    "CompareResult": "iobench.report.compare",
    "build_compare": "iobench.report.compare",
}

FIX = "pip install --force-reinstall 'pandas>=2.0' 'numpy>=1.24' 'matplotlib>=3.7'"


def import_report_libraries() -> None:
    """Import pandas, numpy and matplotlib, or raise one ``IOBenchError`` naming the fix.

    A missing or broken library (an ``ImportError``, or any error a half-installed one
    raises while importing) becomes one line instead of a traceback or a vanished command.
    """
    from iobench.errors import IOBenchError

    for name in ("numpy", "pandas", "matplotlib"):
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - a broken install raises anything at import
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise IOBenchError(
                f"the report needs {name}, which cannot be imported ({detail}); fix: {FIX}"
            ) from None


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'iobench.report' has no attribute {name!r}")
    import_report_libraries()
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
