"""verdict.py: the decision (advice, keep, noise, too few, same storage) and the console table."""

from __future__ import annotations

import pytest

from iobench.report.configs import ConfigTimes, configs_from_rows, spread
from iobench.report.placement import differences, same_filesystem, shared_storage_lines
from iobench.report.verdict import console_lines, decide
from iobench.rundir.meta import RoleInfo

DISK_AND_SHM = {
    "target": RoleInfo(path="/srv/data", device="/dev/vda", mountpoint="/", fstype="ext4"),
    "tmp": RoleInfo(path="/dev/shm", device="tmpfs", mountpoint="/dev/shm", fstype="tmpfs"),
}
ONE_DISK = {
    "target": RoleInfo(path="/work/clone", device="/dev/vda", mountpoint="/", fstype="ext4"),
    "tmp": RoleInfo(path="/tmp", device="/dev/vda", mountpoint="/", fstype="ext4"),
}
NAIVE = {"venv_role": "target", "tmpdir_role": "target", "cache_role": "target",
         "installer": "pip", "cache_state": "cold", "compile": "on"}  # fmt: skip
ON_TMP = {**NAIVE, "venv_role": "tmp", "tmpdir_role": "tmp", "cache_role": "tmp"}
WARM = {**ON_TMP, "cache_role": "target", "cache_state": "warm"}


def configs(**times: tuple[float, ...]) -> list[ConfigTimes]:
    facts = {"naive": NAIVE, "venv_on_tmp": ON_TMP, "warm": WARM}
    return [ConfigTimes(name.replace("_", "-"), t, facts[name]) for name, t in times.items()]


def test_a_clear_winner_earns_advice() -> None:
    v = decide(configs(naive=(4.0, 4.1, 3.9), venv_on_tmp=(2.0, 2.05, 1.98)), "naive", DISK_AND_SHM)
    assert v.kind == "advice" and v.advise and v.winner == "venv-on-tmp"
    assert v.headline == (
        "venv-on-tmp is 2.00× faster than naive (2.0 s vs 4.0 s; 95%: 1.89–2.09×, n=3, pooled; "
        "beyond noise)."
    )
    assert v.changes[0] == "venv on tmp (tmpfs) instead of target (ext4)" and not v.moot


def test_a_winner_tied_with_the_runner_up_still_advises_and_says_so() -> None:
    v = decide(configs(naive=(4.0, 4.1, 3.9), venv_on_tmp=(2.0, 2.05, 1.98), warm=(2.02, 2.0, 2.06)),
               "naive", DISK_AND_SHM)  # fmt: skip
    assert v.kind == "advice" and v.runner_up == "warm"
    assert v.headline.endswith("; warm (2.0 s) is as fast within noise.")
    assert v.notes and "not distinguishable" in v.notes[0]


def test_overlapping_trials_are_no_difference_beyond_noise() -> None:
    v = decide(configs(naive=(2.04, 2.28, 3.06), warm=(1.66, 2.12, 1.72)), "naive", DISK_AND_SHM)
    assert v.kind == "noise" and not v.advise
    assert v.headline.startswith(
        "No difference beyond noise (95%: 0.89–1.98×, n=3, pooled): fastest measured warm 1.7 s"
    )


def test_one_trial_per_config_asks_for_more() -> None:
    v = decide(configs(naive=(4.0,), venv_on_tmp=(2.0,)), "naive", DISK_AND_SHM)
    assert v.kind == "too-few" and not v.advise
    assert "a ranking needs at least 2 trials per config" in v.headline


def test_the_baseline_winning_means_keep_what_you_have() -> None:
    v = decide(configs(naive=(2.0, 2.05, 1.98), venv_on_tmp=(4.0, 4.1, 3.9)), "naive", DISK_AND_SHM)
    assert v.kind == "keep" and not v.advise
    assert v.headline == (
        "naive, the baseline, is fastest (2.0 s, 2.00× faster than venv-on-tmp; 95%: 1.89–2.09×, "
        "n=3, pooled): keep what you have."
    )


def test_moving_things_within_one_filesystem_is_never_advice() -> None:
    # a large, steady "difference" between target and tmp on the same disk: order, not placement
    v = decide(configs(naive=(4.0, 4.1, 3.9), venv_on_tmp=(2.0, 2.05, 1.98)), "naive", ONE_DISK)
    assert v.kind == "same-storage" and not v.advise
    assert v.headline.startswith("No difference to act on: venv-on-tmp and naive differ only in")
    assert len(v.moot) == 3 and not v.changes
    # a warm cache is a real change even on one disk: judged by the rule, not by storage
    v = decide(configs(naive=(4.0, 4.1, 3.9), warm=(2.0, 2.05, 1.98)), "naive", ONE_DISK)
    assert v.kind == "advice" and v.changes == ("cache warm instead of cold",)


def test_configs_that_differ_in_no_placement_are_noise_not_same_storage() -> None:
    """Two strategies with one placement (prewarm and persistent-venv): no sentence about
    moving things within a filesystem (it used to read "differ only in , one filesystem")."""
    same = [ConfigTimes("prewarm", (24.1, 23.3, 24.6), NAIVE),
            ConfigTimes("persistent-venv", (24.9, 24.4, 33.4), NAIVE)]  # fmt: skip
    v = decide(same, "persistent-venv", ONE_DISK)
    assert v.kind == "noise" and not v.advise and not v.moot
    assert v.headline.startswith("No difference beyond noise (95%:")
    assert "differ only in" not in v.headline


def test_filesystems_are_compared_by_device_and_mount_point() -> None:
    assert same_filesystem(ONE_DISK, "target", "tmp") is True
    assert same_filesystem(DISK_AND_SHM, "target", "tmp") is False
    assert (
        same_filesystem({"target": RoleInfo(path="/x"), "tmp": RoleInfo()}, "target", "tmp") is None
    )
    real, moot = differences(NAIVE, {**NAIVE, "cache_role": "off"}, ONE_DISK)
    assert real == ["cache on target (ext4) instead of off"] and moot == []
    assert shared_storage_lines(DISK_AND_SHM) == []
    (line,) = shared_storage_lines(ONE_DISK)
    assert line.startswith(
        "Same storage: target and tmp are one filesystem (ext4 at /, device /dev/vda)"
    )


def test_spread_is_min_max_for_few_trials_and_p10_p90_for_many() -> None:
    assert spread([2.77, 3.55]) == (2.77, 3.55, "min–max")
    lo, hi, name = spread(range(1, 12))
    assert (lo, hi, name) == (pytest.approx(2.0), pytest.approx(10.0), "p10–p90")


def test_console_table_counts_a_resumed_trial_once_and_states_the_verdict() -> None:
    rows = [
        {"trial_id": "naive-r1", "config": "naive", "status": "ok", "time_to_ready_s": "4.0", **NAIVE},
        {"trial_id": "warm-r1", "config": "warm", "status": "interrupted", "time_to_ready_s": "", **WARM},
        {"trial_id": "naive-r2", "config": "naive", "status": "ok", "time_to_ready_s": "4.2", **NAIVE},
        {"trial_id": "warm-r1", "config": "warm", "status": "ok", "time_to_ready_s": "2.0", **WARM},
        {"trial_id": "warm-r2", "config": "warm", "status": "ok", "time_to_ready_s": "2.1", **WARM},
        {"trial_id": "warm-r3", "config": "warm", "status": "failed", "time_to_ready_s": "", **WARM},
    ]  # fmt: skip
    assert [c.n for c in configs_from_rows(rows)] == [2, 2]
    assert console_lines(rows, ONE_DISK) == [
        "Same storage: target and tmp are one filesystem (ext4 at /, device /dev/vda); configs "
        "that only move things between them compare that filesystem with itself, and any "
        "difference between them is noise or order, never advice.",
        "config  n  median     spread  vs naive                    failed",
        "naive   2   4.1 s  4.0–4.2 s  baseline",
        "warm    2   2.0 s  2.0–2.1 s  2.00× faster  beyond noise  1",
        "spread: min–max of the successful trials",
        "warm is 2.00× faster than naive (2.0 s vs 4.1 s; 95%: 1.72–2.32×, n=2, pooled; beyond noise).",
    ]


def test_without_naive_the_baseline_is_the_scenarios_first_config_whatever_ran_first() -> None:
    rows = [
        {"trial_id": "b-r1", "config": "b", "status": "ok", "time_to_ready_s": "2.0", **WARM},
        {"trial_id": "a-r1", "config": "a", "status": "ok", "time_to_ready_s": "4.0", **NAIVE},
    ]  # fmt: skip
    lines = console_lines(rows, order=["a", "b"])
    assert lines[0].split()[4] == "vs" and lines[0].split()[5] == "a"
    assert lines[1].split()[0] == "a" and "baseline" in lines[1]


def test_a_slower_config_beyond_noise_is_advised_when_the_fastest_spreads_too_much() -> None:
    # measured here: tiny scenario, 1 ms FUSE volume (target) vs /dev/shm, other jobs running;
    # warm's trials (2.57, 2.59, 5.44 s) widened by hand to an outlier of 17 s, since the
    # measured ones now rank beyond noise with the pooled variance
    configs = [
        ConfigTimes("warm", (1.0, 2.5934, 17.0), WARM),
        ConfigTimes("venv-on-tmp", (3.4544, 5.9729, 4.9669), ON_TMP),
        ConfigTimes("nocache", (13.0565, 14.6735, 11.8042), {**NAIVE, "cache_role": "off"}),
        ConfigTimes("naive", (18.8766, 18.063, 18.3778), NAIVE),
    ]
    v = decide(configs, "naive", DISK_AND_SHM)
    assert v.kind == "advice" and v.fastest == "warm" and v.advised == "venv-on-tmp"
    assert v.winner == "venv-on-tmp"
    assert v.headline == (
        "venv-on-tmp is 3.70× faster than naive (5.0 s vs 18.4 s; 95%: 2.08–7.46×, n=3, pooled; "
        "beyond noise); warm "
        "measured faster (2.6 s), but its trials spread too much to tell."
    )
    assert v.vs_baseline is not None and v.vs_baseline.fast == "venv-on-tmp"


def test_a_baseline_given_up_is_slower_and_the_table_says_by_more_than_its_bound() -> None:
    """naive's trials were all ended by --give-up-after at 6.0 and 6.3 s: it is not 'failed',
    its median is "> 6.2 s", and the fastest config earns its advice with a lower bound."""
    rows = [
        {"trial_id": "naive-r1", "config": "naive", "status": "censored", "time_to_ready_s": "",
         "censored_after_s": "6.0", **NAIVE},
        {"trial_id": "venv-on-tmp-r1", "config": "venv-on-tmp", "status": "ok",
         "time_to_ready_s": "2.0", **ON_TMP},
        {"trial_id": "naive-r2", "config": "naive", "status": "censored", "time_to_ready_s": "",
         "censored_after_s": "6.3", **NAIVE},
        {"trial_id": "venv-on-tmp-r2", "config": "venv-on-tmp", "status": "ok",
         "time_to_ready_s": "2.2", **ON_TMP},
    ]  # fmt: skip
    naive, fast = configs_from_rows(rows)
    assert (naive.n, naive.failed, naive.censored) == (0, 0, (6.0, 6.3))
    lines = console_lines(rows, DISK_AND_SHM)
    assert lines[0].split() == [
        "config",
        "n",
        "median",
        "spread",
        "vs",
        "naive",
        "failed",
        "given",
        "up",
    ]
    assert lines[1].split()[:4] == ["naive", "0", ">", "6.2"] and lines[1].split()[-1] == "2"
    v = decide([naive, fast], "naive", DISK_AND_SHM)
    assert v.kind == "advice" and v.advised == "venv-on-tmp" and v.baseline == "naive"
    assert v.headline == (
        "venv-on-tmp is more than 2.86× faster than naive (2.1 s, n=2; naive's 2 trial(s) "
        "given up after > 6.0 s)."
    )
    # the model's figure for the config given up, when above its bound, is said beside it
    predicted = [{**r, "predicted_s": "18.9"} for r in rows]
    v = decide(configs_from_rows(predicted), "naive", DISK_AND_SHM)
    assert v.headline.endswith(
        "given up after > 6.0 s; predicted 18.9 s, ~9.0× (docs/prediction.md))."
    )
    # a fast trial slower than a bound: no such claim
    slow = ConfigTimes("venv-on-tmp", (2.0, 6.5), ON_TMP)
    assert decide([naive, slow], "naive", DISK_AND_SHM).kind != "advice"


def test_winner_is_named_only_when_the_verdict_advises_or_keeps() -> None:
    """Issue 21: `list` and `jq .winner` named a config for "no difference" and one-trial
    runs. The winner is the verdict's: advised, or the baseline fastest beyond noise."""
    same = [ConfigTimes("naive", (10.0, 10.4, 9.8)), ConfigTimes("tmp-fix", (9.9, 10.3, 10.1))]
    noise = decide(same, "naive")
    assert noise.kind == "noise" or noise.kind == "keep"
    assert noise.winner is None and noise.fastest in ("naive", "tmp-fix")
    one = decide([ConfigTimes("naive", (10.0,)), ConfigTimes("tmp-fix", (5.0,))], "naive")
    assert one.kind == "too-few" and one.winner is None and one.fastest == "tmp-fix"
    alone = decide([ConfigTimes("naive", (10.0, 10.1))], "naive")
    assert alone.winner is None
    kept = decide(
        [ConfigTimes("naive", (5.0, 5.1, 5.05)), ConfigTimes("x", (9.0, 9.2, 9.1))], "naive"
    )
    assert kept.kind == "keep" and kept.winner == "naive"


def test_the_verdict_pairs_trials_by_round_and_says_so() -> None:
    """Issue 21: load that grows across a run hid a steady difference; trials.csv's repeat
    pairs them, and the headline shows the interval and the rule that decided."""
    load = (1.0, 1.0, 1.7, 2.4, 3.1)
    rows = []
    for r, f in enumerate(load, start=1):
        rows.append(
            {
                "trial_id": f"naive-r{r}",
                "config": "naive",
                "repeat": r,
                "status": "ok",
                "time_to_ready_s": 11.0 * f * (1 + 0.004 * (r % 2)),
                **NAIVE,
            }
        )
        rows.append({"trial_id": f"venv-on-tmp-r{r}", "config": "venv-on-tmp", "repeat": r,
                     "status": "ok", "time_to_ready_s": 10.0 * f, **ON_TMP})  # fmt: skip
    v = decide(configs_from_rows(rows), "naive", DISK_AND_SHM)
    assert v.kind == "advice" and v.winner == "venv-on-tmp"
    assert v.vs_baseline is not None and v.vs_baseline.rule == "paired"
    assert "n=5, paired by round; beyond noise" in v.headline


def test_two_configs_tied_within_noise_advise_the_same_one_whichever_measured_faster() -> None:
    """Issue 21, measured: three default runs advised warm-cache-on-target, then (a CPU burner
    started part-way) venv-on-tmp — tied within noise, the faster-measured one flipped. The
    one with fewer changes against the baseline is advised (then the first by name)."""
    for warm in ((1.95, 1.97, 1.99), (2.10, 2.12, 2.08)):  # faster, then slower than venv-on-tmp
        v = decide(configs(naive=(4.0, 4.1, 3.9), venv_on_tmp=(2.0, 2.05, 2.03), warm=warm),
                   "naive", DISK_AND_SHM)  # fmt: skip
        assert v.kind == "advice" and v.winner == "venv-on-tmp", v.headline
        assert "is as fast within noise" in v.headline and "fewer changes" in v.notes[0]
