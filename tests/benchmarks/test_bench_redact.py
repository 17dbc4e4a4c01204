"""Redacting a kept installer log (target: under 0.5 s for a 2 MB pip log, linear in size).

Every pattern of :mod:`iobench.redact` starts only where a token starts; before that rule a
6.8 MB log took 12 s here and a long dotted token grew quadratically. Run with `nox -s bench`.
"""

from __future__ import annotations

import pytest

from iobench.redact import redact_text

LINE = (
    '2026-11-30T18:00:00,123 Looking up "https://files.pythonhosted.org/packages/ab/cd/'
    'torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl.metadata" in the cache '
    "sha256=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n"
)


@pytest.mark.parametrize(
    "text",
    [LINE * 9000, "a." * 500_000, "x" * 1_000_000],
    ids=["pip-log-2MB", "dotted-1MB", "one-word-1MB"],
)
def test_redact_a_log(benchmark, text: str) -> None:
    benchmark.group = "redact"
    out = benchmark(redact_text, text)
    assert len(out) == len(text)  # nothing secret in it: unchanged
