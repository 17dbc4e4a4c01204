"""Scenario loading: shipped scenarios, matrix expansion, and errors that name file and key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iobench.errors import RunDirError, ScenarioError
from iobench.scenario.load import load_scenario, shipped
from iobench.scenario.schema import NAME_RE
from iobench.scenario.stored import scenario_from_meta

REQUIRED = {"naive", "tmp-fix", "venv-on-tmp", "warm-cache-on-target"}


@pytest.mark.parametrize("name", ["smoke", "torch", "diffusers"])
def test_shipped_scenarios_have_the_four_configs(name: str) -> None:
    s = load_scenario(name)
    by = {c.name: c for c in s.configs}
    assert REQUIRED <= set(by)
    assert (by["naive"].venv, by["naive"].tmpdir, by["naive"].cache) == ("target",) * 3
    assert (by["tmp-fix"].venv, by["tmp-fix"].tmpdir, by["tmp-fix"].cache) == (
        "target",
        "tmp",
        "tmp",
    )
    assert (by["venv-on-tmp"].venv, by["venv-on-tmp"].tmpdir, by["venv-on-tmp"].cache) == (
        "tmp",
    ) * 3
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
        (
            "[configs.a]\nvenv='target'\ntmpdir='tmp'\ncache='tmp'\ncache_state='hot'\n",
            "configs.a.cache_state",
        ),
        ("[configs.a]\nvenv='target'\ntmpdir='tmp'\n", "configs.a.cache"),
        ("[configs.a]\nvenv='off'\ntmpdir='tmp'\ncache='tmp'\n", "configs.a.venv"),
        ("[configs.a]\nvenv='t'\ntmpdir='t'\ncache='off'\ncache_state='warm'\n", "configs.a"),
        (
            "[configs.a]\nvenv='t'\ntmpdir='t'\ncache='t'\ninstaller='conda'\n",
            "configs.a.installer",
        ),
        (
            "[configs.a]\nvenv='t'\ntmpdir='t'\ncache='t'\nbogus=1\n",
            "configs.a: unknown key(s) bogus",
        ),
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
        load_scenario(
            str(
                _write(
                    tmp_path, BASE + "repeats = 0\n[configs.a]\nvenv='t'\ntmpdir='t'\ncache='t'\n"
                )
            )
        )
    with pytest.raises(ScenarioError, match="scenario.ready: not valid Python"):
        load_scenario(
            str(
                _write(
                    tmp_path,
                    BASE.replace("import a", "import (")
                    + "[configs.a]\nvenv='t'\ntmpdir='t'\ncache='t'\n",
                )
            )
        )
    with pytest.raises(ScenarioError, match="not valid TOML"):
        load_scenario(str(_write(tmp_path, "[scenario\n")))
    with pytest.raises(ScenarioError, match="no configs"):
        load_scenario(str(_write(tmp_path, BASE)))
    with pytest.raises(ScenarioError, match="unknown scenario 'nope'.*smoke"):
        load_scenario("nope")


def test_matrix_product_excludes_and_names(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        BASE
        + """
[matrix]
venv = ["target", "tmp"]
tmpdir = ["target", "tmp"]
cache = ["tmp", "off"]
cache_state = ["cold", "warm"]
exclude = [{ venv = "tmp", tmpdir = "target" }]
name = "{venv}-{tmpdir}-{cache}-{cache_state}"
""",
    )
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
    p = _write(
        tmp_path,
        BASE
        + """
[matrix]
venv = ["target", "tmp"]
tmpdir = ["tmp"]
cache = ["off", "target"]
cache_state = ["cold"]
""",
    )
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
    with pytest.raises(
        ScenarioError, match=r"s\.toml: matrix: generated config name 'venv-a/b_.*matrix\.name"
    ):
        load_scenario(str(p))


def test_matrix_pattern_names_are_checked(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        BASE + '[matrix]\nvenv = ["t"]\ntmpdir = ["t"]\ncache = ["t"]\nname = "../{venv}"\n',
    )
    with pytest.raises(
        ScenarioError, match=r"s\.toml: matrix\.name: generated config name '\.\./t'"
    ):
        load_scenario(str(p))
    p = _write(
        tmp_path,
        BASE + '[matrix]\nvenv = ["t"]\ntmpdir = ["t"]\ncache = ["t"]\nname = "{venv}={cache}"\n',
    )
    with pytest.raises(ScenarioError, match=r"matrix\.name: generated config name 't=t'"):
        load_scenario(str(p))
    p = _write(tmp_path, BASE + '[matrix]\nvenv = ["t"]\ntmpdir = ["t"]\ncache = ["t"]\nname = 3\n')
    with pytest.raises(ScenarioError, match=r"matrix\.name: expected a pattern"):
        load_scenario(str(p))
    # two combinations, one name: caught as a duplicate
    p = _write(
        tmp_path,
        BASE + '[matrix]\nvenv = ["t", "u"]\ntmpdir = ["t"]\ncache = ["t"]\nname = "same"\n',
    )
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
    del legacy["extra"], legacy["size_mb"], legacy["default_configs"]  # an old run had none
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
        (
            lambda m: {**m, "configs": [{**m["configs"][0], "pin": "x"}]},
            "configs.naive: unknown key(s) pin",
        ),
        (
            lambda m: {**m, "configs": [_drop(m["configs"][0], "venv")]},
            "configs.naive.venv: missing",
        ),
        (
            lambda m: {**m, "configs": [{**m["configs"][0], "name": "a/b"}]},
            "scenario.configs[0].name",
        ),
        (
            lambda m: {**m, "configs": [{**m["configs"][0], "installer": 3}]},
            "configs.naive.installer",
        ),
        (lambda m: {**m, "configs": [m["configs"][0], m["configs"][0]]}, "used twice"),
    ],
)
def test_scenario_from_meta_malformed(mutate, key: str) -> None:
    with pytest.raises(RunDirError) as exc:
        scenario_from_meta(mutate(_meta()))
    msg = str(exc.value)
    assert msg.startswith("meta.json: ") and key in msg and "\n" not in msg


# --- scenario files speak only the schema ---------------------------------------------------------


@pytest.mark.parametrize(
    "body, message",
    [
        (
            f"[config.x]\n{CFG}",
            "unknown table(s) config (known: configs, defaults, matrix, scenario, workload)",
        ),
        (f"[configs.a]\n{CFG}[defaults]\nvnev='t'\n", "defaults: unknown key(s) vnev"),
        (f"[configs.a]\n{CFG}", None),
        (
            "[matrix]\nvenv=['t']\ntmpdir=['t']\ncache=['t']\nexclude=[{vnev='t'}]\n",
            "matrix.exclude[0]: unknown axis(s) vnev",
        ),
        (f"[configs.a]\n{CFG}description=3\n", "configs.a.description: expected a string"),
        ("[configs.a]\nvenv='a/b'\ntmpdir='t'\ncache='t'\n", "configs.a.venv: role 'a/b' must be"),
    ],
)
def test_unknown_tables_and_keys_are_errors(tmp_path: Path, body: str, message: str | None) -> None:
    p = _write(tmp_path, BASE + body)
    if message is None:
        assert [c.name for c in load_scenario(str(p)).configs] == ["a"]
        return
    with pytest.raises(ScenarioError) as exc:
        load_scenario(str(p))
    assert str(exc.value).startswith(f"{p}: ") and message in str(exc.value), exc.value


def test_unknown_scenario_keys_are_errors(tmp_path: Path) -> None:
    p = _write(tmp_path, BASE + "repeat = 3\n" + f"[configs.a]\n{CFG}")
    with pytest.raises(
        ScenarioError,
        match=r"s\.toml: scenario: unknown key\(s\) repeat \(known: default_configs, description, image, kind",
    ):
        load_scenario(str(p))


@pytest.mark.parametrize(
    "req, ok",
    [
        ("torch==2.9.1", True),
        ("numpy>=1.24; python_version >= '3.10'", True),
        ("pkg[extra]", True),
        ("pkg @ https://example.invalid/pkg-1.0-py3-none-any.whl", True),
        ("./wheels/pkg-1.0-py3-none-any.whl", True),
        ("/abs/pkg-1.0.tar.gz", True),
        ("git+https://example.invalid/x/y", True),
        ("-r requirements.txt", False),
        ("--index-url=https://evil.invalid/simple", False),
        ("-e .", False),
        ("torch --pre", False),
        ("", False),
        ("not a requirement!", False),
    ],
)
def test_requirements_are_requirements_never_pip_options(
    tmp_path: Path, req: str, ok: bool
) -> None:
    p = _write(
        tmp_path,
        BASE.replace('packages = ["a"]', f"packages = [{json.dumps(req)}]") + f"[configs.a]\n{CFG}",
    )
    if ok:
        assert load_scenario(str(p)).packages == (req,)
        assert load_scenario("smoke").with_packages([req]).packages == (req,)
        return
    with pytest.raises(ScenarioError, match=r"s\.toml: scenario\.packages(\[0\])?: ") as exc:
        load_scenario(str(p))
    assert "\n" not in str(exc.value)
    with pytest.raises(ScenarioError, match=r"^--package "):
        load_scenario("smoke").with_packages([req])


@pytest.mark.parametrize(
    "line, key",
    [
        ("repeats = 1001", "scenario.repeats: expected an integer from 1 to 1000"),
        ("repeats = 100000000", "scenario.repeats"),
        ("repeats = 2.0", "scenario.repeats"),
        ("repeats = true", "scenario.repeats"),
        ("size_mb = nan", "scenario.size_mb: expected a number from 0 to"),
        ("size_mb = inf", "scenario.size_mb"),
        ("size_mb = -1", "scenario.size_mb"),
        ("size_mb = 1e30", "scenario.size_mb"),
        ("description = 5", "scenario.description: expected a string"),
    ],
)
def test_numbers_are_finite_and_sane(tmp_path: Path, line: str, key: str) -> None:
    p = _write(tmp_path, BASE + line + "\n" + f"[configs.a]\n{CFG}")
    with pytest.raises(ScenarioError) as exc:
        load_scenario(str(p))
    assert str(exc.value).startswith(f"{p}: ") and key in str(exc.value), exc.value


def test_meta_and_files_share_one_validator() -> None:
    # a scenario in meta.json fails exactly as its TOML would, with the meta's name for the file
    meta = _meta()
    meta["packages"] = ["--index-url=https://evil.invalid"]
    with pytest.raises(RunDirError, match=r"^meta\.json: scenario\.packages\[0\]: .*a pip option"):
        scenario_from_meta(meta)
    meta = _meta()
    meta["repeats"] = 10**6
    with pytest.raises(
        RunDirError, match=r"^meta\.json: scenario\.repeats: expected an integer from 1 to 1000"
    ):
        scenario_from_meta(meta)
    meta = _meta()
    meta["wheels"] = "/stored/profile.toml"  # resolved when the run started: kept as is
    assert scenario_from_meta(meta).wheels == "/stored/profile.toml"
    for bad in ("../../elsewhere.toml", "/stored/../etc/profile.toml", "rel/profile.toml"):
        meta["wheels"] = bad
        with pytest.raises(
            RunDirError, match=r"^meta\.json: scenario\.wheels: .* neither a profile name"
        ):
            scenario_from_meta(meta)


def test_a_scenario_may_repeat_until_settled_and_the_default_run_does(tmp_path: Path) -> None:
    """Issue 21: the default run kept 2 rounds and often ended "no difference (n=2)"; a
    scenario's repeats = "auto:N" makes a run without --repeats go on until settled."""
    smoke = load_scenario("smoke")
    assert smoke.repeats_auto and smoke.repeats == 5
    assert smoke.to_dict()["repeats"] == "auto:5"  # meta.json keeps the TOML's spelling
    assert scenario_from_meta(json.loads(json.dumps(smoke.to_dict()))).repeats_auto
    text = (Path(__file__).parents[1] / "data" / "tiny.toml").read_text()
    for value, ok in (('"auto"', 5), ('"auto:3"', 3), ('"auto:1"', None), ('"sometimes"', None)):
        path = tmp_path / "s.toml"
        path.write_text(text.replace("repeats = 1", f"repeats = {value}"))
        if ok is None:
            with pytest.raises(ScenarioError, match="scenario.repeats"):
                load_scenario(str(path))
        else:
            s = load_scenario(str(path))
            assert s.repeats_auto and s.repeats == ok


def test_meta_json_takes_the_pack_methods_and_cache_modes_the_scenario_knows() -> None:
    """rundir/ may not import the scenario's vocabulary (tests/test_layers.py), so meta.json's
    choices are written out there: held equal here."""
    import dataclasses

    from iobench.rundir.meta import RunMeta
    from iobench.scenario.vocab import PACK_METHODS
    from iobench.trial.coldcache import MODES

    fields = {f.name: f.metadata for f in dataclasses.fields(RunMeta)}
    assert fields["pack_method"]["choices"] == ("auto", *PACK_METHODS)
    assert fields["cache_mode"]["choices"] == MODES


@pytest.mark.parametrize(
    "value, message",
    [
        ('["a", "b"]', None),
        ('["b"]', None),
        ('["c"]', r"scenario\.default_configs: no config 'c'"),
        ('["a", "a"]', r"scenario\.default_configs: a config named twice"),
        ("[]", r"scenario\.default_configs: expected a non-empty list"),
        ('"a"', r"scenario\.default_configs: expected a non-empty list"),
    ],
)
def test_default_configs_name_the_scenario_s_own(
    tmp_path: Path, value: str, message: str | None
) -> None:
    body = BASE + f"default_configs = {value}\n[configs.a]\n{CFG}[configs.b]\n{CFG}"
    path = _write(tmp_path, body)
    if message is not None:
        with pytest.raises(ScenarioError, match=message):
            load_scenario(str(path))
        return
    s = load_scenario(str(path))
    assert [c.name for c in s.by_default().configs] == json.loads(value)
    stored = json.loads(json.dumps(s.to_dict()))
    assert scenario_from_meta(stored).default_configs == s.default_configs
    assert s.by_default().by_default() == s.by_default()  # selected: its own default set
