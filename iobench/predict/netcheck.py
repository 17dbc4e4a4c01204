"""Whether this pod can reach its package index, and how fast the first byte comes: the
index pip would use (``--index-url``, PIP_INDEX_URL, pip.conf, PyPI), a default route, one
bounded fetch (docs/doctor.md)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from iobench.predict.finding import Finding
from iobench.redact import redact


def index_url(explicit: str | None = None, env: dict[str, str] | None = None) -> str:
    """The index pip would use: the option, PIP_INDEX_URL, pip's config files, else PyPI."""
    import configparser

    env = dict(os.environ if env is None else env)
    if explicit or env.get("PIP_INDEX_URL"):
        return str(explicit or env["PIP_INDEX_URL"])
    home = env.get("HOME") or str(Path.home())
    files = [
        "/etc/pip.conf",
        "/etc/xdg/pip/pip.conf",
        os.path.join(home, ".pip/pip.conf"),
        os.path.join(home, ".config/pip/pip.conf"),
        env.get("PIP_CONFIG_FILE", ""),
    ]
    found = "https://pypi.org/simple"
    for name in files:
        cfg = configparser.ConfigParser()
        try:
            cfg.read(name)
        except (configparser.Error, OSError):
            continue
        for section in ("global", "install"):
            if cfg.has_option(section, "index-url"):
                found = cfg.get(section, "index-url")
    return found


def has_default_route(proc_net: str = "/proc/net") -> bool:
    """Whether any IPv4 or IPv6 default route is configured."""
    try:
        with open(os.path.join(proc_net, "route"), encoding="ascii") as fh:
            if any(line.split()[1:2] == ["00000000"] for line in fh.readlines()[1:]):
                return True
    except OSError:
        pass
    try:
        with open(os.path.join(proc_net, "ipv6_route"), encoding="ascii") as fh:
            return any(
                line.split()[:2] == ["0" * 32, "00"] and line.split()[-1] != "lo" for line in fh
            )
    except OSError:
        return False


def _fetch(url: str, timeout_s: float, cap: int = 2 * 10**6) -> dict[str, Any]:
    """GET ``url`` (credentials in it sent as Basic auth): first-byte time and rate."""
    import base64
    import urllib.error
    import urllib.parse
    import urllib.request

    parts = urllib.parse.urlsplit(url)
    headers = {"User-Agent": "iobench-doctor"}
    if parts.username:
        cred = (
            f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        )
        headers["Authorization"] = "Basic " + base64.b64encode(cred.encode()).decode()
        parts = parts._replace(
            netloc=(parts.hostname or "") + (f":{parts.port}" if parts.port else "")
        )
    t0 = time.perf_counter()
    with urllib.request.urlopen(
        urllib.request.Request(urllib.parse.urlunsplit(parts), headers=headers), timeout=timeout_s
    ) as resp:
        first = resp.read(1)
        ttfb = time.perf_counter() - t0
        got = len(first)
        while got < cap and time.perf_counter() - t0 < timeout_s:
            chunk = resp.read(64 * 1024)
            if not chunk:
                break
            got += len(chunk)
        total = time.perf_counter() - t0
    rate = got / 1e6 / (total - ttfb) if total > ttfb and got > 1 else None
    return {
        "status": resp.status,
        "ttfb_ms": round(ttfb * 1000, 1),
        "bytes": got,
        "mbps": round(rate, 2) if rate else None,
    }


def index_check(
    url: str, timeout_s: float = 10.0, offline: bool = False
) -> tuple[dict[str, Any], list[Finding]]:
    """Reach the index: the simple page of ``pip`` (small), else the index root."""
    import urllib.error
    import urllib.parse

    shown = redact(url)
    host = urllib.parse.urlsplit(url).hostname or ""
    info: dict[str, Any] = {"url": shown, "checked": False}
    if offline:
        return info, [Finding("info", "index", f"index {shown} not checked (--offline)")]
    loopback = host in ("localhost", "::1") or host.startswith("127.")
    if not loopback and not has_default_route():
        info["network"] = False
        return info, [
            Finding(
                "warn",
                "index",
                f"no network configured (no default route): {shown} cannot be "
                "reached; install from a local wheelhouse",
            )
        ]
    base = url.rstrip("/")
    try:
        try:
            info |= _fetch(base + "/pip/", timeout_s) | {"checked": True, "page": "/pip/"}
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                raise
            info |= _fetch(base + "/", timeout_s) | {"checked": True, "page": "/"}
    except (OSError, ValueError) as exc:
        info |= {"checked": True, "reachable": False, "error": str(getattr(exc, "reason", exc))}
        return info, [Finding("bad", "index", f"index {shown} unreachable: {info['error']}")]
    info["reachable"] = True
    rate = (
        f", {info['mbps']:.1f} MB/s on a {info['bytes'] / 1e3:.0f} kB page"
        if info.get("mbps")
        else ""
    )
    return info, [
        Finding("ok", "index", f"index {shown}: first byte in {info['ttfb_ms']:.0f} ms{rate}")
    ]
