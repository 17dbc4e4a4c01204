"""The ``standin`` kind's question: the install kind's, which it fakes (time-to-ready, or a
month of starts with a start-up strategy)."""

from __future__ import annotations

from iobench.cost.kinds.install import question
from iobench.rundir.kinds import standin as rows

NAME = rows.NAME

__all__ = ["NAME", "question"]
