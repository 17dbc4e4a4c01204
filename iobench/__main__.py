"""The one exit of iobench: ``main(argv) -> int``.

Only here are the project's errors (and, as a last resort, OS errors such as a full disk)
turned into one ``iobench: error:`` line, and Ctrl-C into exit 130; everything below raises.
Exit status: 0 success; 1 a runtime failure or failed trials; 2 a usage error; 130 interrupted; 141 output pipe closed.
"""

from __future__ import annotations

import sys

from iobench.errors import IOBenchError


def printable(text: object) -> str:
    """iobench.units.printable, imported only when there is an error to print."""
    from iobench.units import printable as clean

    return clean(text)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the process exit status."""
    from iobench.cli import dispatch

    try:
        return dispatch(list(sys.argv[1:] if argv is None else argv))
    except IOBenchError as exc:  # one line: nothing in it acts on the terminal
        print(f"iobench: error: {printable(exc)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        if getattr(exc, "quiet", False):  # a fleet's rank other than 0: rank 0 says it
            return 130
        if not hasattr(exc, "run_dir") and not hasattr(exc, "resume_command"):
            print("iobench: interrupted", file=sys.stderr)  # not a run: nothing to resume
            return 130
        where = getattr(exc, "run_dir", None) or "RUN_DIR"
        again = getattr(exc, "resume_command", None) or f"iobench run --resume {where}"
        print(f"iobench: interrupted; finished trials are kept (continue with: {again})",
              file=sys.stderr)  # fmt: skip
        return 130
    except BrokenPipeError:
        return 141
    except OSError as exc:  # a disk filled or a folder vanished somewhere we did not expect
        where = f" ({exc.filename})" if exc.filename else ""
        print(
            f"iobench: error: {printable(exc.strerror or exc)}{printable(where)}", file=sys.stderr
        )
        return 1


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    entry()
