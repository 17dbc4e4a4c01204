"""iobench.trial.warmcache: one primed cache per placement, re-primed when a trial changed it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from iobench.scenario.kinds.install import InstallConfig as Config
from iobench.system.scratch import Scratch
from iobench.trial.warmcache import WarmCaches, fingerprint, placement

WARM = Config("warm", venv="tmp", tmpdir="tmp", cache="target", cache_state="warm")


def _caches(tmp_path: Path) -> WarmCaches:
    scratch = {}
    for role in ("target", "tmp"):
        (tmp_path / role).mkdir()
        scratch[role] = Scratch(tmp_path / role, "run-1").ensure().claim()
    return WarmCaches(scratch)


def _fill(cache: Path) -> None:
    (cache / "http-v2" / "a").mkdir(parents=True)
    (cache / "http-v2" / "a" / "entry").write_bytes(b"x" * 100)
    (cache / "wheels").mkdir()


def test_fingerprint_sees_names_and_sizes_not_times(tmp_path: Path) -> None:
    _fill(tmp_path)
    first = fingerprint(tmp_path)
    (tmp_path / "http-v2" / "a" / "entry").write_bytes(b"y" * 100)  # rewritten, same size
    assert fingerprint(tmp_path) == first
    (tmp_path / "http-v2" / "a" / "entry").write_bytes(b"y" * 101)
    assert fingerprint(tmp_path) != first
    (tmp_path / "http-v2" / "a" / "entry").write_bytes(b"y" * 100)
    (tmp_path / "wheels" / "new.whl").write_bytes(b"")
    assert fingerprint(tmp_path) != first


def test_primed_once_then_reused_while_unchanged(tmp_path: Path) -> None:
    caches = _caches(tmp_path)
    path = caches.path(WARM)
    assert path.is_dir() and str(path).startswith(str(tmp_path / "target"))
    assert not caches.ready(WARM)
    _fill(caches.reset(WARM))
    caches.mark_primed(WARM)
    for _ in range(3):  # three repeats: the cache is checked after each and stays primed
        assert caches.ready(WARM)
        assert caches.check(WARM)
    assert (caches.primed, caches.reused) == (1, 3)


def test_a_trial_that_changes_the_cache_gets_a_fresh_one_primed(tmp_path: Path) -> None:
    caches = _caches(tmp_path)
    _fill(caches.reset(WARM))
    caches.mark_primed(WARM)
    (caches.path(WARM) / "wheels" / "built.whl").write_bytes(b"w")  # the trial added one
    assert not caches.check(WARM)
    assert not caches.ready(WARM)  # the next trial primes again ...
    fresh = caches.reset(WARM)
    assert fresh == caches.path(WARM) and list(fresh.iterdir()) == []  # ... into an empty cache


def test_placements_are_role_installer_link_mode_and_creator(tmp_path: Path) -> None:
    caches = _caches(tmp_path)
    uv = replace(WARM, installer="uv")
    other_role = replace(WARM, cache="tmp")
    keys = {placement(c) for c in (WARM, uv, other_role, replace(WARM, name="warm-2"))}
    assert len(keys) == 3  # a second config of the same placement shares its cache
    assert caches.path(uv) != caches.path(WARM) != caches.path(other_role)


COLD = Config("naive", venv="target", tmpdir="target", cache="target")


def test_a_cold_trial_s_cache_is_adopted_once_when_a_warm_config_wants_it(tmp_path: Path) -> None:
    caches = _caches(tmp_path)
    caches.wanted = {placement(WARM)}
    assert placement(COLD) == placement(WARM)  # same role, installer, link mode, creator
    trial_cache = caches.scratch["target"].trial_dir("naive-r1") / "cache"
    trial_cache.mkdir()
    assert not caches.adopt(COLD, trial_cache)  # empty: nothing to keep
    _fill(trial_cache)
    print_of_trial = fingerprint(trial_cache)
    assert caches.adopt(COLD, trial_cache)
    assert not trial_cache.exists() and fingerprint(caches.path(WARM)) == print_of_trial
    assert caches.ready(WARM) and (caches.primed, caches.adopted) == (0, 1)
    second = caches.scratch["target"].trial_dir("naive-r2") / "cache"
    second.mkdir()
    _fill(second)
    assert not caches.adopt(COLD, second) and second.is_dir()  # one is primed already
    # no warm config of that placement in the run, or no cache: nothing is adopted
    (tmp_path / "other").mkdir()
    other = _caches(tmp_path / "other")
    other.wanted = {placement(replace(WARM, cache="tmp"))}
    assert not other.adopt(COLD, second)
    assert not other.adopt(replace(COLD, cache="off"), second)
