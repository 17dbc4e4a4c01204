"""The report's sections: what each kind of work, and each feature of a run, adds to a report.

A section is one module with one function, ``build(ctx) -> Part | None``: it reads the run (and
the summary every section shares), draws its charts, and returns a ``Part``: the console lines
it adds before the table, the lines it adds after the verdict (its advice, priced), its fragment
of the page (rendered from its own template, autoescaped: ``iobench.report.page``), the files it
wrote and, for the install kind, the start script. ``build_report`` runs the run's kind's
section, then every feature's that applies (start-up strategies, a fleet, the predictions), and
places their fragments in the page template: no section knows another, and the page knows
none by name.

Registered here: each kind's section by the name the run directory gives the kind
(``iobench.rundir.kinds``), and the features in the order the page shows them.
"""

from __future__ import annotations

from iobench.report.part import Build, Context, Part
from iobench.report.sections import (
    checkpoint,
    dataset,
    fleet,
    foresight,
    install,
    lifecycle,
    standin,
    weights,
)

#: each kind's section, by the kind's name
KINDS: dict[str, Build] = {
    install.NAME: install.build,
    dataset.NAME: dataset.build,
    checkpoint.NAME: checkpoint.build,
    weights.NAME: weights.build,
    standin.NAME: standin.build,
}
#: the features' sections, in the order the page shows them (each decides whether it applies)
FEATURES: tuple[Build, ...] = (lifecycle.build, fleet.build, foresight.build_part)


def build_parts(ctx: Context) -> list[Part]:
    """The run's kind's part, then every feature's that applies."""
    parts = [KINDS[ctx.meta.kind](ctx)] if ctx.meta.kind in KINDS else []
    parts += [f(ctx) for f in FEATURES]
    return [p for p in parts if p is not None]


__all__ = ["FEATURES", "KINDS", "Build", "Context", "Part", "build_parts"]
