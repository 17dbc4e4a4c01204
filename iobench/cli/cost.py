"""The cost options of `iobench run`, `report` and `compare`: ``--gpu``, ``--gpu-price``,
``--gpus``, ``--starts-per-month`` and the storage prices, parsed into ``CostOptions``.

Values stay text in argparse and are checked here, so a bad number is a ``UsageError`` (one
line, exit 2) rather than argparse's usage dump.
"""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING, Any

from iobench.cli.common import later
from iobench.errors import UsageError

if TYPE_CHECKING:
    from iobench.cost.idle import CostOptions


def add_cost_arguments(parser: argparse.ArgumentParser, *, storage: bool = True) -> None:
    """Add ``--gpu``, ``--gpu-price``, ``--gpus``, ``--starts-per-month`` (and storage).

    Values stay text here and are checked in :func:`cost_options_from_args`, so a bad
    number is a ``UsageError`` (one line, exit 2) rather than argparse's usage dump.
    """
    group = parser.add_argument_group("cost (what idle GPU time costs)")
    group.add_argument(
        "--gpu",
        metavar="NAME",
        help=later(lambda: "price preset, case-insensitive: " + ", ".join(_prices().known_names())),
    )
    group.add_argument(
        "--gpu-price", metavar="USD", help="price per GPU-hour in USD (overrides the preset)"
    )
    group.add_argument(
        "--gpus", metavar="N", help="GPUs the pod rents (default: as detected, else 1)"
    )
    group.add_argument(
        "--starts-per-month",
        "--starts",
        metavar="N",
        help=later(
            lambda: (
                "cold starts per month for the monthly figure "
                f"(default {_prices().DEFAULT_STARTS_PER_MONTH:g})"
            )
        ),
    )
    _add_workload_figures(group)
    if storage:
        group.add_argument(
            "--storage-usd-per-gb",
            metavar="X",
            help="charge per GB written on the target volume (metered storage)",
        )
        group.add_argument(
            "--storage",
            metavar="PRESET",
            help="the volume's price preset, for what start-up strategies keep on it a month "
            "(e.g. runpod-volume, efs-bursting, efs-elastic, gp3: iobench/cost/storage_prices.csv)",
        )


def _add_workload_figures(group: argparse._ArgumentGroup) -> None:
    """The figures one kind of work prices by: a dataset's bar, a checkpoint's pod, a strategy."""
    group.add_argument(
        "--au-target",
        metavar="SHARE",
        help=later(
            lambda: (
                "a dataset run's bar for accelerator utilisation, 0-1 (default "
                f"{_idle().AU_TARGET:g}, MLPerf Storage's for ResNet-50 and U-Net3D)"
            )
        ),
    )
    group.add_argument(
        "--mtbf-hours",
        metavar="H",
        help=later(
            lambda: (
                "a checkpoint run's pod: mean hours between failures, pre-emptions "
                f"and restarts (default {_idle().MTBF_HOURS:g}: a preemptible VM's longest "
                "life; docs/checkpoint.md)"
            )
        ),
    )
    group.add_argument(
        "--every-minutes",
        metavar="M",
        help="a checkpoint run: your own interval between saves, priced beside the best one",
    )
    group.add_argument(
        "--training-hours",
        metavar="H",
        help="a dataset run's month of training: hours of accelerator compute (default 730: a "
        "month at full use)",
    )
    group.add_argument(
        "--strategy-figure",
        metavar="NAME=FIRST_S,RESTART_S[,GB_KEPT]",
        action="append",
        default=None,
        help="a start-up strategy you measured elsewhere (a snapshot restore, FlashBoot): "
        "its first start and restart in seconds and the GB it keeps, ranked beside the "
        "measured ones, marked entered (repeatable)",
    )


def _number(flag: str, text: object, what: str) -> float | None:
    if text is None:
        return None
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        try:
            value = float(str(text).strip())
        except ValueError:
            raise UsageError(f"{flag} wants {what}, not {text!r}") from None
    if math.isnan(value) or math.isinf(value):
        raise UsageError(f"{flag} wants {what}, not {text!r}")
    return value


def given_options(args: argparse.Namespace) -> dict[str, object]:
    """The cost options the command line gave (None: not given), checked."""
    gpus_raw = getattr(args, "gpus", None)
    gpus: int | None = None
    if gpus_raw is not None:
        try:
            gpus = int(str(gpus_raw).strip())
        except ValueError:
            raise UsageError(f"--gpus wants a whole number, not {gpus_raw!r}") from None
    figures = getattr(args, "strategy_figure", None)
    return {
        "gpu": getattr(args, "gpu", None),
        "gpu_price": _number("--gpu-price", getattr(args, "gpu_price", None), "a price in USD per GPU-hour"),
        "gpus": gpus,
        "starts_per_month": _number("--starts-per-month", getattr(args, "starts_per_month", None), "a number"),
        "storage_usd_per_gb": _number("--storage-usd-per-gb", getattr(args, "storage_usd_per_gb", None), "a price in USD per GB"),
        "storage": getattr(args, "storage", None),
        "au_target": _number("--au-target", getattr(args, "au_target", None), "a share from 0 to 1"),
        "mtbf_hours": _number("--mtbf-hours", getattr(args, "mtbf_hours", None), "a number of hours"),
        "every_minutes": _number("--every-minutes", getattr(args, "every_minutes", None), "a number of minutes"),
        "training_hours": _number("--training-hours", getattr(args, "training_hours", None), "a number of hours"),
        "entered": tuple(_month().strategy_figure(t) for t in figures) if figures else None,
    }  # fmt: skip


def cost_options_from_args(args: argparse.Namespace, stored: object = None) -> CostOptions:
    """Validated CostOptions from parsed arguments (raises UsageError), on top of what a run
    stored (meta.json's ``pricing``: a report rebuilt later prices the run as it was)."""
    return _idle().options_from_meta(stored, **given_options(args))


def stored_options(meta: Any) -> object:
    """A run's cost options: meta.json's ``pricing``; for a run written before the key, the
    cost options of the command that made it (meta.json's ``command``)."""
    if meta.pricing is not None:
        return meta.pricing
    parser = argparse.ArgumentParser(add_help=False)
    add_cost_arguments(parser)
    try:
        args, _ = parser.parse_known_args([a for a in meta.command[1:] if isinstance(a, str)])
        return {k: v for k, v in given_options(args).items() if v is not None}
    except (UsageError, SystemExit):
        return None


def judged_by(meta: Any, rows: list[Any], cost: CostOptions | None = None) -> Any:
    """The measure a run is judged by (its kind's question, ``iobench.cost.kinds``), priced
    with ``cost`` or, without, with the options the run stored."""
    from iobench.cost.kinds import run_measure

    if cost is None:
        try:
            cost = cost_options_from_args(argparse.Namespace(), stored_options(meta))
        except UsageError:  # a stored preset this version does not know: unpriced
            cost = _idle().CostOptions()
    return run_measure(meta.kind, rows, cost, meta.gpu_info)


def _prices() -> Any:
    import iobench.cost.prices as prices

    return prices


def _idle() -> Any:
    import iobench.cost.idle as idle

    return idle


def _month() -> Any:
    import iobench.cost.month as month

    return month
