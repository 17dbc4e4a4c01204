"""Secrets never reach a results folder: one redaction rule for every value and text iobench
writes (meta.json, the report built from it, the installer logs it keeps), and an allow-list
of the environment variables that matter to a measurement.

Why an allow-list: a deny-list of secret-looking names cannot win (``DB_PASS``, ``GH_PAT``,
``NPM_AUTH``, ``CI_JOB_JWT`` all slip through). Only variables that change what an installer
or an import does are recorded; their values are still redacted, since ``PIP_INDEX_URL`` or
``HF_TOKEN`` are on the list for good reasons.

What :func:`redact_text` hides (each keeps its shape, so a reader still sees *where* a secret was):
- a URL's user information, up to the *last* ``@`` of its authority, so a password holding
  ``@`` goes whole: ``https://u:p@ss@host/`` -> ``https://***@host/``;
- every query value of a URL: ``?token=abc&sig=x`` -> ``?token=***&sig=***`` (index URLs
  carry nothing else there);
- ``name=value`` pairs whose name sounds like a secret (``AccountKey=``, ``password=``,
  ``SharedAccessSignature=``, ``api_key=``), as in connection strings;
- ``Authorization:`` header values.
Values of variables whose own name sounds like a secret are replaced whole.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Mapping
from pathlib import Path

MASK = "***"
PRIVATE_FILE_MODE = 0o600  # results that hold configuration (meta.json, logs): owner only
PRIVATE_DIR_MODE = 0o700

# Variables recorded in meta.json: what changes an installer's, an interpreter's or a
# framework's behaviour (and so the time to ready). Anything else is left out.
ENV_ALLOW = (
    "PIP_*",
    "UV_*",
    "PYTHON*",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
    "PATH",
    "HOME",
    "TMPDIR",
    "TMP",
    "TEMP",
    "XDG_*",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "HF_*",
    "HUGGINGFACE_*",
    "TRANSFORMERS_*",
    "TORCH_*",
    "TORCHINDUCTOR_*",
    "TRITON_*",
    "CUDA_*",
    "CUDNN_*",
    "NCCL_*",
    "NVIDIA_*",
    "OMP_*",
    "MKL_*",
    "OPENBLAS_*",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "MALLOC_*",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "ALL_PROXY",
    "all_proxy",
    "IOBENCH_*",
)
_SECRET_WORDS = r"TOKEN|KEY|SECRET|PASS|PWD|CRED|AUTH|JWT|SIG|COOKIE|SESSION|PRIVATE|CERT_PASSWORD"
_SECRET_NAME = re.compile(rf"(?:{_SECRET_WORDS})", re.I)

# scheme://userinfo@ : the authority ends at the first / ? # or blank; the userinfo at its
# last @ (greedy), so '@' inside a password cannot cut it short
# (each pattern starts only where a token starts, so a long log is scanned in linear time)
_URL_USERINFO = re.compile(
    r"(?P<scheme>(?<![a-zA-Z0-9+.-])[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<cred>[^/?#\s]*)@"
)
# a URL's query: ?a=1&b=2 up to a blank, quote or fragment
_URL_QUERY = re.compile(
    r"(?P<url>(?<![a-zA-Z0-9+.-])[a-zA-Z][a-zA-Z0-9+.-]*://[^\s?#'\"<>]*)\?(?P<query>[^\s#'\"<>]*)"
)
_QUERY_PAIR = re.compile(r"(?P<name>[^&=;]+)=(?P<value>[^&;]*)")
# name=value in connection strings and command lines, where the name sounds like a secret
_PAIR_HEAD = re.compile(r"(?<![\w.-])(?P<name>[\w.-]+)\s*[=:]\s*")
_PAIR_VALUE = re.compile(r"[^;&,\s'\"]+")
_SECRET_PAIR_NAME = re.compile(rf"{_SECRET_WORDS}|SharedAccessSignature", re.I)
_AUTH_HEADER = re.compile(r"(?P<name>\b(?:Proxy-)?Authorization:\s*)(?P<value>[^\r\n]+)", re.I)


def _mask_query(m: re.Match[str]) -> str:
    query = _QUERY_PAIR.sub(
        lambda p: f"{p.group('name')}={MASK}" if p.group("value") else p.group(0), m.group("query")
    )
    return f"{m.group('url')}?{query}"


def redact_text(text: str) -> str:
    """``text`` (a value, a command line, a whole log) with every credential replaced by ``***``."""
    text = _URL_USERINFO.sub(lambda m: m.group("scheme") + MASK + "@", text)
    text = _URL_QUERY.sub(_mask_query, text)
    text = _AUTH_HEADER.sub(lambda m: m.group("name") + MASK, text)
    return _mask_pairs(text)


def _mask_pairs(text: str) -> str:
    """Hide the value after every ``name=`` or ``name:`` whose name sounds like a secret.
    Only the heads are matched, so a value never hides a later pair (``x=password=...``)."""
    parts: list[str] = []
    last = 0
    for m in _PAIR_HEAD.finditer(text):
        if m.start() < last or not _SECRET_PAIR_NAME.search(m.group("name")):
            continue
        value = _PAIR_VALUE.match(text, m.end())
        if value is None:
            continue
        parts += [text[last : m.end()], MASK]
        last = value.end()
    parts.append(text[last:])
    return "".join(parts)


def redact(value: str) -> str:
    """One value (a URL, a requirement, an argument) with its credentials as ``***``."""
    return redact_text(value)


def redact_argv(argv: list[str]) -> list[str]:
    """A command line with credentials hidden, also the value after ``--token``-like options."""
    out: list[str] = []
    for arg in argv:
        prev = out[-1] if out else ""
        secret_option = prev.startswith("-") and "=" not in prev and secret_name(prev)
        out.append(MASK if secret_option else redact_text(arg))
    return out


def secret_name(name: str) -> bool:
    """True if a variable's name says its value is a secret (``HF_TOKEN``, ``PIP_PASSWORD``)."""
    return bool(_SECRET_NAME.search(name))


def allowed(name: str) -> bool:
    """True if meta.json records this environment variable (see ``ENV_ALLOW``)."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in ENV_ALLOW)


def environment(env: Mapping[str, str]) -> dict[str, str]:
    """The allow-listed variables of ``env``, sorted, values redacted (whole for secret names)."""
    return {
        k: (MASK if secret_name(k) else redact_text(v))
        for k, v in sorted(env.items())
        if allowed(k)
    }


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temporary file, then rename), readable by its
    owner only whatever the umask: the file holds configuration."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, PRIVATE_FILE_MODE)
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)  # an older .tmp kept its mode through O_TRUNC
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            fd = -1
            f.write(text)
    finally:
        if fd != -1:
            os.close(fd)
    os.replace(tmp, path)


def redact_file(path: Path) -> None:
    """Redact a log that is kept (an installer's output) in place, leaving it owner-only."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return
    write_private(path, redact_text(text))
