"""Scenario loading: shipped scenarios, matrix expansion, and errors that name file and key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iobench.errors import RunDirError, ScenarioError
from iobench.scenario import NAME_RE, load_scenario, scenario_from_meta, shipped

REQUIRED = {"naive", "tmp-fix", "venv-on-tmp", "warm-cache-on-target"}


@pytest.mark.parametrize("name", ["smoke", "torch", "diffusers"])
def test_shipped_scenarios_have_the_four_configs(name: str) -> None:
    s = load_scenario(name)
    by = {c.name: c for c in s.configs}
    assert REQUIRED <= set(by)
    assert (by["naive"].venv, by["naive"].tmpdir, by["naive"].cache) == ("target",) * 3
    assert (by["tmp-fix"].venv, by["tmp-fix"].tmpdir, by["tmp-fix"].cache) == ("target", "tmp", "tmp")
    assert (by["venv-on-tmp"].venv, by["venv-on-tmp"].tmpdir, by["venv-on-tmp"].cache) == ("tmp",) * 3
    w = by["warm-cache-on-target"]
    assert (w.venv, w.tmpdir, w.cache, w.cache_state) == ("tmp", "tmp", "target", "warm")
    assert {"smoke", "torch", "diffusers"} <= set(shipped())


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "s.toml"
    p.write_text(text)
    return p


BASE = """
[scenario]
name = "x"
packages = ["a"]
ready = "import a"
"""


@pytest.mark.parametrize(
    "body, key",
    [
        ("[configs.a]\nvenv='target'\ntmpdir='tmp'\ncache='tmp'\ncache_state='hot'\n", "configs.a.cache_state"),
        ("[configs.a]\nvenv='target'\ntmpdir='tmp'\n", "configs.a.cache"),
        ("[configs.a]\nvenv='off'\ntmpdir='tmp'\ncache='tmp'\n", "configs.a.venv"),
        ("[configs.a]\nvenv='t'\ntmpdir='t'\ncache='off'\ncache_state='warm'\n", "configs.a"),
        ("[configs.a]\nvenv='t'\ntmpdir='t'\ncache='t'\ninstaller='conda'\n", "configs.a.installer"),
        ("[configs.a]\nvenv='t'\ntmpdir='t'\ncache='t'\nbogus=1\n", "configs.a: unknown key(s) bogus"),
        ("[matrix]\nvenv=[]\n", "matrix.venv"),
    ],
)
def test_errors_name_file_and_key(tmp_path: Path, body: str, key: str) -> None:
    p = _write(tmp_path, BASE + body)
    with pytest.raises(ScenarioError) as exc:
        load_scenario(str(p))
    assert str(p) in str(exc.value) and key in str(exc.value)


def test_top_level_errors(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="scenario.repeats"):
        load_scenario(str(_write(tmp_path, BASE + "repeats = 0\n[configs.a]\nvenv='t'\ntmpdir='t'\ncache='t'\n")))
    with pytest.raises(ScenarioError, match="scenario.ready: not valid Python"):
        load_scenario(str(_write(tmp_path, BASE.replace("import a", "import (") + "[configs.a]\nvenv='t'\ntmpdir='t'\ncache='t'\n")))
    with pytest.raises(ScenarioError, match="not valid TOML"):
        load_scenario(str(_write(tmp_path, "[scenario\n")))
    with pytest.raises(ScenarioError, match="no configs"):
        load_scenario(str(_write(tmp_path, BASE)))
    with pytest.raises(ScenarioError, match="unknown scenario 'nope'.*smoke"):
        load_scenario("nope")


def test_matrix_product_excludes_and_names(tmp_path: Path) -> None:
    p = _write(tmp_path, BASE + """
[matrix]
venv = ["target", "tmp"]
tmpdir = ["target", "tmp"]
cache = ["tmp", "off"]
cache_state = ["cold", "warm"]
exclude = [{ venv = "tmp", tmpdir = "target" }]
name = "{venv}-{tmpdir}-{cache}-{cache_state}"
""")
    s = load_scenario(str(p))
    names = [c.name for c in s.configs]
    # 2*2*2*2 = 16, minus 4 (venv=tmp,tmpdir=target), minus warm+off (3 left pairs) = 9
    assert len(names) == 9
    assert "tmp-target-tmp-cold" not in names
    assert "target-tmp-off-warm" not in names
    assert "target-tmp-tmp-warm" in names
    sub = s.select(["target-tmp-tmp-warm", "tmp-tmp-off-cold"])
    assert [c.name for c in sub.configs] == ["target-tmp-tmp-warm", "tmp-tmp-off-cold"]
    with pytest.raises(ScenarioError, match="unknown config 'zzz'"):
        s.select(["zzz"])


CFG = "venv='t'\ntmpdir='t'\ncache='t'\n"


@pytest.mark.parametrize(
    "body, key",
    [
        (f'[configs."../x"]\n{CFG}', 'configs."../x": config name'),
        (f'[configs."a/b"]\n{CFG}', 'configs."a/b": config name'),
        (f'[configs.".hidden"]\n{CFG}', 'configs.".hidden": config name'),
        (f"[configs.-dash]\n{CFG}", "configs.-dash: config name"),
        (f'[configs.".."]\n{CFG}', 'configs."..": config name'),
        (f'[configs."a b"]\n{CFG}', 'configs."a b": config name'),
        (f"[configs.{'a' * 81}]\n{CFG}", "at most 80"),
    ],
)
def test_config_names_must_be_path_safe(tmp_path: Path, body: str, key: str) -> None:
    p = _write(tmp_path, BASE + body)
    with pytest.raises(ScenarioError) as exc:
        load_scenario(str(p))
    msg = str(exc.value)
    assert msg.startswith(f"{p}: ") and key in msg and "\n" not in msg


@pytest.mark.parametrize("bad", ["../up", "a/b", ".x", "-x", ""])
def test_scenario_name_must_be_path_safe(tmp_path: Path, bad: str) -> None:
    p = _write(tmp_path, BASE.replace('name = "x"', f"name = {bad!r}") + f"[configs.a]\n{CFG}")
    with pytest.raises(ScenarioError, match="scenario.name") as exc:
        load_scenario(str(p))
    assert str(p) in str(exc.value)


def test_matrix_default_names_are_path_safe(tmp_path: Path) -> None:
    p = _write(tmp_path, BASE + """
[matrix]
venv = ["target", "tmp"]
tmpdir = ["tmp"]
cache = ["off", "target"]
cache_state = ["cold"]
""")
    names = [c.name for c in load_scenario(str(p)).configs]
    assert names == [
        "venv-target_tmpdir-tmp_cache-off_state-cold",
        "venv-target_tmpdir-tmp_cache-target_state-cold",
        "venv-tmp_tmpdir-tmp_cache-off_state-cold",
        "venv-tmp_tmpdir-tmp_cache-target_state-cold",
    ]
    assert all(NAME_RE.match(n) for n in names)
    # a role with characters a path must not hold: the error points at the pattern to set
    p = _write(tmp_path, BASE + '[matrix]\nvenv = ["a/b"]\ntmpdir = ["t"]\ncache = ["t"]\n')
    with pytest.raises(ScenarioError, match=r"s\.toml: matrix: generated config name 'venv-a/b_.*matrix\.name"):
        load_scenario(str(p))


def test_matrix_pattern_names_are_checked(tmp_path: Path) -> None:
    p = _write(tmp_path, BASE + '[matrix]\nvenv = ["t"]\ntmpdir = ["t"]\ncache = ["t"]\nname = "../{venv}"\n')
    with pytest.raises(ScenarioError, match=r"s\.toml: matrix\.name: generated config name '\.\./t'"):
        load_scenario(str(p))
    p = _write(tmp_path, BASE + '[matrix]\nvenv = ["t"]\ntmpdir = ["t"]\ncache = ["t"]\nname = "{venv}={cache}"\n')
    with pytest.raises(ScenarioError, match=r"matrix\.name: generated config name 't=t'"):
        load_scenario(str(p))
    p = _write(tmp_path, BASE + '[matrix]\nvenv = ["t"]\ntmpdir = ["t"]\ncache = ["t"]\nname = 3\n')
    with pytest.raises(ScenarioError, match=r"matrix\.name: expected a pattern"):
        load_scenario(str(p))
    # two combinations, one name: caught as a duplicate
    p = _write(tmp_path, BASE + '[matrix]\nvenv = ["t", "u"]\ntmpdir = ["t"]\ncache = ["t"]\nname = "same"\n')
    with pytest.raises(ScenarioError, match="'same' used twice"):
        load_scenario(str(p))


def test_select_rejects_duplicates() -> None:
    s = load_scenario("smoke")
    with pytest.raises(ScenarioError, match="--configs: config 'naive' given twice"):
        s.select(["naive", "tmp-fix", "naive"])
    assert [c.name for c in s.select(["tmp-fix", "naive"]).configs] == ["tmp-fix", "naive"]


def _meta() -> dict:
    return json.loads(json.dumps(load_scenario("smoke").to_dict()))  # as meta.json holds it


def test_scenario_from_meta_roundtrip() -> None:
    s = load_scenario("smoke")
    assert scenario_from_meta(_meta()) == s
    legacy = _meta()
    legacy["configs"][0]["name"] = "venv=target-tmpdir=tmp"  # an old default matrix name
    del legacy["extra"], legacy["size_mb"]
    assert scenario_from_meta(legacy).configs[0].name == "venv=target-tmpdir=tmp"


def _drop(d: dict, key: str) -> dict:
    d.pop(key)
    return d


@pytest.mark.parametrize(
    "mutate, key",
    [
        (lambda m: [], "scenario: expected a table"),
        (lambda m: {**m, "future": 1}, "scenario: unknown key(s) future"),
        (lambda m: _drop(m, "configs"), "scenario.configs"),
        (lambda m: _drop(m, "name"), "scenario.name"),
        (lambda m: {**m, "name": "../x"}, "scenario.name"),
        (lambda m: {**m, "packages": "torch"}, "scenario.packages"),
        (lambda m: {**m, "repeats": "3"}, "scenario.repeats"),
        (lambda m: {**m, "configs": [1]}, "scenario.configs[0]: expected a table"),
        (lambda m: {**m, "configs": [{**m["configs"][0], "pin": "x"}]}, "configs.naive: unknown key(s) pin"),
        (lambda m: {**m, "configs": [_drop(m["configs"][0], "venv")]}, "configs.naive.venv: missing"),
        (lambda m: {**m, "configs": [{**m["configs"][0], "name": "a/b"}]}, "scenario.configs[0].name"),
        (lambda m: {**m, "configs": [{**m["configs"][0], "installer": 3}]}, "configs.naive.installer"),
        (lambda m: {**m, "configs": [m["configs"][0], m["configs"][0]]}, "used twice"),
    ],
)
def test_scenario_from_meta_malformed(mutate, key: str) -> None:
    with pytest.raises(RunDirError) as exc:
        scenario_from_meta(mutate(_meta()))
    msg = str(exc.value)
    assert msg.startswith("meta.json: ") and key in msg and "\n" not in msg
