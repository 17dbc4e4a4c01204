"""Fixtures of the lab tests (helper functions live in ``helpers.lab``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers.lab import volume_factory


@pytest.fixture
def volume(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """Mount slow volumes under tmp_path; all are torn down (and checked) afterwards."""
    yield from volume_factory(tmp_path)
