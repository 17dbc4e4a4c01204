"""The cost wing's registry of the kinds of work: each kind's question (``iobench.cost.measure``),
by the name the run directory gives it: what makes one config better than another, and what
that is worth."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from iobench.cost.idle import CostOptions, pricing
from iobench.cost.kinds import checkpoint, dataset, install, standin, weights
from iobench.cost.measure import Measure, Pricing
from iobench.rundir import kinds as rows
from iobench.rundir.meta import GpuInfo

Question = Callable[[Sequence[Any], Pricing], Measure]

#: every kind's question
QUESTIONS: dict[str, Question] = {
    install.NAME: install.question,
    dataset.NAME: dataset.question,
    checkpoint.NAME: checkpoint.question,
    weights.NAME: weights.question,
    standin.NAME: standin.question,
}


def measure(kind: str, trials: Sequence[Any], pricing: Pricing) -> Measure:
    """The run's measure: its kind's question over its trials, at its prices."""
    return QUESTIONS[rows.kind(kind).name](trials, pricing)


def run_measure(
    kind: str, trials: Sequence[Any], options: CostOptions | None, gpu: GpuInfo | None
) -> Measure:
    """The measure of a run's ``trials`` priced as its cost options say (and the GPU the run
    detected): what ``iobench run``'s end, its early stop and ``list`` judge by."""
    priced, _ = pricing(options or CostOptions(), gpu)
    return measure(kind, trials, priced)


__all__ = ["QUESTIONS", "Question", "measure", "run_measure"]
