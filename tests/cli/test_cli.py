"""The command line: exit codes, one error line, exports, dry runs, list, env defaults.

Exit status 130 (Ctrl-C during a real run) is tested with a real SIGINT in
test_robustness.py.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import standin
from helpers.files import DATA, only_run_dir

from iobench import __version__
from iobench.__main__ import main
from iobench.cli.run import run_exit_code

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

TINY = DATA / "tiny.toml"
IOBENCH = str(Path(sys.executable).parent / "iobench")


def _err(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def _one_error(err: str) -> str:
    """The error line, and nothing else (no `usage:` line after it)."""
    lines = err.strip().splitlines()
    assert lines and lines[0].startswith("iobench: error: "), err
    assert lines[0].count("error:") == 1 and "iobench: error: iobench" not in lines[0], err
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["run", "--target", "/nonexistent/x"], "--target: /nonexistent/x does not exist"),
        (["run", "--tmp", "/etc/hostname"], "--tmp: /etc/hostname is not a directory"),
        (["run", "--target", "/"], "refusing the root folder"),
        (["run", "--repeats", "0"], "expected a whole number >= 1"),
        (["run", "--sample-hz", "-5"], "expected a number > 0"),
        (["run", "--scenario", "nope"], "unknown scenario 'nope'"),
        (["run", "--scenario", str(TINY), "--configs", "naive,zzz"], "unknown config 'zzz'"),
        (["run", "--path", "bad"], "expected NAME=DIR"),
        (["run", "--scenario", "torch", "--wheelhouse", "/nonexistent"], "/nonexistent"),
        (["bogus"], "invalid choice"),
        (
            ["run", "--export-json", "-", "--export-csv", "-"],
            "only one --export-* can go to stdout",
        ),
        (
            ["run", "--export-json", "/nonexistent/dir/x.json"],
            "folder /nonexistent/dir does not exist",
        ),
        (["run", "--export-json", "x.json", "--no-report"], "drop --no-report"),
        (["scenarios", "show", "nope"], "unknown scenario 'nope'"),
        (["completion", "fish"], "invalid choice 'fish'"),
    ],
)
def test_usage_errors_exit_2_with_one_line(
    argv: list[str], fragment: str, capsys, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    rc = main(argv)
    line = _one_error(_err(capsys))
    assert rc == 2
    assert fragment in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing created


@pytest.mark.parametrize(
    "argv, suggestion",
    [
        (["rn"], "did you mean 'run'?"),
        (["run", "--repats", "3"], "did you mean '--repeats'?"),
        (["run", "--targte=/tmp"], "did you mean '--target'?"),
        (["scenarios", "shwo", "smoke"], "did you mean 'show'?"),
        (["report", "x", "--fromat", "json"], "did you mean '--format'?"),
    ],
)
def test_did_you_mean(argv: list[str], suggestion: str, capsys) -> None:
    assert main(argv) == 2
    err = _err(capsys)
    assert suggestion in _one_error(err)


def test_the_error_line_names_the_subcommands_help(capsys) -> None:
    assert main(["run", "--repeats", "x"]) == 2
    assert _one_error(_err(capsys)).endswith("(options: iobench run --help)")


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["run", "--gpu", "H1000", "--dry-run"], "did you mean 'H100 PCIe' or 'H100 SXM'?"),
        (["compare", "results/nonexistent"], "results/nonexistent: no such folder"),
        (["report", "."], "is not an iobench run folder"),
    ],
)
def test_what_the_user_typed_wrong_exits_2_in_one_line(
    argv: list[str], fragment: str, capsys, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert fragment in _one_error(_err(capsys))


def test_no_arguments_prints_help_ending_with_where_to_start(capsys) -> None:
    assert main([]) == 2
    out = capsys.readouterr().out
    assert "exit status:" in out and "130" in out and "IOBENCH_TARGET" in out
    assert out.rstrip().splitlines()[-5].startswith("start here:")
    for command in ("run", "report", "compare", "list", "scenarios", "completion"):
        assert f"\n    {command}" in out


def test_run_help_has_examples_metavars_and_env(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", "--help"])
    assert exc.value.code == 0
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert "examples:" in out and "exit status:" in out
    for fragment in (
        "--target DIR",
        "--tmp DIR",
        "--results DIR",
        "--scenario NAME|FILE",
        "--python PATH",
        "--export-json FILE",
        "[env IOBENCH_TARGET]",
        "[env IOBENCH_GPU]",
    ):
        assert fragment in out, fragment


def test_runtime_errors_exit_1(tmp_path: Path, capsys) -> None:
    not_a_run = tmp_path / "plain"
    not_a_run.mkdir()
    assert main(["report", str(not_a_run)]) == 2  # what the user typed: a usage error
    assert "not an iobench run folder" in _one_error(_err(capsys))
    assert main(["run", "--resume", str(not_a_run)]) == 1
    assert "no meta.json" in _one_error(_err(capsys))


def test_exit_code_rule() -> None:
    from types import SimpleNamespace as Row

    ok = Row(trial_id="a-r1", config="a", status="ok")
    bad = Row(trial_id="b-r1", config="b", status="failed")
    bad_a = Row(trial_id="a-r2", config="a", status="stalled")
    assert run_exit_code([ok]) == 0
    assert run_exit_code([ok, bad_a]) == 1
    assert run_exit_code([ok, bad_a], allow_failures=True) == 0  # config a has a successful trial
    assert run_exit_code([ok, bad], allow_failures=True) == 1  # config b has none
    assert run_exit_code([]) == 1


def test_read_only_target(tmpfs, tmp_path: Path, capsys) -> None:
    ro = tmpfs(size="16m", name="ro")
    subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
    rc = main(
        ["run", "--target", str(ro), "--scenario", str(TINY), "--results", str(tmp_path / "r")]
    )
    err = _one_error(_err(capsys))
    assert rc == 2 and "not writable" in err and str(ro) in err
    assert not (tmp_path / "r").exists()


def test_not_enough_space(tmpfs, tmp_path: Path, capsys) -> None:
    small = tmpfs(size="2m", name="small")
    rc = main(
        ["run", "--target", str(small), "--scenario", str(TINY), "--results", str(tmp_path / "r")]
    )
    err = _one_error(_err(capsys))
    assert rc == 2 and "MB free" in err and "needs about" in err


def test_missing_role_for_scenario(tmp_path: Path, capsys) -> None:
    s = tmp_path / "s.toml"
    s.write_text(
        TINY.read_text()
        .replace('wheels = "tiny-profile.toml"', f'wheels = "{TINY.parent}/tiny-profile.toml"')
        .replace('venv = "tmp"', 'venv = "local"', 1)
    )
    rc = main(
        ["run", "--scenario", str(s), "--target", str(tmp_path), "--results", str(tmp_path / "r")]
    )
    assert rc == 2 and "no --path local=DIR" in _err(capsys)


def test_version_and_module_entry() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "iobench", "--version"], capture_output=True, text=True
    )
    assert out.returncode == 0 and out.stdout.strip() == f"iobench {__version__}"
    out = subprocess.run([IOBENCH, "--version"], capture_output=True, text=True)
    assert out.stdout.strip() == f"iobench {__version__}"


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["run", "--index-url", "http://127.0.0.1:9/simple/"], "synthetic wheels"),
        (["run", "--sample-hz", "1000"], "at most 100"),
        (["run", "--lock-wait", "-5"], "--lock-wait"),
        (["run", "--python", "/nonexistent/python"], "no such interpreter"),
        (["run", "--resume", "x", "--scenario", "smoke"], "drop --scenario"),
    ],
)
def test_bad_combinations_one_line(
    argv: list[str], fragment: str, capsys, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert fragment in _one_error(_err(capsys))


@pytest.mark.e2e
def test_credentials_never_reach_meta(tmp_path: Path) -> None:
    import json

    from iobench.redact import redact

    assert redact("https://user:s3cret@host/simple") == "https://***@host/simple"
    rc = main(
        [
            "run",
            "--scenario",
            str(TINY),
            "--configs",
            "naive",
            "--target",
            str(tmp_path),
            "--results",
            str(tmp_path / "r"),
            "--no-report",
            "--quiet",
            "--label",
            "x",
            "--package",
            "tiny-core @ https://user:s3cret@example.invalid/tiny.whl",
            "--no-reuse-downloads",  # the trial itself meets the URL (and fails)
        ]
    )
    assert rc == 1  # the trial fails (no such host), and that is recorded
    meta = (only_run_dir(tmp_path / "r") / "meta.json").read_text()
    assert "s3cret" not in meta and "***@example.invalid" in meta
    assert json.loads(meta)["scenario"]["packages"] == [
        "tiny-core @ https://***@example.invalid/tiny.whl"
    ]


# ---------------------------------------------------------------- a real run, exported three ways
def _quiet_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOBENCH_")}
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


@pytest.fixture(scope="module")
def exported_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """One stand-in run (its report built) with every export: JSON on stdout, Markdown and
    CSV to files; `iobench run` as a process of its own, as a user starts it."""
    base = tmp_path_factory.mktemp("exported")
    md, table = base / "summary.md", base / "summary.csv"
    path = standin.scenario(base, "rate = 200\n")
    argv = [IOBENCH, *standin.argv(base, path, "--label", "exports", "--export-json", "-",
            "--export-markdown", str(md), "--export-csv", str(table))]  # fmt: skip
    argv.remove("--no-report")  # the exports come from the report
    proc = subprocess.run(
        argv, capture_output=True, text=True, cwd=base, env=_quiet_env(), timeout=300
    )
    return {"proc": proc, "base": base, "md": md, "csv": table}


@pytest.mark.run
@pytest.mark.charts
def test_run_ok_exits_0_and_stdout_is_the_json_export(exported_run: dict) -> None:
    proc = exported_run["proc"]
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)  # stdout holds the export alone; the console went to stderr
    assert data["format"] and data["label"] == "exports" and data["scenario"] == "standin"
    assert {c["config"] for c in data["configs"]} == {"naive", "venv-on-tmp"}
    # one meaning of "winner" (issue 21): the verdict's, null unless it advises or keeps
    v = data["verdict"]
    assert v["fastest_measured"] in ("naive", "venv-on-tmp")
    if v["kind"] in ("advice", "keep") and (
        v["kind"] == "advice" or v["vs_runner_up"]["beyond_noise"]
    ):
        assert data["winner"] == (v["advised"] or v["fastest_measured"]) == v["winner"]
    else:
        assert data["winner"] is None and v["winner"] is None
    assert "Report: " in proc.stderr and "export markdown: " in proc.stderr


@pytest.mark.run
@pytest.mark.charts
def test_markdown_and_csv_exports_parse_back(exported_run: dict) -> None:
    run_dir = only_run_dir(exported_run["base"] / "results")
    rows = list(csv.DictReader(io.StringIO(exported_run["csv"].read_text())))
    assert {r["config"] for r in rows} == {"naive", "venv-on-tmp"}
    assert all(float(r["median_time_to_ready_s"]) > 0 for r in rows)
    assert (
        exported_run["csv"].read_text() == (run_dir / "summary.csv").read_text()
    )  # the report's own table
    md = exported_run["md"].read_text().splitlines()
    table = [line for line in md if line.startswith("|")]
    assert len(table) >= 4 and set(table[1].replace("|", "").strip()) <= set("-: ")
    assert any("naive" in line for line in table) and any("venv-on-tmp" in line for line in table)


@pytest.mark.run
@pytest.mark.charts
def test_list_shows_the_stored_run(exported_run: dict, capsys) -> None:
    results = exported_run["base"] / "results"
    assert main(["list", str(results)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["run", "label", "scenario", "target", "status", "ok/all", "winner"]
    winner = json.loads(exported_run["proc"].stdout)["winner"] or "-"
    meta = json.loads(next(results.glob("*/meta.json")).read_text())
    fstype = meta["roles"]["target"]["fstype"]
    assert len(out) == 2
    assert out[1].split()[1:] == ["exports", "standin", fstype, meta["status"], "4/4", winner]
    assert main(["list", str(results), "--format", "json"]) == 0
    [entry] = json.loads(capsys.readouterr().out)
    assert entry["label"] == "exports" and entry["ok"] == 4
    assert entry["winner"] == (None if winner == "-" else winner)


@pytest.mark.run
@pytest.mark.charts
def test_resume_of_a_finished_run_has_nothing_to_do_and_keeps_it(
    exported_run: dict, capsys
) -> None:
    run_dir = only_run_dir(exported_run["base"] / "results")
    before = {p.name: p.read_bytes() for p in (run_dir / "meta.json", run_dir / "trials.csv")}
    assert main(["run", "--resume", str(run_dir), "--no-report"]) == 0
    assert capsys.readouterr().out.startswith(f"nothing to do: all 4 trials of {run_dir} are done")
    assert {p: (run_dir / p).read_bytes() for p in before} == before  # ended_at kept


def test_list_shows_what_a_received_run_folder_holds_without_acting_on_the_terminal(
    tmp_path: Path, capsys
) -> None:
    """Issue 23 (low): a received meta.json's label printed its escape sequences raw (a title
    change, a cleared screen). And a run of this host still "running" whose process is gone
    says so."""
    import socket

    from helpers.runs import make_run_dir

    run = make_run_dir(tmp_path / "results")
    meta = json.loads((run / "meta.json").read_text())
    meta["label"] = "pod\x1b]0;pwned\x07\x1b[2J\u202e"
    meta["status"], meta["host"]["hostname"] = "running", socket.gethostname()
    meta["run_id"] = meta["run_id"] + "-999999999"  # a pid that is not alive
    (run / "meta.json").write_text(json.dumps(meta))
    assert main(["list", str(tmp_path / "results")]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out
    assert "pod\\x1b]0;pwned\\x07\\x1b[2J\\u202e" in out and "running (gone)" in out
    # a received folder's own name, in the warning for a damaged run (the re-test's variant)
    bad = tmp_path / "results" / "r\x1b]0;dir\x07"
    bad.mkdir()
    (bad / "meta.json").write_text("{bad")
    assert main(["list", str(tmp_path / "results")]) == 0
    err = capsys.readouterr().err
    assert "skipped" in err and "\x1b" not in err and "r\\x1b]0;dir\\x07" in err


def test_list_env_default_and_empty_and_bad(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("IOBENCH_RESULTS", str(tmp_path))
    assert main(["list"]) == 0
    assert "yet (start one with: iobench run --results" in capsys.readouterr().out
    assert main(["list", str(tmp_path / "missing")]) == 2
    assert "no such folder" in _one_error(_err(capsys))


def test_failed_trials_exit_1_even_with_allow_failures_when_a_config_has_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = standin.scenario(tmp_path, "exit = 1\n", configs=standin.NAIVE, repeats=1)
    assert main(standin.argv(tmp_path, path, "--quiet", "--allow-failures")) == 1
    err = capsys.readouterr().err
    assert "1 trial(s) did not succeed: naive-r1" in err and "Traceback" not in err


# ---------------------------------------------------------------- dry run, env defaults
def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_dry_run_prints_the_plan_and_creates_nothing(tmp_path: Path, capsys, monkeypatch) -> None:
    target, tmp = tmp_path / "target", tmp_path / "tmp"
    target.mkdir()
    tmp.mkdir()
    (target / "user-file").write_text("mine")
    monkeypatch.chdir(tmp_path)
    before = _tree(tmp_path)
    rc = main(
        [
            "run",
            "--dry-run",
            "--scenario",
            str(TINY),
            "--target",
            str(target),
            "--tmp",
            str(tmp),
            "--repeats",
            "2",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert _tree(tmp_path) == before  # no results folder, no scratch, no lock
    assert "trials    8 (4 configs x 2 repeats)" in out
    assert f"  target   {target}" in out and f"  tmp      {tmp}" in out and "free" in out
    assert (
        "2 warm trial(s) download nothing after at most 1 untimed priming install(s)" in out
        and "6 cold install(s)" in out
        and "loopback index (no network)" in out
    )
    # issue 21: what measuring costs, in bytes (10 MB installed, wheels as 40 % of it):
    # 6 cold installs and 1 priming from the index; venvs, downloads and cold caches per role
    assert "bytes     about 28.0 MB from the index (6 cold install(s) and up to 1 priming" in out
    assert "written: target 56.0 MB, tmp 72.0 MB" in out
    assert "naive-r1" in out and "nocache-r2" in out
    argv = ["run", "--dry-run", "--scenario", str(TINY), "--target", str(target)]
    assert main([*argv, "--tmp", str(tmp), "--repeats", "auto:3"]) == 0
    out = capsys.readouterr().out
    assert "trials    at most 12 (4 configs x 3 repeats, fewer once settled" in out
    assert _tree(tmp_path) == before


def test_env_defaults_fill_options_and_the_command_line_wins(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("IOBENCH_TARGET", str(a))
    monkeypatch.setenv("IOBENCH_TMP", str(b))
    monkeypatch.setenv("IOBENCH_SCENARIO", str(TINY))
    monkeypatch.setenv("IOBENCH_RESULTS", str(tmp_path / "res"))
    assert main(["run", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"  target   {a}" in out and f"  tmp      {b}" in out and "scenario  tiny" in out
    assert f"results   {tmp_path / 'res'}/" in out
    assert main(["run", "--dry-run", "--target", str(b), "--tmp", str(a)]) == 0
    out = capsys.readouterr().out
    assert f"  target   {b}" in out and f"  tmp      {a}" in out
    monkeypatch.setenv("IOBENCH_TARGET", "/nonexistent/x")
    assert main(["run", "--dry-run"]) == 2
    assert "--target: /nonexistent/x does not exist" in _one_error(_err(capsys))


# ---------------------------------------------------------------- scenarios show, completion
def test_scenarios_show_prints_toml_that_loads_back(tmp_path: Path, capsys) -> None:
    from iobench.scenario.load import load_scenario

    assert main(["scenarios", "show", "smoke"]) == 0
    text = capsys.readouterr().out
    assert tomllib.loads(text)["scenario"]["name"] == "smoke"
    copy = tmp_path / "mine.toml"
    copy.write_text(text)
    assert load_scenario(str(copy)).name == "smoke"
    assert main(["scenarios", "show", str(TINY)]) == 0
    assert capsys.readouterr().out == TINY.read_text()
    assert main(["scenarios"]) == 0
    assert "iobench scenarios show NAME" in capsys.readouterr().out


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_script_is_valid_shell(shell: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [IOBENCH, "completion", shell], capture_output=True, text=True, env=_quiet_env()
    )
    assert proc.returncode == 0, proc.stderr
    assert "--export-json" in proc.stdout and "scenarios" in proc.stdout
    script = tmp_path / f"iobench.{shell}"
    script.write_text(proc.stdout)
    if shell == "bash":
        assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
        # the generated function completes subcommands when bash calls it
        probe = f'source {script}; COMP_WORDS=(iobench ru); COMP_CWORD=1; _shtab_iobench; echo "${{COMPREPLY[@]}}"'
        got = subprocess.run(["bash", "-c", probe], capture_output=True, text=True)
        assert got.stdout.split() == ["run"], got


# ---------------------------------------------------------------- start-up: report libraries only when reporting
def test_help_and_run_parsing_import_no_report_library() -> None:
    code = (
        "import sys\n"
        "from iobench.__main__ import main\n"
        "for argv in (['--help'], ['run', '--help'], ['report', '--help']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "heavy = sorted(m for m in ('pandas', 'matplotlib', 'numpy', 'iobench.run.runner') if m in sys.modules)\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_quiet_env()
    )
    assert "HEAVY []" in proc.stderr, proc.stderr


def test_help_imports_only_the_cli_wing_and_the_standard_library() -> None:
    """``iobench --help`` (0.05 s at most: issue 38) loads the cli wing and the standard
    library, nothing else of iobench's or of anyone's; and not the standard modules that cost
    it a third of that time (shutil with zlib, bz2 and lzma; dataclasses with inspect and ast;
    json, socket, tempfile): the commands that need them import them when they run."""
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "from iobench.__main__ import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('NEW', *sorted(set(sys.modules) - before), file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_quiet_env()
    )
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("NEW ")]
    assert line, proc.stderr
    new = line[0].split()[1:]
    ours = [m for m in new if m == "iobench" or m.startswith("iobench.")]
    allowed = {"iobench", "iobench.__main__", "iobench.errors", "iobench.cli"}
    assert [m for m in ours if m not in allowed and not m.startswith("iobench.cli.")] == []
    others = [m for m in new if m not in ours]
    assert [m for m in others if m.split(".")[0].lstrip("_") not in _STDLIB] == []
    kept_out = {"shutil", "lzma", "bz2", "dataclasses", "inspect", "json", "socket", "tempfile"}
    assert sorted(kept_out & set(new)) == []


_STDLIB = {name.lstrip("_") for name in sys.stdlib_module_names}


def test_broken_report_library_is_one_line_not_a_vanished_command(tmp_path: Path) -> None:
    fake = tmp_path / "site"
    (fake / "pandas").mkdir(parents=True)
    (fake / "pandas" / "__init__.py").write_text(
        "raise ImportError('libfoo.so: cannot open shared object file')\n"
    )
    env = _quiet_env(PYTHONPATH=str(fake))
    help_out = subprocess.run([IOBENCH, "--help"], capture_output=True, text=True, env=env)
    assert (
        help_out.returncode == 0
        and "    report" in help_out.stdout
        and "    compare" in help_out.stdout
    )
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    proc = subprocess.run(
        [IOBENCH, "report", str(run_dir)], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert (
        "the report needs pandas" in line
        and "libfoo.so" in line
        and "pip install --force-reinstall" in line
    )


@pytest.mark.run
def test_missing_report_library_refuses_exports_before_any_trial(tmp_path: Path) -> None:
    fake = tmp_path / "site"
    fake.mkdir()
    (fake / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Hide:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'matplotlib':\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, _Hide())\n"
    )
    env = _quiet_env(PYTHONPATH=str(fake))
    argv = [
        IOBENCH,
        "run",
        "--export-json",
        str(tmp_path / "x.json"),
        "--results",
        str(tmp_path / "r"),
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert "needs matplotlib" in line and "pip install" in line
    assert not (tmp_path / "r").exists()


# --- the README's two commands -----------------------------------------------------------------


def test_the_readme_test_command_is_what_ci_runs():
    root = Path(__file__).parents[2]
    if not (root / ".ci").is_dir():
        pytest.skip("an sdist carries no .ci/ (the package session runs this file from one)")
    readme = [
        ln
        for ln in (root / "README.md").read_text().splitlines()
        if ln.startswith("python3 -m venv")
    ]
    ci = (root / ".ci" / "run").read_text().splitlines()[-1]
    assert len(readme) == 2 and readme[1] == ci
    # a venv left at that path by another python3 would mix two Pythons (CI failed so once)
    assert all(ln.startswith("python3 -m venv --clear ") for ln in readme)


@pytest.mark.charts
def test_the_answer_is_the_last_thing_on_screen_and_quiet_prints_only_the_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issues 21 and 38 (hyperfine-style): the notes are one line, then the table, then the
    verdict in words, ending with where the start script and the report are; the start
    script is start.sh in the run folder, not on screen. --quiet prints the verdict only."""
    from helpers import standin

    monkeypatch.chdir(tmp_path)
    path = standin.scenario(tmp_path, repeats=2)
    argv = [a for a in standin.argv(tmp_path, path) if a != "--no-report"]  # the report's lines too
    assert main(argv) == 0
    out = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    head = next(i for i, line in enumerate(out) if line.split()[:3] == ["config", "n", "median"])
    assert not any(line.startswith(("note:", "results:", "    ", "#!")) for line in out), out
    assert sum(line.startswith("notes: ") for line in out[:head]) <= 1
    assert "Report: " in out[-1] and out[-1].endswith("report.html."), out[head:]
    assert any(v.startswith(("No difference", "One trial", "naive", "venv-on-tmp"))
               for v in out[head:]), out[head:]  # fmt: skip
    run = next((tmp_path / "results").iterdir())
    if any("Start script: " in line for line in out[head:]):
        script = (run / "start.sh").read_text()
        assert script.startswith("#!/bin/bash") and (run / "start.sh").stat().st_mode & 0o100
        assert main(["report", str(run), "--script"]) == 0
        assert capsys.readouterr().out == script
    assert main([*argv, "--quiet"]) == 0
    said = capsys.readouterr()
    quiet = [line for line in said.out.splitlines() if line.strip()]
    assert quiet and quiet[0].startswith(("No difference", "One trial", "naive", "venv-on-tmp"))
    assert not any(line.startswith(("config", "note", "Report:", "[", "iobench:", "probe",
                                    "warning:")) for line in quiet), quiet  # fmt: skip
    from iobench.run.roles import journal_less
    from iobench.system.procfs import mount_of

    mount = mount_of(tmp_path)  # the first run ended seconds ago: said, on stderr
    if mount is not None and mount.fstype == "ext4" and journal_less(mount.source):
        assert "warning: target is ext4 without a journal" in said.err, said.err
