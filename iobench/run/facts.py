"""Facts about the machine a run measured: filesystems of each role, host, versions, pip's
configuration, GPU, and the environment that matters (allow-listed, secrets redacted).

Why: a time-to-ready figure means nothing without the storage it was measured on. Every
role records its filesystem type, mount point, mount options and free space, read from
/proc/self/mountinfo (longest mount-point prefix of the resolved path).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psutil
import virtualenv

from iobench import __version__, redact
from iobench.system import gpu, procfs
from iobench.trial.installers import uv_binary


def redact_env(env: dict[str, str]) -> dict[str, str]:
    """The environment as meta.json records it: allow-listed variables only, values redacted
    (see :mod:`iobench.redact`)."""
    return redact.environment(env)


def mount_of(path: Path) -> dict:
    """Filesystem facts of the mount holding ``path``."""
    real = str(Path(path).resolve())
    best: dict = {}
    m = procfs.mount_of(real)
    if m is not None:
        best = {
            "mountpoint": m.mountpoint,
            "fstype": m.fstype,
            "device": m.source,
            "mount_options": m.options,
        }
    try:
        st = os.statvfs(real)
        best["total_bytes"] = st.f_blocks * st.f_frsize
        best["free_bytes"] = st.f_bavail * st.f_frsize
    except OSError:
        pass
    best["path"] = real
    return best


def fstype_of(path: Path) -> str:
    return str(mount_of(path).get("fstype", "unknown"))


def host_info() -> dict:
    cpu_model = ""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model,
        "memory_bytes": psutil.virtual_memory().total,
    }


def _version_of(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return (
        (out.stdout or out.stderr).strip().splitlines()[0]
        if out.returncode == 0 and (out.stdout or out.stderr)
        else None
    )


def _pip_host() -> str | None:
    """What ``python -m pip --version`` prints for this interpreter, without starting a pip
    (~0.3 s): the installed pip's version and folder, as pip words it."""
    spec = importlib.util.find_spec("pip")
    if spec is None or not spec.origin:
        return None
    try:
        version = importlib.metadata.version("pip")
    except importlib.metadata.PackageNotFoundError:
        return None
    where = os.path.dirname(spec.origin)
    return f"pip {version} from {where} (python {sys.version_info[0]}.{sys.version_info[1]})"


def _uv_version() -> str | None:
    uv = uv_binary()
    return _version_of([uv, "--version"]) if uv else None


def _pip_config_list() -> list[str]:
    """``pip config list`` (its lines, secrets redacted); [] when pip cannot say."""
    try:
        out = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return [redact.redact_text(line) for line in out.stdout.splitlines() if line.strip()]


#: what ``prefetch`` started: its thread and, once done, its answers
_PREFETCHED: dict[str, Any] = {}


def prefetch() -> None:
    """Start the slow facts (``pip config list`` and ``uv --version``: a process start-up
    each, ~0.5 s) in a background thread now, while the run's wheels and index are made,
    so that ``versions`` and ``pip_config`` take them without waiting. Each answer is used
    once: a later run in the same process asks again."""
    earlier = _PREFETCHED.get("thread")
    if earlier is not None:
        earlier.join(timeout=60)
    _PREFETCHED.clear()
    _LATE.clear()

    def work() -> None:
        _PREFETCHED["pip_config_list"] = _pip_config_list()
        _PREFETCHED["uv"] = _uv_version()

    thread = threading.Thread(target=work, name="iobench-metadata", daemon=True)
    _PREFETCHED["thread"] = thread
    thread.start()


#: the prefetched facts a caller asked for before they were ready (see ``with_late_facts``)
_LATE: set[str] = set()


def _prefetched(key: str, compute: Any, wait: bool = True) -> Any:
    """The prefetched answer for ``key`` (computed here when none was prefetched); None,
    remembered for ``with_late_facts``, when ``wait`` is False and it is not ready yet."""
    thread = _PREFETCHED.get("thread")
    if thread is not None:
        if wait:
            thread.join(timeout=60)
        if key in _PREFETCHED:
            return _PREFETCHED.pop(key)
        if thread.is_alive():
            _LATE.add(key)
            return None
    return compute()


def with_late_facts(versions: dict, pip_config: dict) -> tuple[dict, dict]:
    """meta.json's ``versions`` and ``pip_config`` with the facts an earlier ``wait=False``
    call left out (``uv``, pip's ``config_list``) filled in, now that the prefetch is done
    (waiting for it if needed): meta.json is written first and these come after the
    warm-up, so the run's set-up does not wait for pip. Copies; each fact comes once."""
    keys = set(_LATE)
    _LATE.clear()
    versions, pip_config = dict(versions), dict(pip_config)
    if "uv" in keys:
        versions["uv"] = _prefetched("uv", _uv_version)
    if "pip_config_list" in keys:
        pip_config["config_list"] = _prefetched("pip_config_list", _pip_config_list)
    return versions, pip_config


def versions(wait: bool = True, installers: bool = True) -> dict:
    """The versions of what a run used: Python and iobench, and (``installers``: a run that
    installs) virtualenv, the host's pip and uv."""
    found = {
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "iobench": __version__,
    }
    if not installers:
        return found
    return {
        **found,
        "virtualenv": getattr(virtualenv, "__version__", "unknown"),
        "pip_host": _pip_host(),
        "uv": _prefetched("uv", _uv_version, wait),
    }


def pip_config(isolated: bool, wait: bool = True) -> dict:
    """pip's configuration as this machine's pip sees it, and whether trials ignored it
    (``config_list`` None while ``wait`` is False and pip has not answered yet)."""
    listed = _prefetched("pip_config_list", _pip_config_list, wait)
    files = []
    for candidate in (
        "/etc/pip.conf",
        "/etc/xdg/pip/pip.conf",
        str(Path.home() / ".config/pip/pip.conf"),
        str(Path.home() / ".pip/pip.conf"),
        os.environ.get("PIP_CONFIG_FILE", ""),
    ):
        if candidate and os.path.isfile(candidate):
            files.append(candidate)
    return {
        "isolated": isolated,
        "note": (
            "trials ran with PIP_CONFIG_FILE=/dev/null and no PIP_* variables (local index)"
            if isolated
            else "trials used this pip configuration (remote index)"
        ),
        "config_list": listed,
        "files": files,
        "env": {k: v for k, v in redact.environment(os.environ).items() if k.startswith("PIP_")},
    }


def gpu_info() -> dict | None:
    """The GPU as iobench.system.gpu detects it (None on a machine without one)."""
    try:
        found = gpu.detect_gpus()
    except Exception:  # noqa: BLE001 - a broken driver must not stop a storage benchmark
        return None
    return None if found is None else found.to_meta()
