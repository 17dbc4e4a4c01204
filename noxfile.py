"""Automation: `nox -s tests` (what CI runs), `lint`, `smoke`, `bench`.

The tests session also installs the Debian packages the lab needs (FUSE 3, sshfs, sshd,
iproute2) when it runs as root on a Debian-like machine and they are missing, so that a
fresh machine needs nothing but this file.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True

PYTHON = None  # the interpreter nox runs on
APT_PACKAGES = ["fuse3", "libfuse3-3", "sshfs", "openssh-server", "iproute2"]
APT_COMMANDS = {"fusermount3": "fuse3", "sshfs": "sshfs", "sshd": "openssh-server", "ip": "iproute2"}


def _missing_apt() -> list[str]:
    missing = {pkg for cmd, pkg in APT_COMMANDS.items() if not (shutil.which(cmd) or os.path.exists(f"/usr/sbin/{cmd}"))}
    if not os.path.exists("/usr/lib/x86_64-linux-gnu/libfuse3.so.3") and not any(
        os.path.exists(p) for p in ("/usr/lib/aarch64-linux-gnu/libfuse3.so.3", "/lib/x86_64-linux-gnu/libfuse3.so.3")
    ):
        missing.add("libfuse3-3")
    return sorted(missing)


def install_system_packages(session: nox.Session) -> None:
    """apt-get the lab's packages if we can (root, apt) and they are missing."""
    missing = _missing_apt()
    if not missing:
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        session.warn(f"lab packages missing ({', '.join(missing)}); lab tests will skip")
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *APT_PACKAGES]
    if subprocess.run(cmd, env=env).returncode != 0:
        session.run("apt-get", "update", "-q", external=True, env=env)
        session.run(*cmd, external=True, env=env)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The test suite (slow tests too with `-- --slow`)."""
    install_system_packages(session)
    session.install("-e", ".[test]")
    session.run("pytest", "-p", "no:cacheprovider", "--durations=10", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    session.install("ruff>=0.5")
    session.run("ruff", "check", "iobench", "tests", "tools", "noxfile.py")


@nox.session(python=PYTHON)
def smoke(session: nox.Session) -> None:
    """The default offline run, as a user would start it, then its report."""
    session.install("-e", ".")
    session.run("iobench", "run", "--results", ".nox/smoke-results", *session.posargs)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """pytest-benchmark benchmarks: sampler overhead, report speed."""
    install_system_packages(session)
    session.install("-e", ".[test]")
    session.run(
        "pytest", "tests/benchmarks", "-p", "no:cacheprovider", "-o", "addopts=",
        "--benchmark-only", "--benchmark-columns=min,median,max,rounds", *session.posargs,
    )
