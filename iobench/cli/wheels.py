"""`iobench wheels`: profile real wheels, synthesize wheels from a profile, check a twin's fidelity."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from iobench.cli.common import _Parser, positive_int
from iobench.errors import UsageError

_INSTALLS = (
    "installs the wheels once into a scratch venv on tmpfs (/dev/shm): pip --no-deps --no-index "
    "--no-compile, isolated from pip's configuration, then compileall, then the ready check"
)


# ---------------------------------------------------------------- wheels
def _add_wheels(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "wheels", help="synthetic wheels: measure a real wheel's shape, or generate from a profile"
    )
    wsub = p.add_subparsers(dest="wheels_cmd", required=True, parser_class=_Parser)
    prof = wsub.add_parser(
        "profile",
        help="print real wheels' shape and costs as a profile (TOML)",
        description="Measure real wheels into a profile: their files (read from the wheel) and, unless "
        f"--shape-only, their costs: bytecode compilation and the first import's fan-out. Measuring costs {_INSTALLS}.",
    )
    prof.add_argument("wheels", nargs="+", type=Path, metavar="WHEEL")
    prof.add_argument("--name", default="measured", help="profile name (default: measured)")
    prof.add_argument("--seed", type=int, default=1)
    prof.add_argument("--out", type=Path, help="write the TOML here instead of stdout")
    _add_cost_options(prof)
    prof.add_argument(
        "--shape-only", action="store_true", help="read the wheel files only; install nothing"
    )
    prof.set_defaults(func=cmd_wheels_profile)
    syn = wsub.add_parser("synth", help="generate the wheels of a profile")
    syn.add_argument(
        "profile",
        help="shipped profile name (smoke, torch-cpu-like, diffusers-like) or a .toml path",
    )
    syn.add_argument("--out", type=Path, required=True, help="folder for the wheels")
    syn.set_defaults(func=cmd_wheels_synth)
    chk = wsub.add_parser(
        "check",
        help="install real wheels and their synthetic twin side by side; print each cost and the ratio",
        description=f"Build PROFILE's synthetic twin, then, alternately, {_INSTALLS}: once for WHEEL... and once "
        "for the twin, --repeats times. Prints files, bytes, install s, compile s, import files and bytes, "
        "each with the ratio synthetic/real.",
    )
    chk.add_argument("profile", help="shipped profile name or a .toml path")
    chk.add_argument("wheels", nargs="+", type=Path, metavar="WHEEL")
    chk.add_argument("--repeats", type=positive_int, default=3, help="installs of each (default 3)")
    _add_cost_options(chk)
    chk.set_defaults(func=cmd_wheels_check)


def _add_cost_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--deps",
        nargs="+",
        type=Path,
        default=[],
        metavar="WHEEL_OR_DIR",
        help="wheels the ready check needs (e.g. torch's typing_extensions, sympy): installed, not measured",
    )
    p.add_argument(
        "--ready", help="the ready check's code (default: import the wheels' top-level packages)"
    )


def _wheel_files(paths: list[Path], what: str) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out += sorted(p.glob("*.whl"))
        elif p.is_file() and p.suffix == ".whl":
            out.append(p)
        else:
            raise UsageError(
                f"{p}: no such {what} (give .whl files{' or a folder of them' if what != 'wheel file' else ''})"
            )
    return out


def cmd_wheels_profile(args: argparse.Namespace) -> int:
    from iobench.wheels.measure import profile_of_wheels, profile_to_toml
    from iobench.wheels.profile import describe

    wheels = _wheel_files(args.wheels, "wheel file")
    prof = profile_of_wheels(wheels, args.name, args.seed)
    if not args.shape_only:
        from iobench.wheels.cost import default_ready, with_costs

        prof = with_costs(
            prof, wheels, args.ready or default_ready(wheels), _wheel_files(args.deps, "dependency")
        )
    text = profile_to_toml(prof)
    if args.out:
        try:
            from iobench import files

            files.write(args.out, text, 0o644)  # a profile is shared input, not a report
        except OSError as exc:
            raise UsageError(f"--out {args.out}: cannot write ({exc.strerror or exc})") from None
        print("\n".join(describe(prof)))
        print(f"profile written to {args.out}")
    else:
        sys.stdout.write(text)
    return 0


def cmd_wheels_synth(args: argparse.Namespace) -> int:
    from iobench.wheels.profile import describe, load_profile
    from iobench.wheels.synth import synthesize

    prof = load_profile(args.profile)
    paths = synthesize(prof, args.out)
    print("\n".join(describe(prof)))
    for p in paths:
        print(f"wrote {p} ({p.stat().st_size / 1e6:.1f} MB)")
    return 0


def cmd_wheels_check(args: argparse.Namespace) -> int:
    from iobench.wheels.cost import check, default_ready, fidelity_lines
    from iobench.wheels.profile import load_profile

    prof = load_profile(args.profile)
    wheels = _wheel_files(args.wheels, "wheel file")
    deps = _wheel_files(args.deps, "dependency")
    fid = check(prof, wheels, args.ready or default_ready(wheels), deps, args.repeats)
    print(f"profile {prof.name} vs {', '.join(w.name for w in wheels)}")
    print("\n".join(fidelity_lines(fid)))
    return 0
