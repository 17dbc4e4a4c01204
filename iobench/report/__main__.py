"""``python -m iobench.report report|compare ...`` (the same handlers `iobench` registers)."""

from __future__ import annotations

import sys

from iobench.report.cli import main

if __name__ == "__main__":
    sys.exit(main())
