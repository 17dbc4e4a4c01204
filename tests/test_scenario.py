"""Scenario loading: shipped scenarios, matrix expansion, and errors that name file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from iobench.errors import ScenarioError
from iobench.scenario import load_scenario, shipped

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
