"""``python -m iobench.report report|compare ...``: the same as ``iobench report|compare ...``."""

from __future__ import annotations

import sys

from iobench.__main__ import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
