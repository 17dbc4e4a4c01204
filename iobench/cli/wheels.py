"""`iobench wheels`: profile real wheels, synthesize wheels from a profile."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from iobench.cli.common import _Parser
from iobench.errors import UsageError


# ---------------------------------------------------------------- wheels
def _add_wheels(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("wheels", help="synthetic wheels: measure a real wheel's shape, or generate from a profile")
    wsub = p.add_subparsers(dest="wheels_cmd", required=True, parser_class=_Parser)
    prof = wsub.add_parser("profile", help="print a real wheel's shape as a profile (TOML)")
    prof.add_argument("wheels", nargs="+", type=Path, metavar="WHEEL")
    prof.add_argument("--name", default="measured", help="profile name (default: measured)")
    prof.add_argument("--seed", type=int, default=1)
    prof.add_argument("--out", type=Path, help="write the TOML here instead of stdout")
    prof.set_defaults(func=cmd_wheels_profile)
    syn = wsub.add_parser("synth", help="generate the wheels of a profile")
    syn.add_argument("profile", help="shipped profile name (smoke, torch-cpu-like) or a .toml path")
    syn.add_argument("--out", type=Path, required=True, help="folder for the wheels")
    syn.set_defaults(func=cmd_wheels_synth)


def cmd_wheels_profile(args: argparse.Namespace) -> int:
    from iobench.wheels import describe, profile_of_wheels, profile_to_toml

    for w in args.wheels:
        if not w.is_file():
            raise UsageError(f"{w}: no such wheel file")
    prof = profile_of_wheels(args.wheels, args.name, args.seed)
    text = profile_to_toml(prof)
    if args.out:
        args.out.write_text(text)
        print("\n".join(describe(prof)))
        print(f"profile written to {args.out}")
    else:
        sys.stdout.write(text)
    return 0


def cmd_wheels_synth(args: argparse.Namespace) -> int:
    from iobench.wheels import describe, load_profile, synthesize

    prof = load_profile(args.profile)
    paths = synthesize(prof, args.out)
    print("\n".join(describe(prof)))
    for p in paths:
        print(f"wrote {p} ({p.stat().st_size / 1e6:.1f} MB)")
    return 0
