"""Secrets never reach results: URL credentials, query tokens, key= pairs, and an allow-listed environment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.files import DATA

from iobench.redact import environment, redact, redact_argv, redact_text

SECRETS = ["s3cr@t", "tok123", "AbCdKey==", "sigval", "hunter2", "jwt.payload.sig"]


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        # a password holding '@' goes whole (before: 'https://***@t@host' kept part of it)
        ("https://user:s3cr@t@host.example/simple", "https://***@host.example/simple"),
        ("https://tok123@host/simple/", "https://***@host/simple/"),
        ("https://host/simple/?token=tok123", "https://host/simple/?***"),
        (
            "https://acct.blob.core.windows.net/c/x.whl?sv=2022&sig=sigval&se=2030",
            "https://acct.blob.core.windows.net/c/x.whl?***",
        ),
        (
            "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=AbCdKey==;EndpointSuffix=core",
            "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=***;EndpointSuffix=core",
        ),
        (
            "torch @ https://u:hunter2@files.example/torch.whl",
            "torch @ https://***@files.example/torch.whl",
        ),
        ("password=hunter2", "password=***"),
        ("x=password=hunter2 y", "x=password=*** y"),  # a value never hides a later pair
        ("Authorization: Bearer jwt.payload.sig", "Authorization: ***"),
        ("https://pypi.org/simple/", "https://pypi.org/simple/"),  # nothing to hide: unchanged
        ("numpy==2.0", "numpy==2.0"),
        (
            "pkg @ git+https://host/repo@v1.0",
            "pkg @ git+https://host/repo@v1.0",
        ),  # '@' in a path is not userinfo
    ],
)
def test_redact(raw: str, shown: str) -> None:
    assert redact(raw) == shown


def test_redact_text_hides_every_secret_of_a_log() -> None:
    log = (
        "Looking in indexes: https://user:s3cr@t@idx.example/simple?token=tok123\n"
        "Collecting torch @ https://u:hunter2@files.example/torch.whl\n"
        "  Authorization: Basic hunter2\n"
        "conn AccountKey=AbCdKey==; sig: sigval\n"
    )
    out = redact_text(log)
    assert not any(s in out for s in SECRETS), out
    assert out.count("\n") == log.count("\n")  # lines kept: a reader still sees where


def test_redact_argv_hides_the_value_after_a_secret_option() -> None:
    argv = [
        "iobench",
        "run",
        "--index-url",
        "https://u:hunter2@h/simple",
        "--token",
        "tok123",
        "--repeats",
        "3",
    ]
    assert redact_argv(argv) == [
        "iobench",
        "run",
        "--index-url",
        "https://***@h/simple",
        "--token",
        "***",
        "--repeats",
        "3",
    ]


def test_environment_is_an_allow_list_with_values_redacted() -> None:
    env = {
        # secrets under names a deny-list missed (before: stored in clear)
        "DB_PASS": "hunter2",
        "GH_PAT": "tok123",
        "NPM_AUTH": "x",
        "CI_JOB_JWT": "jwt.payload.sig",
        "AZURE_STORAGE_CONNECTION_STRING": "AccountName=a;AccountKey=AbCdKey==",
        "RANDOM_THING": "whatever",
        # what matters to a measurement, recorded
        "PIP_INDEX_URL": "https://user:s3cr@t@idx.example/simple?token=tok123",
        "PIP_NO_CACHE_DIR": "1",
        "UV_LINK_MODE": "copy",
        "TMPDIR": "/fast/tmp",
        "PATH": "/usr/bin:/bin",
        "HF_TOKEN": "tok123",
        "HF_HOME": "/cache/hf",
        "LC_ALL": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "CUDA_VISIBLE_DEVICES": "0",
        "OMP_NUM_THREADS": "4",
        "HTTPS_PROXY": "http://u:hunter2@proxy:3128",
    }
    out = environment(env)
    assert set(out) == {
        "PIP_INDEX_URL",
        "PIP_NO_CACHE_DIR",
        "UV_LINK_MODE",
        "TMPDIR",
        "PATH",
        "HF_TOKEN",
        "HF_HOME",
        "LC_ALL",
        "PYTHONDONTWRITEBYTECODE",
        "CUDA_VISIBLE_DEVICES",
        "OMP_NUM_THREADS",
        "HTTPS_PROXY",
    }
    assert out["PIP_INDEX_URL"] == "https://***@idx.example/simple?***"
    assert out["HF_TOKEN"] == "***" and out["HF_HOME"] == "/cache/hf"
    assert out["HTTPS_PROXY"] == "http://***@proxy:3128"
    assert not any(s in repr(out) for s in SECRETS)
    assert list(out) == sorted(out)


def test_a_failed_phase_keeps_its_output_redacted(tmp_path: Path) -> None:
    """Before: a direct-URL requirement with credentials stayed in clear in results/…/logs/."""
    import stat
    import sys

    from iobench.trial.process import Limits, run_phase
    from iobench.trial.sampler import Sampler

    script = "print('Collecting torch @ https://u:hunter2@files.example/t.whl?sig=sigval'); raise SystemExit(3)"
    out = tmp_path / "t1.install.out"
    sampler = Sampler(20.0, stall_after=30.0).start()
    try:
        r = run_phase(
            "install",
            [sys.executable, "-c", script],
            dict(os.environ),
            tmp_path,
            sampler,
            out,
            Limits(),
        )
    finally:
        sampler.stop()
    assert r.returncode == 3
    assert "hunter2" not in r.output and "sigval" not in r.output and "files.example" in r.output
    kept = out.read_text()
    assert "hunter2" not in kept and "sigval" not in kept and "https://***@files.example" in kept
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


@pytest.mark.e2e
def test_credentials_are_hidden_in_every_file_of_a_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 9 item 10: a password holding '@', a direct-URL --package with credentials and a
    ?token= are hidden everywhere: meta.json, trials.csv, the kept logs and any report."""
    from iobench.__main__ import main

    for name, value in {
        "DB_PASS": "dbpass-zz",
        "GH_PAT": "ghpat-zz",
        "CI_JOB_JWT": "jwt-zz",
        "AZURE_CONN": "AccountName=a;AccountKey=acctkey-zz",
        "PIP_EXTRA_INDEX_URL": "http://x:pipw-zz@127.0.0.1:9/simple/?token=piptok-zz",
    }.items():
        monkeypatch.setenv(name, value)
    tiny = DATA / "tiny.toml"
    package = "tiny-core @ http://user:p@ss-zz@127.0.0.1:9/tiny_core-1.0-py3-none-any.whl?token=tok-zz&sig=sig-zz"
    rc = main(
        [
            "run",
            "--scenario",
            str(tiny),
            "--configs",
            "naive",
            "--target",
            str(tmp_path),
            "--results",
            str(tmp_path / "r"),
            "--quiet",
            "--package",
            package,
            "--label",
            "secrets",
            "--no-reuse-downloads",  # the trial itself meets the index (and fails)
        ]
    )
    assert rc == 1  # the install fails (nothing listens on port 9), and that is recorded
    files = [p for p in (tmp_path / "r").rglob("*") if p.is_file()]
    assert any(p.parent.name == "logs" for p in files), files  # the failed install's log is kept
    assert any(p.name == "meta.json" for p in files), files
    for path in files:
        text = path.read_bytes().decode(errors="replace")
        leaked = [
            s
            for s in (
                "p@ss-zz",
                "ss-zz",
                "tok-zz",
                "sig-zz",
                "dbpass-zz",
                "ghpat-zz",
                "jwt-zz",
                "acctkey-zz",
                "pipw-zz",
                "piptok-zz",
            )
            if s in text
        ]
        assert not leaked, (path, leaked)


CLOUDSMITH_TOKEN = "AbCdEf1234567890zz"
GEMFURY_TOKEN = "1a2B3c4D5e6F7g8H9i0J"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (f"https://dl.cloudsmith.io/{CLOUDSMITH_TOKEN}/acme/repo/python/simple/",
         "https://dl.cloudsmith.io/***/acme/repo/python/simple/"),
        (f"https://pypi.fury.io/{GEMFURY_TOKEN}/acme/", "https://pypi.fury.io/***/acme/"),
        ("https://host/simple/eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig/", "https://host/simple/***/"),
        # what is not a token keeps its words: package, wheel and CUDA names
        ("https://download.pytorch.org/whl/cu121/torch-2.1.0%2Bcu121-cp311-cp311-linux_x86_64.whl",
         "https://download.pytorch.org/whl/cu121/torch-2.1.0%2Bcu121-cp311-cp311-linux_x86_64.whl"),
        ("https://gitlab.example.com/api/v4/projects/12345/packages/pypi/simple",
         "https://gitlab.example.com/api/v4/projects/12345/packages/pypi/simple"),
    ],
)  # fmt: skip
def test_a_token_in_an_index_url_s_path_is_hidden_whoever_the_provider(
    raw: str, shown: str
) -> None:
    """Issue 23, item 7: Cloudsmith and Gemfury put the token in the path; it was stored in
    clear. The rule is the token's look, not a list of providers."""
    assert redact(raw) == shown


def test_the_iobench_and_locale_catch_alls_are_gone() -> None:
    out = environment({"IOBENCH_TARGET": "/w", "IOBENCH_DEPLOY_KEYS": "x", "LC_ALL": "C",
                       "LC_IDENTIFICATION": "y", "XDG_RUNTIME_DIR": "/run/user/0"})  # fmt: skip
    assert out == {"IOBENCH_TARGET": "/w", "LC_ALL": "C"}


@pytest.mark.e2e
def test_a_token_in_the_index_url_s_path_reaches_no_file_and_no_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run installing from a real loopback index whose URL holds a token in its path (as
    Cloudsmith's does), a Gemfury-style extra index in the environment: the token is in no
    file of the run (meta.json, report.html, summaries, logs) and in no line printed; the
    report shows the index's scheme and host only; every file of the run is private."""
    import stat
    import threading
    from functools import partial
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    from helpers.files import TINY_PROFILE

    from iobench.__main__ import main
    from iobench.wheels.profile import load_profile
    from iobench.wheels.synth import synthesize

    served = tmp_path / "served"
    simple = served / CLOUDSMITH_TOKEN / "simple"
    wheels = synthesize(load_profile(str(TINY_PROFILE)), tmp_path / "wheels")
    for wheel in wheels:
        project = simple / wheel.name.split("-")[0].replace("_", "-")
        project.mkdir(parents=True, exist_ok=True)
        (project / wheel.name).write_bytes(wheel.read_bytes())
        (project / "index.html").write_text(f'<a href="{wheel.name}">{wheel.name}</a>\n')
    (tmp_path / "t").mkdir()

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # the server's own log is not iobench's
            pass

    handler = partial(Quiet, directory=str(served))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    index = f"http://127.0.0.1:{server.server_address[1]}/{CLOUDSMITH_TOKEN}/simple/"
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", f"https://pypi.fury.io/{GEMFURY_TOKEN}/acme/")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("IOBENCH_DEPLOY_TOKEN_URL", f"x/{GEMFURY_TOKEN}")  # no longer recorded
    try:
        rc = main(["run", "--scenario", str(DATA / "tiny.toml"), "--configs", "naive",
                   "--target", str(tmp_path / "t"), "--results", str(tmp_path / "r"),
                   "--index-url", index, "--package", "tiny-core", "--no-probe"])  # fmt: skip
    finally:
        server.shutdown()
    out = capsys.readouterr()
    assert rc == 0, out.err
    printed = out.out + out.err
    assert CLOUDSMITH_TOKEN not in printed and GEMFURY_TOKEN not in printed
    run = next((tmp_path / "r").iterdir())
    html = (run / "report.html").read_text()
    # the packages were downloaded once from it (the report names its host) and served on
    # loopback; none of its path, where the token is
    assert f"downloaded once from http://127.0.0.1:{server.server_address[1]}" in html
    assert "/simple" not in html
    # nor in what the one download recorded beside its wheels, in iobench's cache
    records = list(
        (Path(os.environ["XDG_CACHE_HOME"]) / "iobench" / "downloads").glob("*/download.json")
    )
    assert records and all(CLOUDSMITH_TOKEN not in r.read_text() for r in records)
    made = [p for p in run.rglob("*") if p.is_file()]
    assert {"meta.json", "report.html", "summary.json", "summary.csv"} <= {p.name for p in made}
    for path in made:
        text = path.read_bytes().decode(errors="replace")
        assert CLOUDSMITH_TOKEN not in text and GEMFURY_TOKEN not in text, path
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, (path, oct(path.stat().st_mode))


@pytest.mark.parametrize(
    "token",
    [
        "Xk9Qz7Lm2Pw4",
        "12345678901234567890",
        "AbCdEfGhIjKlMnOpQrStUvWxYz",
        "AbCdEf%2B1234567890zz",
        "Zq7%41b9x%2F2k",
        "Ab12-Cd34-Ef56",
        "a1B2c3D4e5",
    ],
)
def test_short_digit_letter_and_escaped_tokens_in_an_index_path_are_masked(token: str) -> None:
    """Before (the hostile re-test): a 12-character Gemfury-style token, an all-digit one, an
    all-letter one and a percent-escaped one stayed in meta.json and the logs."""
    url = f"http://envuser:pw@127.0.0.1:8765/{token}/simple/"
    assert redact_text(url) == "http://***@127.0.0.1:8765/***/simple/"
    assert token not in redact_text(f"Looking in indexes: {url}, https://pypi.org/simple")


@pytest.mark.parametrize(
    "url",
    ["https://download.pytorch.org/whl/cu121/torch/", "https://pypi.org/simple/s3transfer/",
     "https://pypi.org/simple/python3-openid/", "https://x.org/pytorch-nightly/simple/",
     "https://x.org/simple/my%20pkg/", "https://x.org/py3-cu121-abc/"],
)  # fmt: skip
def test_a_path_s_own_words_stay(url: str) -> None:
    assert redact_text(url) == url


#: issue 35: the token shapes the last round found left in meta.json
SHAPES = {
    "query without =": ("https://idx.example/simple/?glpatABCDEF123456", "glpatABCDEF123456"),
    "fragment": ("https://idx.example/simple/#fragtokXyz12345", "fragtokXyz12345"),
    "base64 padded": ("https://idx.example/dXNlcjpwYXNzd29yZA==/simple/", "dXNlcjpwYXNzd29yZA"),
    "dotted": ("https://idx.example/Ab12Cd34.Ef56Gh78Ij/simple/", "Ef56Gh78Ij"),
    "lowercase": ("https://idx.example/qwertyuiopasdfghjklzxcvbnmqw/simple/", "qwertyuiopasdf"),
}


def test_the_token_shapes_left_in_meta_json_are_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As it was done: each shape in an index URL of the environment and on the command
    line of a run; meta.json (0600, but made to be copied between pods) kept them."""
    from helpers import standin

    from iobench.__main__ import main

    urls = [url for url, _ in SHAPES.values()]
    monkeypatch.setenv("PIP_INDEX_URL", urls[0])
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", " ".join(urls[1:]))
    path = standin.scenario(tmp_path, repeats=1)
    assert main(standin.argv(tmp_path, path, "--quiet", "--label", " ".join(urls))) == 0
    (run,) = (tmp_path / "results").iterdir()
    text = (run / "meta.json").read_text()
    assert [name for name, (_, secret) in SHAPES.items() if secret in text] == []
    assert "https://idx.example/simple/?***" in text and "/simple/#***" in text
    # the words of a path stay: a wheel's name with its dots, versions and local tags
    for kept in ("https://h/simple/torch-2.1.0+cu121-cp311-cp311-linux_x86_64.whl",
                 "https://h/nvidia_cudnn_cu12-8.9.2.26-py3-none-manylinux1_x86_64.whl",
                 "https://h/python3.11/s3transfer/", "https://h/whl/cu121/torch/"):  # fmt: skip
        assert redact_text(kept) == kept
