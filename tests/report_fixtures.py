"""Transition: the synthetic run directories moved to ``tests/helpers/runs.py``."""

from helpers.runs import *  # noqa: F403
from helpers.runs import __all__  # noqa: F401
