"""units.py: one formatter per unit, and the one "how much faster" convention."""

from __future__ import annotations

import math

from iobench.units import (
    fmt_bytes,
    fmt_mbps,
    fmt_s,
    fmt_s_range,
    fmt_share,
    fmt_speed,
    fmt_times,
    fmt_vs,
    noise_word,
    run_key,
)


def test_seconds_bytes_rates_and_shares() -> None:
    assert [fmt_s(x) for x in (0.04, 3.24, 123.4, 12345, math.nan, None)] == [
        "0.04 s", "3.2 s", "123 s", "12,345 s", "—", "—",
    ]  # fmt: skip
    assert fmt_s_range(2.04, 3.06) == "2.0–3.1 s" and fmt_s_range(358.7, 378.1) == "359–378 s"
    assert [fmt_bytes(x) for x in (35_000, 16_400_000, 999, 25_276_514_304)] == [
        "35.0 kB", "16.4 MB", "999 bytes", "25.3 GB",
    ]  # fmt: skip
    assert fmt_mbps(3.44) == "3.4 MB/s" and fmt_mbps(123.4) == "123 MB/s"
    assert [fmt_share(x) for x in (0.84, 0.004, 0.0, math.nan)] == ["84%", "<1%", "0%", "—"]


def test_how_much_faster_has_one_convention() -> None:
    assert fmt_speed(2.3, "naive") == "2.30× faster than naive"
    assert fmt_speed(0.8, "naive") == "1.25× slower than naive"  # never "0.80x"
    assert fmt_speed(15.7) == "16× faster" and fmt_speed(1.004, "naive") == "same as naive"
    assert fmt_speed(math.nan) == "—" and fmt_times(0) == "—"


def test_a_ratio_between_two_runs_always_says_whether_it_is_noise() -> None:
    """compare's table, page and chart: a newcomer read "1.60× slower" with no noise word
    where one run had a single trial."""
    assert fmt_vs(1 / 1.6, True, "A") == "1.60× slower than A (beyond noise)"
    assert fmt_vs(1.3, False) == "1.30× faster (within noise)"
    assert fmt_vs(1.66, None) == fmt_vs(1.66, math.nan) == "1.66× faster (too few trials)"
    assert fmt_vs(math.nan, True) == "—"
    assert [noise_word(k) for k in (True, False, None)] == ["beyond noise", "within noise", ""]


def test_run_keys_go_on_after_z() -> None:
    assert [run_key(i) for i in (0, 1, 25, 26, 27, 701, 702)] == [
        "A", "B", "Z", "AA", "AB", "ZZ", "AAA",
    ]  # fmt: skip


def test_did_you_mean_prefixes_first_then_near_misses_else_nothing() -> None:
    """Issue 21: no "did you mean" for config, scenario and GPU names."""
    from iobench.units import did_you_mean

    assert did_you_mean("naiv", ["naive", "tmp-fix"]) == "did you mean 'naive'?"
    assert did_you_mean("h10", ["H100 PCIe", "H100 SXM", "H200"]) == (
        "did you mean 'H100 PCIe' or 'H100 SXM'?"
    )
    assert did_you_mean("smkoe", ["smoke", "torch"]) == "did you mean 'smoke'?"
    assert did_you_mean("zzz", ["naive", "tmp-fix"]) == ""


def test_the_lab_gave_words_only_below_nine_tenths_of_what_is_allowed() -> None:
    from iobench.units import lab_gave

    assert lab_gave(812, 1573.0, "efs-elastic") == "the lab gave 812 of the preset's 1,573 MB/s"
    assert lab_gave(40.0, 100.0) == "the lab gave 40 of the volume's 100 MB/s"
    assert lab_gave(90.0, 100.0) is None and lab_gave(95.0, 100.0) is None  # faithful enough
    for unknown in ((None, 100.0), (50.0, None), (math.nan, 1.0), (5.0, 0.0)):
        assert lab_gave(*unknown) is None
