"""The scenario wing's registry of the kinds of work: one line a kind, by the name the run
directory's registry gives it (``iobench.rundir.kinds``). Each kind's file declares its config
(where its things live) and its ``[workload]`` settings (``iobench.scenario.config``)."""

from __future__ import annotations

from iobench.errors import ScenarioError
from iobench.scenario.config import ScenarioKind
from iobench.scenario.kinds import checkpoint, dataset, install, standin, weights

#: every kind's scenario side, by name
KINDS: dict[str, ScenarioKind] = {
    k.name: k
    for k in (
        install.KIND,
        dataset.KIND,
        checkpoint.KIND,
        weights.KIND,
        standin.KIND,
    )
}


def kind(name: str) -> ScenarioKind:
    try:
        return KINDS[name]
    except KeyError:
        raise ScenarioError(f"unknown workload kind {name!r} (known: {', '.join(KINDS)})") from None


__all__ = ["KINDS", "kind"]
