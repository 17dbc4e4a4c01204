"""iobench.run.overhead: the clock's account and the summary line, with hand-made numbers."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from iobench.report.formats import overhead_line as summary_line
from iobench.run.overhead import Clock
from iobench.rundir.meta import OVERHEAD_CAUSES as CAUSES
from iobench.rundir.meta import overhead_ratio as ratio

ACCOUNT = {
    "wall_s": 100.0,
    "trials_s": 80.0,
    "parts_s": {"setup": 3.0, "priming": 7.0, "cleanup": 4.0, "records": 0.2, "trial": 1.0,
                "other": 4.8},
    "before_start_s": 1.5,
    "report_s": 2.25,
}  # fmt: skip


def test_summary_line_names_the_causes_largest_first() -> None:
    line = summary_line(ACCOUNT)
    assert line == (
        "iobench overhead: 20% of the run (20.0 s of 100.0 s; wall / trials 1.25) — priming 7%, "
        "other 5%, cleanup 4%, set-up 3%, trial steps 1%; outside it: before the run 1.5 s, "
        "report 2.2 s"
    )
    assert ratio(ACCOUNT) == pytest.approx(1.25)


@pytest.mark.parametrize(
    "account",
    [None, {}, {"wall_s": 10.0}, {"wall_s": 10.0, "trials_s": 0}, {"wall_s": "x", "trials_s": 1}],
)
def test_unknown_or_damaged_overhead_gives_no_line(account: dict | None) -> None:
    """Runs made before the key (or a damaged one) read as unknown, not as zero."""
    assert summary_line(account) is None and ratio(account) is None


def test_clock_parts_and_the_rest_add_up_to_the_wall() -> None:
    clock = Clock(start=time.monotonic() - 1.0)  # the run started a second ago
    with clock.part("setup"):
        time.sleep(0.02)
    row = SimpleNamespace(time_to_ready_s=0.03, persist_s=None, restart_s=0.01)
    clock.trial(row, priming_s=0.005, seconds=0.05)
    time.sleep(0.01)
    account = clock.account(before_start_s=0.5)
    parts = account["parts_s"]
    assert list(parts) == list(CAUSES)
    assert account["trials_s"] == pytest.approx(0.04)
    assert parts["setup"] >= 0.02 and parts["priming"] == pytest.approx(0.005)
    assert parts["trial"] == pytest.approx(0.005)  # 0.05 - 0.04 measured - 0.005 priming
    assert 0.9 < parts["other"] < 1.5  # the second nobody attributed
    assert sum(parts.values()) == pytest.approx(account["wall_s"] - account["trials_s"], abs=2e-3)
    assert account["before_start_s"] == 0.5
    with pytest.raises(KeyError):
        clock.add("lunch", 1.0)


def test_a_part_nested_in_another_is_counted_once() -> None:
    clock = Clock()
    with clock.part("setup"):
        time.sleep(0.02)
        with clock.part("probe"):
            time.sleep(0.05)
    assert 0.05 <= clock.parts["probe"] < clock.parts["probe"] + clock.parts["setup"] < 0.2
    assert 0.02 <= clock.parts["setup"] < 0.05 + 0.02  # the probe's seconds are not in it
