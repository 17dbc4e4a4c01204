"""Automation: `nox -s lab-deps tests package` is what CI runs (`.ci/run`, the README's test command).

Sessions:
- ``lab-deps``: apt-get the Debian packages the lab tests need (FUSE 3, sshfs, sshd, iproute2,
  squashfs-tools, squashfuse, zstd),
  when run as root on a Debian-like machine and they are missing; otherwise it says which are
  missing and the lab tests skip. Its own step, so that installing system packages is never a
  side effect of running the tests.
- ``quick``: the quick tier while editing (under a minute): the unmarked tests, with
  pytest's cache on so that ``--lf`` works.
- ``tests``: the whole suite (every tier: e2e, lab, slow, timing, venv and run tests
  included): the untimed tests on every core (pytest-xdist), then the timing tests
  serially; pytest options after ``--`` run instead, in one process.
- ``package``: build the sdist and, from it, the wheel; check both; install the wheel into a
  fresh venv and run ``iobench`` from it (help, scenarios, a one-trial smoke run); run the
  sdist's own CLI tests against the installed wheel.
- ``lint``: ruff check, ruff format --check, mypy.
- ``smoke``: the default offline run, as a user would start it.
- ``bench``: pytest-benchmark benchmarks (start-up, sampler overhead, report speed).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import nox

nox.options.sessions = ["lint", "tests", "package"]
nox.options.reuse_existing_virtualenvs = True

PYTHON = None  # the interpreter nox runs on


def _drop_a_library_path_that_breaks_ssl() -> None:
    """Drop LD_LIBRARY_PATH when it makes this interpreter load another Python's libpython.

    Seen in CI: pyenv's 3.11.7 with LD_LIBRARY_PATH naming /usr/lib/x86_64-linux-gnu loads
    Debian's libpython3.11 (3.11.2), whose missing symbols break ``import ssl``, and with it
    virtualenv, which every session and much of the suite create venvs with. Kept when
    ``import ssl`` works with it, or fails without it too (then it is not the cause, and the
    warning below names the other cause seen here).
    """
    probe = [sys.executable, "-c", "import ssl"]
    if subprocess.run(probe, capture_output=True).returncode == 0:
        return
    if "LD_LIBRARY_PATH" in os.environ:
        clean = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
        if subprocess.run(probe, capture_output=True, env=clean).returncode == 0:
            print(
                f"nox > LD_LIBRARY_PATH={os.environ['LD_LIBRARY_PATH']} breaks `import ssl` for "
                f"{sys.executable} (another Python's libpython comes first); dropped for the sessions"
            )
            del os.environ["LD_LIBRARY_PATH"]
            return
    # Also seen in CI: `python3 -m venv DIR` over a venv another python3 had made there kept
    # that python's binary and took this one's standard library (pyvenv.cfg's home).
    print(
        f"nox > {sys.executable} cannot `import ssl` (virtualenv needs it); if it is a venv "
        f"that another Python made first, make it again with `python3 -m venv --clear`"
    )


_drop_a_library_path_that_breaks_ssl()
APT_PACKAGES = [
    "fuse3", "libfuse3-3", "sshfs", "openssh-server", "iproute2",
    "squashfs-tools", "squashfuse", "zstd",  # packed-venv's archives (tests/test_strategies.py)
    "openmpi-bin", "libopenmpi-dev",  # fleet runs under mpirun (tests/fleet/; mpi4py over it)
    "strace",  # tools/import_ops.py traces a ready check (tests/predict/test_import_ops.py)
]  # fmt: skip
APT_COMMANDS = {
    "fusermount3": "fuse3",
    "sshfs": "sshfs",
    "sshd": "openssh-server",
    "ip": "iproute2",
    "mksquashfs": "squashfs-tools",
    "squashfuse": "squashfuse",
    "zstd": "zstd",
    "mpirun": "openmpi-bin",
    "strace": "strace",
}
LIBFUSE = (
    "/usr/lib/x86_64-linux-gnu/libfuse3.so.3",
    "/usr/lib/aarch64-linux-gnu/libfuse3.so.3",
    "/lib/x86_64-linux-gnu/libfuse3.so.3",
)
# what the sdist must carry for its own tests to run (checked by `package`)
SDIST_MUST_HAVE = [
    "LICENSE",
    "README.md",
    "noxfile.py",
    "docs/design.md",
    "results/README.md",
    "tests/conftest.py",
    "tests/helpers/__init__.py",
    "tests/data/tiny.toml",
    "tests/data/tiny-profile.toml",
    "tests/benchmarks",
    "iobench/scenario/shipped/smoke.toml",
]


def _missing_apt() -> list[str]:
    missing = {
        pkg
        for cmd, pkg in APT_COMMANDS.items()
        if not (shutil.which(cmd) or os.path.exists(f"/usr/sbin/{cmd}"))
    }
    if not any(os.path.exists(p) for p in LIBFUSE):
        missing.add("libfuse3-3")
    return sorted(missing)


@nox.session(name="lab-deps", python=False)
def lab_deps(session: nox.Session) -> None:
    """apt-get the lab's Debian packages if they are missing and we can (root, apt)."""
    missing = _missing_apt()
    if not missing:
        session.log("lab packages present")
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        session.warn(f"lab packages missing ({', '.join(missing)}); lab tests will skip")
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *APT_PACKAGES]
    if subprocess.run(cmd, env=env).returncode != 0:
        session.run("apt-get", "update", "-q", external=True, env=env)
        session.run(*cmd, external=True, env=env)


#: the quick tier: every test without a marker of the heavier tiers (tests/conftest.py)
QUICK = "not (e2e or lab or slow or timing or venv or run or charts)"


#: the test sessions' venvs are made and filled by uv where nox finds it (the README's command
#: installs it beside nox): `pip install -e .[test]` took 35 s of the 10-minute budget, uv
#: 3.5 s; pip itself is installed too, as some tests run the session's own `python -m pip`
TEST_BACKEND = "uv|virtualenv"
#: uv trusts its own bundled roots unless told to use the system's, as pip does: behind a
#: TLS-inspecting proxy whose CA only the system store holds, a clean `env -i` install failed
#: ("invalid peer certificate: UnknownIssuer") where pip's went through
INSTALL_ENV = {"UV_NATIVE_TLS": "1"}
#: pytest writes the test modules it rewrites (for its assertion messages) as bytecode, unless
#: PYTHONDONTWRITEBYTECODE is set; then every xdist worker rewrites all ~90 files again at each
#: collection. A shell with it set made the quick tier 61 s instead of 45 s on 2 cores (4
#: workers); `env -i` (the README's command, CI) does not set it, so the tests never rely on it
PYTEST_ENV: dict[str, str | None] = {"PYTHONDONTWRITEBYTECODE": None}


@nox.session(python=PYTHON, venv_backend=TEST_BACKEND)
def quick(session: nox.Session) -> None:
    """The quick tier while editing (under a minute): the unmarked tests, on every core
    (pytest-xdist: none of them asserts a duration), pytest's cache on (``nox -s quick --
    --lf`` runs the last failures first)."""
    session.install("-e", ".[test]", "pip", env=INSTALL_ENV)
    # twice the cores, at least 4: the tests wait on the processes they start more than they
    # compute (2 cores: 55 s with 4 workers, 60-69 s with 2)
    workers = str(max(4, 2 * (os.cpu_count() or 1)))
    session.run("pytest", "-q", "-n", workers, "-m", QUICK, "--durations=5", *session.posargs,
                env=PYTEST_ENV)  # fmt: skip


@nox.session(python=PYTHON, venv_backend=TEST_BACKEND)
def tests(session: nox.Session) -> None:
    """The whole test suite; pytest options after `--`."""
    if _missing_apt():
        session.warn(
            "lab packages missing: run `nox -s lab-deps` first (as root) or the lab tests skip"
        )
    session.install("-e", ".[test]", "pip", env=INSTALL_ENV)
    if session.posargs:  # a selection of one's own: as given, in one process
        session.run("pytest", "-p", "no:cacheprovider", "--durations=15", *session.posargs,
                    env=PYTEST_ENV)  # fmt: skip
        return
    # everything but the timing tests on one worker more than the cores (at most 4: the
    # lab's mounts and the runs' venvs are the load), then the timing tests alone, so that
    # no assertion on a duration runs beside another test (10:57 serial, 6:40 this way on 2
    # cores). One more worker than cores: the tests wait on the mounts, launches and venvs
    # they start as much as they compute (2 cores, back to back: 2 workers 7:55, 3 workers
    # 6:39, 4 workers 6:52). (worksteal: a worker that runs out takes queued tests from a
    # busy one, so the longest tests, the fleet's launches, do not leave a core idle at the end)
    workers = str(min(4, (os.cpu_count() or 1) + 1))
    session.run("pytest", "-p", "no:cacheprovider", "-n", workers, "--dist", "worksteal",
                "-m", "not timing", "--durations=15", env=PYTEST_ENV)  # fmt: skip
    # only the files that mark a test timing: collecting all ~70 files takes 8 s here, these 2
    session.run("pytest", "-p", "no:cacheprovider", "-m", "timing", "--durations=5",
                *_files_marking("timing"), env=PYTEST_ENV)  # fmt: skip


def _files_marking(marker: str) -> list[str]:
    """The test files whose text marks a test ``marker`` (a decorator or a module's
    ``pytestmark``); tests/conftest.py refuses a test that gets it another way."""
    needle = f"mark.{marker}"
    return sorted(str(p) for p in Path("tests").rglob("test_*.py") if needle in p.read_text())


def _venv_bin(venv: Path, name: str) -> str:
    return str(venv / "bin" / name)


def _build_and_check(session: nox.Session, work: Path) -> tuple[str, Path]:
    """Build sdist then wheel (from the sdist), check both; return the wheel and the unpacked sdist."""
    dist = work / "dist"
    # sdist first, then the wheel built from the unpacked sdist: a file the sdist lacks fails here
    session.run("python", "-m", "build", "--outdir", str(dist), ".")
    sdists, wheels = glob.glob(str(dist / "*.tar.gz")), glob.glob(str(dist / "*.whl"))
    if len(sdists) != 1 or len(wheels) != 1:
        session.error(f"expected one sdist and one wheel in {dist}, got {sdists + wheels}")
    session.run("twine", "check", "--strict", *sdists, *wheels)
    session.run("check-wheel-contents", *wheels)
    with tarfile.open(sdists[0]) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
        if hasattr(tarfile, "data_filter"):
            tar.extractall(work / "sdist", filter="data")
        else:  # Python before 3.10.12 / 3.11.4
            tar.extractall(work / "sdist")
    lacking = [
        f for f in SDIST_MUST_HAVE if not any(n == f or n.startswith(f + "/") for n in names)
    ]
    if lacking:
        session.error(f"the sdist lacks {', '.join(lacking)}")
    return wheels[0], next((work / "sdist").iterdir())


def _use_the_wheel(session: nox.Session, work: Path, wheel: str, sdist_root: Path) -> None:
    """Install the wheel in a fresh venv, run iobench from it, and the sdist's CLI tests against it."""
    venv = work / "venv"
    session.run("python", "-m", "venv", str(venv))
    python, iobench = _venv_bin(venv, "python"), _venv_bin(venv, "iobench")
    session.run(python, "-m", "pip", "install", "-q", f"{wheel}[test]", external=True)
    session.run(iobench, "--help", external=True, silent=True)
    session.run(iobench, "scenarios", external=True)
    run_here, results = work / "run", str(work / "results")
    run_here.mkdir()
    tiny = ["--configs", "venv-on-tmp", "--repeats", "1", "--target", str(run_here)]
    tiny += ["--tmp", str(run_here), "--results", results, "--quiet"]
    session.run(iobench, "run", *tiny, external=True)
    session.run(iobench, "list", results, external=True)
    # the venv's pytest does not put the current folder on sys.path, so `import iobench` is
    # the wheel's, not the sdist's
    with session.chdir(sdist_root):
        quick = ["-p", "no:cacheprovider", "-q", "-m", QUICK, "tests/cli/test_cli.py"]
        session.run(_venv_bin(venv, "pytest"), *quick, external=True)


@nox.session(python=PYTHON)
def package(session: nox.Session) -> None:
    """Build sdist + wheel, check them, install the wheel in a fresh venv and run iobench from it."""
    session.install("build>=1.2", "twine>=5.1", "check-wheel-contents>=0.6")
    work = Path(tempfile.mkdtemp(prefix="iobench-package-"))
    try:
        wheel, sdist_root = _build_and_check(session, work)
        _use_the_wheel(session, work, wheel, sdist_root)
    finally:
        shutil.rmtree(work, ignore_errors=True)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff check, ruff format --check, mypy (its per-module baseline is in pyproject.toml)."""
    session.install("-e", ".[lint]")
    paths = ["iobench", "tests", "tools", "noxfile.py"]
    session.run("ruff", "check", *paths)
    session.run("ruff", "format", "--check", *paths)
    session.run("mypy")


@nox.session(python=PYTHON)
def smoke(session: nox.Session) -> None:
    """The default offline run, as a user would start it, then its report."""
    session.install("-e", ".")
    session.run("iobench", "run", "--results", ".nox/smoke-results", *session.posargs)


#: where `nox -s bench` keeps its results (git-ignored), and the slow-down that fails it
BENCH_STORAGE = ".benchmarks"
BENCH_FAIL = "median:25%"


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """pytest-benchmark benchmarks: start-up, sampler overhead, report speed.

    Each run is saved under .benchmarks/ and compared with the last saved one: a median
    25 % slower fails the session (the first run has nothing to compare with and says so).
    """
    session.install("-e", ".[test]")
    saved = sorted(Path(BENCH_STORAGE).glob("*/*.json"))
    if saved:
        compare = ["--benchmark-compare", f"--benchmark-compare-fail={BENCH_FAIL}"]
        session.log(f"comparing with the last saved run, {saved[-1]}")
    else:
        compare = []
        session.log(f"no saved benchmark run in {BENCH_STORAGE}/ yet: saving this one, no compare")
    session.run(
        "pytest",
        "tests/benchmarks",
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=",
        "--benchmark-only",
        "--benchmark-columns=min,median,max,rounds",
        "--timeout=1800",  # the report's makes a 200 MB run first; on a busy machine, 300 s is short
        f"--benchmark-storage=file://{BENCH_STORAGE}",
        "--benchmark-autosave",
        *compare,
        *session.posargs,
    )
