"""The ``standin`` kind's section: the install kind's, which it fakes."""

from __future__ import annotations

from iobench.report.sections.install import build
from iobench.rundir.kinds import standin as rows

NAME = rows.NAME

__all__ = ["NAME", "build"]
