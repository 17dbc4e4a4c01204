"""iobench: where should a Python environment, TMPDIR and package caches live on this machine?"""

from __future__ import annotations

__version__ = "0.1.0"
