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
- a URL's query and fragment, whole: ``?token=abc&sig=x`` -> ``?***``, ``?glpat123`` ->
  ``?***``, ``#tok`` -> ``#***`` (index URLs carry nothing else there);
- every path segment of a URL that looks like a token, whoever the provider (Cloudsmith's
  ``dl.cloudsmith.io/<TOKEN>/org/repo/``, Gemfury's ``pypi.fury.io/<TOKEN>/user/``, a JWT):
  16 or more of ``[A-Za-z0-9_-]`` holding both letters and digits, base64 with its ``=``
  padding, 24 or more letters of one case, dot-joined parts of which one is a token
  (``Ab12Cd34.Ef56Gh78Ij``), or a JWT's ``eyJ…``; package and wheel names keep their dots,
  separators and so their words;
- ``name=value`` pairs whose name sounds like a secret (``AccountKey=``, ``password=``,
  ``SharedAccessSignature=``, ``api_key=``), as in connection strings;
- ``Authorization:`` header values.
Values of variables whose own name sounds like a secret are replaced whole.
"""

from __future__ import annotations

import errno
import fnmatch
import re
from collections.abc import Mapping
from pathlib import Path

from iobench import files

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
    "XDG_CACHE_HOME",  # pip's and uv's caches
    "XDG_CONFIG_HOME",  # their configuration files
    "XDG_DATA_HOME",
    "LANG",
    "LANGUAGE",
    "LC_ALL",  # the two locale variables that change how text is decoded
    "LC_CTYPE",
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
    # the variables iobench itself reads (iobench.cli.common.ENV_DEFAULTS, the lab's state)
    "IOBENCH_TARGET",
    "IOBENCH_TMP",
    "IOBENCH_RESULTS",
    "IOBENCH_SCENARIO",
    "IOBENCH_PYTHON",
    "IOBENCH_WHEELHOUSE",
    "IOBENCH_INDEX_URL",
    "IOBENCH_GPU",
    "IOBENCH_LAB_STATE_DIR",
)
_SECRET_WORDS = r"TOKEN|KEY|SECRET|PASS|PWD|CRED|AUTH|JWT|SIG|COOKIE|SESSION|PRIVATE|CERT_PASSWORD"
_SECRET_NAME = re.compile(rf"(?:{_SECRET_WORDS})", re.I)

# scheme://userinfo@ : the authority ends at the first / ? # or blank; the userinfo at its
# last @ (greedy), so '@' inside a password cannot cut it short
# (each pattern starts only where a token starts, so a long log is scanned in linear time)
_URL_USERINFO = re.compile(
    r"(?P<scheme>(?<![a-zA-Z0-9+.-])[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<cred>[^/?#\s]*)@"
)
# a URL's query (?a=1&b=2) and its fragment (#x), each up to a blank or quote
_URL_QUERY = re.compile(
    r"(?P<url>(?<![a-zA-Z0-9+.-])[a-zA-Z][a-zA-Z0-9+.-]*://[^\s?#'\"<>]*)"
    r"(?:\?(?P<query>[^\s#'\"<>]*))?(?:#(?P<fragment>[^\s'\"<>]*))?"
)
# a URL's path, after its authority, up to a blank, quote, query or fragment
_URL_PATH = re.compile(
    r"(?P<head>(?<![a-zA-Z0-9+.-])[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s?#'\"<>]*)"
    r"(?P<path>/[^\s?#'\"<>]*)"
)
# a path segment that is a token (percent-escapes left out): 16 or more letters and digits
# mixed; 10 or more of them without a separator, with 3 digits and 3 letters at least
# (Gemfury's and Cloudsmith's are 12-20); 16 digits or more; 20 letters or more of both
# cases; or a JWT. A path's words (simple, cu121, s3transfer, python3-openid) are none.
_TOKEN_SEGMENT = re.compile(
    r"(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{16,}"
    r"|(?=(?:[A-Za-z]*[0-9]){3})(?=(?:[0-9]*[A-Za-z]){3})[A-Za-z0-9]{10,}"
    r"|[0-9]{16,}"
    r"|(?=[A-Za-z]*[a-z])(?=[A-Za-z]*[A-Z])[A-Za-z]{20,}"
    r"|[a-z]{24,}|[A-Z]{24,}"
    r"|(?=[A-Za-z0-9+_-]*[A-Za-z])[A-Za-z0-9+_-]{8,}={1,2}"  # base64, padded
    r"|eyJ[A-Za-z0-9_.-]{10,}"
)
# one dot-joined part of a segment that is a token by itself (no separator inside: a
# wheel's name parts have - or _): 10 or more letters and digits, 3 of each at least
_DOTTED_PART = re.compile(r"(?=(?:[A-Za-z]*[0-9]){3})(?=(?:[0-9]*[A-Za-z]){3})[A-Za-z0-9]{10,}")
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
# groups of letters mixed with digits joined by - or _ (Ab12-Cd34-Ef56): every group mixed
_GROUPED = re.compile(r"(?:(?=[A-Za-z]*[0-9])(?=[0-9]*[A-Za-z])[A-Za-z0-9]{3,}[-_]){2,}"
                      r"(?=[A-Za-z]*[0-9])(?=[0-9]*[A-Za-z])[A-Za-z0-9]{3,}")  # fmt: skip
# a segment with percent-escapes and no dot (a file name has one) whose own characters, the
# escapes left out, are 8 or more letters and digits, 3 of each at least (Zq7%41b9x%2F2k)
_ESCAPED_OWN = re.compile(r"(?=(?:[A-Za-z]*[0-9]){3})(?=(?:[0-9]*[A-Za-z]){3})[A-Za-z0-9]{8,}")


def _is_token(segment: str) -> bool:
    """Whether one path segment of a URL reads as a credential (see _TOKEN_SEGMENT)."""
    parts = segment.split(".")
    return bool(
        _TOKEN_SEGMENT.fullmatch(_PERCENT.sub("", segment))
        or _GROUPED.fullmatch(segment)
        or ("%" in segment and "." not in segment and _escaped_token(segment))
        or (
            len(parts) > 1
            and any(_DOTTED_PART.fullmatch(p) for p in parts)
            and all(p.isalnum() for p in parts)
        )  # fmt: skip
    )


def _escaped_token(segment: str) -> bool:
    own = re.sub(r"[^A-Za-z0-9]", "", _PERCENT.sub("", segment))
    return bool(_ESCAPED_OWN.fullmatch(own))


# name=value in connection strings and command lines, where the name sounds like a secret
_PAIR_HEAD = re.compile(r"(?<![\w.-])(?P<name>[\w.-]+)\s*[=:]\s*")
_PAIR_VALUE = re.compile(r"[^;&,\s'\"]+")
_SECRET_PAIR_NAME = re.compile(rf"{_SECRET_WORDS}|SharedAccessSignature", re.I)
_AUTH_HEADER = re.compile(r"(?P<name>\b(?:Proxy-)?Authorization:\s*)(?P<value>[^\r\n]+)", re.I)


def _mask_query(m: re.Match[str]) -> str:
    """The URL with its query and fragment masked whole (a token needs no ``=``)."""
    query, fragment = m.group("query"), m.group("fragment")
    return (
        m.group("url")
        + (f"?{MASK}" if query else "?" if query is not None else "")
        + (f"#{MASK}" if fragment else "#" if fragment is not None else "")
    )


def _mask_path(m: re.Match[str]) -> str:
    segments = m.group("path").split("/")
    masked = [MASK if _is_token(s) else s for s in segments]
    return m.group("head") + "/".join(masked)


def redact_text(text: str) -> str:
    """``text`` (a value, a command line, a whole log) with every credential replaced by ``***``."""
    text = _URL_USERINFO.sub(lambda m: m.group("scheme") + MASK + "@", text)
    text = _URL_PATH.sub(_mask_path, text)
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


def url_host(url: str) -> str:
    """``scheme://host[:port]`` of a URL, nothing after it and no user information (what a
    report shows of an index: enough to tell two indexes apart, no path that may hold a
    token); a value that is not a URL comes back redacted."""
    m = re.match(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?:[^/?#\s]*@)?(?P<host>[^/?#\s]*)", url)
    return f"{m.group('scheme')}{m.group('host')}" if m else redact_text(url)


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
    files.write(path, text, PRIVATE_FILE_MODE)


def redact_file(path: Path) -> None:
    """Redact a log that is kept (an installer's output) in place, leaving it owner-only.
    On a full disk the redacted text goes into the file's own blocks when it fits, else the
    log is removed: a log that cannot be redacted is not kept (and the trial goes on)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return
    try:
        files.write(path, redact_text(text), PRIVATE_FILE_MODE, in_place_when_full=True)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        path.unlink(missing_ok=True)
