"""`iobench scenarios` and `iobench clean`."""

from __future__ import annotations

import argparse
from pathlib import Path

from iobench.errors import UsageError


# ---------------------------------------------------------------- scenarios, clean
def _add_scenarios(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "scenarios",
        help="list the shipped scenarios, or print one's TOML (scenarios show NAME)",
        description="Without a subcommand: the shipped scenarios and their configs. "
        "`iobench scenarios show NAME` prints a scenario's TOML to copy and edit "
        "(then run it with --scenario FILE).",
    )
    ssub = p.add_subparsers(dest="scenarios_cmd", metavar="{show}")
    show = ssub.add_parser("show", help="print a scenario's TOML")
    show.add_argument("name", metavar="NAME|FILE", help="a shipped scenario name or a .toml file")
    show.set_defaults(func=cmd_scenarios_show)
    p.set_defaults(func=cmd_scenarios)


def cmd_scenarios(args: argparse.Namespace) -> int:
    from iobench.scenario.load import load_scenario, shipped

    for name in shipped():
        s = load_scenario(name)
        restarts = ", each trial a first start and a cold restart" if s.lifecycle else ""
        print(f"{name}: {s.description} (repeats {s.repeats}{restarts})")
        for c in s.configs:
            print(f"  {c.name:<24} {c.summary()}")
        if s.default_configs:
            print(f"  runs by default: {', '.join(s.default_configs)} (the others: --configs)")
    print("show one's TOML: iobench scenarios show NAME")
    return 0


def scenario_source(name: str) -> tuple[Path, str]:
    """The file a scenario name (or path) stands for and its text, validated first."""
    from iobench.scenario.load import SCENARIO_DIR, load_scenario

    load_scenario(name)  # unknown or invalid: the loader's one-line error
    path = Path(name)
    if path.suffix != ".toml" and not path.exists():
        path = SCENARIO_DIR / f"{name}.toml"
    return path, path.read_text()


def cmd_scenarios_show(args: argparse.Namespace) -> int:
    _, text = scenario_source(args.name)
    print(text, end="" if text.endswith("\n") else "\n")
    return 0


def _add_clean(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("clean", help="report or remove scratch left by a crashed run")
    p.add_argument(
        "dirs", nargs="+", type=Path, metavar="DIR", help="a role folder (e.g. the target)"
    )
    p.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    p.set_defaults(func=cmd_clean)


def cmd_clean(args: argparse.Namespace) -> int:
    from iobench.system.scratch import (
        SCRATCH_NAME,
        Scratch,
        is_scratch,
        remove_scratch,
        scratch_problem,
    )

    for d in args.dirs:
        if not d.is_dir():
            raise UsageError(f"{d} is not a directory")
        root = d / SCRATCH_NAME
        if not root.exists():
            print(f"{d}: no iobench scratch")
            continue
        if not is_scratch(root):
            raise UsageError(f"{scratch_problem(root)}; not touching it")
        from iobench.system.scratch import live_owner

        left = Scratch(d).leftovers()
        if args.dry_run:
            names = [p.name + (" (in use)" if p.is_dir() and live_owner(p) else "") for p in left]
            print(f"{root}: {len(left)} leftover item(s): " + ", ".join(names))
            continue
        from iobench.system.lock import read_lock

        holder = read_lock(root)
        if holder is not None and holder.stale_reason() is None:
            raise UsageError(
                f"{root} is in use by a running iobench ({holder.describe()}); not cleaning"
            )
        n, kept = remove_scratch(root)
        if kept:
            print(f"{root}: removed {n} item(s); kept what live runs use: {', '.join(kept)}")
        else:
            print(f"{root}: removed ({n} item(s))")
    return 0
